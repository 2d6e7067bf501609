"""HTTP API bodies (`/v1`), shared by the server's routes, the worker's and the client's httpx calls."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from padbench.contract.bounds import MAX_RETENTION_DAYS, DbId, Label, LeaseToken, Message, Name, NoNul, WorkerLabels
from padbench.contract.history import MAX_BASELINES, RegressionFlag
from padbench.contract.kinds import DEFAULT_KIND, JOB_KINDS, JobResult, JobSpec
from padbench.contract.parallel import MAX_GPUS, MAX_NODES
from padbench.contract.results import MAX_RESULT_ROWS, JobResultBase

API_PREFIX = "/v1"
# A submit's key, new per job and the same on every retry of that submit; a retry answered from the
# existing job carries the second header (value `true`).
IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class JobStatus(str, Enum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"

    @property
    def is_final(self) -> bool:
        return self in (JobStatus.succeeded, JobStatus.failed, JobStatus.cancelled)


class JobCreate(Body):
    spec: JobSpec

    @field_validator("spec", mode="before")
    @classmethod
    def _padding_by_default(cls, value: Any) -> Any:
        """A spec without `kind` is a padding job, exactly as in `parse_job_spec`."""
        if isinstance(value, dict) and "kind" not in value:
            return {"kind": DEFAULT_KIND, **value}
        return value


class JobCreated(Body):
    id: int
    status: JobStatus


class JobsPrune(Body):
    """Remove finished jobs (succeeded, failed, cancelled) that ended more than `older_than_days` ago."""

    older_than_days: Annotated[int, Field(ge=1, le=MAX_RETENTION_DAYS)]


class JobsPruned(Body):
    removed: Annotated[int, Field(ge=0)]


class JobSummary(Body):
    """A job as the list shows it: its state, not its spec or results (a page stays small)."""

    id: int
    kind: str
    name: str | None = None
    status: JobStatus
    progress: float | None = None  # 0..1
    progress_message: str | None = None
    attempts: int
    max_attempts: int
    worker: str | None = None
    # The device the job ran on (the GPU's name, or `cpu`), as its worker registered it; None until claimed.
    device: str | None = None
    submitter: str
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None
    cancel_requested: bool = False


class JobOut(JobSummary):
    spec: dict[str, Any]
    # Why a queued job cannot start on any worker in contact now (e.g. it needs more GPUs than any of them
    # owns), worked out when the job is read; None when some live worker could take it.
    waiting_reason: Message | None = None
    # What the check of its result against each baseline it matches by fingerprint found, as the result was
    # stored (read with the job itself, `GET /v1/jobs/{id}`; empty elsewhere).
    regressions: Annotated[list[RegressionFlag], Field(max_length=MAX_BASELINES)] = []


class JobPage(Body):
    items: list[JobSummary]
    total: int
    limit: int
    offset: int


# A verdict's line names rows; a result holds at most MAX_RESULT_ROWS of them, each named in ~100 characters.
VerdictLine = Annotated[str, Field(max_length=1_000_000)]
RowIndex = Annotated[int, Field(ge=0, lt=MAX_RESULT_ROWS)]


class VerdictOut(Body):
    """What a padding result's rows add up to, computed by the server from the stored rows with the rule
    `padbench results` prints under its table, so the dashboard says exactly what the CLI says. Rows are
    named by their index in the result's `strategies`. An attention sweep has no verdict: all empty."""

    lines: Annotated[list[VerdictLine], Field(max_length=64)] = []  # the verdict, then indented details
    summary: Message | None = None  # the verdict in a few words, for a list of jobs
    winner: RowIndex | None = None  # the row the CLI highlights (the fastest that may win)
    ranked: Annotated[list[RowIndex], Field(max_length=MAX_RESULT_ROWS)] = []  # the rows as the table lists them
    doubtful: Annotated[list[RowIndex], Field(max_length=MAX_RESULT_ROWS)] = []  # rows not to rank by (dimmed)


MAX_GPU_MEMORY_BYTES = 2**53
# How `CUDA_VISIBLE_DEVICES` names a GPU: its index (`0`) or its UUID (`GPU-…`, `MIG-…`).
GpuId = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")]


class GpuInfo(Body):
    """One GPU a worker owns."""

    index: GpuId  # as CUDA_VISIBLE_DEVICES names it; the worker's jobs see it under this name
    name: Label  # the model, e.g. "NVIDIA H100 80GB HBM3"
    memory_bytes: Annotated[int, Field(ge=0, le=MAX_GPU_MEMORY_BYTES)]


