"""Why a queued job waits, when no worker in contact could ever take it: none of them carries every label
the job names (`worker_labels`), or it asks for more GPUs than any of those that do owns. Worked out each
time the job is read, from the workers' registered capabilities, never stored: a worker that joins, or one
that stops, changes the answer at once.

Only labels and the GPU count are judged here; a job may still wait for a kernel, a job kind or a GPU model
(`gpu:`) no worker offers, or simply for a busy worker to finish.
"""

from __future__ import annotations

from collections.abc import Sequence

from padbench.contract.api import Capabilities
from padbench.contract.parallel import GpuRequest
from padbench.contract.spec import JobSpecBase


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
    return _gpu_count_reason(GpuRequest.of(spec), [worker.owned_gpus for worker in carrying])


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
