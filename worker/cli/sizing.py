"""Before `padbench run` starts a job on a machine without a CUDA GPU: is the spec sized for one?

A spec written for a GPU (gpt2-seed in bf16 over 2,000 sequences, say) runs on a CPU too, for hours. The
run command says so at once, before torch is imported, with a rough time for this CPU and how to make the
spec small. The time is the FLOPs of the tokens each layout computes (two per weight a token passes
through, from `weights_upper_bound`) over this CPU's matrix-multiply rate, measured here in about 0.15 s,
times the share of that rate a model's forward reaches: about half in fp32 (gpt2-seed on 2 cores of an
AMD EPYC), while the same run in bf16 took over fifteen times as long (most CPUs have no fast bf16 or fp16
matrix instructions).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from padbench.contract.model_spec import weights_upper_bound
from padbench.contract.spec import JobSpecBase
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.machine import CPU_SHARE_OF_MATMUL, cuda_gpu_present
from padbench.report.progress import format_duration
from padbench.worker.engine.data.synthetic import DistributionError, get_distribution
from padbench.worker.jobs import get_job_runner

# Training does a backward pass of about twice the forward's work.
TRAINING_FACTOR = 3
# A spec whose estimate is longer than this on a CPU is called sized for a GPU, whatever its device says.
LONG_ON_A_CPU_S = 300.0
# A GPU-sized job (device auto) estimated longer than this on the CPU is not started without --anyway; a spec that
# names device: cpu is the user's stated choice and is only warned about.
REFUSED_ON_A_CPU_S = 3600.0
MATMUL_SIZE = 512
MATMUL_SECONDS = 0.15
SMALLER = ("For a first result here, `padbench init --cpu small.yaml` writes a spec that runs in under a minute; "
           "or make this one smaller: a tiny-* preset, dtype: fp32, attention: sdpa, fewer data.num_samples.")


def cpu_matmul_flops() -> float:
    """This CPU's fp32 matrix-multiply rate (FLOP/s): the fastest of the calls made in about 0.15 s, so a
    moment of another process's load does not count."""
    a = np.random.default_rng(0).standard_normal((MATMUL_SIZE, MATMUL_SIZE), dtype=np.float32)
    np.matmul(a, a)  # the first call starts the BLAS threads: not timed
    fastest, start = float("inf"), time.perf_counter()
    while time.perf_counter() - start < MATMUL_SECONDS:
        call = time.perf_counter()
        np.matmul(a, a)
        fastest = min(fastest, time.perf_counter() - call)
    return 2.0 * MATMUL_SIZE**3 / max(fastest, 1e-9)


def mean_length(spec: PaddingJobSpec) -> float:
    """Tokens in an average sequence: the synthetic distribution's, or max_length where only the files know."""
    if spec.data.source != "synthetic":
        return float(spec.data.max_length)
    try:
        distribution = get_distribution(spec.data.distribution)
    except DistributionError:
        return float(spec.data.max_length)  # the job itself reports the bad name
    return float(distribution.sample(np.random.default_rng(0), 4096, spec.data.max_length).mean())


def padding_flops(spec: PaddingJobSpec) -> float | None:
    """The FLOPs of every measured pass: static computes max_length per sequence, the other layouts about
    the sequences' own lengths. None when the model's size is known only from its files."""
    weights = weights_upper_bound(spec.model.architecture())
    if weights is None:
        return None
    average = mean_length(spec)
    tokens = sum(spec.data.num_samples * (spec.data.max_length if strategy.name == "static" else average)
                 * len(spec.batch_sizes_for(strategy)) for strategy in spec.strategies)
    factor = TRAINING_FACTOR if spec.mode == "training" else 1
    return 2.0 * weights * tokens * spec.measurement.repeats * factor


def cpu_seconds(spec: PaddingJobSpec, matmul_flops: float) -> float | None:
    flops = padding_flops(spec)
    return None if flops is None else flops / (matmul_flops * CPU_SHARE_OF_MATMUL[spec.dtype])


def describe_size(spec: PaddingJobSpec) -> str:
    layouts = sum(len(spec.batch_sizes_for(strategy)) for strategy in spec.strategies)
    repeats = spec.measurement.repeats
    return (f"{spec.model.label}, {spec.dtype}, {spec.data.num_samples:,} sequences × {layouts} layouts × "
            f"{repeats} repeat{'s' if repeats > 1 else ''}")


@dataclass(frozen=True)
class SizingWarning:
    text: str
    # Sized for a GPU and hours long on this CPU: `run` starts it only when told to (--anyway), as a worker
    # without a GPU leaves such a job to GPU workers.
    refused: bool = False


def gpu_sizing_warning(spec: JobSpecBase, name: str, matmul_flops: float | None = None) -> SizingWarning | None:
    """What to tell someone about to run `name` on this machine, or None when it suits a CPU (or there is a GPU)."""
    if cuda_gpu_present():
        return None
    if getattr(spec, "device", None) == "cuda":  # every kind that runs on a device names it `device`
        return SizingWarning(f"{name} asks for device: cuda, but this machine has no CUDA GPU, so the job will fail; "
                             f"device: auto runs it on the CPU. {SMALLER}")
    planned = get_job_runner(spec.kind).planned_run(spec)
    if planned is None:
        return None
    seconds = cpu_seconds(planned, matmul_flops or cpu_matmul_flops())
    if seconds is None:
        if planned.device == "cpu":
            return None
        return SizingWarning(f"this machine has no CUDA GPU, and {name} may be sized for one "
                             f"({describe_size(planned)}); it runs on the CPU. {SMALLER}")
    if seconds < LONG_ON_A_CPU_S:
        return None
    said = (f"this machine has no CUDA GPU, and {name} is sized for one: on this CPU it would take roughly "
            f"{format_duration(seconds)} ({describe_size(planned)}). {SMALLER}")
    if seconds >= REFUSED_ON_A_CPU_S and planned.device != "cpu":
        return SizingWarning(f"{said} Run it where there is a GPU (padbench submit), or pass --anyway to run it "
                             "here regardless.", refused=True)
    return SizingWarning(f"{said} Ctrl-C stops the run.")
