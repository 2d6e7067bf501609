"""`batch_size: auto` for a generate job: probe the sizes in child processes before the job's model is built.

    sized = size_batch(spec, progress)
    sized.spec.batch_size  # the chosen size (or still "auto" when the probe failed: sized.failure says why)

The search is the padding kind's (`padbench.worker.jobs.probing.search`), over sequences decoding at once;
memory grows affinely in them (the cache is `size × capacity` rows, the prefill `size × longest` tokens).
Probing before the job builds its model keeps the children's view of the device honest: nothing of this job
is resident yet, so memory held by others is really other processes'. One child serves the sizes while they
fit; a size that runs out ends it, and the next starts in a fresh one. Limits are not cached across jobs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from padbench.contract.results import ProbeReport
from padbench.kinds.generate.contract import GenerateJobSpec
from padbench.worker.jobs.generate.sizing.protocol import SlotsRequest
from padbench.worker.jobs.probing.oracle import (
    ChildOracle,
    ProbeFailed,
    allocator_environment,
    read_device_facts,
)
from padbench.worker.jobs.probing.search import choose_size, search_ceiling, search_limit
from padbench.worker.runtime.child_session import ChildSession
from padbench.worker.runtime.progress import ProgressFn

PROBE_TARGET = "padbench.worker.jobs.generate.sizing.child:probe_slots"


@dataclass(frozen=True)
class SizedSpec:
    """The spec the rows run (`auto` replaced by the chosen size), the probe's report, or why it failed."""

    spec: GenerateJobSpec
    report: ProbeReport | None = None
    failure: str | None = None  # set: no size was found, and every row fails with this reason


def size_batch(spec: GenerateJobSpec, progress: ProgressFn, *, target: str = PROBE_TARGET) -> SizedSpec:
    """The spec with a concrete batch size: as given, or found by the OOM probe (which never raises)."""
    if spec.batch_size != "auto":
        return SizedSpec(spec)
    try:
        report = find_slots(spec, progress, target=target)
    except ProbeFailed as error:
        return SizedSpec(spec, failure=f"batch_size auto: {error.reason}")
    return SizedSpec(spec.model_copy(update={"batch_size": report.chosen}), report)


def longest_prompt(spec: GenerateJobSpec) -> int:
    """The longest prompt any row prefills: the data's cap, or a context-table length when longer."""
    return max([spec.data.max_length, *(spec.context or [])])


def slots_request(spec: GenerateJobSpec, device: Literal["cuda", "cpu"], size: int) -> SlotsRequest:
    return SlotsRequest(model=spec.model, dtype=spec.dtype, device=device, attention=spec.attention, size=size,
                        prompt_tokens=longest_prompt(spec), output_tokens=spec.max_output_tokens(),
                        seed=spec.data.seed, cpu_memory_budget_bytes=spec.probe.cpu_memory_budget_bytes)


def find_slots(spec: GenerateJobSpec, progress: ProgressFn, *, target: str = PROBE_TARGET) -> ProbeReport:
    """The probe's report; raises `ProbeFailed` when no size fits or a child ends other than fits / OOM."""
    started = time.monotonic()
    probe = spec.probe
    with ChildSession(target, env=allocator_environment(), reuse=probe.reuse_child) as session:
        facts = read_device_facts(spec.device, probe, session)
        sizes = ChildOracle(lambda size: slots_request(spec, facts.device, size), "sequences decoding at once",
                            progress, session, target, probe.probe_timeout_s)
        result = search_limit(sizes, curve="affine", ceiling=search_ceiling(probe.cap, probe.margin))
    if result.largest_fit == 0:
        raise ProbeFailed(f"even 1 sequence of {longest_prompt(spec)} prompt and {spec.max_output_tokens()} output "
                          f"tokens runs out of memory", sizes.attempts, sizes.last_oom_log)
    chosen = choose_size(result.largest_fit, result.smallest_oom, probe.margin, probe.cap)
    above = "" if result.smallest_oom is None else f", out of memory at {result.smallest_oom}"
    progress(1.0, f"batch size {chosen} (largest fit {result.largest_fit}{above})")
    return ProbeReport(chosen=chosen,
                       largest_fit=result.largest_fit, smallest_oom=result.smallest_oom,
                       predicted_limit=result.predicted_limit, margin=probe.margin, cap=probe.cap,
                       probes=sizes.attempts, seconds=time.monotonic() - started, cached=False,
                       memory_total_bytes=facts.total_bytes, memory_used_by_others_bytes=facts.used_by_others_bytes)
