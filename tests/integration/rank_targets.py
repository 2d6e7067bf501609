"""Rank targets for the launcher's tests: each runs in every rank that torch's elastic launcher starts."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from padbench.worker.runtime.isolation import ChildContext


def _join(pid_dir: str) -> int:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    Path(pid_dir, f"rank{rank}.pid").write_text(str(os.getpid()))
    return rank


def sum_ranks(ctx: ChildContext, pid_dir: str) -> dict[str, Any]:
    """Every rank adds its number; each reports progress (only rank 0's reaches the parent)."""
    rank = _join(pid_dir)
    ctx.progress(0.5, f"rank {rank} halfway")
    total = torch.tensor([rank + 1.0])
    dist.all_reduce(total)
    ctx.finished({"rank": rank})
    return {"rank": rank, "world": dist.get_world_size(), "sum": float(total.item())}


def fail_on_rank_one(ctx: ChildContext, pid_dir: str, error: str) -> None:
    """Rank 1 raises while rank 0 waits for it in a collective (as a rank that fails mid-step leaves the others)."""
    rank = _join(pid_dir)
    if rank == 1:
        time.sleep(0.5)
        raise MemoryError("CUDA out of memory (simulated)") if error == "oom" else ValueError("bad shape on rank 1")
    dist.all_reduce(torch.zeros(1))
    time.sleep(600)


def die_on_rank_one(ctx: ChildContext, pid_dir: str) -> None:
    """Rank 1 is killed outright, with no chance to say anything."""
    rank = _join(pid_dir)
    if rank == 1:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    dist.all_reduce(torch.zeros(1))
    time.sleep(600)


def hang(ctx: ChildContext, pid_dir: str) -> None:
    _join(pid_dir)
    time.sleep(600)
