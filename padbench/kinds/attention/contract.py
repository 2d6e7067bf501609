"""The attention kind's contract: its job spec, a sweep of attention kernels over sequence lengths on random inputs
of the shape it names (no model), dense or packed into varlen batches of a length distribution's sequences; and its
result, one `AttentionCell` per (kernel, sequence length)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from padbench.contract.bounds import Label, Seed
from padbench.contract.job_kind import JobKind
from padbench.contract.kernel_families import SweepKernelChoice
from padbench.contract.results import JobResultBase, PartialResult, ResultModel, check_partial_rows
from padbench.contract.spec import Dtype, JobSpecBase, MemoryBudget, SeqLen, StrictModel, TimeoutSeconds

# The sweep's kernels are the kernel families' sweep kernels (`padbench/kernels/`); a family's aliases name its
# `sweep_alias` there (transformers' eager attention is `naive`).
SweepKernelName = str


class VarlenLayout(StrictModel):
    distribution: Label = "wikitext103-bert"  # lengths per sequence; packed up to each seq_len
    seed: Seed = 0


class AttentionJobSpec(JobSpecBase):
    kind: Literal["attention"]
    batch: Annotated[int, Field(ge=1, le=4096)] = 8
    heads: Annotated[int, Field(ge=1, le=1024)] = 32
    kv_heads: Annotated[int, Field(ge=1, le=1024)] | None = None  # GQA when fewer than heads
    head_dim: Annotated[int, Field(ge=1, le=1024)] = 64
    # pydantic copies list defaults per instance; ruff cannot see through JobSpecBase that this is a pydantic model.
    seq_lens: Annotated[list[SeqLen], Field(min_length=1, max_length=64)] = \
        [512, 1024, 2048, 4096, 8192, 16384]  # noqa: RUF012
    causal: bool = False
    dtype: Dtype = "bf16"
    direction: Literal["forward", "forward+backward"] = "forward"
    layout: Literal["dense", "varlen"] = "dense"
    varlen: VarlenLayout = VarlenLayout()
    kernels: Annotated[list[SweepKernelChoice], Field(min_length=1, max_length=16)] = \
        ["naive", "sdpa-flash"]  # noqa: RUF012
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


# --- results -------------------------------------------------------------------------------------------

class AttentionCell(ResultModel):
    kernel: str
    seq_len: int
    status: Literal["ok", "oom", "unsupported", "error"]
    reason: str | None = None
    median_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    tflops: float | None = None
    fraction_of_matmul: float | None = None
    peak_memory_bytes: int | None = None  # above the inputs
    rel_error: float | None = None
    warmup_ms: float | None = None  # first call, including any JIT compilation


class AttentionResult(JobResultBase):
    kind: Literal["attention"] = "attention"
    spec: AttentionJobSpec
    matmul_tflops: float | None = None  # measured in the same run, for context
    cells: list[AttentionCell]
    partial: PartialResult | None = None

    @model_validator(mode="after")
    def _partial_counts_the_rows(self) -> AttentionResult:
        check_partial_rows(self.partial, len(self.cells))
        return self


JOB_KIND = JobKind(spec=AttentionJobSpec, result=AttentionResult, runner="padbench.worker.jobs.attention")
