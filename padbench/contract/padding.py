"""The padding kind's job spec: a model's forward (or training step) over one dataset laid out by each batching
strategy (static, dynamic, binned, packed, wrapped), on each attention kernel, at each batch size."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from padbench.contract.batch_size import BatchSizeChoice, auto_times, sizes_of
from padbench.contract.experts import (
    ExpertsChoice,
    ExpertsName,
    dense_model_experts_problem,
    experts_of,
    stated_experts,
)
from padbench.contract.model_spec import ModelSpec
from padbench.contract.parallel import DistributedSpec
from padbench.contract.spec import (
    FLASH_KERNELS,
    AttentionChoice,
    AttentionName,
    CompileChoice,
    DataSpec,
    Device,
    Dtype,
    JobSpecBase,
    MeasurementSpec,
    NewJobProblem,
    ProbeSpec,
    StrategySpec,
    check_tokenizer_named,
    model_and_probe_problems,
)
from padbench.contract.training import TrainingSpec
from padbench.contract.trl import TrlSettings, with_trl_strategy


class PaddingJobSpec(JobSpecBase):
    kind: Literal["padding"] = "padding"
    model: ModelSpec = ModelSpec(preset="tiny")
    data: DataSpec = DataSpec()
    # pydantic copies list defaults per instance; ruff cannot see through JobSpecBase that this is a pydantic model.
    strategies: Annotated[list[StrategySpec], Field(min_length=1, max_length=32)] = [  # noqa: RUF012
        StrategySpec(name="static"), StrategySpec(name="dynamic"),
        StrategySpec(name="binned", n_bins=16), StrategySpec(name="packed"),
    ]
    attention: AttentionChoice = "flash"
    # Mixtures of experts only: transformers' implementation of the expert matmuls, or a list (one row each);
    # unset, the model's default as transformers resolves it, recorded as it ran.
    experts: ExpertsChoice | None = None
    batch_size: BatchSizeChoice = 32
    dtype: Dtype = "bf16"
    device: Device = "auto"
    mode: Literal["inference", "training"] = "inference"
    compile: CompileChoice = "auto"
    measurement: MeasurementSpec = MeasurementSpec()
    probe: ProbeSpec = ProbeSpec()
    training: TrainingSpec = TrainingSpec()
    distributed: DistributedSpec = DistributedSpec()
    # TRL's packing settings (SFTConfig's names): they add the layout they mean to `strategies`.
    trl: TrlSettings | None = None
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
            if kernel in FLASH_KERNELS and self.dtype == "fp32":
                raise ValueError(f"attention {kernel!r} ({strategy.label}) needs dtype bf16 or fp16, not fp32")
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
