"""A worker's part in a job across several workers (`nodes` > 1): join a gang, wait for it, run this node's ranks.

When the queue has no job for this worker alone, it joins a job across several (`/v1/gangs`), holding as many
of its GPUs as the job's `gpus` while it beats its membership. The gang either fills (every member is told
the rendezvous: node 0's address and port, a run id, the number of nodes and its own node rank) or is
dissolved (the server's bound on forming, a member gone): then the GPUs go back to the pool at once.

Once formed, every member starts its ranks through the launcher's c10d rendezvous (`launch_job(...,
rendezvous=...)`), so the job code runs exactly as on one node. Node 0 holds the job's lease: it heartbeats
it, and reports a failure, a cancel or a release for the whole gang. torch numbers the nodes itself, so the
progress and the result come back on whichever node runs global rank 0: node 0's heartbeat carries the
progress when it is that node, else that member's membership beat does, and that member reports the result
under its membership; the others report nothing. The result goes through the worker's `Reporter` like a
one-node job's: saved in the outbox first, retried until the server answers for good, and offered again at the
next start if the worker stops first. The server keeps the memberships of an attempt that ended while the job
awaits a result, so a result that arrives after the attempt was reaped (the server unreachable meanwhile) is
still taken if none came first. A member whose membership ends (409: the attempt was lost with another member,
or ended) stops its ranks.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from padbench.contract.api import LeaseOut
from padbench.contract.gangs import GangJoined, GangState
from padbench.contract.spec import JobSpecBase
from padbench.http import ApiError
from padbench.worker.jobs import spec_json
from padbench.worker.runtime import launcher
from padbench.worker.runtime.isolation import ChildReport
from padbench.worker.supervisor.api import LeaseLost, WorkerApi
from padbench.worker.supervisor.gpus import job_ranks, visible_devices
from padbench.worker.supervisor.lease import LatestProgress, LeaseKeeper, interval_until, wait_for_beat
from padbench.worker.supervisor.outbox import ReportRoute
from padbench.worker.supervisor.reporting import priced
from padbench.worker.supervisor.specs import SpecRefused, job_spec

if TYPE_CHECKING:
    from padbench.worker.supervisor.loop import Supervisor

log = logging.getLogger("padbench.worker")

# How often a member beats while its gang forms: the gang starts within about this of its last join.
FORMING_BEAT_S = 0.5


def node_address(configured: str | None) -> str:
    """The address other nodes reach this worker at: as configured, else what its host name resolves to."""
    if configured:
        return configured
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def free_port(address: str) -> int:
    """A port free on `address` now, for the rendezvous store this worker hosts should it be node 0."""
    with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as probe:
        probe.bind((address, 0))
        return int(probe.getsockname()[1])


class MembershipKeeper:
    """Beats a gang membership in a thread: the latest state, `formed` once it carries a rendezvous, `lost` on
    a 409 (the gang was dissolved or its attempt ended). On the node that runs global rank 0 (torch numbers
    the nodes itself, so any member may) `update` is the ranks' `on_progress`: the beats carry the job's
    progress, and one comes soon after progress changes, paced as a lease's heartbeat (`wait_for_beat`)."""

    def __init__(self, api: WorkerApi, joined: GangJoined) -> None:
        self._api, self.job_id, self.token = api, joined.job.id, joined.member_token
        self.state: GangState = joined.state
        self.formed, self.lost, self._done = threading.Event(), threading.Event(), threading.Event()
        self._progress = LatestProgress()
        self._thread = threading.Thread(target=self._run, name=f"gang-{self.job_id}", daemon=True)
        self._note(joined.state)

    def __enter__(self) -> MembershipKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._done.set()
        self._progress.wake.set()
        self._thread.join(timeout=30)

    def update(self, fraction: float, message: str) -> None:
        """`on_progress` for this node's ranks: remember the latest progress and nudge the beating thread."""
        self._progress.update(fraction, message)

    def _run(self) -> None:
        last_beat = time.monotonic()
        while not self.lost.is_set() and wait_for_beat(self._progress, self._done, last_beat, self._interval()):
            self.beat()
            last_beat = time.monotonic()

    def _interval(self) -> float:
        return interval_until(self.state.member_expires_at) if self.formed.is_set() else FORMING_BEAT_S

    def beat(self) -> None:
        progress, message = self._progress.latest()
        try:
            self._note(self._api.beat_gang(self.job_id, self.token, progress, message))
        except LeaseLost as error:
            log.warning("job %d: gang membership ended (%s)", self.job_id, error)
            self.lost.set()
        except ApiError as error:  # transient: the next beat may get through before the membership lapses
            log.warning("job %d: gang heartbeat failed: %s", self.job_id, error)

    def _note(self, state: GangState) -> None:
        self.state = state
        if state.rendezvous is not None:
            self.formed.set()


