"""Running the sweep's cells in child processes, so an OOM or a sticky CUDA error costs one child only.

One child measures one kernel over the sweep's lengths, shortest first (starting a process and a CUDA
context per cell would cost more than most cells). Inside it, each cell is its own try: an out-of-memory
becomes an `oom` cell and the memory is released before the next length; a call the kernel refuses
becomes `unsupported`; a sticky CUDA error ends the child, and the lengths it did not reach go to a fresh
one. If a child dies or hangs, every length it did not report is re-run alone, one child each, so the
failure is pinned on the cell that caused it.

A child started here is in its own session (worker.child), so a kill aimed at the job's process group
misses it: each child therefore asks Linux to kill it when its parent dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import resource
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from padbench.contract.results import AttentionCell
from padbench.contract.spec import AttentionJobSpec
from worker.child import ChildContext, ChildReport, classify_exception, run_in_child
from worker.sweep.inputs import Problem
from worker.sweep.kernels import SWEEP_KERNELS, SweepKernel, describe_error
from worker.sweep.measure import Settings, measure_cell

CHILD_TARGET = "worker.sweep.cells:measure_kernel_cells"
CHILD_STARTUP_S = 120.0  # interpreter, torch import and CUDA context, on top of the per-cell limit
# Messages with which a kernel refuses an input it cannot handle (as opposed to failing on it).
_REFUSAL_MARKERS = ("No available kernel", "No viable backend", "not supported", "does not support", "is unavailable")
_PR_SET_PDEATHSIG = 1

ProgressFn = Callable[[float, str], None]


# --- in the child -----------------------------------------------------------------------------------------

def measure_kernel_cells(ctx: ChildContext, spec_document: dict[str, Any], kernel_name: str,
                         seq_lens: list[int], device_name: str) -> list[dict[str, Any]]:
    """Child entry point: cells for `seq_lens` (ascending) in order; stops early only on a sticky CUDA error."""
    _die_with_parent()
    spec = AttentionJobSpec.model_validate(spec_document)
    device, kernel = torch.device(device_name), SWEEP_KERNELS.get(kernel_name)
    if device.type == "cpu" and spec.cpu_memory_budget_bytes is not None:
        cap_address_space(spec.cpu_memory_budget_bytes)
    settings = Settings(warmup=spec.warmup, repeats=spec.repeats, check_error=spec.check_error)
    cells: list[dict[str, Any]] = []
    out_of_memory_at: int | None = None
    for index, seq_len in enumerate(seq_lens):
        ctx.progress(index / len(seq_lens), f"{kernel_name} N={seq_len}")
        cell, sticky = _one_cell(kernel, Problem.from_spec(spec, seq_len), device, settings, out_of_memory_at)
        cells.append(cell.model_dump(mode="json"))
        if cell.status == "oom" and out_of_memory_at is None:
            out_of_memory_at = seq_len
        if sticky:
            break  # the CUDA context is unusable: the parent gives the remaining lengths a fresh child
    return cells


def _one_cell(kernel: SweepKernel, problem: Problem, device: torch.device, settings: Settings,
              out_of_memory_at: int | None) -> tuple[AttentionCell, bool]:
    """The measured cell, or why there is none; and whether the failure poisoned the CUDA context."""
    skipped = _reason_not_to_run(kernel, problem, device, out_of_memory_at)
    if skipped is not None:
        return skipped, False
    failure: tuple[str, str] | None = None
    try:
        return measure_cell(kernel, problem, device, settings), False
    except Exception as error:  # MemoryError included: every failure becomes a cell
        failure = (classify_exception(error), describe_error(error))
    # Outside the except block, so the failed frame's tensors are unreachable and can be freed.
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    outcome, reason = failure
    return failed_cell(kernel.name, problem.seq_len, outcome, reason), outcome == "cuda_error"


def _reason_not_to_run(kernel: SweepKernel, problem: Problem, device: torch.device,
                       out_of_memory_at: int | None) -> AttentionCell | None:
    unavailable = kernel.available(device, problem.dtype) or kernel.unsupported(problem)
    if unavailable is not None:
        return AttentionCell(kernel=kernel.name, seq_len=problem.seq_len, status="unsupported", reason=unavailable)
    if out_of_memory_at is not None:
        reason = f"not run: already out of memory at N={out_of_memory_at}"
        return AttentionCell(kernel=kernel.name, seq_len=problem.seq_len, status="oom", reason=reason)
    if device.type == "cuda":
        needed, total = kernel.predicted_bytes(problem), torch.cuda.get_device_properties(device).total_memory
        if needed > total:
            reason = f"not run: its N² score matrices alone need {needed / 2**30:.1f} GiB of {total / 2**30:.1f}"
            return AttentionCell(kernel=kernel.name, seq_len=problem.seq_len, status="oom", reason=reason)
    return None


def failed_cell(kernel: str, seq_len: int, outcome: str, reason: str) -> AttentionCell:
    if outcome == "oom":
        return AttentionCell(kernel=kernel, seq_len=seq_len, status="oom", reason=reason)
    refused = any(marker in reason for marker in _REFUSAL_MARKERS) or reason.startswith("NotImplementedError")
    return AttentionCell(kernel=kernel, seq_len=seq_len, status="unsupported" if refused else "error", reason=reason)


def cap_address_space(budget_bytes: int) -> None:
    """Let this process map at most `budget_bytes` more, so an N² allocation raises MemoryError.

    Called after imports and after one multi-threaded op, so the thread pool's stacks and malloc arenas
    are already inside the baseline rather than eating the budget.
    """
    torch.randn(256, 256) @ torch.randn(256, 256)
    baseline = _virtual_memory_bytes()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = baseline + budget_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))


def _virtual_memory_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("cannot read VmSize from /proc/self/status: the CPU memory budget needs Linux")


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


# --- in the parent ---------------------------------------------------------------------------------------------

def run_kernel(spec: AttentionJobSpec, kernel_name: str, device: str,
               on_progress: ProgressFn | None = None) -> list[AttentionCell]:
    """Every length of one kernel: grouped in one child, isolated one per child after a child fails."""
    pending = sorted(set(spec.seq_lens))
    static_reason = _static_reason(spec, SWEEP_KERNELS.get(kernel_name), device)
    if static_reason is not None:  # no child needed to learn that a package or device is missing
        return [AttentionCell(kernel=kernel_name, seq_len=n, status="unsupported", reason=static_reason)
                for n in pending]
    total = len(pending)
    cells: list[AttentionCell] = []
    isolated = False
    while pending:
        group = pending[:1] if isolated else pending
        report = run_in_child(CHILD_TARGET, spec.model_dump(mode="json"), kernel_name, group, device,
                              timeout_s=CHILD_STARTUP_S + spec.cell_timeout_s * len(group),
                              on_progress=_scaled(on_progress, len(cells), len(group), total))
        if report.outcome == "ok" and report.value:
            done = [AttentionCell.model_validate(cell) for cell in report.value]
        elif len(group) > 1:
            isolated = True  # which cell killed the child is unknown: find out one child per length
            continue
        else:
            done = [_cell_from_report(kernel_name, group[0], report)]
        cells.extend(done)
        pending = pending[len(done):]
    return cells


def _static_reason(spec: AttentionJobSpec, kernel: SweepKernel, device: str) -> str | None:
    """Why the kernel cannot run at all, from what the parent knows without touching the device."""
    problem = Problem.from_spec(spec, min(spec.seq_lens))
    return kernel.check(torch.device(device), problem.dtype) or kernel.unsupported(problem)


def _cell_from_report(kernel: str, seq_len: int, report: ChildReport) -> AttentionCell:
    reason = report.error or f"child ended with outcome {report.outcome}"
    if report.outcome == "ok":
        reason = "the child returned no cell"
    return failed_cell(kernel, seq_len, report.outcome, reason)


def _scaled(on_progress: ProgressFn | None, done: int, group: int, total: int) -> ProgressFn | None:
    """Map a child's progress over its own lengths onto this kernel's whole list."""
    if on_progress is None:
        return None
    return lambda fraction, message: on_progress((done + fraction * group) / total, message)
