"""HTTP bodies of gang claims (`/v1/gangs`): workers that hold one job across several of them together.

A worker with room joins a queued job across several workers (`nodes` > 1) and gets a member token, then beats
its membership until the gang is full (the answer then carries the rendezvous every node starts its ranks
with, and node 0 the job's lease) or is dissolved (409: its GPUs go back to other work). Once the job runs, the
member whose node runs global rank 0 carries the job's progress on its beat, as a lease's heartbeat does.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field, field_validator

from padbench.contract.api import Body, JobOut, LeaseComplete, LeaseOut
from padbench.contract.bounds import DbId, LeaseToken, Message, Name, NoNul
from padbench.contract.kinds import JobResult
from padbench.contract.parallel import MAX_GPUS, MAX_NODES
from padbench.contract.results import JobResultBase

# A host name or an IPv4/IPv6 address other nodes reach this worker at.
NodeAddress = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9.:_\[\]%-]+$"), NoNul]
Port = Annotated[int, Field(ge=1, le=65535)]
NodeRank = Annotated[int, Field(ge=0, lt=MAX_NODES)]


class GangJoin(Body):
    worker_id: DbId
    gpus_free: Annotated[int, Field(ge=0, le=MAX_GPUS)] | None = None
    # Where this worker would host the gang's rendezvous store, should it be node 0: its address and a port
    # it found free.
    address: NodeAddress
    port: Port


class GangLeave(Body):
    member_token: LeaseToken


class GangBeat(Body):
    """A membership's beat. torch numbers the nodes itself, so global rank 0, whose progress is the job's, may
    run on any member: that member's beat carries the progress (bounded as a lease heartbeat's), which the
    server shows on the job while the member belongs to its running attempt."""

    member_token: LeaseToken
    progress: Annotated[float, Field(ge=0, le=1)] | None = None
    message: Message | None = None


class GangRendezvous(Body):
    """What each node passes torch's elastic launcher: c10d rendezvous at `endpoint` (node 0's address and
    port), under `run_id`, `nodes` nodes, this one being `node_rank`."""

    endpoint: Annotated[str, Field(max_length=300)]
    run_id: Annotated[str, Field(max_length=100)]
    nodes: Annotated[int, Field(ge=2, le=MAX_NODES)]
    node_rank: NodeRank


class GangNode(Body):
    node_rank: NodeRank
    worker: Name


class GangState(Body):
    job_id: DbId
    node_rank: NodeRank
    nodes: Annotated[int, Field(ge=2, le=MAX_NODES)]
    members: Annotated[list[GangNode], Field(max_length=MAX_NODES)]  # those that joined so far
    member_expires_at: datetime
    # Set once the gang is full and the job started; `lease` only for node 0, which reports for the job.
    rendezvous: GangRendezvous | None = None
    lease: LeaseOut | None = None


class GangJoined(Body):
    member_token: str
    job: JobOut
    state: GangState


class GangComplete(Body):
    """The job's result, reported by the member whose node ran global rank 0 (torch's rendezvous orders the
    nodes itself, so that may be any member), under its membership of the running attempt."""

    member_token: LeaseToken
    result: JobResult

    @field_validator("result")
    @classmethod
    def _not_partial(cls, result: JobResultBase) -> JobResultBase:
        return LeaseComplete.whole(result)
