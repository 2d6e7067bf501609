"""The worker's GPUs as a pool: each running job holds a disjoint set of them, so no two jobs share a GPU.

A GPU is named as `CUDA_VISIBLE_DEVICES` names it (`0`, or a UUID); a job's child sees exactly the GPUs it
holds, under that variable. A worker without GPUs has an empty pool and runs one job at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from padbench.contract.parallel import GpuRequest
from padbench.contract.spec import JobSpecBase


class GpuPool:
    """Which of the worker's GPUs are free; `take` and `give_back` are safe from any thread."""

    def __init__(self, gpus: Sequence[str]) -> None:
        self.owned: tuple[str, ...] = tuple(gpus)
        self._free = list(self.owned)
        self._lock = threading.Lock()

    @property
    def free(self) -> int:
        with self._lock:
            return len(self._free)

    def take(self, count: int) -> tuple[str, ...] | None:
        """`count` free GPUs, now held (the first free ones in the worker's order); None when fewer are free."""
        with self._lock:
            if count > len(self._free):
                return None
            taken, self._free = tuple(self._free[:count]), self._free[count:]
            return taken

    def give_back(self, gpus: Sequence[str]) -> None:
        with self._lock:
            held = set(self._free) | set(gpus)
            self._free = [gpu for gpu in self.owned if gpu in held]


def job_ranks(spec: JobSpecBase, owned: int) -> int:
    """How many processes a job with this spec runs as on a worker owning `owned` GPUs."""
    return GpuRequest.of(spec).ranks(owned)


def visible_devices(gpus: Sequence[str]) -> dict[str, str]:
    """The environment a job's child needs to see exactly `gpus` (nothing to restrict without a GPU list)."""
    return {"CUDA_VISIBLE_DEVICES": ",".join(gpus)} if gpus else {}
