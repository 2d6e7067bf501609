"""The tune kind's contract: given a model, data, GPUs and a mode (inference, training or generate), search the
settings that decide throughput (layout or batching strategy, attention kernel, batch size, activation
checkpointing, compile, precision) for the fastest that fits, within a time budget; and its result, every trial
with its settings, figure, memory and fate, the finalists measured with repeats, the winner and the settings to
paste.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from padbench.contract.bounds import Label, Message
from padbench.contract.horizon import Duration
from padbench.contract.job_kind import JobKind
from padbench.contract.kernel_families import AttentionChoice, missing_entry_point, needs_half_precision
from padbench.contract.kernel_family import ModelEntryPoint
from padbench.contract.model_spec import ModelSpec
from padbench.contract.results import (
    GpuActivity,
    JobResultBase,
    PartialResult,
    ResultModel,
    Spread,
    check_partial_rows,
)
from padbench.contract.spec import (
    DataSpec,
    Dtype,
    JobSpecBase,
    MemoryBudget,
    NewJobProblem,
    StrategyName,
    StrictModel,
    check_tokenizer_named,
)
from padbench.contract.training import Checkpointing, Precision
from padbench.kinds.generate.contract import (
    GENERATE_STRATEGIES,
    GenerateStrategyName,
    OutputLength,
    most_output_tokens,
)

# What a tune measures: a forward (inference) or a training step, whose trials are padding jobs; or batched
# generation (generate), whose trials are generate jobs and whose figure is output tokens/s.
TuneMode = Literal["inference", "training", "generate"]
BatchSize = Annotated[int, Field(ge=1, le=65_536)]


class TuneSpace(StrictModel):
    """The settings searched; each list's values are tried against every other list's (what cannot work
    together is never tried, and says why). Unset kernels: every attention family the worker runs."""

    layouts: Annotated[list[StrategyName], Field(min_length=1, max_length=5)] = \
        ["static", "dynamic", "binned", "packed"]  # noqa: RUF012
    # Generate mode: the batching strategies tried (in place of the layouts).
    strategies: Annotated[list[GenerateStrategyName], Field(min_length=1, max_length=3)] = \
        list(GENERATE_STRATEGIES)  # noqa: RUF012
    kernels: Annotated[list[AttentionChoice], Field(min_length=1, max_length=8)] | None = None
    batch_sizes: Annotated[list[BatchSize], Field(min_length=1, max_length=16)] = [8, 16, 32, 64]  # noqa: RUF012
    checkpointing: Annotated[list[Checkpointing], Field(min_length=1, max_length=4)] = \
        ["none", "ops", "selective", "full"]  # noqa: RUF012
    compile: Annotated[list[bool], Field(min_length=1, max_length=2)] = [False, True]  # noqa: RUF012
    precision: Annotated[list[Precision], Field(min_length=1, max_length=4)] = ["bf16", "amp"]  # noqa: RUF012
    # Training on several GPUs: FSDP2's reshard_after_forward (see the padding spec's `distributed`); on one GPU
    # nothing is sharded and the setting is not searched.
    reshard_after_forward: Annotated[list[bool], Field(min_length=1, max_length=2)] = [True, False]  # noqa: RUF012


class TuneSettings(StrictModel):
    # Wall-clock time the search may take, the finalists' full measurements included (compiles too).
    budget: Duration = 900.0
    finalists: Annotated[int, Field(ge=1, le=8)] = 3
    # Whole measured runs of each finalist: their spread gives the verdict's intervals.
    repeats: Annotated[int, Field(ge=2, le=20)] = 3
    # Measured batches of a configuration in the first round of trials; each later round doubles them.
    first_round_batches: Annotated[int, Field(ge=1, le=1000)] = 4
    # The memory a configuration must fit in, per GPU: unset, the GPU's free memory; on a CPU, a stand-in for
    # device memory (without one, the plan prunes nothing there).
    memory_bytes: MemoryBudget | None = None
    space: TuneSpace = TuneSpace()


def layout_entry(layout: str) -> ModelEntryPoint:
    """The kernel entry point a padding layout's rows call: packed rows (varlen), else padded rows."""
    return "packed" if layout == "packed" else "padded"


class TuneJobSpec(JobSpecBase):
    kind: Literal["tune"]
    model: ModelSpec = ModelSpec(preset="tiny")
    data: DataSpec = DataSpec(num_samples=512)
    mode: TuneMode = "training"
    dtype: Dtype = "bf16"
    # Generate mode: the new tokens of each request (a count, a uniform range, or a field's token count).
    output_length: OutputLength = 128
    tune: TuneSettings = TuneSettings()
    SPANS_GPUS: ClassVar[bool] = True
    # The tune job coordinates its trials from one process; each trial starts its own ranks on the job's GPUs.
    LAUNCHES_OWN_RANKS: ClassVar[bool] = True

    @model_validator(mode="after")
    def _consistent(self) -> TuneJobSpec:
        check_tokenizer_named(self.data, self.model)
        positions = self.model.max_positions()
        longest = self.data.max_length + (self.max_output_tokens() if self.mode == "generate" else 0)
        if positions is not None and longest > positions:
            what = "data.max_length" + (" and output_length" if self.mode == "generate" else "")
            raise ValueError(f"{what} ({longest} tokens) exceed the model's positions ({positions})")
        return self

    def new_job_problems(self) -> list[NewJobProblem]:
        """Refused here: in generate mode, a kernel the space names without a KV-cache (decode) path; in any
        mode, kernels none of which runs in the spec's dtype (a space with no configuration to try)."""
        kernels = self.tune.space.kernels
        if kernels is None:
            return []
        problems: list[NewJobProblem] = []
        if self.mode == "generate":
            problems = [(("tune", "space", "kernels", str(index)), missing) for index, kernel in enumerate(kernels)
                        if (missing := missing_entry_point(kernel, "decode")) is not None]
        if not any(self.kernel_runs(kernel, entry) for kernel in kernels for entry in self.entry_points()):
            problems.append((("tune", "space", "kernels"),
                             f"{', '.join(kernels)} {'runs' if len(kernels) == 1 else 'run'} in bf16 or fp16 only, "
                             "and dtype is fp32: no configuration "
                             "could run; add a kernel that runs in fp32 (sdpa, eager) or set dtype: bf16"))
        return problems

    def kernel_runs(self, kernel: str, entry: ModelEntryPoint) -> bool:
        """Whether `kernel` can run at `entry` in this spec's dtype (flash kernels take bf16 or fp16 only)."""
        return not (self.dtype == "fp32" and needs_half_precision(kernel, entry))

    def entry_points(self) -> set[ModelEntryPoint]:
        """Where the configurations call attention: the KV cache in generate mode, else each layout's rows."""
        return {"decode"} if self.mode == "generate" else {layout_entry(layout) for layout in self.tune.space.layouts}

    def max_output_tokens(self) -> int:
        return most_output_tokens(self.output_length)


