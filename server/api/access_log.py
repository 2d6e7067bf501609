"""Quiet access logs: requests that change nothing are not logged unless PADBENCH_LOG_POLLS is set.

An idle worker asks for a job every few seconds and a busy one heartbeats: hundreds of identical lines an
hour that bury the lines that matter (submissions, claims, results, failures).
"""

from __future__ import annotations

import logging

ACCESS_LOGGER = "uvicorn.access"
# (method, path, status) of the polls: an empty claim (204), a heartbeat (200) and the health checks.
QUIET_REQUESTS: frozenset[tuple[str, str, int]] = frozenset(
    {("POST", "/v1/leases", 204), ("GET", "/healthz", 200), ("GET", "/livez", 200)})
HEARTBEAT_SUFFIX = "/heartbeat"


def is_poll(method: str, path: str, status: int) -> bool:
    if (method, path, status) in QUIET_REQUESTS:
        return True
    return method == "POST" and path.startswith("/v1/leases/") and path.endswith(HEARTBEAT_SUFFIX) and status == 200


class SkipPolls(logging.Filter):
    """Drops uvicorn access records of polls (its records carry client, method, path, version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5:
            _, method, path, _, status = args
            return not (isinstance(status, int) and is_poll(str(method), str(path), status))
        return True


def quiet_access_log(log_polls: bool) -> None:
    """Install (or, with `log_polls`, remove) the filter on uvicorn's access logger; safe to call repeatedly."""
    logger = logging.getLogger(ACCESS_LOGGER)
    for existing in [f for f in logger.filters if isinstance(f, SkipPolls)]:
        logger.removeFilter(existing)
    if not log_polls:
        logger.addFilter(SkipPolls())
