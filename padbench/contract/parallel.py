"""Jobs across several GPUs: how many a job asks for, how it spreads its work, and what it reports per rank.

A job on `gpus: N` runs as N processes (ranks), one per GPU, started together by the worker's launcher;
on `device: cpu` the ranks are processes talking over gloo, which is how the multi-GPU path is tested
without a GPU. Training shards the model with FSDP2 (every decoder layer and the root); inference runs one
replica per GPU (data parallel) when the model fits one GPU, and sharded when it does not. Each step's work is
dealt across the ranks so that each computes about the same (a padded step's rows balanced by tokens, a packed
step's packs of nearly equal fill), and the ranks together process the same sequences, so the layouts still
compare on identical work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from padbench.contract.training import RunPrecision

MAX_GPUS = 64  # more GPUs than any one host holds today (8 to 16)
GpuCountNumber = Annotated[int, Field(ge=1, le=MAX_GPUS)]
# Hosts one job runs across (a gang of workers): the published 70B-405B training figures use 2 to 64 nodes.
MAX_NODES = 64
NodeCount = Annotated[int, Field(ge=1, le=MAX_NODES, description="Workers (hosts) the job runs across, `gpus` "
                                                                 "ranks on each; a gang of workers claims it together")]
# Ranks of one job: every GPU of every node.
MAX_RANKS = MAX_GPUS * MAX_NODES


def _count_from_text(value: Any) -> Any:
    """`--set gpus=2` gives the text "2"; a count is meant."""
    return int(value) if isinstance(value, str) and value.isdigit() else value


# A number of GPUs, or `all` of those the worker that takes the job owns. Published with `enum` rather than
# pydantic's `const` for the same reason as a batch size (client generators turn `const` into a check that
# refuses every number).
GpuCount = Annotated[GpuCountNumber | Literal["all"], BeforeValidator(_count_from_text), WithJsonSchema({
    "oneOf": [{"type": "integer", "minimum": 1, "maximum": MAX_GPUS}, {"type": "string", "enum": ["all"]}],
    "description": "GPUs the job runs on, one process each, or `all` of the worker's"})]

# A scaling axis: the same rows measured at each of several GPU counts (one launch per count, the ranks of each
# count alone on the worker), reported as tokens/s per GPU and the scaling efficiency against the smallest count.
# `[all]` is the counts 1, 2, 4, … doubling while below the GPUs of the worker that takes the job, then that
# number itself (1, 2, 4, 8 on eight GPUs; 1, 2, 4, 6 on six).
MAX_SCALING_COUNTS = 8


def _scaling_counts(counts: list[int | str]) -> list[int | str]:
    if counts == ["all"]:
        return counts
    if "all" in counts:
        raise ValueError("`all` in a list of GPU counts stands alone: [all] is 1, 2, 4, … up to the worker's GPUs")
    if len(counts) < 2 or counts != sorted(set(counts)):
        raise ValueError("a scaling axis lists at least two different GPU counts, smallest first, e.g. [1, 2, 4]")
    return counts


GpuScaling = Annotated[
    list[Annotated[GpuCountNumber | Literal["all"], BeforeValidator(_count_from_text)]],
    Field(min_length=1, max_length=MAX_SCALING_COUNTS), AfterValidator(_scaling_counts),
    WithJsonSchema({"type": "array", "minItems": 1, "maxItems": MAX_SCALING_COUNTS, "items": {"oneOf": [
        {"type": "integer", "minimum": 1, "maximum": MAX_GPUS}, {"type": "string", "enum": ["all"]}]},
        "description": "a scaling axis: the same rows at each GPU count, smallest first, or [all]: 1, 2, 4, … "
                       "up to the worker's GPUs"})]


def scaling_top(counts: Sequence[int | str]) -> int | Literal["all"]:
    """The most GPUs a scaling axis takes at once: its largest count, or `all` of the worker's."""
    return "all" if list(counts) == ["all"] else max(int(count) for count in counts)


def scaling_counts(counts: Sequence[int | str], owned: int) -> list[int]:
    """The GPU counts a scaling axis measures on a worker owning `owned` GPUs (`[all]` doubles up to them)."""
    if list(counts) != ["all"]:
        return [int(count) for count in counts]
    doubling = [2**power for power in range(MAX_GPUS.bit_length()) if 2**power < max(owned, 1)]
    return [*doubling, max(owned, 1)]


# How inference spreads over several GPUs: `replicated` (data parallel, one full copy per GPU), `sharded`
# (FSDP2, for a model one GPU cannot hold) or `auto`: replicated when the weights fit one GPU.
InferenceParallelism = Literal["auto", "replicated", "sharded"]
# What ran, as the result states it.
Parallelism = Literal["single", "replicated", "sharded"]


class StrictSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class DistributedSpec(StrictSection):
    inference: InferenceParallelism = "auto"
    # How long a rank waits in one collective before the job fails as hung (a rank that died or stalled).
    collective_timeout_s: Annotated[float, Field(ge=10, le=3600)] = 600.0
    # Training sharded with FSDP2: whether each decoder layer frees its all-gathered weights after its forward
    # (true: gathered again for its backward, the least memory) or keeps them until its backward (false: one
    # all-gather per layer and step fewer, at the memory of the unsharded layers). The root module never reshards:
    # its backward starts as soon as its forward ends. Inference always reshards (it has no backward).
    reshard_after_forward: bool = True
    # Explicit prefetch (FSDP2's set_modules_to_forward_prefetch / set_modules_to_backward_prefetch): each decoder
    # layer issues the next layer's all-gather (the previous one's in the backward) as it starts, so it runs while
    # this layer computes, however far ahead the CPU is; false leaves FSDP2's implicit order alone, whose forward
    # all-gathers are issued only when the CPU reaches the next layer.
    prefetch: bool = True


# `gpus: all` as a number, where one is stored (the jobs table's gpus column): every GPU of the worker that takes
# the job.
ALL_GPUS = 0


@dataclass(frozen=True)
class GpuRequest:
    """What a spec's `gpus` and `device` ask of a worker: the one place their rules live, for the server (what a
    job requires, what it holds, why no worker takes it) and the worker (how many processes it starts)."""

    gpus: int | Literal["all"]
    device: str  # cuda, cpu or auto
    # A job that starts its own ranks (a tune's trials) runs as one process holding all its GPUs.
    launches_own_ranks: bool = False

    @classmethod
    def of(cls, spec: Any) -> GpuRequest:
        """The request of a job spec (every kind's spec has `gpus`, `device` and `LAUNCHES_OWN_RANKS`). A scaling
        axis asks for its largest count, run as one process that launches each count's ranks in turn."""
        if isinstance(spec.gpus, list):
            return cls(scaling_top(spec.gpus), spec.device, launches_own_ranks=True)
        return cls(spec.gpus, spec.device, spec.LAUNCHES_OWN_RANKS)

    @classmethod
    def from_stored(cls, stored: int, device: str) -> GpuRequest:
        return cls("all" if stored == ALL_GPUS else stored, device)

    @property
    def stored(self) -> int:
        return ALL_GPUS if self.gpus == "all" else self.gpus

    @property
    def on_cpu(self) -> bool:
        return self.device == "cpu"

    @property
    def spans_gpus(self) -> bool:
        """Several GPUs (or `all`), so only a worker with GPUs can take it; CPU ranks are processes instead."""
        return self.gpus != 1 and not self.on_cpu

    def gpus_held(self, owned: int) -> int:
        """The GPUs it takes of a worker owning `owned` (at least one: a GPU job needs a GPU)."""
        return max(owned, 1) if self.gpus == "all" else self.gpus

    def ranks(self, owned: int) -> int:
        """How many processes it runs as on a worker owning `owned` GPUs: one per GPU it takes; on device cpu,
        `gpus` processes (`all` is one: a CPU has no GPUs to count); one for a job that starts its own."""
        if self.launches_own_ranks:
            return 1
        return self.trial_ranks(owned)

    def trial_ranks(self, owned: int) -> int:
        """The processes one run of its work starts (a tune's trial: as many as a padding job's)."""
        if self.on_cpu:
            return self.gpus if isinstance(self.gpus, int) else 1
        return self.gpus_held(owned)

    @property
    def any_worker(self) -> bool:
        """One GPU, or a CPU worker's one process: whichever worker comes can run it."""
        return self.gpus == 1 and self.device not in ("cuda", "cpu")

    def fits(self, owned: int) -> bool:
        """Whether a worker owning `owned` GPUs (0: a CPU worker) could run it at all."""
        if self.on_cpu:  # its ranks on a CPU worker's processes, or on as many of a GPU worker's GPUs
            return owned == 0 or self.gpus == "all" or self.gpus <= owned
        if self.any_worker:
            return True
        return owned >= (1 if self.gpus == "all" else self.gpus)


# --- results ------------------------------------------------------------------------------------------------

class ResultSection(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, str_max_length=100_000)


class RankFigures(ResultSection):
    """One rank's share of a strategy row."""

    rank: Annotated[int, Field(ge=0, lt=MAX_RANKS)]
    device: Annotated[str, Field(max_length=200)]  # e.g. "cuda:1 NVIDIA H100 80GB HBM3" or "cpu"
    real_tokens: Annotated[int, Field(ge=0)]
    computed_tokens: Annotated[int, Field(ge=0)] | None = None  # padding included: the work the rank computed
    batches: Annotated[int, Field(ge=0)]
    measured_seconds: Annotated[float, Field(ge=0)]
    peak_allocated_bytes: Annotated[int, Field(ge=0)] | None = None  # CUDA allocator; None on CPU
    # Seconds per step inside collectives (all-gather, reduce-scatter, all-reduce), from the profiler's timeline
    # over a few steps after the measurement: the time during which at least one collective ran (on GPUs the
    # NCCL kernels, which include waiting for the other ranks; on CPUs gloo's operations).
    collective_seconds_per_step: Annotated[float, Field(ge=0)] | None = None
    # The part of it no compute overlapped (no other kernel on the GPU; no operator on a computing thread of the
    # CPU): what the communication cost the step, at most the time in collectives.
    exposed_collective_seconds_per_step: Annotated[float, Field(ge=0)] | None = None


