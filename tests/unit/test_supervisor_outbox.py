"""The outbox's files: a saved result comes back with its route, and a file saved before routes were recorded
is read as a lease's report."""

from __future__ import annotations

import json
from pathlib import Path

from padbench.worker.supervisor.outbox import Outbox, PendingResult, ReportRoute
from tests.unit.supervisor_targets import padding_result

RESULT = padding_result([])


def test_a_saved_result_comes_back_with_its_token_and_route(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path)
    saved = [PendingResult(3, "lease-abc", RESULT), PendingResult(4, "member-def", RESULT, ReportRoute.GANG)]
    for pending in saved:
        outbox.save(pending)
    assert outbox.pending() == saved


def test_a_file_saved_before_routes_were_recorded_is_a_lease_report(tmp_path: Path) -> None:
    (tmp_path / "job-9.json").write_text(json.dumps({"job_id": 9, "lease_token": "lease-old", "result": RESULT}))
    assert Outbox(tmp_path).pending() == [PendingResult(9, "lease-old", RESULT, ReportRoute.LEASE)]


def test_a_file_naming_an_unknown_route_is_set_aside(tmp_path: Path) -> None:
    document = {"job_id": 9, "token": "t", "route": "carrier-pigeon", "result": RESULT}
    (tmp_path / "job-9.json").write_text(json.dumps(document))
    assert Outbox(tmp_path).pending() == []
    assert (tmp_path / "job-9.unreadable").exists()
