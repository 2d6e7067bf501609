"""The `generate` job kind's contract: batched decoding measured per batching strategy and attention kernel.

Generation pays for padding twice: prompts padded to the longest of their batch, and every slot of a static
batch decoding until the batch's longest answer ends. A generate job serves the same requests under each
strategy and states what each costs; transformers' own `generate` and continuous batching run beside them
as reference rows, so a user sees what the library they would otherwise call gives on the same requests.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, WithJsonSchema, model_validator

from padbench.contract.attention_pick import AttentionPicks
from padbench.contract.bounds import MAX_REPEATS, Label
from padbench.contract.job_kind import JobKind
from padbench.contract.kernel_families import DecodeAttentionSetting, missing_entry_point, needs_half_precision
from padbench.contract.model_spec import ModelSpec
from padbench.contract.results import (
    EnergyUse,
    Environment,
    GpuActivity,
    JobResultBase,
    MemoryStats,
    PartialResult,
    ProbeReport,
    Rate,
    ResultModel,
    Share,
    Spread,
    check_partial_rows,
)
from padbench.contract.spec import (
    DataSpec,
    Dtype,
    JobSpecBase,
    NewJobProblem,
    ProbeSpec,
    SeqLen,
    StrictModel,
    check_tokenizer_named,
    model_and_probe_problems,
)

GenerateStrategyName = Literal["static", "sorted", "continuous"]
# Rows of the libraries users would otherwise call, on the same requests: never a strategy, never gated.
ReferenceName = Literal["transformers-generate", "transformers-continuous"]
GENERATE_STRATEGIES: tuple[GenerateStrategyName, ...] = ("static", "sorted", "continuous")
# Output lengths: a new answer of a real model ends at its own length; random weights never stop on their own.
OutputTokens = Annotated[int, Field(ge=1, le=131_072)]
MAX_CONCURRENCY = 65_536
# `oneOf` with `enum: ["auto"]` rather than pydantic's `anyOf` with `const`, which client generators misread
# (the same choice as a padding job's batch size).
CONCURRENCY_SCHEMA = {"oneOf": [{"type": "integer", "minimum": 1, "maximum": MAX_CONCURRENCY},
                                {"type": "string", "enum": ["auto"]}],
                      "description": "sequences decoding at once, or `auto`: the most that fit, found by the OOM probe"}


class UniformLengths(StrictModel):
    """Each request's output length drawn uniformly from [low, high], seeded by `data.seed`."""

    uniform: Annotated[list[OutputTokens], Field(min_length=2, max_length=2)]

    @model_validator(mode="after")
    def _ordered(self) -> UniformLengths:
        if self.uniform[0] > self.uniform[1]:
            raise ValueError(f"uniform: the low end {self.uniform[0]} is above the high end {self.uniform[1]}")
        return self


class LengthsFromField(StrictModel):
    """Each request's output length is the token count of a field of its record (e.g. the reference answer)."""

    field: Label
    # An answer longer than this is cut to it, so one outlier cannot hold a whole static batch.
    max_tokens: OutputTokens = 2048


OutputLength = OutputTokens | UniformLengths | LengthsFromField


def most_output_tokens(lengths: OutputLength) -> int:
    """The most new tokens any request asks for."""
    if isinstance(lengths, int):
        return lengths
    return lengths.uniform[1] if isinstance(lengths, UniformLengths) else lengths.max_tokens


class GenerateMeasurementSpec(StrictModel):
    # Whole passes over every request per strategy: their spread gives the row's 95% interval.
    repeats: Annotated[int, Field(ge=1, le=MAX_REPEATS)] = 3
    # Requests served once before timing (CUDA graphs are captured and kernels compiled there).
    warmup_requests: Annotated[int, Field(ge=0, le=100_000)] = 16
    noise_cv: Annotated[float, Field(gt=0, le=1)] = 0.05
    allow_contention: bool = False
    # Requests generated one at a time by the plain reference and by each strategy before timing.
    correctness_samples: Annotated[int, Field(ge=1, le=256)] = 8
    # Output tokens compared per gate request (all of them on the CPU in fp32; the first on a GPU).
    correctness_tokens: Annotated[int, Field(ge=1, le=512)] = 8


