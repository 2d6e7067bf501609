"""`attention: auto` over HTTP: the worker settles it. Real processes: a `padbench server` and a `padbench worker`
on this machine's CPU. The first job compares sdpa and eager on the same rows; the worker keeps its figures under
the job's id, and the second job, which names no attention, runs the faster one and says so, naming that job."""

from __future__ import annotations

import pytest

from padbench.contract.api import JobStatus
from padbench.kinds.padding.contract import PaddingResult
from tests.acceptance.conftest import LiveServer
from tests.acceptance.specs import QUICK

pytestmark = pytest.mark.slow


def finished(server: LiveServer, document: dict[str, object]) -> tuple[int, PaddingResult]:
    with server.client() as client:
        job = client.submit(document).id
        done = client.wait(job, poll_s=0.2, timeout_s=240)
        assert done.status is JobStatus.succeeded, done.error
        result = client.results(job)
    assert isinstance(result, PaddingResult)
    return job, result


def test_the_worker_picks_the_kernel_its_earlier_job_measured_faster(live_server: LiveServer, start_worker) -> None:
    start_worker("cpu")
    compared = {key: value for key, value in QUICK.items() if key != "attention"}
    first_job, first = finished(live_server, compared | {"strategies": [
        {"name": "static", "attention": "sdpa"}, {"name": "static", "attention": "eager"}]})
    measured = {row.attention: row.tokens_per_s or 0.0 for row in first.strategies}
    faster = max(measured, key=lambda family: measured[family])

    second_job, second = finished(live_server, compared | {"strategies": ["static"]})
    assert second.spec.attention == "auto" and second.attention_auto is not None
    pick = second.attention_auto[0]
    assert (pick.chosen, pick.measured, pick.device) == (faster, True, "cpu")
    assert pick.reason.startswith(f"fastest measured: {faster} ") and f"in job {first_job} on " in pick.reason
    assert [row.attention for row in second.strategies] == [faster]
    shown = live_server.cli("results", str(second_job))
    assert shown.returncode == 0 and f"attention auto chose {faster} for padded rows: fastest measured" in shown.stdout
