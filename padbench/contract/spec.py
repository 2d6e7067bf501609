"""Job specs: the one contract that the server validates, the worker runs and the client submits.

This module holds what the kinds' specs share: the base every kind's spec extends (`JobSpecBase`) and the
sections several kinds take (data, strategies, measurement, the OOM probe, dtypes); the names a spec gives for
attention are the kernel families' (`kernel_families.py`). Each kind's own spec lives in its folder
(`padbench/kinds/<kind>/contract.py`) and `kinds.py` registers them.
Every field a user can write is declared with its bounds, so a bad spec fails at submission (HTTP 422 / CLI
error naming the field) rather than minutes later on a GPU.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from padbench.contract.batch_size import BatchSizeChoice
from padbench.contract.bounds import MAX_REPEATS, GpuName, Label, Name, PathName, Seed, WorkerLabels, refusing_urls
from padbench.contract.experts import ExpertsName
from padbench.contract.hub_dataset import is_hub_dataset, parse_hub_dataset
from padbench.contract.kernel_families import AttentionSetting
from padbench.contract.model_spec import ModelSpec
from padbench.contract.parallel import GpuCount, NodeCount

# torch's own names are accepted too and stored as the short name, so `dtype: bfloat16` and `dtype: bf16` are
# the same job (and the same row when results are compared).
DTYPE_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}


def _dtype_alias(value: Any) -> Any:
    return DTYPE_ALIASES.get(value, value) if isinstance(value, str) else value


Dtype = Annotated[Literal["bf16", "fp16", "fp32"], BeforeValidator(_dtype_alias)]
Device = Literal["cuda", "cpu", "auto"]
StrategyName = Literal["static", "dynamic", "binned", "packed", "wrapped"]
# The layouts whose batches pad rows to a common width: `pad_to_multiple_of` rounds that width up.
PADDED_STRATEGIES: frozenset[str] = frozenset({"static", "dynamic", "binned"})


def strategy_entry_point(name: str) -> Literal["padded", "packed"]:
    """The attention entry point a strategy's batches need: padded rows, or packs of sequences."""
    return "padded" if name in PADDED_STRATEGIES else "packed"
