"""Job specs: the one contract that the server validates, the worker runs and the client submits.

Every field a user can write is declared here with its bounds, so a bad spec fails at submission
(HTTP 422 / CLI error naming the field) rather than minutes later on a GPU.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, TypeAdapter, model_validator

from padbench.contract.bounds import Label, Name, NoNul, Seed

Dtype = Literal["bf16", "fp16", "fp32"]
Device = Literal["cuda", "cpu", "auto"]
StrategyName = Literal["static", "dynamic", "binned", "packed"]
# `flash` resolves to the best flash implementation present (flash-attn-cute > flash-attn > torch-flash);
# the three explicit names pin one. The result always records the kernel that actually ran.
AttentionName = Literal["flash", "flash-attn", "flash-attn-cute", "torch-flash", "sdpa", "flex", "eager"]
FLASH_KERNELS: frozenset[str] = frozenset({"flash", "flash-attn", "flash-attn-cute", "torch-flash"})


class StrictModel(BaseModel):
    """Unknown keys are errors: a typo in a spec must not silently fall back to a default."""

    # NaN and ±Infinity are never a meaningful setting, and NaN cannot even be stored as JSON.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# A file, tokenizer or model directory name; where it may point is the worker's decision (its roots).
PathName = Annotated[str, Field(min_length=1, max_length=1024), NoNul]
# Seconds a person may ask one step to run before it counts as hung.
TimeoutSeconds = Annotated[float, Field(gt=0, le=6 * 3600)]
# A CPU stand-in for device memory: at most 1 TiB.
MemoryBudget = Annotated[int, Field(ge=1, le=2**40)]
# Rows per batch, and sequence lengths: the longest context of today's open models is 128k to 1M tokens.
BatchSize = Annotated[int, Field(ge=1, le=65_536)]
SeqLen = Annotated[int, Field(ge=1, le=1_048_576)]


# --- model -------------------------------------------------------------------------------------------

class GPT2Fields(StrictModel):
    n_layer: PositiveInt
    n_embd: PositiveInt
    n_head: PositiveInt
    vocab_size: PositiveInt = 30522
    n_positions: PositiveInt = 1024

    @model_validator(mode="after")
    def _heads_divide_width(self) -> GPT2Fields:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        return self


# Presets are data, not code paths: `gpt2-seed` is the model of the original padding benchmark.
MODEL_PRESETS: dict[str, GPT2Fields] = {
    "gpt2-seed": GPT2Fields(n_layer=12, n_embd=1024, n_head=8, vocab_size=30522, n_positions=640),
    "gpt2": GPT2Fields(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024),
    "tiny": GPT2Fields(n_layer=2, n_embd=64, n_head=4, vocab_size=30522, n_positions=640),
}


class ModelSpec(StrictModel):
    """Exactly one of `preset`, `config` or `path` (a local Hugging Face model directory)."""

    preset: Literal["gpt2-seed", "gpt2", "tiny"] | None = None
    config: GPT2Fields | None = None
    path: PathName | None = None
    # Throughput does not depend on weight values, so random init is the default even for `path`.
    load_weights: bool = False

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"preset": value} if value in MODEL_PRESETS else {"path": value}
        return value

    @model_validator(mode="after")
    def _exactly_one_source(self) -> ModelSpec:
        given = [name for name in ("preset", "config", "path") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of preset, config or path (got {given or 'none'})")
        if self.load_weights and self.path is None:
            raise ValueError("load_weights needs a local model directory in `path`")
        return self

    def known_fields(self) -> GPT2Fields | None:
        """The architecture when it is known without reading files (presets and explicit configs)."""
        return MODEL_PRESETS[self.preset] if self.preset else self.config


# --- data --------------------------------------------------------------------------------------------

class DataSpec(StrictModel):
    # `hf:NAME[:CONFIG[:SPLIT]]`, a local .txt/.jsonl/.json/.parquet/.csv file, or `synthetic`.
    source: PathName = "synthetic"
    tokenizer: PathName | None = None
    text_field: Label = "text"
    max_length: SeqLen = 640
    num_samples: Annotated[int, Field(ge=1, le=10_000_000)] = 2000
    seed: Seed = 0
    # Sequences are drawn with replacement from the non-empty lines, so any num_samples works.
    with_replacement: bool = True
    # Named length distribution for `synthetic` (see padbench.worker.engine.synthetic for the fitted figures).
    distribution: Label = "wikitext103-bert"

    @model_validator(mode="after")
    def _tokenizer_for_text(self) -> DataSpec:
        if self.source != "synthetic" and self.tokenizer is None:
            raise ValueError(f"data.tokenizer is required for source {self.source!r}")
        return self


# --- strategies ---------------------------------------------------------------------------------------

DEFAULT_N_BINS = 16


class StrategySpec(StrictModel):
    name: StrategyName
    n_bins: Annotated[int, Field(ge=1, le=4096)] | None = None
    attention: AttentionName | None = None  # overrides the job-level attention for this strategy
    batch_size: BatchSize | Literal["auto"] | None = None  # overrides the job-level batch size

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        value = {"name": value} if isinstance(value, str) else value
        if isinstance(value, dict) and value.get("name") == "binned" and value.get("n_bins") is None:
            value = {**value, "n_bins": DEFAULT_N_BINS}
        return value

    @model_validator(mode="after")
    def _bins_only_for_binned(self) -> StrategySpec:
        if self.name != "binned" and self.n_bins is not None:
            raise ValueError(f"n_bins applies only to the binned strategy, not {self.name!r}")
        return self

    @property
    def label(self) -> str:
        return f"binned[{self.n_bins}]" if self.name == "binned" else self.name


# --- measurement ----------------------------------------------------------------------------------------

class MeasurementSpec(StrictModel):
    warmup_batches: Annotated[int, Field(ge=0, le=10_000)] = 3
    # A run must last min_seconds AND min_batches to be valid (MLPerf LoadGen's rule).
    min_seconds: Annotated[float, Field(ge=0, le=3600)] = 5.0
    min_batches: Annotated[int, Field(ge=1, le=100_000)] = 10
    # Stop after this many measured batches even if the data is not exhausted; None = one full pass.
    max_batches: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    repeats: Annotated[int, Field(ge=1, le=100)] = 1
    # Sequences checked against the one-at-a-time reference before timing.
    correctness_samples: Annotated[int, Field(ge=1, le=1024)] = 8


class ProbeSpec(StrictModel):
    margin: Annotated[float, Field(ge=0, lt=0.5)] = 0.05
    cap: Annotated[int, Field(ge=1, le=65_536)] = 4096
    force: bool = False  # ignore the probe cache and re-probe
    probe_timeout_s: TimeoutSeconds = 300.0
    # CPU only: the memory budget that stands in for device memory, so the probe path is testable.
    cpu_memory_budget_bytes: MemoryBudget | None = None


class PaddingJobSpec(StrictModel):
    kind: Literal["padding"] = "padding"
    name: Name | None = None
    model: ModelSpec = ModelSpec(preset="tiny")
    data: DataSpec = DataSpec()
    strategies: Annotated[list[StrategySpec], Field(min_length=1, max_length=32)] = [
        StrategySpec(name="static"), StrategySpec(name="dynamic"),
        StrategySpec(name="binned", n_bins=16), StrategySpec(name="packed"),
    ]
    attention: AttentionName = "flash"
    batch_size: BatchSize | Literal["auto"] = 32
    dtype: Dtype = "bf16"
    device: Device = "auto"
    mode: Literal["inference", "training"] = "inference"
    compile: bool = False  # torch.compile with dynamic shapes (never one graph per batch shape)
    measurement: MeasurementSpec = MeasurementSpec()
    probe: ProbeSpec = ProbeSpec()

    @model_validator(mode="after")
    def _consistent(self) -> PaddingJobSpec:
        fields = self.model.known_fields()
        if fields is not None and self.data.max_length > fields.n_positions:
            raise ValueError(
                f"data.max_length ({self.data.max_length}) exceeds the model's positions ({fields.n_positions})"
            )
        for strategy in self.strategies:
            kernel = self.attention_for(strategy)
            if kernel in FLASH_KERNELS and self.dtype == "fp32":
                raise ValueError(f"attention {kernel!r} ({strategy.label}) needs dtype bf16 or fp16, not fp32")
        labels = [s.label + ":" + self.attention_for(s) for s in self.strategies]
        if len(set(labels)) != len(labels):
            raise ValueError(f"strategies repeat a (strategy, attention) pair: {labels}")
        return self

    def attention_for(self, strategy: StrategySpec) -> AttentionName:
        return strategy.attention or self.attention

    def batch_size_for(self, strategy: StrategySpec) -> int | Literal["auto"]:
        return strategy.batch_size or self.batch_size


# --- attention sweep --------------------------------------------------------------------------------------

SweepKernelName = Literal[
    "naive", "sdpa-math", "sdpa-efficient", "sdpa-flash", "varlen", "flex", "flash-attn", "flash-attn-cute"
]


class VarlenLayout(StrictModel):
    distribution: Label = "wikitext103-bert"  # lengths per sequence; packed up to each seq_len
    seed: Seed = 0


class AttentionJobSpec(StrictModel):
    kind: Literal["attention"]
    name: Name | None = None
    batch: Annotated[int, Field(ge=1, le=4096)] = 8
    heads: Annotated[int, Field(ge=1, le=1024)] = 32
    kv_heads: Annotated[int, Field(ge=1, le=1024)] | None = None  # GQA when fewer than heads
    head_dim: Annotated[int, Field(ge=1, le=1024)] = 64
    seq_lens: Annotated[list[SeqLen], Field(min_length=1, max_length=64)] = [512, 1024, 2048, 4096, 8192, 16384]
    causal: bool = False
    dtype: Dtype = "bf16"
    direction: Literal["forward", "forward+backward"] = "forward"
    layout: Literal["dense", "varlen"] = "dense"
    varlen: VarlenLayout = VarlenLayout()
    kernels: Annotated[list[SweepKernelName], Field(min_length=1, max_length=16)] = ["naive", "sdpa-flash"]
    device: Device = "auto"
    warmup: Annotated[int, Field(ge=0, le=1000)] = 3
    repeats: Annotated[int, Field(ge=1, le=10_000)] = 20
    check_error: bool = True
    cell_timeout_s: TimeoutSeconds = 300.0
    cpu_memory_budget_bytes: MemoryBudget | None = None

    @model_validator(mode="after")
    def _consistent(self) -> AttentionJobSpec:
        kv = self.kv_heads or self.heads
        if self.heads % kv:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({kv})")
        if len(set(self.kernels)) != len(self.kernels):
            raise ValueError("kernels repeat a name")
        return self


JobSpec = Annotated[PaddingJobSpec | AttentionJobSpec, Field(discriminator="kind")]
JOB_SPEC_ADAPTER: TypeAdapter[PaddingJobSpec | AttentionJobSpec] = TypeAdapter(JobSpec)


def parse_job_spec(document: dict[str, Any]) -> PaddingJobSpec | AttentionJobSpec:
    """Validate a decoded YAML/JSON document; a missing `kind` means a padding job."""
    return JOB_SPEC_ADAPTER.validate_python({"kind": "padding", **document})
