"""Result schemas: what a job produces, stored by the server, printed and exported by the client.

This module holds what the kinds' results share (the base `JobResultBase`, the environment, spreads, memory,
GPU activity, probe reports, partial results); each kind's own result lives beside its spec.

A figure that was not measured is `None`, never a placeholder number; a strategy whose run was too
short or failed its correctness gate says so in `valid` / `invalid_reason`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from padbench.contract.spec import JobSpecBase


class ResultModel(BaseModel):
    # A figure that is NaN or infinite was not measured; it must be None, and NaN is not JSON anyway.
    # Strings (names, versions, error lines) are short; the bound keeps one field from filling a result.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, str_max_length=100_000)


Rate = Annotated[float, Field(ge=0, le=1e15)]  # tokens per second
Share = Annotated[float, Field(ge=0, le=1)]
Megahertz = Annotated[int, Field(ge=0, le=100_000)]
# NVML's clock-event reasons that slow a measurement down; idle and application-clock settings are not.
ThrottleReason = Literal["sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake",
                         "sync_boost", "display_clocks"]


class GpuClocks(ResultModel):
    """One NVML reading of the GPU's state, taken when the job starts and when it ends."""

    sm_mhz: Megahertz | None = None
    memory_mhz: Megahertz | None = None
    temperature_c: Annotated[int, Field(ge=-50, le=200)] | None = None
    power_w: Annotated[float, Field(ge=0, le=10_000)] | None = None
    throttle_reasons: Annotated[list[ThrottleReason], Field(max_length=8)] = []


class Environment(ResultModel):
    """Everything a reader needs to judge whether two results are comparable."""

    hostname: str
    device: str  # "cuda" or "cpu"
    gpu_name: str | None = None
    gpu_memory_bytes: int | None = None
    gpu_count: int | None = None
    driver: str | None = None
    cuda: str | None = None
    python: str
    # The padbench that measured it; None in results stored before it was recorded.
    padbench: str | None = None
    torch: str
    transformers: str | None = None
    flash_attn: str | None = None
    flash_attn_cute: str | None = None
    datasets: str | None = None
    dataset_digest: str | None = None
    seeds: dict[str, int] = {}
    # The device's datasheet peak in the job's dtype (bf16 and fp16 share one on the GPUs tabulated), used
    # for MFU, and where it came from. Results stored before the field had its dtype-neutral name carry it
    # as `peak_bf16_tflops`, which is still read.
    peak_tflops: float | None = Field(default=None, validation_alias=AliasChoices("peak_tflops", "peak_bf16_tflops"))
    peak_source: str | None = None
    started_at: str  # ISO 8601, UTC
    # What an hour of one GPU the job ran on costs (on a worker without GPUs, an hour of the machine), as its
    # worker was told (`padbench worker --price-per-gpu-hour`); it prices each row per million tokens. None:
    # not given, and no cost is shown.
    price_per_gpu_hour: Annotated[float, Field(ge=0, le=1e6)] | None = None
    # The GPU's clocks when the job started and when it ended (None on CPU or without NVML): a clock that
    # fell between the two means the later strategies ran slower than the earlier ones for a reason of the box.
    clocks_at_start: GpuClocks | None = None
    clocks_at_end: GpuClocks | None = None


class ProbeAttempt(ResultModel):
    size: int  # batch rows, or for packed the token budget in units of max_length rows
    # "error": the child raised something other than an OOM (e.g. a kernel that cannot run)
    outcome: Literal["fits", "oom", "cuda_error", "timeout", "crash", "error"]
    peak_allocated_bytes: int | None = None  # CUDA: allocator peak of live tensors; CPU: address-space growth
    peak_reserved_bytes: int | None = None  # CUDA: the caching allocator's peak, what runs out first
    seconds: float
    error: str | None = None
    # True when this size started a new child (building the model); False when it reused the previous one.
    new_process: bool | None = None


class ProbeReport(ResultModel):
    chosen: int
    largest_fit: int
    smallest_oom: int | None
    predicted_limit: int | None
    margin: float
    cap: int
    probes: list[ProbeAttempt]
    seconds: float
    cached: bool = False
    mode: Literal["predict", "power", "binsearch"] = "predict"  # the spec's probe.mode: how the search ran
    memory_total_bytes: int | None = None
    memory_used_by_others_bytes: int | None = None


class BatchTier(ResultModel):
    """`batch_size: auto:N`: one size the probe chose, for the sequences of up to `longest` tokens."""

    longest: Annotated[int, Field(ge=1, le=1_048_576)]  # this tier's longest sequence: its widest batch
    # the job's sequences in it (longer than the tier before); None for the one tier of a layout that does not
    # batch by length, which holds them all
    sequences: Annotated[int, Field(ge=0, le=10_000_000)] | None = None
    batch_size: Annotated[int, Field(ge=1)]
    probe: ProbeReport


class MemoryStats(ResultModel):
    # torch's CUDA allocator peaks; None on CPU, where torch keeps no allocator statistics.
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    device_used_bytes: int | None = None  # NVML, whole device, at peak sampling; None on CPU
    host_peak_rss_bytes: int | None = None  # CPU runs: the process's peak resident set over the strategy
    source: str | None = None  # which of the above were measured, e.g. "torch-cuda-allocator+nvml"


