"""A new result checked, as it is stored, against every baseline that some row of it matches by fingerprint:
the finding is kept with the job (its JSON and `padbench status` show it, `/metrics` counts it) and a regression
is posted as JSON to PADBENCH_WEBHOOK_URL when that is set.

Neither may cost the result: the check is pure arithmetic over stored documents, and any failure of it is logged
and leaves the job unflagged; the post runs after the answer to the worker has gone, with a bounded timeout.
"""

from __future__ import annotations

import logging

import httpx
from sqlalchemy.orm import Session

from padbench.contract.history import RegressionCheck
from padbench.contract.results import JobResultBase
from padbench.report.regression import check_against, matches
from padbench.server.api.stored_results import readable
from padbench.server.db.baselines import matching_kind_baselines, record_regression_checks

log = logging.getLogger(__name__)
EVENT = "padbench.regression"


def checks_of_new_result(session: Session, job_id: int, result: JobResultBase,
                         tolerance: float) -> list[RegressionCheck]:
    """The job's result against each baseline of its kind that it matches (not its own)."""
    checks = []
    for baseline, base_document in matching_kind_baselines(session, result.kind):
        base = readable(base_document)
        if baseline.job_id == job_id or base is None or not matches(result, base):
            continue
        checks.append(check_against((job_id, result), (baseline.name, baseline.job_id, base), tolerance))
    return checks


def check_new_result(session: Session, job_id: int, result: JobResultBase, tolerance: float) -> list[RegressionCheck]:
    """Check and keep the findings; a failure of the check itself is logged and flags nothing."""
    try:
        checks = checks_of_new_result(session, job_id, result, tolerance)
    except Exception:  # a bug here must never cost the worker's result, which is being stored
        log.exception("job %d: the check against its baselines failed; the result is stored unflagged", job_id)
        return []
    record_regression_checks(session, job_id, checks)
    return checks


async def post_regressions(url: str, timeout_s: float, checks: list[RegressionCheck]) -> None:
    """POST each regression as JSON; a receiver that fails or is slow is logged, never retried."""
    regressed = [check for check in checks if check.regressed]
    if not regressed:
        return
    async with httpx.AsyncClient(timeout=timeout_s) as client:
        for check in regressed:
            try:
                response = await client.post(url, json={"event": EVENT, **check.model_dump(mode="json")})
                response.raise_for_status()
            except (httpx.HTTPError, httpx.InvalidURL) as error:  # refused, slow, 4xx/5xx, or a URL httpx refuses
                log.warning("job %d: the regression webhook was not delivered: %s", check.job_id, error)
