"""`run_attention_job`: the attention sweep from spec to result.

The job's own process only orchestrates: the matmul rate and environment come from one child, each
kernel's cells from children of their own (worker.sweep.cells), so this process never holds a CUDA
context and nothing a cell does can take the job down with it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from padbench.contract.results import AttentionCell, AttentionResult, Environment
from padbench.contract.spec import AttentionJobSpec
from worker.child import run_in_child
from worker.sweep.cells import run_kernel

ProgressFn = Callable[[float, str], None]
CONTEXT_TARGET = "worker.sweep.matmul:measure_context"
CONTEXT_TIMEOUT_S = 300.0
# Share of the progress bar the matmul/environment child takes; the kernels share the rest equally.
CONTEXT_SHARE = 0.05


class SweepError(RuntimeError):
    """The sweep cannot start at all (no such device, or the context measurement failed)."""


def resolve_device(requested: str) -> str:
    """`auto` is CUDA when a GPU is visible, else the CPU; asking for CUDA without one is an error."""
    has_cuda = torch.cuda.is_available()  # counts devices through the driver; creates no context
    if requested == "auto":
        return "cuda" if has_cuda else "cpu"
    if requested == "cuda" and not has_cuda:
        raise SweepError("device: 'cuda' was requested but no CUDA device is visible")
    return requested


def run_attention_job(spec: AttentionJobSpec, progress: ProgressFn) -> AttentionResult:
    device = resolve_device(spec.device)
    environment, matmul_tflops = _measure_context(spec, device)
    progress(CONTEXT_SHARE, f"matmul {matmul_tflops:.1f} TFLOP/s")
    cells: list[AttentionCell] = []
    share = (1.0 - CONTEXT_SHARE) / len(spec.kernels)
    for index, kernel in enumerate(spec.kernels):
        start = CONTEXT_SHARE + index * share

        def on_progress(fraction: float, message: str, start: float = start) -> None:
            progress(start + fraction * share, message)

        measured = run_kernel(spec, kernel, device, on_progress)
        cells.extend(with_matmul_fraction(cell, matmul_tflops) for cell in measured)
    progress(1.0, "attention sweep done")
    return AttentionResult(spec=spec, environment=environment, matmul_tflops=matmul_tflops, cells=cells)


def _measure_context(spec: AttentionJobSpec, device: str) -> tuple[Environment, float]:
    seeds = {"varlen": spec.varlen.seed} if spec.layout == "varlen" else {}
    report = run_in_child(CONTEXT_TARGET, device, spec.dtype, seeds, timeout_s=CONTEXT_TIMEOUT_S)
    if report.outcome != "ok":
        raise SweepError(f"measuring the {spec.dtype} matmul rate on {device} failed "
                         f"({report.outcome}): {report.error}")
    return Environment.model_validate(report.value["environment"]), float(report.value["matmul_tflops"])


def with_matmul_fraction(cell: AttentionCell, matmul_tflops: float) -> AttentionCell:
    if cell.tflops is None or matmul_tflops <= 0:
        return cell
    return cell.model_copy(update={"fraction_of_matmul": cell.tflops / matmul_tflops})
