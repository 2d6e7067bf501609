"""Measuring configurations: each group sharing its job-level settings runs as one padding job (a generate job in
generate mode) in a child process of its own (its ranks, on several GPUs), so a configuration that runs out of
memory, or crashes a kernel, stops only itself; its rows come back as the job reports them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.parallel import GpuRequest
from padbench.contract.results import Environment, GpuActivity, MemoryStats, Spread
from padbench.kinds.generate.contract import GenerateResult, GenerateRow
from padbench.kinds.padding.contract import PaddingResult, StrategyResult
from padbench.kinds.tune.contract import TuneConfig, TuneJobSpec
from padbench.worker.jobs import spec_json
from padbench.worker.jobs.tune.trial_specs import trial_spec
from padbench.worker.runtime.launcher import launch_job

RUN_JOB = "padbench.worker.jobs:run_job"


@dataclass(frozen=True)
class Measured:
    """What one configuration's row said (a padding row, or a generate row in generate mode): its figure, or why
    it has none."""

    tokens_per_s: float | None = None  # real tokens/s, or output tokens/s
    status: Literal["ok", "invalid", "failed"] = "failed"
    kernel: str | None = None  # the kernel that ran
    peak_memory_bytes: int | None = None
    compile_seconds: float | None = None
    spread: Spread | None = None
    gpu_activity: GpuActivity | None = None
    reason: str | None = "the trial reported no row for it"
    warmup_seconds: float | None = None  # a compiled row's compile included
    measured_seconds: float | None = None

    def figures(self) -> str:
        """The outcome in a progress line: its rate and peak, or why it has none."""
        if self.tokens_per_s is None:
            return f"no figure ({self.short_reason()})"
        peak = "" if self.peak_memory_bytes is None else f", peak {self.peak_memory_bytes / 2**30:.1f} GiB"
        return f"{self.tokens_per_s:,.0f} tokens/s{peak}"

    def short_reason(self) -> str | None:
        """An allocator's out-of-memory message is a paragraph; what matters is that the plan's estimate let the
        configuration through."""
        if self.reason is not None and "out of memory" in self.reason.lower():
            return ("ran out of memory in its trial, though the memory plan's estimate let it through: "
                    + self.reason.split(". ")[0][:300])
        return self.reason

    @classmethod
    def failed(cls, reason: str) -> Measured:
        """The whole group's child failed: every configuration in it shares the reason."""
        return cls(reason=reason)

    @classmethod
    def of_padding(cls, row: StrategyResult | None) -> Measured:
        if row is None:
            return cls()
        compiled = row.compilation
        return cls(tokens_per_s=row.tokens_per_s if row.status == "ok" else None, status=row.status,
                   kernel=row.kernel, compile_seconds=None if compiled is None else compiled.compile_seconds,
                   peak_memory_bytes=_peak(row.memory), spread=row.spread, gpu_activity=row.gpu_activity,
                   reason=None if row.status == "ok" else row.invalid_reason or row.error,
                   warmup_seconds=row.warmup_seconds, measured_seconds=row.measured_seconds)

    @classmethod
    def of_generate(cls, row: GenerateRow | None) -> Measured:
        if row is None:
            return cls()
        rate = row.output_tokens_per_s if row.status == "ok" else None
        return cls(tokens_per_s=None if rate is None else float(rate), status=row.status, kernel=row.kernel,
                   compile_seconds=row.compile_seconds, spread=row.spread, peak_memory_bytes=_peak(row.memory),
                   reason=None if row.status == "ok" else row.invalid_reason or row.error,
                   warmup_seconds=row.warmup_seconds, measured_seconds=row.measured_seconds)


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
        job = trial_spec(self.spec, configs, batches, repeats)
        ranks = 1 if self.spec.mode == "generate" else self.ranks()  # a generate job runs on one GPU
        report = launch_job(RUN_JOB, spec_json(job), ranks=ranks, timeout_s=max(timeout_s, 1.0),
                            on_progress=lambda _fraction, message: self.on_message(message),
                            should_stop=should_stop)
        if report.outcome != "ok":
            what = "ran out of memory" if report.outcome == "oom" else report.outcome
            return [Measured.failed(f"its trial {what}: {report.error}") for _ in configs]
        result = JOB_RESULT_ADAPTER.validate_python(report.value)
        self.environment = self.environment or result.environment
        if isinstance(result, GenerateResult):
            generated = {(row.strategy, row.attention, row.batch_size): row for row in result.rows if not row.reference}
            return [Measured.of_generate(generated.get((config.layout, config.kernel, config.batch_size)))
                    for config in configs]
        assert isinstance(result, PaddingResult)
        rows = {(row.strategy, row.attention, row.batch_size): row for row in result.strategies}
        return [Measured.of_padding(rows.get((config.layout, config.kernel, config.batch_size))) for config in configs]


def _peak(memory: MemoryStats | None) -> int | None:
    """A row's peak: the allocator's on a GPU, the process's resident set on a CPU."""
    return None if memory is None else memory.peak_allocated_bytes or memory.host_peak_rss_bytes


def _device_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0
