"""Running the sweep's cells in child processes, so an OOM or a sticky CUDA error costs one child only.

One child measures the sweep's cells kernel by kernel, shortest length first: a process with a fresh
CUDA context costs seconds to start (interpreter, torch, context), and a child per cell would spend most
of a GPU sweep's time starting up. Inside it, each cell is its own try: an out-of-memory becomes an `oom`
cell and the memory is released before the next cell (longer lengths of that kernel are then not tried);
a call the kernel refuses becomes `unsupported`; a sticky CUDA error ends the child, and the cells it did
not reach go to a fresh one. If a child dies or hangs, every cell it did not report is re-run alone, one
child each, so the failure is pinned on the cell that caused it.

A child started here is in its own session (`runtime.isolation`), so a kill aimed at the job's process
group misses it: `run_in_child` therefore has each child ask Linux to kill it when its parent dies.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import torch

from padbench.kinds.attention.contract import AttentionCell, AttentionJobSpec
from padbench.worker.jobs.attention.inputs import Problem
from padbench.worker.jobs.attention.kernels import SWEEP_KERNELS, SweepKernel, describe_error
from padbench.worker.jobs.attention.measure import CellSettings, measure_cell
from padbench.worker.runtime import procfs
from padbench.worker.runtime.isolation import ChildContext, ChildReport, classify_exception, run_in_child
from padbench.worker.runtime.progress import ProgressFn

CHILD_TARGET = "padbench.worker.jobs.attention.cells:measure_cells"
CHILD_STARTUP_S = 120.0  # interpreter, torch import and CUDA context, on top of the per-cell limit
# Messages with which a kernel refuses an input it cannot handle (as opposed to failing on it).
_REFUSAL_MARKERS = ("No available kernel", "No viable backend", "not supported", "does not support", "is unavailable")


# --- in the child -----------------------------------------------------------------------------------------

CellKey = tuple[str, int]  # (kernel, seq_len)


def measure_cells(ctx: ChildContext, spec_document: dict[str, Any], keys: list[CellKey],
                  device_name: str) -> list[dict[str, Any]]:
    """Child entry point: the cells for `keys`, in order; stops early only on a sticky CUDA error."""
    spec = AttentionJobSpec.model_validate(spec_document)
    device = torch.device(device_name)
    if device.type == "cpu" and spec.cpu_memory_budget_bytes is not None:
        cap_address_space(spec.cpu_memory_budget_bytes)
    settings = CellSettings(warmup=spec.warmup, repeats=spec.repeats, check_error=spec.check_error)
    cells: list[dict[str, Any]] = []
    out_of_memory_at: dict[str, int] = {}  # kernel → the shortest length it ran out of memory at
    for index, (kernel_name, seq_len) in enumerate(keys):
        ctx.progress(index / len(keys), f"{kernel_name} N={seq_len}")
        kernel = SWEEP_KERNELS.get(kernel_name)
        problem = Problem.from_spec(spec, seq_len)
        cell, sticky = _one_cell(kernel, problem, device, settings, out_of_memory_at.get(kernel_name))
        cells.append(cell.model_dump(mode="json"))
        ctx.finished(cells[-1])  # kept by the parent even if a later cell kills this child or the job is stopped
        if cell.status == "oom":
            out_of_memory_at.setdefault(kernel_name, seq_len)
        if sticky:
            break  # the CUDA context is unusable: the parent gives the remaining cells a fresh child
    return cells


def _one_cell(kernel: SweepKernel, problem: Problem, device: torch.device, settings: CellSettings,
              out_of_memory_at: int | None) -> tuple[AttentionCell, bool]:
    """The measured cell, or why there is none; and whether the failure poisoned the CUDA context."""
    skipped = _reason_not_to_run(kernel, problem, device, out_of_memory_at)
    if skipped is not None:
        return skipped, False
    try:
        return measure_cell(kernel, problem, device, settings), False
    except Exception as error:  # MemoryError included: every failure becomes a cell
        outcome, reason = classify_exception(error), describe_error(error)
    # Outside the except block, so the failed frame's tensors are unreachable and can be freed.
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
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
        predicted = predicted_oom(kernel, problem, torch.cuda.get_device_properties(device).total_memory)
        if predicted is not None:
            return AttentionCell(kernel=kernel.name, seq_len=problem.seq_len, status="oom", reason=predicted)
    return None


def predicted_oom(kernel: SweepKernel, problem: Problem, device_bytes: int) -> str | None:
    """Why a cell cannot fit, when its N² matrices alone exceed the device: not worth a try (seconds each)."""
    needed = kernel.predicted_bytes(problem)
    if needed <= device_bytes:
        return None
    return f"not run: its N² score matrices alone need {needed / 2**30:.1f} of {device_bytes / 2**30:.1f} GiB"


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
    procfs.cap_address_space(budget_bytes)


# --- in the parent ---------------------------------------------------------------------------------------------

def run_cells(spec: AttentionJobSpec, device: str, on_progress: ProgressFn | None = None,
              on_cells: Callable[[list[AttentionCell]], None] | None = None) -> list[AttentionCell]:
    """Every (kernel, length) cell of the sweep, kernel by kernel, shortest length first.

    The cells share a child until one kills it; then the cells it did not report each get a child. Each
    time a child hands over a measured cell, `on_cells` gets every cell known so far, in the sweep's order.
    """
    lengths = sorted(set(spec.seq_lens))
    cells: dict[CellKey, AttentionCell] = {}

    def keep(cell_document: dict[str, Any]) -> None:
        cell = AttentionCell.model_validate(cell_document)
        cells[cell.kernel, cell.seq_len] = cell
        if on_cells is not None:
            on_cells([cells[key] for key in sweep_order(spec, lengths) if key in cells])

    pending: list[CellKey] = []
    for kernel in spec.kernels:
        reason = _static_reason(spec, SWEEP_KERNELS.get(kernel), device)
        for seq_len in lengths:
            if reason is None:
                pending.append((kernel, seq_len))
            else:  # no child needed to learn that a package, a device or a mask feature is missing
                cells[kernel, seq_len] = AttentionCell(kernel=kernel, seq_len=seq_len, status="unsupported",
                                                       reason=reason)
    total, done = len(pending), 0
    isolated = False
    while pending:
        group = pending[:1] if isolated else pending
        report = run_in_child(CHILD_TARGET, spec.model_dump(mode="json"), group, device,
                              timeout_s=CHILD_STARTUP_S + spec.cell_timeout_s * len(group),
                              on_progress=_scaled(on_progress, done, len(group), total), on_finished=keep)
        if report.outcome == "ok" and report.value:
            finished = [AttentionCell.model_validate(cell) for cell in report.value]
        elif len(group) > 1:
            isolated = True  # which cell killed the child is unknown: find out, one child per cell
            continue
        else:
            finished = [_cell_from_report(*group[0], report)]
        for cell in finished:
            cells[cell.kernel, cell.seq_len] = cell
        pending, done = pending[len(finished):], done + len(finished)
    return [cells[key] for key in sweep_order(spec, lengths)]


def sweep_order(spec: AttentionJobSpec, lengths: list[int]) -> list[CellKey]:
    return [(kernel, seq_len) for kernel in spec.kernels for seq_len in lengths]


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
    """Map a child's progress over its own cells onto the whole sweep's."""
    if on_progress is None:
        return None
    return lambda fraction, message: on_progress((done + fraction * group) / total, message)