# torch.compile with dynamic shapes (one graph serves every batch shape): the whole model in inference, each
# decoder layer on its own in training (as torchtitan compiles, so checkpointing and sharding wrap compiled
# layers). `auto` compiles a row only where compiling pays for itself within its measured run, judged from eager
# and compiled steps timed before the warm-up; the row states what it decided, why, and the compile time, which
# never lands inside the measured time. Published with `enum` rather than `const`: client generators turn
# `const` into a check that refuses the other branch.
CompileChoice = Annotated[
    bool | Literal["auto"],
    WithJsonSchema({"oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["auto"]}]}),
]


class StrictModel(BaseModel):
    """Unknown keys are errors: a typo in a spec must not silently fall back to a default."""

    # NaN and ±Infinity are never a meaningful setting, and NaN cannot even be stored as JSON.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _hub_dataset_form(source: str) -> str:
    # An `hf:` source is never checked against the worker's roots, so it must not be able to name a local path.
    if is_hub_dataset(source):
        try:
            parse_hub_dataset(source)
        except ValueError as error:
            raise PydanticCustomError("hub_dataset", "{reason}", {"reason": str(error)}) from None
    return source


DataSource = Annotated[PathName, refusing_urls(
    "name a local file (relative to the worker's data root), an hf: data set (hf:NAME[:CONFIG[:SPLIT]]) or synthetic"),
    AfterValidator(_hub_dataset_form)]
TokenizerName = Annotated[PathName, refusing_urls(
    "name a local directory (relative to the worker's model or data root) or a tokenizer on the Hugging Face hub "
    "(e.g. google-bert/bert-base-uncased)")]
# Seconds a person may ask one step to run before it counts as hung.
TimeoutSeconds = Annotated[float, Field(gt=0, le=6 * 3600)]
# A CPU stand-in for device memory: at most 1 TiB.
MemoryBudget = Annotated[int, Field(ge=1, le=2**40)]
# Sequence lengths: the longest context of today's open models is 128k to 1M tokens.
SeqLen = Annotated[int, Field(ge=1, le=1_048_576)]


# --- data --------------------------------------------------------------------------------------------

class DataSpec(StrictModel):
    # `hf:NAME[:CONFIG[:SPLIT]]`, a local .txt/.jsonl/.json/.parquet/.csv file, or `synthetic`.
    source: DataSource = "synthetic"
    tokenizer: TokenizerName | None = None
    text_field: Label = "text"
    max_length: SeqLen = 640
    num_samples: Annotated[int, Field(ge=1, le=10_000_000)] = 2000
    seed: Seed = 0
    # Sequences are drawn with replacement from the non-empty lines, so any num_samples works.
    with_replacement: bool = True
    # Named length distribution for `synthetic` (see padbench.worker.engine.data.synthetic for the fitted figures).
    distribution: Label = "wikitext103-bert"


def check_tokenizer_named(data: DataSpec, model: ModelSpec) -> None:
    """Text needs a tokenizer: named, or the model directory's own, or the Hub model's."""
    if data.source != "synthetic" and data.tokenizer is None and model.path is None and model.hub is None:
        raise ValueError(f"data.tokenizer is required for source {data.source!r} (or a model.path whose directory "
                         "holds the model's tokenizer, or a model.hub)")


# --- strategies ---------------------------------------------------------------------------------------

DEFAULT_N_BINS = 16


def strategy_label(name: str, n_bins: int | None, pad_to_multiple_of: int | None = None) -> str:
    """A strategy as tables name it: `binned[16]` carries its number of bins, `dynamic[×64]` the multiple its
    widths are padded to (both: `binned[16, ×64]`), the others are their name."""
    options = [str(n_bins)] if name == "binned" else []
    options += [f"×{pad_to_multiple_of}"] if pad_to_multiple_of is not None else []
    return f"{name}[{', '.join(options)}]" if options else name


class StrategySpec(StrictModel):
    name: StrategyName
    n_bins: Annotated[int, Field(ge=1, le=4096)] | None = None
    # Padded layouts only: each batch's width rounded up to a multiple of this (transformers' and TRL's
    # `pad_to_multiple_of`), e.g. 64 so tensor-core tiles are never partly empty; the widest stays max_length
    # rounded up.
    pad_to_multiple_of: Annotated[int, Field(ge=1, le=4096)] | None = None
    attention: AttentionSetting | None = None  # overrides the job-level attention for this strategy
    batch_size: BatchSizeChoice | None = None  # overrides the job-level batch size (or sizes)
    experts: ExpertsName | None = None  # overrides the job-level experts' implementation (mixtures of experts)

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
        if self.pad_to_multiple_of is not None and self.name not in PADDED_STRATEGIES:
            raise ValueError(f"pad_to_multiple_of applies only to the padded strategies (static, dynamic, binned); "
                             f"{self.name!r} pads no rows")
        return self

    @property
    def label(self) -> str:
        return strategy_label(self.name, self.n_bins, self.pad_to_multiple_of)

    def widest(self, max_length: int) -> int:
        """The widest batch this strategy builds from sequences of at most max_length tokens."""
        multiple = self.pad_to_multiple_of or 1
        return -(-max_length // multiple) * multiple


# --- measurement ----------------------------------------------------------------------------------------

class MeasurementSpec(StrictModel):
    warmup_batches: Annotated[int, Field(ge=0, le=10_000)] = 3
    # A run must last min_seconds AND min_batches to be valid (MLPerf LoadGen's rule).
    min_seconds: Annotated[float, Field(ge=0, le=3600)] = 5.0
    min_batches: Annotated[int, Field(ge=1, le=100_000)] = 10
    # Stop after this many measured batches even if the data is not exhausted; None = one full pass.
    max_batches: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    # Whole measured runs per strategy, each lasting min_seconds and min_batches: their spread gives the
    # row's 95% interval and coefficient of variation (CV).
    repeats: Annotated[int, Field(ge=1, le=MAX_REPEATS)] = 3
    # A row whose repeats vary more than this CV (standard deviation / mean) is marked noisy, not valid.
    noise_cv: Annotated[float, Field(gt=0, le=1)] = 0.05
    # Rows timed while another process computed on the same GPU are marked contended and left out of the
    # verdict; true keeps them in (the marking and the sampled figures stay in the result).
    allow_contention: bool = False
    # Sequences checked against the one-at-a-time reference before timing.
    correctness_samples: Annotated[int, Field(ge=1, le=1024)] = 8
    # After the measured steps: a training row's step timed phase by phase (forward, backward, optimizer) and,
    # on several GPUs, its collectives profiled. false leaves both out of the result, for runs that need only
    # the figures (a tune's trials: on a large model the two take several steps and a profiler trace each).
    diagnostics: bool = True


# How the OOM probe searches: `predict` fits memory against size through measured peaks (padbench's own, fewest
# probes); `power` and `binsearch` are PyTorch Lightning's BatchSizeFinder modes (double until out of memory;
# then, for binsearch, bisect).
ProbeMode = Literal["predict", "power", "binsearch"]


class ProbeSpec(StrictModel):
    mode: ProbeMode = "predict"
    margin: Annotated[float, Field(ge=0, lt=0.5)] = 0.05
    cap: Annotated[int, Field(ge=1, le=65_536)] = 4096
    force: bool = False  # ignore the probe cache and re-probe
    probe_timeout_s: TimeoutSeconds = 300.0
    # One child tries a strategy's sizes while they fit, building the model once (on a GPU it goes on to the
    # job's next strategy); false starts a fresh child for every size (slower, for comparison).
    reuse_child: bool = True
    # CPU only: the memory budget that stands in for device memory, so the probe path is testable.
    cpu_memory_budget_bytes: MemoryBudget | None = None


# --- job kinds ---------------------------------------------------------------------------------------------

# A new job's spec problem: where (keys below the spec) and why.
NewJobProblem = tuple[tuple[str, ...], str]


class JobSpecBase(StrictModel):
    """What the spec of every kind of job starts with: its kind, which picks the kind's model, and a name.

    Each kind narrows `kind` to its own name (`Literal["padding"]`); `padbench.contract.kinds` registers
    the kinds and builds the union of their specs.
    """

    kind: str
    name: Name | None = None
    # Run only on a worker whose GPU's name contains this, in any case (`H100` takes "NVIDIA H100 80GB HBM3"):
    # a throughput is a property of one GPU, so a job meant for one must never run on another.
    gpu: GpuName | None = None
    # Run only on a worker carrying every one of these labels (`padbench worker --label nvlink`), in any case:
    # what a name cannot say about a box (its interconnect, its owner, its disks) its operator labels it with.
    worker_labels: WorkerLabels = []
    # GPUs the job runs on at once, one process (rank) each, or `all` of the worker's; on device cpu, the
    # number of processes. Kinds that run on one GPU only leave SPANS_GPUS false and refuse more.
    gpus: GpuCount = 1
    # Where it runs: `cuda` pins a GPU (a worker without one never claims it), `cpu` the host, `auto` whichever
    # the worker has.
    device: Device = "auto"
    # Workers (hosts) the job runs across, each running `gpus` ranks: a fleet of padbench workers claims it
    # together (a gang) and its ranks meet through torch's c10d rendezvous. Only kinds that span GPUs take more
    # than one.
    nodes: NodeCount = 1
    SPANS_GPUS: ClassVar[bool] = False
    # A kind whose job starts its own ranks (a tune's trials) runs as one process holding all of its GPUs.
    LAUNCHES_OWN_RANKS: ClassVar[bool] = False

    @model_validator(mode="after")
    def _one_gpu_unless_spanning(self) -> JobSpecBase:
        if self.gpus != 1 and not self.SPANS_GPUS:
            raise ValueError(f"gpus: {self.kind} jobs run on one GPU; only padding jobs span several")
        return self

    @model_validator(mode="after")
    def _nodes_only_for_ranks_across_hosts(self) -> JobSpecBase:
        if self.nodes == 1:
            return self
        if not self.SPANS_GPUS or self.LAUNCHES_OWN_RANKS:
            raise PydanticCustomError("nodes", "nodes: {kind} jobs run on one worker; only padding jobs, whose "
                                      "ranks shard the model or split the data, run across several",
                                      {"kind": self.kind})
        if self.gpus == "all" or isinstance(self.gpus, list):
            raise PydanticCustomError("nodes", "nodes: a job across several workers names its GPUs per worker "
                                      "(gpus: N), not all nor a list: every node of a gang runs the same number "
                                      "of ranks", {})
        return self

    def new_job_problems(self) -> list[NewJobProblem]:
        """What a new job may not ask, though a spec stored with an earlier result may hold it: checked at
        submission (the CLI and the server), never when a stored spec or result is read back, so results
        measured before a check existed stay readable. A kind with such checks overrides this."""
        return []


def model_and_probe_problems(model: ModelSpec, probed: bool, device: Device, probe: ProbeSpec) -> list[NewJobProblem]:
    """The submission checks of kinds that build a model and may probe its batch size (`batch_size: auto`)."""
    model_type = model.model_type_problem()
    problems: list[NewJobProblem] = [] if model_type is None else [(("model", "config"), model_type)]
    if probed and device == "cpu" and probe.cpu_memory_budget_bytes is None:
        # A CPU has no device memory to run out of: the probe would grow the batch until the host swaps.
        problems.append((("batch_size",), "auto on device cpu needs probe.cpu_memory_budget_bytes, the memory "
                                          "the OOM probe may fill in place of a GPU's; or give a number"))
    return problems
