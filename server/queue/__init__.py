"""The job queue. EVERY job state change is one named, single-statement SQL UPDATE in this package:
`jobs.py` submits, claims, cancels, reaps and prunes jobs, `leases.py` is what a lease's holder does
(heartbeat, resume, report, release), `gangs.py` is a job a gang of workers holds together, and `fences.py`
holds the conditions they share.

Rules the statements keep (after procrastinate and Oban):
- Time comes from the database clock (`db_now`), never from Python's.
- A claim is one atomic `UPDATE … WHERE id = (SELECT … LIMIT 1 [FOR UPDATE SKIP LOCKED]) RETURNING …`;
  attempts are counted at claim time, so a job that crashes its worker every time runs out of attempts.
  Each claim's lease is recorded in `job_attempts` in the same transaction; a released lease gives its
  attempt back and its record with it, so `jobs.attempts` counts exactly the recorded attempts.
  A worker that owns GPUs claims while some are free, saying how many: it gets only a job that needs no
  more than that (`jobs.gpus`, `all` being every GPU it owns); a worker without GPUs runs one job at a time
  and is offered any job its capabilities allow (multi-rank jobs not on `device: cpu` need `device:cuda`).
- A result is a GPU run's worth of measurement, so it is accepted from ANY recorded attempt of the job,
  even one whose lease expired or went to another worker, as long as the job has no result yet and has
  not ended otherwise (a job failed only because its last lease expired still takes it). One fenced UPDATE
  decides: the first result wins; a later one changes nothing and its caller answers 409.
- A heartbeat is fenced by the lease token alone (the reaper clears the token when it takes a lease away),
  so a lease past its deadline that nobody took yet is simply extended; the job's latest attempt may also
  resume its lease when the reaper took it but nobody claimed the job again.
- fail, release and cancelled are fenced by the lease token AND an unexpired deadline: a worker whose
  lease expired (and perhaps went to someone else) changes nothing there; its caller answers 409.
- The reaper is one idempotent UPDATE; running it twice changes nothing the second time. It takes a lease
  away only once it has been missed by the admin's grace (PADBENCH_LEASE_GRACE_SECONDS) beyond its deadline:
  a holder that is only unreachable (the server restarting, a network outage) extends its lease with its
  next heartbeat, and the job is not run twice meanwhile.
- A submit with an idempotency key is one `INSERT … ON CONFLICT DO NOTHING`: two racing retries of the same
  submit cannot both create a job, and neither needs an error (which would abort a PostgreSQL transaction).
- A job across several nodes (`jobs.nodes` > 1) is claimed by a gang of plain workers (`gangs.py`), or whole
  by one worker that hands its jobs to a scheduler and says (`max_nodes` in its capabilities) how many nodes
  that scheduler places: the same claim statement as a one-node job's, with the job's nodes bounded by the
  worker's. Each attempt records who holds it (`job_attempts.held_by`: one worker, or a gang); a whole
  claim is one worker's, heartbeats, reports, fails, releases and resumes exactly as a one-node job's, and
  none of the gang's paths below (members lost, a failure requeued) touch it. A forming gang whose job is
  claimed whole meanwhile is stale: its members learn it at their next beat.
- A gang: a worker joins it with one INSERT that takes the next node rank in join order and is refused (ON
  CONFLICT DO NOTHING on the job and node rank, unique among the forming gang's members) when another joiner
  took that rank first, so a full gang never takes a member more. The job stays queued while the gang forms;
  the join that makes it full starts it (one UPDATE, one attempt recorded as the gang's, one lease held by
  node 0). Members beat their membership, fenced by their member token; a gang that is not full within the
  admin's bound (PADBENCH_GANG_FORM_SECONDS), or one of whose forming members missed its beat past the grace,
  is dissolved whole, so no worker holds GPUs waiting forever. A member of a running gang that misses its beat
  past the grace takes the attempt with it (the reaper's rules: requeued, or failed with no attempt left), and
  the other members learn it at their next beat (409). torch numbers the nodes itself, so global rank 0, whose
  progress is the job's, may run on any member: that member's beat carries the progress, stored on the job by
  one UPDATE fenced by the running attempt (the member's attempt token is the job's lease). The members of an
  attempt that ended stay while the job can still take a result (they record who ran it), and are removed once
  it cannot (succeeded, cancelled, failed otherwise than by its last lease expiring) or with the job; the
  forming gang of a job that left the queue is removed. The gang's result comes from the member whose node ran
  global rank 0, under its member token, which stands for its attempt's lease: the result rule above applies
  to it unchanged, so a late result of an ended attempt is taken while no result came first.
"""

from padbench.server.queue.fences import FINISHED, LEASE_EXPIRED_ERROR
from padbench.server.queue.gangs import (
    beat_membership,
    dissolve_unformed_gangs,
    join_gang,
    leave_gang,
    record_member_progress,
    remove_stale_members,
    requeue_gangs_missing_a_member,
    start_full_gang,
)
from padbench.server.queue.jobs import (
    claim_next_job,
    delete_finished_jobs,
    insert_job,
    queued_gpu_requirements,
    request_cancel,
    requeue_expired_leases,
)
from padbench.server.queue.leases import (
    LeaseExtension,
    cancel_with_partial_result,
    complete_job,
    extend_lease,
    fail_job,
    release_job,
    resume_lease,
)

__all__ = [
    "FINISHED",
    "LEASE_EXPIRED_ERROR",
    "LeaseExtension",
    "beat_membership",
    "cancel_with_partial_result",
    "claim_next_job",
    "complete_job",
    "delete_finished_jobs",
    "dissolve_unformed_gangs",
    "extend_lease",
    "fail_job",
    "insert_job",
    "join_gang",
    "leave_gang",
    "queued_gpu_requirements",
    "record_member_progress",
    "release_job",
    "remove_stale_members",
    "request_cancel",
    "requeue_expired_leases",
    "requeue_gangs_missing_a_member",
    "resume_lease",
    "start_full_gang",
]
