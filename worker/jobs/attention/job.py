"""`run_attention_job`: the attention sweep from spec to result.

The job's own process only orchestrates: the matmul rate and environment come from one child, the cells
from others (`cells`), so this process never holds a CUDA context and nothing a cell does can take the
job down with it.
"""

from __future__ import annotations

from collections.abc import Callable

from padbench.contract.results import Environment, PartialResult
from padbench.kinds.attention.contract import AttentionCell, AttentionJobSpec, AttentionResult
from padbench.worker.jobs.attention.cells import run_cells
from padbench.worker.runtime.device import resolve_device
from padbench.worker.runtime.isolation import run_in_child
from padbench.worker.runtime.progress import ProgressFn, progress_span

CONTEXT_TARGET = "padbench.worker.jobs.attention.matmul:measure_context"
CONTEXT_TIMEOUT_S = 300.0
# Share of the progress bar the matmul/environment child takes; the cells take the rest.
CONTEXT_SHARE = 0.05


class SweepError(RuntimeError):
    """The sweep cannot start at all: the context measurement failed."""


def run_attention_job(spec: AttentionJobSpec, progress: ProgressFn,
                      on_partial: Callable[[AttentionResult], None] | None = None) -> AttentionResult:
    """The sweep's result; each time a cell is measured, `on_partial` gets the cells known so far (those a
    kernel cannot run at all included), marked partial, so that a sweep stopped before its end keeps them."""
    device = resolve_device(spec.device).type
    environment, matmul_tflops = _measure_context(spec, device)
    progress(CONTEXT_SHARE, f"matmul {matmul_tflops:.1f} TFLOP/s")
    planned = len(spec.kernels) * len(set(spec.seq_lens))

    def result(cells: list[AttentionCell], partial: PartialResult | None) -> AttentionResult:
        return AttentionResult(spec=spec, environment=environment, matmul_tflops=matmul_tflops, partial=partial,
                               cells=[with_matmul_fraction(cell, matmul_tflops) for cell in cells])

    def hand_over(cells: list[AttentionCell]) -> None:
        if on_partial is not None:
            on_partial(result(cells, PartialResult(rows_finished=len(cells), rows_planned=planned)))

    measured = run_cells(spec, device, progress_span(progress, CONTEXT_SHARE, 1.0), on_cells=hand_over)
    progress(1.0, "attention sweep done")
    return result(measured, None)


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