class GenerateJobSpec(JobSpecBase):
    """Batched decoding of the data's prompts under each strategy, beside transformers' own loops. Each row reports
    output tokens/s and, under the names serving benchmarks use (vLLM's benchmark_serving), TTFT (a request's
    admission to its first token), TPOT (per request: (latency − TTFT) / (output tokens − 1)) and ITL (every gap
    between two tokens of a request), as median and p99. ITL was called TBT (time between tokens) before; results
    that say TBT are read as ITL, the same figure."""

    kind: Literal["generate"]
    model: ModelSpec = ModelSpec(preset="tiny")
    # Prompts: the same sources as padding jobs; `max_length` caps a prompt's tokens.
    data: DataSpec = DataSpec(num_samples=64, max_length=128)
    output_length: OutputLength = 32
    # pydantic copies list defaults per instance; ruff cannot see through JobSpecBase that this is a pydantic model.
    strategies: Annotated[list[GenerateStrategyName], Field(min_length=1, max_length=3)] = \
        list(GENERATE_STRATEGIES)  # noqa: RUF012
    references: Annotated[list[ReferenceName], Field(max_length=2)] = \
        ["transformers-generate", "transformers-continuous"]  # noqa: RUF012
    # A kernel family with a KV-cache (decode) path, `flash` (the fastest flash implementation with one), or `auto`:
    # the one the worker's table of measured kernel speeds finds fastest here (where it has no figure: `flex` on a
    # GPU, measured fastest there, else `flash`).
    attention: DecodeAttentionSetting = "auto"
    # Sequences decoding at once (a static batch's rows, a continuous batch's slots); `auto`: the most whose
    # KV cache and activations fit, found by the OOM probe in child processes.
    batch_size: Annotated[Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] | Literal["auto"],
                          WithJsonSchema(CONCURRENCY_SCHEMA)] = 16
    dtype: Dtype = "bf16"
    # Decode steps replayed as CUDA graphs (GPU only): no host launch per kernel, no host sync per token.
    cuda_graphs: bool = True
    # torch.compile the graphed decode step (fuses the elementwise kernels between its matmuls); the result
    # states whether it compiled and how long compiling took, which is never inside the measured time.
    compile: bool = True
    # The strategy rows run each attention layer's query/key/value projections as one matmul, and each gated
    # MLP's gate/up projections as one (weights concatenated once, when the model is built); the references
    # run transformers' own layers.
    fuse_projections: bool = True
    # Context lengths of the decode table: every request's prompt is this long, one row per length.
    context: Annotated[list[SeqLen], Field(min_length=1, max_length=16)] | None = None
    measurement: GenerateMeasurementSpec = GenerateMeasurementSpec()
    probe: ProbeSpec = ProbeSpec()

    @model_validator(mode="after")
    def _consistent(self) -> GenerateJobSpec:
        check_tokenizer_named(self.data, self.model)
        if needs_half_precision(self.attention, "decode") and self.dtype == "fp32":
            raise ValueError(f"attention {self.attention!r} needs dtype bf16 or fp16, not fp32")
        if len(set(self.strategies)) != len(self.strategies):
            raise ValueError(f"strategies repeat a name: {self.strategies}")
        if len(set(self.references)) != len(self.references):
            raise ValueError(f"references repeat a name: {self.references}")
        if self.context is not None and len(set(self.context)) != len(self.context):
            raise ValueError(f"context repeats a length: {self.context}")
        positions = self.model.max_positions()
        longest = self.longest_context()
        if positions is not None and longest > positions:
            raise ValueError(f"the longest request ({longest} tokens of prompt and output) exceeds the model's "
                             f"positions ({positions})")
        return self

    def new_job_problems(self) -> list[NewJobProblem]:
        problems = model_and_probe_problems(self.model, self.batch_size == "auto", self.device, self.probe)
        # A family without a KV-cache kernel is refused here, not claimed by a worker that runs it for padding
        # jobs and failed there.
        missing = missing_entry_point(self.attention, "decode")
        return problems if missing is None else [(("attention",), missing), *problems]

    def max_output_tokens(self) -> int:
        return most_output_tokens(self.output_length)

    def longest_context(self) -> int:
        prompts = max(self.context) if self.context else self.data.max_length
        return prompts + self.max_output_tokens()


