"""Polls (empty claims, heartbeats, health checks) stay out of the access log unless PADBENCH_LOG_POLLS."""

from __future__ import annotations

import logging

import pytest

from padbench.server.api.access_log import ACCESS_LOGGER, quiet_access_log


def access(method: str, path: str, status: int) -> logging.LogRecord:
    # The shape of uvicorn's access records: '%s - "%s %s HTTP/%s" %d'.
    return logging.LogRecord(ACCESS_LOGGER, logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                             ("127.0.0.1:5000", method, path, "1.1", status), None)


POLLS = [("POST", "/v1/leases", 204), ("POST", "/v1/leases/7/heartbeat", 200), ("GET", "/healthz", 200)]
STATE_CHANGES = [("POST", "/v1/leases", 200), ("POST", "/v1/jobs", 201), ("POST", "/v1/leases/7/complete", 204),
                 ("POST", "/v1/leases/7/heartbeat", 409), ("GET", "/v1/jobs", 401)]


@pytest.fixture(autouse=True)
def restore_filters() -> object:
    logger = logging.getLogger(ACCESS_LOGGER)
    saved = list(logger.filters)
    yield
    logger.filters[:] = saved


def test_polls_are_not_logged_but_state_changes_are() -> None:
    quiet_access_log(log_polls=False)
    quiet_access_log(log_polls=False)  # idempotent: one filter, not two
    logger = logging.getLogger(ACCESS_LOGGER)
    assert [logger.filter(access(*poll)) for poll in POLLS] == [False] * len(POLLS)
    assert [logger.filter(access(*change)) for change in STATE_CHANGES] == [True] * len(STATE_CHANGES)


def test_log_polls_keeps_every_line() -> None:
    quiet_access_log(log_polls=False)
    quiet_access_log(log_polls=True)
    logger = logging.getLogger(ACCESS_LOGGER)
    assert all(logger.filter(access(*poll)) for poll in POLLS)