class Capabilities(Body):
    device: Label  # "cuda" or "cpu"
    # The first GPU's model and memory (every GPU's is in `gpus`).
    gpu_name: Label | None = None
    gpu_memory_bytes: Annotated[int, Field(ge=0, le=MAX_GPU_MEMORY_BYTES)] | None = None
    # Every GPU the worker owns and runs jobs on (none on a CPU worker): a job on N GPUs needs N of them free.
    gpus: Annotated[list[GpuInfo], Field(max_length=MAX_GPUS)] = []
    # the names of every kind's list together (what servers read before `kernels_by_kind`); earlier workers
    # listed their kernels here too, beside the families
    kernels: Annotated[list[Label], Field(max_length=64)] = []
    # Per job kind, the names a spec of that kind may give for attention that runs here: a padding job's families
    # run padded rows and packs here, a generate job's their KV-cache path, an attention sweep's kernels run. The
    # server offers each job only what its own kind runs. Empty: a worker from before the lists were per kind.
    kernels_by_kind: Annotated[dict[Label, Annotated[list[Label], Field(max_length=64)]],
                               Field(max_length=16)] = {}
    # the experts implementations of mixtures of experts that run on this worker (`grouped_mm`, …)
    experts: Annotated[list[Label], Field(max_length=16)] = []
    job_kinds: Annotated[list[Label], Field(max_length=16)] = list(JOB_KINDS)
    # Its operator's labels (`padbench worker --label nvlink`): a job naming `worker_labels` runs only on a
    # worker carrying all of them.
    labels: WorkerLabels = []
    # The host memory a job's processes may hold together (the worker's memory cap); None from earlier workers.
    job_memory_bytes: Annotated[int, Field(ge=0, le=2**50)] | None = None
    # The fp32 matrix-multiply work (FLOPs) a CPU worker's CPU does within its job timeout: its measured rate
    # times PADBENCH_JOB_TIMEOUT_S. A `device: auto` job estimated to need more on a CPU is left to a GPU
    # worker. None: not measured (a worker with GPUs, or one from before), which takes any job as it did.
    cpu_flops_per_job: Annotated[float, Field(ge=0, le=1e24, allow_inf_nan=False)] | None = None
    # The most nodes one job of this worker runs across. A plain worker runs its jobs on its own host (1) and
    # joins gangs for jobs across nodes; a worker that hands its jobs to a scheduler (`padbench worker
    # --slurm`) says how many nodes its partition has, and claims a `nodes: M` job whole when M is no more.
    max_nodes: Annotated[int, Field(ge=1, le=MAX_NODES)] = 1

    @field_validator("gpus")
    @classmethod
    def _each_gpu_once(cls, gpus: list[GpuInfo]) -> list[GpuInfo]:
        indices = [gpu.index for gpu in gpus]
        if len(set(indices)) != len(indices):
            raise ValueError(f"each GPU is listed once; got indices {indices}")
        return gpus

    @property
    def owned_gpus(self) -> int:
        """How many GPUs the worker owns. A CUDA worker that lists none (registered before workers listed
        their GPUs) owns its one GPU."""
        return len(self.gpus) if self.gpus else int(self.device == "cuda")


class WorkerRegister(Body):
    name: Name
    capabilities: Capabilities


class WorkerOut(Body):
    id: DbId
    name: Name
    capabilities: Capabilities
    registered_at: datetime
    # Its latest registration, claim (even one that found no job) or heartbeat, by the database's clock.
    last_contact_at: datetime | None = None
    running_job_id: DbId | None = None  # the newest of `running_job_ids`
    running_job_ids: Annotated[list[DbId], Field(max_length=MAX_GPUS)] = []
    # How many of its GPUs its running jobs hold (None for a worker that owns none).
    gpus_busy: Annotated[int, Field(ge=0, le=MAX_GPUS)] | None = None


class LeaseRequest(Body):
    worker_id: DbId
    # How many of the worker's GPUs no job of its holds now: the claim gives it only a job that fits them.
    # Left out, all of them (a worker that runs one job at a time claims only when idle).
    gpus_free: Annotated[int, Field(ge=0, le=MAX_GPUS)] | None = None


class LeaseOut(Body):
    job: JobOut
    lease_token: str
    lease_expires_at: datetime


class Heartbeat(Body):
    lease_token: LeaseToken
    progress: Annotated[float, Field(ge=0, le=1)] | None = None
    message: Message | None = None


class HeartbeatAck(Body):
    cancel_requested: bool
    lease_expires_at: datetime


class LeaseComplete(Body):
    lease_token: LeaseToken
    result: JobResult

    @field_validator("result")
    @classmethod
    def _not_partial(cls, result: JobResultBase) -> JobResultBase:
        return cls.whole(result)

    @staticmethod
    def whole(result: JobResultBase) -> JobResultBase:
        # Rows kept from a cancelled run are reported as such (`LeaseCancelled`); they never make a job succeed.
        if result.partial is not None:
            raise ValueError("a completed job's result must not be marked partial (result.partial)")
        return result


class LeaseFail(Body):
    lease_token: LeaseToken
    error: Annotated[str, Field(max_length=10_000), NoNul]
    traceback: Annotated[str, Field(max_length=200_000), NoNul] | None = None


class LeaseCancelled(Body):
    """The job stopped on a cancel request after finishing some rows: those rows, marked partial."""

    lease_token: LeaseToken
    result: JobResult

    @field_validator("result")
    @classmethod
    def _marked_partial(cls, result: JobResultBase) -> JobResultBase:
        if result.partial is None:
            raise ValueError("a cancelled job's result must be marked partial (result.partial)")
        if result.partial.reason != "cancelled":
            raise ValueError(f"a cancelled job's result.partial.reason is 'cancelled', not {result.partial.reason!r}")
        return result


class LeaseRelease(Body):
    lease_token: LeaseToken


class ErrorOut(Body):
    """An error answer's body: `detail` says what was wrong (a sentence, or for 422 a list naming the fields)."""

    detail: Any


class LeaseConflictOut(Body):
    """A 409 on a lease call, with the job's status now: whether the job ended, or another worker's lease
    holds it (the lease was missed past the server's grace). Either way the run under this lease stops."""

    detail: Message
    job_status: JobStatus