# --- results ------------------------------------------------------------------------------------------------

Milliseconds = Annotated[float, Field(ge=0, le=1e9)]
Bytes = Annotated[int, Field(ge=0, le=2**60)]


class Latency(ResultModel):
    """The distribution of a latency over every request (or token) of the measured passes."""

    p50_ms: Milliseconds
    p99_ms: Milliseconds
    samples: Annotated[int, Field(ge=1, le=10**12)]
    mean_ms: Milliseconds | None = None  # None in results recorded before the mean was


class GenerateRow(ResultModel):
    @model_validator(mode="before")
    @classmethod
    def _tbt_is_itl(cls, data: object) -> object:
        """Results recorded before these names called ITL `time_between_tokens` (TBT): the same figure, the time of
        the step that gave a request its next token, which is the gap since its previous one (every running request
        gets a token in every step). Read under its present name."""
        if isinstance(data, dict) and "time_between_tokens" in data:
            renamed = {key: value for key, value in data.items() if key != "time_between_tokens"}
            renamed.setdefault("inter_token_latency", data["time_between_tokens"])
            return renamed
        return data

    strategy: str  # a strategy (`static`, `sorted`, `continuous`) or a reference's name
    reference: bool = False  # a library's own generation loop, shown beside the strategies
    attention: str  # as requested
    kernel: str  # what actually ran, e.g. "torch-flash-kvcache", "sdpa-kvcache", "transformers-sdpa"
    context: SeqLen | None = None  # the prompt length of a context-table row; None: the data's prompts
    batch_size: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] | None = None
    status: Literal["ok", "invalid", "failed"]
    invalid_reason: str | None = None
    error: str | None = None
    cuda_graphs: bool | None = None  # whether decode steps were replayed as CUDA graphs
    compiled: bool | None = None  # whether the decode step ran compiled by torch.compile
    fused_layers: Annotated[int, Field(ge=0, le=10**6)] | None = None  # attention layers and MLPs fused
    # Decode-step product shapes that ran split-K, with the times that chose it over cuBLAS in this job.
    split_k_products: Annotated[list[Annotated[str, Field(max_length=160)]], Field(max_length=64)] | None = None
    compile_seconds: Annotated[float, Field(ge=0, le=1e6)] | None = None  # in the warm-up, not the measurement
    # Capturing the CUDA graphs of continuous batching's padded steps with prefills (compiling them included),
    # before the warm-up: not in the measurement.
    capture_seconds: Annotated[float, Field(ge=0, le=1e6)] | None = None
    # Headline: Σ output tokens / Σ measured seconds over the repeats (every request served once per repeat).
    output_tokens_per_s: Rate | None = None
    total_tokens_per_s: Rate | None = None  # prompt + output tokens over the same time
    decode_tokens_per_s: Rate | None = None  # output tokens of decode steps / the decode steps' time
    repeat_tokens_per_s: Annotated[list[Rate], Field(max_length=100)] | None = None
    spread: Spread | None = None
    energy: EnergyUse | None = None  # over the measured passes; None on CPU or without NVML: not measured
    speedup_vs_static: Annotated[float, Field(ge=0, le=1e6)] | None = None
    # Latencies under the names serving benchmarks give them (vLLM's benchmarks/benchmark_serving.py), from each
    # request's token times in the measured passes. TTFT: from a request's admission to a slot to its first token.
    time_to_first_token: Latency | None = None
    # TPOT, one sample per request of two or more output tokens: (latency − TTFT) / (output tokens − 1).
    time_per_output_token: Latency | None = None
    # ITL, one sample per output token after a request's first: the time since that request's previous token.
    inter_token_latency: Latency | None = None
    # Share of decode slot-steps that produced a token some request asked for (idle slots waste the rest).
    slot_utilization: Share | None = None
    requests: Annotated[int, Field(ge=0, le=10**9)] | None = None
    prompt_tokens: Annotated[int, Field(ge=0, le=10**15)] | None = None
    output_tokens: Annotated[int, Field(ge=0, le=10**15)] | None = None
    prompt_pad_tokens: Annotated[int, Field(ge=0, le=10**15)] | None = None  # pads prefilled beside the prompts
    # Padding computed so that steps with prefills fill a captured CUDA graph's token count (work, not output).
    bucket_pad_tokens: Annotated[int, Field(ge=0, le=10**15)] | None = None
    # Steps with prefills padded to a token bucket, each replaying the CUDA graph captured for its token count.
    bucketed_prefill_steps: Annotated[int, Field(ge=0, le=10**12)] | None = None
    decode_steps: Annotated[int, Field(ge=0, le=10**12)] | None = None
    prefill_steps: Annotated[int, Field(ge=0, le=10**12)] | None = None
    # Prefill steps that also advanced running decodes (continuous batching refilling a slot).
    interleaved_prefills: Annotated[int, Field(ge=0, le=10**12)] | None = None
    measured_seconds: Annotated[float, Field(ge=0, le=1e7)] | None = None
    warmup_seconds: Annotated[float, Field(ge=0, le=1e7)] | None = None
    kv_cache_bytes: Bytes | None = None
    memory: MemoryStats | None = None
    # Bytes of weights and KV cache a decode step reads ÷ the step's time ÷ the copy bandwidth of this job.
    bandwidth_utilization: Annotated[float, Field(ge=0, le=100)] | None = None
    mfu: Annotated[float, Field(ge=0, le=100)] | None = None
    mfu_vs_matmul: Annotated[float, Field(ge=0, le=100)] | None = None
    gpu_activity: GpuActivity | None = None
    correctness_passed: bool | None = None
    # The gate: requests whose greedy tokens equal the one-at-a-time reference, and the first step's logits.
    gate_requests: Annotated[int, Field(ge=0, le=256)] | None = None
    gate_detail: str | None = None
    max_logit_error: Annotated[float, Field(ge=0)] | None = None
    logit_tolerance: Annotated[float, Field(ge=0)] | None = None
    # `batch_size: auto`: the OOM probe that chose `batch_size` (strategy rows; every one ran at its choice).
    probe: ProbeReport | None = None


class GenerateResult(JobResultBase):
    kind: Literal["generate"] = "generate"
    spec: GenerateJobSpec
    model_parameters: int
    weight_bytes: Bytes  # what a decode step reads of the weights
    kv_bytes_per_token: Bytes  # every layer's key and value of one token
    matmul_tflops: float | None = None
    copy_bandwidth_gbps: Annotated[float, Field(ge=0, le=1e6)] | None = None  # device copy rate, this job
    num_requests: int
    prompt_tokens_total: int
    output_tokens_total: int
    rows: list[GenerateRow]
    partial: PartialResult | None = None
    attention_auto: AttentionPicks | None = None  # `attention: auto`: the family picked, and why

    @model_validator(mode="after")
    def _partial_counts_the_rows(self) -> GenerateResult:
        check_partial_rows(self.partial, len(self.rows))
        return self


__all__ = ["GENERATE_STRATEGIES", "Environment", "GenerateJobSpec", "GenerateResult", "GenerateRow", "Latency"]


JOB_KIND = JobKind(spec=GenerateJobSpec, result=GenerateResult, runner="padbench.worker.jobs.generate")
