"""Measuring configurations: each group sharing its job-level settings runs as one padding job in a child process
of its own (its ranks, on several GPUs), so a configuration that runs out of memory, or crashes a kernel, stops
only itself; its rows come back as the padding job reports them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.parallel import GpuRequest
from padbench.contract.results import Environment
from padbench.kinds.padding.contract import PaddingResult, StrategyResult
from padbench.kinds.tune.contract import TuneConfig, TuneJobSpec
from padbench.worker.jobs import spec_json
from padbench.worker.jobs.tune.trial_specs import padding_spec
from padbench.worker.runtime.launcher import launch_job

RUN_JOB = "padbench.worker.jobs:run_job"


@dataclass(frozen=True)
class Measured:
    """What one configuration's row said: its figure, or why it has none."""

    row: StrategyResult | None
    error: str | None = None  # the whole group's child failed: every configuration in it shares the reason

    @property
    def tokens_per_s(self) -> float | None:
        return None if self.row is None or self.row.status != "ok" else self.row.tokens_per_s

    @property
    def reason(self) -> str | None:
        if self.error is not None:
            return self.error
        if self.row is None:
            return "the trial reported no row for it"
        return self.row.invalid_reason or self.row.error if self.row.status != "ok" else None


@dataclass
class TrialRunner:
    spec: TuneJobSpec
    on_message: Callable[[str], None]  # what the running trial says it does
    environment: Environment | None = None  # the first trial's: where the tune ran

    def ranks(self) -> int:
        visible = [gpu for gpu in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if gpu.strip()]
        return GpuRequest.of(self.spec).trial_ranks(len(visible) if visible else _device_count())

    def measure(self, configs: Sequence[TuneConfig], batches: int, repeats: int, timeout_s: float,
                should_stop: Callable[[], bool]) -> list[Measured]:
        """The configurations (one group: the same job settings), measured together for `batches` batches."""
        job = padding_spec(self.spec, configs, batches, repeats)
        report = launch_job(RUN_JOB, spec_json(job), ranks=self.ranks(), timeout_s=max(timeout_s, 1.0),
                            on_progress=lambda _fraction, message: self.on_message(message),
                            should_stop=should_stop)
        if report.outcome != "ok":
            what = "ran out of memory" if report.outcome == "oom" else report.outcome
            return [Measured(None, f"its trial {what}: {report.error}") for _ in configs]
        result = JOB_RESULT_ADAPTER.validate_python(report.value)
        assert isinstance(result, PaddingResult)
        self.environment = self.environment or result.environment
        rows = {(row.strategy, row.attention, row.batch_size): row for row in result.strategies}
        return [Measured(rows.get((config.layout, config.kernel, config.batch_size))) for config in configs]


def _device_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0