def join_one(supervisor: Supervisor) -> bool:
    """Join a job across several workers if the queue has one this worker can take; True when it did (a thread
    of its own now waits for the gang and runs this node's share)."""
    assert supervisor.worker_id is not None
    address = node_address(supervisor.config.node_address)
    owned = bool(supervisor.gpus.owned)
    try:
        joined = supervisor.api.join_gang(supervisor.worker_id, address, free_port(address),
                                          supervisor.gpus.free if owned else None)
    except (ApiError, OSError) as error:
        log.warning("joining a gang failed: %s", error)
        return False
    if joined is None:
        return False
    try:
        spec = job_spec(joined.job.spec)
    except SpecRefused as refused:
        log.error("job %d: cannot run its spec here (%s); leaving its gang", joined.job.id, refused)
        _leave(supervisor.api, joined)
        return False
    ranks = job_ranks(spec, len(supervisor.gpus.owned))
    held = supervisor.gpus.take(ranks) if owned else ()
    if held is None:
        _leave(supervisor.api, joined)
        return False
    log.info("job %d: joined its gang as node %d of %d", joined.job.id, joined.state.node_rank, joined.state.nodes)
    member = GangMember(supervisor, joined, spec, held, ranks, address)
    supervisor.run_in_thread(joined.job.id, held, member.run)
    return True


def _leave(api: WorkerApi, joined: GangJoined) -> None:
    try:
        api.leave_gang(joined.job.id, joined.member_token)
    except ApiError as error:  # the server dissolves the gang on its own once the membership lapses
        log.warning("job %d: could not leave its gang: %s", joined.job.id, error)


class GangMember:
    def __init__(self, supervisor: Supervisor, joined: GangJoined, spec: JobSpecBase, held: tuple[str, ...],
                 ranks: int, address: str) -> None:
        self.sup, self.joined, self.spec, self.held, self.ranks, self.address = (
            supervisor, joined, spec, held, ranks, address)
        self.job_id = joined.job.id

    def run(self) -> None:
        with MembershipKeeper(self.sup.api, self.joined) as membership:
            if not self._wait_formed(membership):
                return
            state = membership.state
            assert state.rendezvous is not None
            log.info("job %d: gang formed; starting %d rank(s) as node %d of %d at %s", self.job_id, self.ranks,
                     state.node_rank, state.nodes, state.rendezvous.endpoint)
            with ExitStack() as stack:
                keeper = stack.enter_context(LeaseKeeper(self.sup.api, state.lease)) if state.lease else None
                report = self._run_ranks(state, membership, keeper)
                log.info("job %d: node %d's ranks finished: %s in %.1f s", self.job_id, state.node_rank,
                         report.outcome, report.seconds)
                self._settle(report, membership, keeper, state.lease)

    def _wait_formed(self, membership: MembershipKeeper) -> bool:
        while not membership.formed.is_set():
            if membership.lost.is_set():
                log.info("job %d: its gang was dissolved before it formed; its GPUs are free again", self.job_id)
                return False
            if self.sup.stopping:
                _leave(self.sup.api, self.joined)
                return False
            membership.formed.wait(0.1)
        return True

    def _run_ranks(self, state: GangState, membership: MembershipKeeper, keeper: LeaseKeeper | None) -> ChildReport:
        assert state.rendezvous is not None
        rendezvous = launcher.Rendezvous(endpoint=state.rendezvous.endpoint, run_id=state.rendezvous.run_id,
                                         nodes=state.rendezvous.nodes, node_rank=state.rendezvous.node_rank,
                                         local_addr=self.address)
        env = {**visible_devices(self.held), "PADBENCH_WORKER_NAME": self.sup.config.name,
               "PADBENCH_NODE_RANK": str(state.node_rank)}

        def should_stop() -> bool:
            lease_over = keeper is not None and (keeper.lost.is_set() or keeper.cancel_requested.is_set())
            return self.sup.stopping or membership.lost.is_set() or lease_over

        return launcher.launch_job(
            self.sup.config.job_target, spec_json(self.spec), ranks=self.ranks, rendezvous=rendezvous,
            timeout_s=self.sup.config.job_timeout_s, memory_cap_bytes=self.sup.config.job_memory_cap_bytes, env=env,
            on_progress=keeper.update if keeper is not None else membership.update, should_stop=should_stop)

    def _settle(self, report: ChildReport, membership: MembershipKeeper, keeper: LeaseKeeper | None,
                lease: LeaseOut | None) -> None:
        if report.outcome == "ok":
            if report.value is not None:  # this node ran global rank 0: its result is the gang's
                self._report_result(report.value, membership)
            return
        if keeper is None or lease is None:  # node 0 speaks for the gang's failures
            log.warning("job %d: this node's ranks ended (%s): %s", self.job_id, report.outcome, report.error)
            return
        try:
            if keeper.lost.is_set():
                log.warning("job %d: the gang's lease was lost; nothing is reported", self.job_id)
            elif self.sup.stopping:
                self.sup.api.release(self.job_id, lease.lease_token)
            else:  # a cancel requested ends the job cancelled (the server decides): no rows are kept across nodes
                self.sup.reporter.fail(self.job_id, lease.lease_token, f"{report.outcome}: {report.error}",
                                       report.traceback)
        except ApiError as error:
            log.error("job %d: could not report the gang's end: %s", self.job_id, error)

    def _report_result(self, value: dict[str, Any], membership: MembershipKeeper) -> None:
        """Report the gang's result as any result is (`Reporter.complete`), under this membership. A result
        refused for good is logged: with no result, node 0's lease lapses and the job is requeued."""
        result = priced(value, self.sup.config.price_per_gpu_hour)
        try:
            self.sup.reporter.complete(self.job_id, membership.token, result, ReportRoute.GANG)
        except ApiError as error:  # stopping before the server answered
            log.warning("job %d: the result is kept in the outbox for the next start (%s)", self.job_id, error)
