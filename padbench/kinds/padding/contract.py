"""The padding kind's contract: its job spec, a model's forward (or training step) over one dataset laid out by each
batching strategy (static, dynamic, binned, packed, wrapped), on each attention kernel, at each batch size; and its
result, one `StrategyResult` row per (strategy, kernel, batch size)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from padbench.contract.attention_pick import AttentionPicks
from padbench.contract.batch_size import BatchSizeChoice, auto_times, sizes_of
from padbench.contract.experts import (
    ExpertLoad,
    ExpertsChoice,
    ExpertsName,
    dense_model_experts_problem,
    experts_of,
    stated_experts,
)
from padbench.contract.horizon import Horizon
from padbench.contract.job_kind import JobKind
from padbench.contract.kernel_families import (
    AttentionName,
    AttentionSetting,
    missing_entry_point,
    needs_half_precision,
)
from padbench.contract.model_spec import ModelSpec
from padbench.contract.parallel import (
    DistributedSpec,
    GpuCount,
    GpuScaling,
    ParallelRun,
    RankShares,
    ScalingPoint,
)
from padbench.contract.results import (
    BatchTier,
    EnergyUse,
    GpuActivity,
    JobResultBase,
    MemoryStats,
    PartialResult,
    ProbeReport,
    Rate,
    ResultModel,
    Spread,
    check_partial_rows,
)
from padbench.contract.spec import (
    CompileChoice,
    DataSpec,
    Dtype,
    JobSpecBase,
    MeasurementSpec,
    NewJobProblem,
    ProbeSpec,
    StrategySpec,
    check_tokenizer_named,
    model_and_probe_problems,
    strategy_entry_point,
    strategy_label,
)
from padbench.contract.training import StepSplit, TrainingRun, TrainingSpec
from padbench.contract.trl import TrlSettings, with_trl_strategy

AUTO_CHECKPOINTING_NEEDS_SIZES = (
    "auto chooses the least recompute that fits the batch sizes asked, and batch_size auto sizes the batch to the "
    "recompute: name one of the two (a batch size, or none, ops, selective or full)")


class PaddingJobSpec(JobSpecBase):
    kind: Literal["padding"] = "padding"
    model: ModelSpec = ModelSpec(preset="tiny")
    data: DataSpec = DataSpec()
    # pydantic copies list defaults per instance; ruff cannot see through JobSpecBase that this is a pydantic model.
    strategies: Annotated[list[StrategySpec], Field(min_length=1, max_length=32)] = [  # noqa: RUF012
        StrategySpec(name="static"), StrategySpec(name="dynamic"),
        StrategySpec(name="binned", n_bins=16), StrategySpec(name="packed"),
    ]
    # A kernel family, `flash` (the fastest flash implementation present), or `auto`: the family the worker's table
    # of measured kernel speeds finds fastest for this kind, device, dtype, mode, layout and length (`flash` where
    # it has no figure), picked per layout by the worker that runs the job and stated in the result.
    attention: AttentionSetting = "auto"
    # Mixtures of experts only: transformers' implementation of the expert matmuls, or a list (one row each);
    # unset, the model's default as transformers resolves it, recorded as it ran.
    experts: ExpertsChoice | None = None
    batch_size: BatchSizeChoice = 32
    dtype: Dtype = "bf16"
    mode: Literal["inference", "training"] = "inference"
    compile: CompileChoice = "auto"
    # The run this benchmark stands for (`2h`, `5B tokens`): `compile: auto` compiles a row when the time its
    # faster steps save over that run exceeds the compile time. Unset: a long run, so `auto` compiles whenever the
    # compiled steady step is faster. The compile time is reported apart either way, never inside a measurement.
    horizon: Horizon | None = None
    measurement: MeasurementSpec = MeasurementSpec()
    probe: ProbeSpec = ProbeSpec()
    training: TrainingSpec = TrainingSpec()
    distributed: DistributedSpec = DistributedSpec()
    # TRL's packing settings (SFTConfig's names): they add the layout they mean to `strategies`.
    trl: TrlSettings | None = None
    # GPUs the job runs on (see JobSpecBase), or a scaling axis: a list of counts, smallest first, each measuring
    # the same rows on its own launch (`[all]`: 1, 2, 4, … up to the worker's GPUs).
    # Wider than JobSpecBase's count: only padding jobs take a scaling axis, so the base keeps the one count.
    gpus: GpuCount | GpuScaling = 1  # type: ignore[assignment]
    SPANS_GPUS: ClassVar[bool] = True

    @model_validator(mode="before")
    @classmethod
    def _trl_layout(cls, document: Any) -> Any:
        return with_trl_strategy(document)

    @model_validator(mode="after")
    def _consistent(self) -> PaddingJobSpec:
        check_tokenizer_named(self.data, self.model)
        positions = self.model.max_positions()
        if positions is not None and self.data.max_length > positions:
            raise ValueError(f"data.max_length ({self.data.max_length}) exceeds the model's positions ({positions})")
        for strategy in self.strategies:
            if positions is not None and strategy.widest(self.data.max_length) > positions:
                raise ValueError(f"{strategy.label}: max_length {self.data.max_length} padded to a multiple of "
                                 f"{strategy.pad_to_multiple_of} exceeds the model's positions ({positions})")
            kernel = self.attention_for(strategy)
            if needs_half_precision(kernel, strategy_entry_point(strategy.name)) and self.dtype == "fp32":
                raise ValueError(f"attention {kernel!r} ({strategy.label}) needs dtype bf16 or fp16, not fp32")
        if self.gpus == ["all"] and self.device == "cpu":
            raise ValueError("gpus: [all] counts the worker's GPUs; on device cpu list the process counts, "
                             "e.g. [1, 2]")
        if self.training.precision == "amp" and self.dtype == "fp32":
            raise ValueError("training.precision amp computes in a half-precision dtype: set dtype bf16 or fp16")
        if self.training.precision == "fp8" and self.dtype != "bf16":
            raise ValueError(f"training.precision fp8 runs the rest of the model in bf16: set dtype bf16, not "
                             f"{self.dtype}")
        if self.training.precision == "bf16" and self.dtype != "bf16":
            raise ValueError(f"training.precision bf16 keeps everything in bf16, but dtype is {self.dtype}: "
                             "set dtype bf16, or precision auto")
        labels = [s.label + ":" + self.attention_for(s) + "".join(f":{e}" for e in self.experts_for(s) if e)
                  for s in self.strategies]
        if len(set(labels)) != len(labels):
            raise ValueError(f"strategies repeat a (strategy, attention) pair: {labels}")
        return self

    def new_job_problems(self) -> list[NewJobProblem]:
        probed = any(auto_times(size) for strategy in self.strategies for size in self.batch_sizes_for(strategy))
        problems = model_and_probe_problems(self.model, probed, self.device, self.probe)
        experts_problem = self._experts_problem()
        if experts_problem is not None:
            problems.append((("experts",), experts_problem))
        if probed and self.mode == "training" and self.training.activation_checkpointing == "auto":
            problems.append((("training", "activation_checkpointing"), AUTO_CHECKPOINTING_NEEDS_SIZES))
        return problems + self._attention_problems()

    def _attention_problems(self) -> list[NewJobProblem]:
        """A strategy whose attention has no kernel for its layout (a family without packs, say): refused here
        rather than claimed by a worker and failed there. Where the job-level attention is the one lacking it,
        the job-level field is named."""
        problems: list[NewJobProblem] = []
        for index, strategy in enumerate(self.strategies):
            missing = missing_entry_point(self.attention_for(strategy), strategy_entry_point(strategy.name))
            where = ("strategies", str(index), "attention") if strategy.attention else ("attention",)
            if missing is not None:
                problems.append((where, f"{missing} (strategy {strategy.label})"))
        return problems

    def _experts_problem(self) -> str | None:
        """`experts` on a model whose stated fields count no experts (a preset, or a config naming them all)."""
        named = self.experts is not None or any(s.experts for s in self.strategies)
        fields = self.model.architecture() if self.model.preset else None
        if not named or fields is None or stated_experts(fields) is not None:
            return None
        return dense_model_experts_problem(self.model.label)

    def attention_for(self, strategy: StrategySpec) -> AttentionName:
        return strategy.attention or self.attention

    def experts_for(self, strategy: StrategySpec) -> list[ExpertsName | None]:
        """The experts' implementations a strategy is measured with (`[None]`: the model's default)."""
        return [strategy.experts] if strategy.experts else experts_of(self.experts)

    def batch_sizes_for(self, strategy: StrategySpec) -> list[int | str]:
        return sizes_of(strategy.batch_size or self.batch_size)

    def batch_size_for(self, strategy: StrategySpec) -> int | str:
        """The one size of a strategy; a job with a list of sizes is expanded (one strategy per size) first."""
        sizes = self.batch_sizes_for(strategy)
        if len(sizes) != 1:
            raise ValueError(f"{strategy.label} has several batch sizes {sizes}: expand the job per size first")
        return sizes[0]


# --- results -------------------------------------------------------------------------------------------

class CompileReport(ResultModel):
    """Whether a row ran compiled by torch.compile, why, and what compiling cost (in no measured second).

    The step times come from a few steps timed before the warm-up, eagerly and then compiled; `auto` keeps the
    compiled model when the time it saves over the measured run's steps exceeds the compile time.
    """

    requested: CompileChoice
    compiled: bool
    scope: Literal["model", "decoder-layers"] | None = None  # what was compiled: None when nothing was
    compile_seconds: Annotated[float, Field(ge=0, le=1e6)] | None = None  # first compiled step beyond the others
    eager_step_s: Annotated[float, Field(ge=0, le=1e6)] | None = None  # median of the eager steps timed
    compiled_step_s: Annotated[float, Field(ge=0, le=1e6)] | None = None  # median of the compiled steps timed
    reason: Annotated[str, Field(max_length=1000)]


class StrategyResult(ResultModel):
    strategy: str  # "static", "dynamic", "binned", "packed", "wrapped"
    n_bins: int | None = None
    pad_to_multiple_of: int | None = None
    # True where the layout runs documents together in one attention span (`wrapped`): its tokens see earlier
    # documents, so it computes another function than the per-sequence layouts and was gated against its own
    # rows run alone.
    crosses_documents: bool = False
    attention: str  # as requested
    kernel: str  # what actually ran, e.g. "torch-flash-varlen", "flash-attn-cute", "eager-block-mask"
    # Models with fewer key/value heads than query heads: whether the kernel took them as they are
    # ("native") or repeated them per query group first ("expanded"); None for models without GQA.
    gqa: Literal["native", "expanded"] | None = None
    # Mixtures of experts: transformers' experts implementation that ran (None for dense models), and how the
    # router spread the row's tokens over the experts.
    experts: Annotated[str, Field(max_length=64)] | None = None
    expert_load: ExpertLoad | None = None
    batch_size: int | None  # None only when `batch_size: auto` could not be probed
    status: Literal["ok", "invalid", "failed"]
    invalid_reason: str | None = None
    error: str | None = None
    # Headline: Σ real tokens / Σ measured seconds. None unless measured and valid.
    tokens_per_s: float | None = None
    speedup_vs_static: float | None = None
    median_batch_tokens_per_s: float | None = None
    p90_batch_tokens_per_s: float | None = None
    repeat_tokens_per_s: Annotated[list[Rate], Field(max_length=100)] | None = None  # each repeat's headline
    spread: Spread | None = None  # None with a single repeat: one number has no spread
    gpu_activity: GpuActivity | None = None  # None on CPU or without NVML
    energy: EnergyUse | None = None  # over the measured repeats; None on CPU or without NVML: not measured
    padding_efficiency: float | None = None  # real tokens / computed tokens
    real_tokens: int | None = None
    computed_tokens: int | None = None
    batches: int | None = None
    measured_seconds: float | None = None
    warmup_seconds: float | None = None
    mfu: float | None = None  # achieved FLOP/s over the datasheet peak
    mfu_vs_matmul: float | None = None  # achieved FLOP/s over the GEMM rate measured in the same job
    memory: MemoryStats | None = None
    max_logit_error: float | None = None
    logit_tolerance: float | None = None
    correctness_passed: bool | None = None
    probe: ProbeReport | None = None
    # `batch_size: auto:N`: N as asked, and the sizes chosen, shortest sequences first (a layout whose batches
    # all share one worst case has one tier, `longest` max_length)
    auto_times: Annotated[int, Field(ge=1, le=16)] | None = None
    batch_tiers: Annotated[list[BatchTier], Field(max_length=16)] | None = None
    per_rank: RankShares | None = None  # jobs on several GPUs: each rank's share of this row
    step_split: StepSplit | None = None  # training: forward, backward and optimizer time per step
    compilation: CompileReport | None = None  # None when the job's compile is false
    scaling: ScalingPoint | None = None  # a scaling axis's row: the GPU count it ran on, and its efficiency

    @property
    def layout_label(self) -> str:
        """The layout as tables name it (`binned[16]`), whatever GPU count the row ran on."""
        return strategy_label(self.strategy, self.n_bins, self.pad_to_multiple_of)

    @property
    def label(self) -> str:
        """The layout, and a scaling axis's GPU count (`packed on 4 GPUs`): the rows of one layout at each count
        are rows of their own in every line that names one."""
        point = self.scaling
        return self.layout_label + ("" if point is None else f" on {point.gpus} GPU{'s' if point.gpus > 1 else ''}")


class PaddingResult(JobResultBase):
    kind: Literal["padding"] = "padding"
    spec: PaddingJobSpec
    model_parameters: int
    # Mixtures of experts: the parameters one token goes through (router, its top-k experts, shared ones, the
    # rest of the model); None for dense models, where every parameter is active.
    active_parameters: int | None = None
    flops_per_token: float
    matmul_tflops: float | None = None  # the device's GEMM rate in the job's dtype, measured in the same job
    num_sequences: int
    real_tokens_total: int
    parallel: ParallelRun | None = None  # jobs on several GPUs (or processes): how they spread the work
    training: TrainingRun | None = None  # training jobs: how they trained
    strategies: list[StrategyResult]
    partial: PartialResult | None = None
    attention_auto: AttentionPicks | None = None  # `attention: auto`: the family picked per layout, and why

    @model_validator(mode="after")
    def _partial_counts_the_rows(self) -> PaddingResult:
        check_partial_rows(self.partial, len(self.strategies))
        return self


JOB_KIND = JobKind(spec=PaddingJobSpec, result=PaddingResult, runner="padbench.worker.jobs.padding")
