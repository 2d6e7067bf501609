"""Stand-in probe children for the probe's integration tests: each ends one way a real probe can.

Kept free of torch so a spawned child starts in well under a second.
"""

from __future__ import annotations

import os
import signal
import time

from padbench.worker.jobs.generate.sizing.protocol import SlotsRequest
from padbench.worker.jobs.padding.probe.protocol import ProbeRequest
from padbench.worker.jobs.probing.protocol import DeviceFacts, ProbeMeasurement
from padbench.worker.runtime.isolation import ChildContext

MIB = 2**20
FAKE_CAPACITY = 100 * MIB
FAKE_BASELINE = 10 * MIB
FAKE_PER_SIZE = 3 * MIB


def fake_device(ctx: ChildContext, request: ProbeRequest) -> ProbeMeasurement:
    """A device with 100 MiB where the model takes 10 MiB and every unit of size 3 MiB: the limit is 30."""
    return _fake_measurement(request.size, request.kernel)


def _fake_measurement(size: int, kernel: str, per_size: int = FAKE_PER_SIZE) -> ProbeMeasurement:
    peak = FAKE_BASELINE + per_size * size
    if peak > FAKE_CAPACITY:
        raise MemoryError(f"fake device: {peak} bytes do not fit")
    return ProbeMeasurement(peak_bytes=peak, peak_allocated_bytes=None, capacity_bytes=FAKE_CAPACITY,
                            baseline_bytes=FAKE_BASELINE, kernel=kernel, seconds=0.0)


# MiB a unit of size keeps on the fake device by the recompute its training does: only `ops` and more fit 8.
FAKE_PER_SIZE_BY_RECOMPUTE = {"none": 12 * MIB, "ops": 9 * MIB, "selective": 6 * MIB, "full": 2 * MIB}


def fake_recompute_device(ctx: ChildContext, request: ProbeRequest) -> ProbeMeasurement:
    """The fake device where activations shrink with recompute: at size 8, none runs out and ops fits."""
    level = request.training.activation_checkpointing if request.training is not None else "none"
    return _fake_measurement(request.size, request.kernel, FAKE_PER_SIZE_BY_RECOMPUTE[level])


def fake_slots(ctx: ChildContext, request: SlotsRequest) -> ProbeMeasurement:
    """The same fake device for the generate kind's probe: at most 30 sequences decoding at once."""
    return _fake_measurement(request.size, request.attention)


def killed_by_signal(ctx: ChildContext, request: ProbeRequest) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def hangs(ctx: ChildContext, request: ProbeRequest) -> None:
    time.sleep(120)


def raises_error(ctx: ChildContext, request: ProbeRequest) -> None:
    raise ValueError(f"kernel {request.kernel!r} cannot take this input")


def sticky_cuda_error(ctx: ChildContext, request: ProbeRequest) -> None:
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


def must_not_run(ctx: ChildContext, request: ProbeRequest) -> None:
    raise AssertionError("a cached limit should have answered without a child")


def fake_gpu_facts(ctx: ChildContext) -> DeviceFacts:
    """What reading a GPU gives, without one: the probe's first call on a `cuda` spec."""
    return DeviceFacts(device="cuda", name="fake GPU", total_bytes=FAKE_CAPACITY, driver="0",
                       used_by_others_bytes=0, used_by_others_source="nvml")


def fake_rows(ctx: ChildContext, request: ProbeRequest) -> ProbeMeasurement:
    """The fake device with rows as wide as max_length: 3967 // max_length rows fit (30 at 128 tokens)."""
    return _fake_measurement(request.size * request.max_length // 128, request.kernel)
