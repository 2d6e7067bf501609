"""This process's place among a job's ranks, and the few agreements ranks must reach to step together.

A job on several GPUs runs the same code in every rank (one process per GPU, started by torch's launcher,
which sets `RANK`, `LOCAL_RANK` and `WORLD_SIZE`). Ranks that shard a model meet in collectives at every
step, so every decision that changes how many steps run (how many batches, whether a pass was long
enough, whether a strategy runs at all) is agreed before it is acted on; a rank that decided alone would
leave the others waiting in a collective forever. One process is the one-rank case of the same code.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.distributed as dist

from padbench.worker.engine.parallel.nccl_log import ask_for_log

Backend = Literal["nccl", "gloo"]


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @classmethod
    def of_environment(cls) -> Ranks:
        """As the launcher set them; one rank when no launcher started this process."""
        return cls(rank=int(os.environ.get("RANK", "0")), world=int(os.environ.get("WORLD_SIZE", "1")),
                   local_rank=int(os.environ.get("LOCAL_RANK", "0")))

    @property
    def spread(self) -> bool:
        return self.world > 1

    @property
    def leader(self) -> bool:
        """Rank 0: the one that assembles and reports the result."""
        return self.rank == 0

    def device(self, device: torch.device) -> torch.device:
        """This rank's own device: its GPU (by local rank) when the job runs on GPUs, else `device`."""
        if device.type == "cuda" and self.spread:
            return torch.device("cuda", self.local_rank)
        return device

    def join(self, device: torch.device, timeout_s: float) -> Backend | None:
        """Join the job's process group (NCCL between GPUs, gloo between CPU processes); None for one rank."""
        if not self.spread:
            return None
        backend: Backend = "nccl" if device.type == "cuda" else "gloo"
        if device.type == "cuda":
            torch.cuda.set_device(device)
            ask_for_log(self.rank)  # NCCL names the transports it chose only in its log
        if not dist.is_initialized():
            dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s),
                                    device_id=device if device.type == "cuda" else None)
        return backend

    def all_agree(self, yes: bool) -> bool:
        """True only when every rank says yes."""
        return self._reduce(int(yes), dist.ReduceOp.MIN) == 1

    def smallest(self, value: int) -> int:
        return self._reduce(value, dist.ReduceOp.MIN)

    def largest(self, value: int) -> int:
        return self._reduce(value, dist.ReduceOp.MAX)

    def gather(self, value: Any) -> list[Any]:
        """Every rank's `value` (picklable), in rank order, on every rank."""
        if not self.spread:
            return [value]
        gathered: list[Any] = [None] * self.world
        dist.all_gather_object(gathered, value)
        return gathered

    def _reduce(self, value: int, op: Any) -> int:
        if not self.spread:
            return value
        tensor = torch.tensor([value], dtype=torch.int64, device=_collective_device())
        dist.all_reduce(tensor, op=op)
        return int(tensor.item())


def _collective_device() -> torch.device:
    """NCCL reduces tensors on the rank's GPU; gloo on the host."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


ONE_RANK = Ranks()  # a process no launcher started: the whole job
