"""Job-child targets for the integration tests (importable by a spawned child)."""

from __future__ import annotations

import time
from typing import Any

from padbench.worker.jobs import run_job
from padbench.worker.runtime.isolation import ChildContext

STALLED = "stalled before the second strategy row"


def padding_job_stalling_after_its_first_row(ctx: ChildContext, spec_text: str) -> dict[str, Any]:
    """The real padding job, held before its second strategy row as if that row took hours: a cancel then
    lands with exactly one row finished. It says so in its progress, which the heartbeats carry."""
    from padbench.worker.jobs.padding.strategy_run import StrategyRun

    measure_row = StrategyRun.run
    rows_started = []

    def measure_or_stall(self: StrategyRun) -> Any:
        rows_started.append(self)
        while len(rows_started) > 1:
            ctx.progress(0.5, STALLED)
            time.sleep(0.1)
        return measure_row(self)

    StrategyRun.run = measure_or_stall  # type: ignore[method-assign]
    return run_job(ctx, spec_text)


BLOCKED_AFTER_MEASURING = "blocked in the step split, after the measurement"


def padding_job_blocking_after_its_measurement(ctx: ChildContext, spec_text: str) -> dict[str, Any]:
    """The real padding job whose step split (the phase timed after a training row's measurement) never ends,
    as a profiler or a split that runs for hours would: only a time limit or a stop ends the job there."""
    from padbench.worker.jobs.padding import strategy_run

    def block(*_: Any) -> None:
        while True:
            ctx.progress(0.9, BLOCKED_AFTER_MEASURING)
            time.sleep(0.5)

    strategy_run.step_split = block  # type: ignore[assignment]
    return run_job(ctx, spec_text)