class Spread(ResultModel):
    """How the headline varied over the repeats: each repeat's Σ real tokens / Σ seconds."""

    repeats: Annotated[int, Field(ge=2, le=100)]
    min_tokens_per_s: Rate
    max_tokens_per_s: Rate
    mean_tokens_per_s: Rate
    # The 95% confidence interval of the mean repeat rate (Student's t with repeats − 1 degrees of freedom).
    ci95_low_tokens_per_s: Rate
    ci95_high_tokens_per_s: Rate
    cv: Annotated[float, Field(ge=0, le=100)]  # sample standard deviation / mean
    cv_threshold: Annotated[float, Field(gt=0, le=1)]
    noisy: bool  # cv > cv_threshold: the row's figure is shown, but it is not a valid measurement


class GpuActivity(ResultModel):
    """What NVML saw on the GPU while a strategy was timed, sampled on a thread beside the measurement."""

    samples: Annotated[int, Field(ge=0, le=10_000_000)]
    interval_s: Annotated[float, Field(gt=0, le=60)]
    # Compute processes on this GPU other than the measuring one: the most seen at once, and the share of
    # samples that saw at least one.
    other_processes_max: Annotated[int, Field(ge=0, le=4096)]
    contended_share: Share
    # False when NVML's process ids are of another PID namespace (a container): then every process beyond
    # one counts as another, since the measuring process itself holds a context on the GPU.
    own_process_identified: bool
    contended: bool
    contention_allowed: bool  # the spec's measurement.allow_contention
    utilization_mean_percent: Annotated[float, Field(ge=0, le=100)] | None = None
    sm_clock_min_mhz: Megahertz | None = None
    sm_clock_max_mhz: Megahertz | None = None
    throttled_share: Share = 0.0
    throttle_reasons: Annotated[list[ThrottleReason], Field(max_length=8)] = []
    throttled: bool = False


class EnergyUse(ResultModel):
    """The energy the job's GPUs used over a row's measured repeats (warm-up excluded), all ranks summed."""

    joules: Annotated[float, Field(ge=0, le=1e15)]
    seconds: Annotated[float, Field(gt=0, le=1e7)]  # the window the energy was read over
    gpus: Annotated[int, Field(ge=1, le=4096)]  # the GPUs summed
    # The tokens the window processed, which the energy is per: a padding row's real tokens, a generate row's
    # output tokens, over all its repeats. None: not counted, and no figure per token is given.
    tokens: Annotated[int, Field(ge=1, le=10**15)] | None = None
    # nvml-energy-counter: NVML's cumulative counter read at both ends of the window (nvmlDeviceGetTotalEnergy-
    # Consumption). power-samples: a GPU without that counter; its power readings sampled on a thread and
    # integrated, an estimate as good as the sampling interval.
    source: Literal["nvml-energy-counter", "power-samples"]


# Above the most rows a result can hold: 32 strategies × 16 batch sizes, or 16 kernels × 64 sequence lengths.
MAX_RESULT_ROWS = 4096
RowCount = Annotated[int, Field(ge=1, le=MAX_RESULT_ROWS)]


class PartialResult(ResultModel):
    """Set only on the result of a job stopped while it ran (a cancel; on `padbench run`, its `--timeout` or a
    child that died), or on the file `padbench run --json` keeps while it runs: what it finished so far.

    Each row listed is a whole measurement, exactly as it would stand in a finished result (the last one may
    lack the figures of the phases timed after its measurement: see `last_row_measured_only`); the rows not
    listed were never measured. A finished result never carries this.
    """

    # "running": written while the job still ran (`padbench run --json` keeps its file current as rows finish),
    # so a file that still says so is from a run stopped outright before it could finish the file.
    reason: Literal["cancelled", "timed_out", "failed", "running"] = "cancelled"
    rows_finished: RowCount  # the strategy rows (padding) or cells (attention) listed
    rows_planned: RowCount  # how many the whole job would have listed
    # The last row listed was handed over as soon as its measurement ended, and the job stopped in the phases
    # timed after it (a training row's step split, the collectives' profile): its measured figures stand, those
    # phases' figures are absent rather than unmeasured-and-guessed.
    last_row_measured_only: bool = False


def check_partial_rows(partial: PartialResult | None, listed: int) -> None:
    """A partial result counts the rows it lists, and lists no more than the job planned."""
    if partial is None:
        return
    if partial.rows_finished != listed:
        raise ValueError(f"partial.rows_finished is {partial.rows_finished} but the result lists {listed} rows")
    if partial.rows_finished > partial.rows_planned:
        raise ValueError(f"partial.rows_finished ({partial.rows_finished}) exceeds rows_planned "
                         f"({partial.rows_planned})")


class JobResultBase(ResultModel):
    """What the result of every kind of job starts with: its kind, the spec it ran and where it ran.

    Each kind narrows `kind` and `spec` to its own and ends its result with `partial: PartialResult | None
    = None` (the rows a cancelled job kept). `partial` is declared by each kind rather than here because a
    field declared here would come before the kind's own fields in every stored document and in the schema.
    """

    kind: str
    spec: JobSpecBase
    environment: Environment

    if TYPE_CHECKING:  # declared for type checkers only: see above
        partial: PartialResult | None
