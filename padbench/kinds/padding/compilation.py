"""What a padding job's rows did about torch.compile, in words: compiled or not, why, and the compile time."""

from __future__ import annotations

from typing import Any

from padbench.kinds.padding.contract import CompileReport, PaddingResult, StrategyResult
from padbench.kinds.padding.experts import kernel_cell


def compiled_rows(result: PaddingResult) -> list[StrategyResult]:
    return [row for row in result.strategies if row.compilation is not None and row.compilation.compiled]


def compile_lines(result: PaddingResult) -> list[str]:
    """One line per row that considered compiling (none for `compile: false`); compile time is never inside the
    measured time, so this is where it shows."""
    rows = [row for row in result.strategies if row.compilation is not None]
    if not rows:
        return []
    lines = [f"torch.compile ({_requested(result)}):"]
    for row in rows:
        assert row.compilation is not None
        lines.append(f"  {row.label} / {kernel_cell(row)}: {_decision(row.compilation)}")
    return lines


def compile_fields(row: StrategyResult) -> dict[str, Any]:
    """The CSV's compile columns: empty for a row of a job that never compiles."""
    report = row.compilation
    return {"compiled": report.compiled if report else None,
            "compile_seconds": report.compile_seconds if report else None,
            "eager_step_s": report.eager_step_s if report else None,
            "compiled_step_s": report.compiled_step_s if report else None}


def _requested(result: PaddingResult) -> str:
    choice = result.spec.compile
    return "auto" if choice == "auto" else "true" if choice else "false"


def _decision(report: CompileReport) -> str:
    steps = []
    if report.eager_step_s is not None:
        steps.append(f"eager {report.eager_step_s * 1000:,.1f} ms/step")
    if report.compiled_step_s is not None:
        steps.append(f"compiled {report.compiled_step_s * 1000:,.1f} ms/step")
    if report.compile_seconds is not None:
        steps.append(f"compiling took {report.compile_seconds:,.1f} s, outside the measurement")
    scope = f" [{report.scope}]" if report.compiled and report.scope else ""
    return f"{report.reason}{scope}" + (f" ({'; '.join(steps)})" if steps else "")