class RankShares(ResultSection):
    """A strategy row's figures per rank (the row's own figures are summed over its ranks)."""

    ranks: Annotated[list[RankFigures], Field(min_length=1, max_length=MAX_RANKS)]
    tokens_per_s_per_gpu: Annotated[float, Field(ge=0)] | None = None
    # Batches left unmeasured so that every rank runs the same number of steps (ranks step together, and a
    # layout's batches rarely divide evenly between them); their tokens are not counted.
    batches_left_out: Annotated[int, Field(ge=0)] = 0
    # How unequal the ranks' work was over the measured steps: the busiest rank's computed tokens over the
    # ranks' mean, minus one (0.05: one rank computed 5% more than the average, and the others waited for it).
    work_imbalance: Annotated[float, Field(ge=0)] | None = None
    # The largest difference in real tokens between two ranks within one measured step.
    largest_step_gap_tokens: Annotated[int, Field(ge=0)] | None = None


class ScalingPoint(ResultSection):
    """A row of a scaling axis: the GPU count it ran on and how its throughput per GPU held up."""

    gpus: GpuCountNumber
    tokens_per_s_per_gpu: Annotated[float, Field(ge=0)] | None = None
    # Tokens/s per GPU over that of the same row at `baseline_gpus`, the smallest count that measured it (1.0:
    # perfect scaling; 0.8: each GPU does 80% of the work it did there). None where either was not measured.
    efficiency: Annotated[float, Field(ge=0)] | None = None
    baseline_gpus: GpuCountNumber | None = None


class ParallelRun(ResultSection):
    """How a job on several GPUs ran: the same for each of its rows."""

    gpus: Annotated[int, Field(ge=1, le=MAX_RANKS)]  # ranks in all: every node's
    parallelism: Parallelism
    precision: RunPrecision
    backend: Literal["nccl", "gloo"] | None = None
    devices: Annotated[list[Annotated[str, Field(max_length=200)]], Field(max_length=MAX_RANKS)] = []
    # A sharded model: the FSDP2 settings its decoder layers were found to hold once sharded (`distributed`'s
    # reshard_after_forward and prefetch, read back from the modules); None where nothing is sharded.
    reshard_after_forward: bool | None = None
    prefetch: bool | None = None
    # How the GPUs connect (`nvidia-smi topo -m`), as the driver prints it; None where it could not be read.
    topology: Annotated[str, Field(max_length=20_000)] | None = None
    # A job across several workers: each node (worker) and the global ranks it ran; empty on one worker.
    nodes: Annotated[list[NodeRun], Field(max_length=MAX_NODES)] = []
    interconnect: Interconnect | None = None


class NodeRun(ResultSection):
    """One worker of a job across several: which node it was and which of the job's ranks ran on it."""

    node_rank: Annotated[int, Field(ge=0, lt=MAX_NODES)]
    worker: Annotated[str, Field(max_length=200)]  # the padbench worker's name ("" when no worker started it)
    host: Annotated[str, Field(max_length=255)]  # the host name the node's ranks saw
    ranks: Annotated[list[Annotated[int, Field(ge=0, lt=MAX_RANKS)]], Field(min_length=1, max_length=MAX_GPUS)]


class Interconnect(ResultSection):
    """What the ranks' links were seen to do: a timed all-reduce over the job's own process group at its start,
    and what the collective library says of itself: NCCL's version and the transports it set its channels up
    over, as its own log names them (read where the user left NCCL_DEBUG unset; empty otherwise, never guessed)."""

    backend: Literal["nccl", "gloo"]
    nccl_version: Annotated[str, Field(max_length=40)] | None = None  # the NCCL torch carries; None on gloo
    hosts: Annotated[int, Field(ge=1, le=MAX_RANKS)]  # distinct host names among the ranks
    across_hosts: bool
    all_reduce_bytes: Annotated[int, Field(ge=1)]
    all_reduce_seconds: Annotated[float, Field(gt=0)]  # median of the timed all-reduces, slowest rank's
    # nccl-tests' bus bandwidth: bytes × 2(n-1)/n over the time, comparable across group sizes.
    all_reduce_bus_gbps: Annotated[float, Field(ge=0)]
    # NCCL's channel transports over all ranks: `P2P/CUMEM` (NVLink or PCIe between GPUs of a host), `SHM`
    # (through host memory), `NET/IB` or `NET/Socket` (between hosts); and the network plugin it loaded.
    nccl_transports: Annotated[list[Annotated[str, Field(max_length=40)]], Field(max_length=8)] = []
    nccl_network: Annotated[str, Field(max_length=40)] | None = None
