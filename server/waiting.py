"""Why a queued job waits, when no worker in contact could ever take it: none of them carries every label
the job names (`worker_labels`), none offers everything the job requires (its kind, an attention kernel, an
experts implementation, a GPU, a GPU model: `padbench.server.requirements`), or it asks for more GPUs than
any of those that do owns. Worked out each time the job is read, from the workers' registered capabilities,
never stored: a worker that joins, or one that stops, changes the answer at once.

With no worker in contact, a job that any worker could take says nothing: it waits for one to come.
Otherwise a job may still simply wait for a busy worker to finish.
"""

from __future__ import annotations

from collections.abc import Sequence

from padbench.contract.api import Capabilities
from padbench.contract.parallel import GpuRequest
from padbench.contract.spec import JobSpecBase
from padbench.server.requirements import (
    CPU_WORK_PREFIX,
    GPU_PREFIX,
    gpu_capabilities,
    job_requirements,
    offered_capabilities,
)

# How each kind of requirement reads in a sentence, in the order they are named (labels have their own reason).
REQUIREMENT_WORDS = {
    "kind": "the {} job kind",
    "device": "device: {}",
    GPU_PREFIX.rstrip(":"): "a GPU named like {!r}",
    "attention": "attention {}",
    "experts": "the {} experts implementation",
    CPU_WORK_PREFIX.rstrip(":"): "a GPU: on a CPU the job's work is about 1e{} FLOPs of matrix multiplies, more than "
    "it does within its job timeout",
}
ORDER = list(REQUIREMENT_WORDS)


def _gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


def _most_owned(owned: Sequence[int]) -> str:
    most = max(owned, default=0)
    return f"the most any live worker owns is {most}" if most else "no live worker owns a GPU"


def _quoted(labels: Sequence[str]) -> str:
    names = [repr(label) for label in labels]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def waiting_reason(spec: JobSpecBase, live_workers: Sequence[Capabilities]) -> str | None:
    """What keeps a queued job with this spec off every live worker; None when one of them could take it."""
    wanted = spec.worker_labels
    carrying = [worker for worker in live_workers if set(wanted) <= set(worker.labels)]
    if wanted and not carrying:
        them = "it" if len(wanted) == 1 else "them all"
        return f"needs a worker labelled {_quoted(wanted)}; no live worker carries {them}"
    # The GPU count first: "needs 4 GPUs" says more than the `device: cuda` every worker without one lacks.
    request = GpuRequest.of(spec)
    return (_gpu_count_reason(request, [w.owned_gpus for w in carrying]) or _unmet_reason(spec, carrying)
            or _nodes_reason(spec, request, carrying))


def _nodes_reason(spec: JobSpecBase, request: GpuRequest, live_workers: Sequence[Capabilities]) -> str | None:
    """A job across several nodes waits until as many live plain workers can each run its share (one gang
    member per worker), or one live worker whose scheduler places that many nodes can take it whole; None
    when either can."""
    if spec.nodes == 1:
        return None
    able = [worker for worker in live_workers
            if request.fits(worker.owned_gpus) and not unmet_requirements(spec, worker)]
    # A worker that hands its jobs to a scheduler joins no gang: it takes a job whole, or not at all.
    whole = [worker for worker in able if worker.max_nodes >= spec.nodes]
    sharing = [worker for worker in able if worker.max_nodes == 1]
    if whole or spec.nodes <= len(sharing):
        return None
    return (f"needs {spec.nodes} workers at once (nodes: {spec.nodes}); {len(sharing)} live worker(s) can run its "
            f"share, or a worker handing jobs to a scheduler with {spec.nodes} nodes (padbench worker --slurm) "
            "could take it whole")


def unmet_requirements(spec: JobSpecBase, worker: Capabilities) -> set[str]:
    """What the job requires that this worker does not offer (the claim's own test, in Python)."""
    required = job_requirements(spec)
    return required - offered_capabilities(worker) - gpu_capabilities(worker, required)


def describe_requirement(requirement: str) -> str:
    """`attention:generate:flash` → "attention 'flash' for generate jobs"; `kind:tune` → "the tune job kind"."""
    prefix, _, rest = requirement.partition(":")
    if prefix == "attention":
        kind, _, family = rest.rpartition(":")
        return f"attention {family!r}" + (f" for {kind} jobs" if kind else "")
    return REQUIREMENT_WORDS.get(prefix, "{}").format(rest)


def _fewest_then_named(missing: set[str]) -> tuple[int, list[str]]:
    return len(missing), sorted(missing)


def _naming_order(requirement: str) -> tuple[int, str]:
    prefix = requirement.partition(":")[0]
    return (ORDER.index(prefix) if prefix in ORDER else len(ORDER), requirement)


def _unmet_reason(spec: JobSpecBase, live_workers: Sequence[Capabilities]) -> str | None:
    """Says "no live worker can run it" and what the nearest worker lacks, when every one lacks something."""
    unmet = [unmet_requirements(spec, worker) for worker in live_workers]
    if not unmet or not all(unmet):
        return None
    lacks_least: set[str] = min(unmet, key=_fewest_then_named)
    nearest = sorted(lacks_least, key=_naming_order)
    lacking = ", ".join(describe_requirement(requirement) for requirement in nearest)
    whom = "the live worker lacks" if len(unmet) == 1 else "the nearest of them lacks"
    return f"no live worker can run it: {whom} {lacking}"


def _gpu_count_reason(request: GpuRequest, live_workers_owned: Sequence[int]) -> str | None:
    """What keeps the job off every live worker that carries its labels, each owning `live_workers_owned[i]`
    GPUs (0: a CPU worker); None when one of them could take it."""
    if request.any_worker or any(request.fits(owned) for owned in live_workers_owned):
        return None
    gpus = request.gpus
    if request.on_cpu:
        wanted = "a CPU worker or a worker with GPUs" if gpus == "all" else f"{_gpus(gpus)} or a CPU worker"
    else:
        wanted = "a worker with GPUs (gpus: all)" if gpus == "all" else _gpus(gpus)
    return f"needs {wanted}; {_most_owned(live_workers_owned)}"