# --- results ------------------------------------------------------------------------------------------------

TrialFate = Literal["finalist", "stopped", "pruned", "failed", "not reached"]


class TuneConfig(ResultModel):
    """One configuration: the settings a padding job (a generate job in generate mode) runs it with."""

    layout: Label  # the padding layout, or in generate mode the batching strategy
    kernel: Label  # the attention family asked for
    batch_size: int
    checkpointing: Checkpointing | None = None  # training only
    compile: bool
    precision: Precision | None = None  # training only
    reshard_after_forward: bool | None = None  # training on several GPUs only

    @property
    def label(self) -> str:
        parts = [self.layout, self.kernel, f"batch {self.batch_size}"]
        if self.checkpointing is not None:
            parts.append(f"ckpt {self.checkpointing}")
        if self.precision is not None:
            parts.append(self.precision)
        if self.reshard_after_forward is not None:
            parts.append("reshard" if self.reshard_after_forward else "no reshard")
        parts.append("compiled" if self.compile else "eager")
        return " · ".join(parts)


class TuneTrial(ResultModel):
    config: TuneConfig
    fate: TrialFate
    reason: Message | None = None  # why it was pruned, stopped or failed
    rounds: Annotated[int, Field(ge=0, le=64)] = 0  # rounds of trials it was measured in
    tokens_per_s: float | None = None  # its latest measurement (real tokens/s, or output tokens/s)
    peak_memory_bytes: int | None = None
    planned_bytes: int | None = None  # what the memory plan said it needs (model state and activations)
    kernel_ran: Label | None = None  # the kernel that actually ran
    compile_seconds: float | None = None  # paid once, before the measured steps; never inside them


class Finalist(ResultModel):
    """A finalist's full measurement: repeats, so its figure has an interval the verdict can compare."""

    trial: Annotated[int, Field(ge=0)]  # index into the trials
    tokens_per_s: float | None = None
    spread: Spread | None = None
    gpu_activity: GpuActivity | None = None
    status: Literal["ok", "invalid", "failed"]
    reason: Message | None = None


class Equivalent(ResultModel):
    tool: Label  # "padbench", "TRL SFTConfig", "accelerate FSDP", "torchtitan"
    settings: Annotated[str, Field(max_length=20_000)] | None = None  # what to paste; None: no equivalent
    missing: Annotated[list[Message], Field(max_length=32)] = []  # noqa: RUF012  (settings it has no equivalent of)


class TimeSpent(ResultModel):
    """Where the tune's time went: its trial jobs (every round's) and the finalists' jobs, each a child process
    that builds the model before its first step."""

    trial_jobs: Annotated[int, Field(ge=0, le=10_000)] = 0
    trial_seconds: Annotated[float, Field(ge=0, le=1e7)] = 0.0
    finals_jobs: Annotated[int, Field(ge=0, le=10_000)] = 0
    finals_seconds: Annotated[float, Field(ge=0, le=1e7)] = 0.0

    def with_trial_job(self, seconds: float) -> TimeSpent:
        return self.model_copy(update={"trial_jobs": self.trial_jobs + 1,
                                       "trial_seconds": self.trial_seconds + seconds})

    def with_finals_job(self, seconds: float) -> TimeSpent:
        return self.model_copy(update={"finals_jobs": self.finals_jobs + 1,
                                       "finals_seconds": self.finals_seconds + seconds})


class TuneResult(JobResultBase):
    kind: Literal["tune"] = "tune"
    spec: TuneJobSpec
    trials: Annotated[list[TuneTrial], Field(max_length=4096)]
    finalists: Annotated[list[Finalist], Field(max_length=8)] = []  # noqa: RUF012
    winner: Annotated[int, Field(ge=0)] | None = None  # index into the trials
    memory_bytes: int | None = None  # what configurations had to fit in, per GPU
    wall_seconds: float  # the tune's own time, start to verdict
    spent: TimeSpent | None = None  # None in results recorded before it was
    equivalents: Annotated[list[Equivalent], Field(max_length=8)] = []  # noqa: RUF012
    partial: PartialResult | None = None

    @model_validator(mode="after")
    def _partial_counts_the_rows(self) -> TuneResult:
        check_partial_rows(self.partial, len(self.trials))
        return self


JOB_KIND = JobKind(spec=TuneJobSpec, result=TuneResult, runner="padbench.worker.jobs.tune")
