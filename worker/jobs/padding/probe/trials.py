"""`batch_size: auto`: find the largest batch (for packed, token budget) a strategy can run, in children.

    report = find_batch_size(spec, strategy, kernel_name, progress)
    batch_size = report.chosen

Reads the device (and what other processes hold on it) first, answers from the probe cache when the
same device, software and model were probed before, and otherwise runs the search policy of
`padbench.worker.jobs.probing` in spawned children. Only "fits" and "out of memory" steer the search; any other end
of a child (sticky CUDA error, crash, timeout, plain error) stops the probe with `ProbeFailed`, which
carries the child's log. One child serves the sizes of a strategy while they fit (between two
out-of-memory results the search only moves upward), so its model is built once; a size that runs out
of memory ends that child, and the next size starts in a fresh one. A job's strategies share their
children and the device reading (`SharedProbes`). Call it before the job's own model
is on the device: memory the calling process holds counts, to the children, as held by others.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, replace
from typing import Literal

import torch

from padbench.contract.results import ProbeReport
from padbench.contract.spec import StrategySpec
from padbench.contract.training import RunPrecision, precision_run
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.attention import ATTENTION_KERNELS
from padbench.worker.engine.model.build import model_config
from padbench.worker.engine.parallel.ranks import Ranks
from padbench.worker.engine.parallel.sharding import Sharding
from padbench.worker.jobs.padding.probe.cache import CachedLimit, ProbeCache, ProbeKey
from padbench.worker.jobs.padding.probe.protocol import ProbeGroup, ProbeRequest
from padbench.worker.jobs.probing import oracle
from padbench.worker.jobs.probing.agreed import AgreedOracle, AttemptFlags, store_address
from padbench.worker.jobs.probing.curves import MemoryCurve
from padbench.worker.jobs.probing.modes import SEARCHES
from padbench.worker.jobs.probing.oracle import (
    ChildOracle,
    ProbeFailed,
    allocator_environment,
    probe_device,
    read_device_facts,
)
from padbench.worker.jobs.probing.protocol import DeviceFacts
from padbench.worker.jobs.probing.search import choose_size, search_ceiling
from padbench.worker.runtime.child_session import ChildSession
from padbench.worker.runtime.environment import flash_attn_cute_version, package_version
from padbench.worker.runtime.progress import ProgressFn

PROBE_TARGET = "padbench.worker.jobs.padding.probe.child:probe_size"
FACTS_TARGET = oracle.FACTS_TARGET
# A cached limit stays valid while other processes hold at most this much more than when it was found.
OTHERS_TOLERANCE_BYTES = 256 * 2**20


def find_batch_size(spec: PaddingJobSpec, strategy: StrategySpec, kernel_name: str, progress: ProgressFn, *,
                    cache: ProbeCache | None = None, probe_target: str = PROBE_TARGET,
                    shared: SharedProbes | None = None, group: RankProbing | None = None) -> ProbeReport:
    """Probe one strategy. Pass a job's `SharedProbes` to give all its strategies one session and one reading
    of the device; without one, the probe opens its own. A job on several ranks passes `group`: every rank
    probes, and the ranks agree on each size (the cache is not used: it knows one GPU's limits)."""
    started = time.monotonic()
    cache = cache or ProbeCache()
    with contextlib.nullcontext(shared) if shared is not None else SharedProbes(spec) as probes:
        facts = probes.device_facts(spec, progress)
        key = probe_key(spec, strategy, kernel_name, facts)
        ceiling = search_ceiling(spec.probe.cap, spec.probe.margin)
        cached = None if spec.probe.force or group is not None else cache.get(key)
        if cached is not None and _still_valid(cached, ceiling, facts):
            progress(1.0, f"batch size from the probe cache: largest fit {cached.largest_fit}")
            return _report(spec, cached, facts, seconds=time.monotonic() - started, cached=True)
        label = f"{strategy.label} with {kernel_name}"
        sizes = size_oracle(spec, strategy, kernel_name, facts, label, progress, probes, probe_target, group)
        try:
            result = SEARCHES[spec.probe.mode](sizes, curve=memory_curve(kernel_name), ceiling=ceiling)
        finally:
            probes.strategy_done(facts.device)
    if result.largest_fit == 0:
        raise ProbeFailed(f"{label}: even size 1 runs out of memory", sizes.attempts, sizes.last_oom_log)
    limit = CachedLimit(largest_fit=result.largest_fit, smallest_oom=result.smallest_oom,
                        predicted_limit=result.predicted_limit, ceiling=ceiling,
                        used_by_others_bytes=facts.used_by_others_bytes, probes=sizes.attempts,
                        seconds=time.monotonic() - started)
    if group is None:
        cache.put(key, limit)
    return _report(spec, limit, facts, seconds=limit.seconds, cached=False)


@dataclass(frozen=True)
class RankProbing:
    """How this rank of a job on several takes part in the probe."""

    ranks: Ranks
    precision: RunPrecision
    sharded: bool  # the job shards its model: the ranks' probe children shard theirs over a group of their own
    backend: Literal["nccl", "gloo"]
    timeout_s: float


def size_oracle(spec: PaddingJobSpec, strategy: StrategySpec, kernel_name: str, facts: DeviceFacts, label: str,
            progress: ProgressFn, probes: SharedProbes, target: str, group: RankProbing | None) -> ChildOracle:
    common = (label, progress, probes.session, target, spec.probe.probe_timeout_s, probes.starts_before_strategy)
    if group is None:
        return ChildOracle(lambda size: probe_request(spec, strategy, kernel_name, facts.device, size), *common)
    host, port = store_address()

    def request(size: int, attempt: int) -> ProbeRequest:
        meeting = None if not group.sharded else ProbeGroup(
            rank=group.ranks.rank, world=group.ranks.world, store_host=host, store_port=port,
            prefix=f"padbench-probe/{probe_namespace(group.ranks)}/{label}/{attempt}", backend=group.backend,
            timeout_s=group.timeout_s)
        return replace(probe_request(spec, strategy, kernel_name, facts.device, size), precision=group.precision,
                       group=meeting)

    return AgreedOracle(request, *common, ranks=group.ranks, flags=AttemptFlags(probe_namespace(group.ranks)))


def rank_gpu_environment(ranks: Ranks) -> dict[str, str]:
    """The rank's own GPU as the only one its probe children see (by local rank among those the job has; where
    the job was given none by name, it runs on every GPU of the host, and the rank's is the one of its index)."""
    visible = [gpu for gpu in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if gpu.strip()]
    if not visible:
        return {"CUDA_VISIBLE_DEVICES": str(ranks.local_rank)}
    return {"CUDA_VISIBLE_DEVICES": visible[ranks.local_rank]} if ranks.local_rank < len(visible) else {}


def probe_namespace(ranks: Ranks) -> str:
    """A name every rank of this job computes alike and no other job shares (the launcher's run id)."""
    return os.environ.get("TORCHELASTIC_RUN_ID", "padbench") + f"-{ranks.world}"


class SharedProbes:
    """What the `auto` strategies of one job share: a child session and one reading of the device.

    The device is read once, in the session's first child before it creates a CUDA context, so "held by
    others" is the rest of the box and not this job's own probe children. On a GPU the child that fit the last
    size of a strategy goes on to the next one: between sizes it frees everything but the CUDA context, and a
    new strategy rebuilds the model, so only the process start and imports are saved. On the CPU each strategy
    starts in a fresh child, because there the peak is the address space's high-water mark, which only a
    fresh process resets. Use as a context manager; closing stops the children (and waits for the live one,
    so its memory is free before anything is measured).
    """

    def __init__(self, spec: PaddingJobSpec, group: RankProbing | None = None) -> None:
        # On a GPU a spare child with the imports done stands by (the host has cores to spare for it), so a
        # size after an out-of-memory rarely waits for them. A rank's children see only the rank's own GPU; a
        # sharded model's children meet anew for every size, so none is reused.
        env = allocator_environment() | (rank_gpu_environment(group.ranks) if group is not None else {})
        reuse = spec.probe.reuse_child and (group is None or not group.sharded)
        self.session = ChildSession(PROBE_TARGET, env=env, reuse=reuse, prestart=probe_device(spec.device) == "cuda")
        self.facts: DeviceFacts | None = None
        self.starts_before_strategy = 0

    def __enter__(self) -> SharedProbes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.session.close()

    def device_facts(self, spec: PaddingJobSpec, progress: ProgressFn) -> DeviceFacts:
        self.starts_before_strategy = self.session.starts
        if self.facts is None:
            started = time.monotonic()
            self.facts = read_device_facts(spec.device, spec.probe, self.session, FACTS_TARGET)
            if self.facts.device == "cuda":  # a child's start and imports: most of what a first probe costs
                progress(0.0, f"device read in {time.monotonic() - started:.1f} s")
        return self.facts

    def strategy_done(self, device: Literal["cuda", "cpu"]) -> None:
        if device == "cpu":
            self.session.retire()


def memory_curve(kernel_name: str) -> MemoryCurve:
    return "quadratic" if ATTENTION_KERNELS.get(kernel_name).quadratic_memory else "affine"


def _report(spec: PaddingJobSpec, limit: CachedLimit, facts: DeviceFacts, *, seconds: float,
            cached: bool) -> ProbeReport:
    return ProbeReport(
        chosen=choose_size(limit.largest_fit, limit.smallest_oom, spec.probe.margin, spec.probe.cap),
        largest_fit=limit.largest_fit, smallest_oom=limit.smallest_oom, predicted_limit=limit.predicted_limit,
        margin=spec.probe.margin, cap=spec.probe.cap, probes=limit.probes, seconds=seconds, cached=cached,
        mode=spec.probe.mode,
        memory_total_bytes=facts.total_bytes, memory_used_by_others_bytes=facts.used_by_others_bytes,
    )


def _still_valid(cached: CachedLimit, ceiling: int, facts: DeviceFacts) -> bool:
    if cached.smallest_oom is None and cached.ceiling < ceiling:
        return False  # the old search stopped at a lower ceiling: the limit above it is unknown
    if facts.used_by_others_bytes is None or cached.used_by_others_bytes is None:
        return True
    return facts.used_by_others_bytes <= cached.used_by_others_bytes + OTHERS_TOLERANCE_BYTES


def probe_request(spec: PaddingJobSpec, strategy: StrategySpec, kernel_name: str, device: Literal["cuda", "cpu"],
                  size: int) -> ProbeRequest:
    """One size under exactly the job's settings: model, dtype, kernel, max_length, mode, compile, seed. A padded
    strategy's rows are probed at its widest (max_length rounded up to its `pad_to_multiple_of`)."""
    return ProbeRequest(model=spec.model, dtype=spec.dtype, device=device, strategy=strategy.name,
                        kernel=kernel_name, size=size, max_length=strategy.widest(spec.data.max_length), mode=spec.mode,
                        compile=probes_compiled(spec), seed=spec.data.seed,
                        cpu_memory_budget_bytes=spec.probe.cpu_memory_budget_bytes,
                        training=spec.training if spec.mode == "training" else None,
                        precision=probed_precision(spec), experts=strategy.experts,
                        distributed=spec.distributed)


def probes_compiled(spec: PaddingJobSpec) -> bool:
    """Whether the probe compiles the model: for `compile: true` only. `auto` decides per row after the probe, and
    the eager model's peak is the higher one (the compiler fuses away intermediates), so an eagerly probed size
    fits either way."""
    return spec.compile is True


def probed_precision(spec: PaddingJobSpec) -> RunPrecision:
    """What the job keeps its weights in on one GPU (a rank of a job on several is given its group's)."""
    return precision_run(spec.training.precision, spec.dtype, 1) if spec.mode == "training" else spec.dtype


def probe_key(spec: PaddingJobSpec, strategy: StrategySpec, kernel_name: str, facts: DeviceFacts) -> ProbeKey:
    family = ATTENTION_KERNELS.get(kernel_name).family
    library = {"flash-attn": package_version("flash_attn"), "flash-attn-cute": flash_attn_cute_version()}
    return ProbeKey(device_name=facts.name, total_memory_bytes=facts.total_bytes, driver=facts.driver,
                    torch=torch.__version__, transformers=package_version("transformers"),
                    kernel_library=library.get(family), model_config=model_config(spec.model).to_json_string(),
                    dtype=spec.dtype, strategy=strategy.label, kernel=kernel_name,
                    max_length=spec.data.max_length, mode=spec.mode, compile=probes_compiled(spec),
                    training=spec.training.model_dump_json() if spec.mode == "training" else None,
                    search=None if spec.probe.mode == "predict" else spec.probe.mode,
                    sharding=None if Sharding.of(spec.distributed, spec.mode).reshard_after_forward
                    else "no reshard after forward")
