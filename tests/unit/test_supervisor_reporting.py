"""Reporting a run's end until the server answers for good, on a fake clock: no test here sleeps."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from padbench.http import ApiError
from padbench.kinds.padding.contract import StrategyResult
from padbench.worker.runtime.kernel_speeds import KernelSpeeds
from padbench.worker.supervisor.api import WorkerApi
from padbench.worker.supervisor.gang import GangMember
from padbench.worker.supervisor.outbox import Outbox, PendingResult, ReportRoute
from padbench.worker.supervisor.reporting import (
    MAX_RETRY_AFTER_S,
    SAVED_RESULT_TRIES,
    Reporter,
    Retrying,
)
from tests.unit.supervisor_targets import padding_result
from tests.unit.test_supervisor_loop import FakeServer

RESULT = padding_result([])


class FakeClock:
    """`Retrying`'s wait: time passes at once; `stop_after_s` plays a stop request arriving at that time."""

    def __init__(self, stop_after_s: float | None = None) -> None:
        self.now = 0.0
        self.waits: list[float] = []
        self.stop_after_s = stop_after_s

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += seconds
        return self.stop_after_s is not None and self.now >= self.stop_after_s


def reporter(server: FakeServer, clock: FakeClock, outbox: Path | None = None) -> Reporter:
    api = WorkerApi("http://padbench.test", "w0rker", transport=httpx.MockTransport(server.handle))
    return Reporter(api, Outbox(outbox) if outbox else None, Retrying(clock.wait, max_delay_s=30.0))


def test_a_result_is_reported_through_transient_errors_long_past_ten_minutes(tmp_path: Path) -> None:
    server, clock = FakeServer(down_for_reports=100), FakeClock()
    sending = reporter(server, clock, tmp_path)
    sending.complete(5, "lease-abc", RESULT)
    assert server.actions() == ["complete"] * 101  # 100 answered 503, then stored
    assert clock.now > 20 * 60 and max(clock.waits) <= 30.0
    assert sending.outbox is not None and sending.outbox.pending() == []


def test_a_409_on_complete_drops_the_saved_result_and_fails_nothing(tmp_path: Path) -> None:
    server = FakeServer(refuse={"complete": 409})
    sending = reporter(server, FakeClock(), tmp_path)
    sending.complete(5, "lease-abc", RESULT)
    assert server.actions() == ["complete"]  # another attempt's result was kept, or the job was cancelled
    assert sending.outbox is not None and sending.outbox.pending() == []


def test_a_refused_result_fails_the_job_with_the_reason(tmp_path: Path) -> None:
    server = FakeServer(refuse={"complete": 422})
    sending = reporter(server, FakeClock(), tmp_path)
    sending.complete(5, "lease-abc", RESULT)
    assert server.actions() == ["complete", "fail"]
    assert server.last("fail")["error"].startswith("the server rejected the job's result: HTTP 422")
    assert sending.outbox is not None and sending.outbox.pending() == []


def test_too_many_requests_is_retried_like_an_outage() -> None:
    server = FakeServer(refuse={"complete": 429})
    clock = FakeClock(stop_after_s=60.0)
    with pytest.raises(ApiError, match="HTTP 429"):
        reporter(server, clock).complete(5, "lease-abc", RESULT)
    assert server.actions().count("complete") > 3 and "fail" not in server.actions()


def test_a_stop_request_ends_the_retries_and_the_outbox_keeps_the_result(tmp_path: Path) -> None:
    server, clock = FakeServer(down_for_reports=1000), FakeClock(stop_after_s=3600.0)
    sending = reporter(server, clock, tmp_path)
    with pytest.raises(ApiError, match="HTTP 503"):
        sending.complete(5, "lease-abc", RESULT)
    assert clock.now >= 3600.0
    assert sending.outbox is not None and [saved.token for saved in sending.outbox.pending()] == ["lease-abc"]


def test_the_delay_grows_with_jitter_up_to_its_cap_and_follows_retry_after() -> None:
    lowest = Retrying(FakeClock().wait, max_delay_s=30.0, jitter=lambda: 0.0)
    highest = Retrying(FakeClock().wait, max_delay_s=30.0, jitter=lambda: 1.0)  # the bound random() stays below
    outage = ApiError("HTTP 503: busy", status=503)
    assert [lowest.delay(failures, outage) for failures in (1, 2, 3, 8, 200)] == [0.25, 0.5, 1.0, 15.0, 15.0]
    assert [highest.delay(failures, outage) for failures in (1, 2, 8)] == [0.5, 1.0, 30.0]
    told = ApiError("HTTP 503: busy", status=503)
    told.retry_after = 7.0  # type: ignore[attr-defined]  # set by padbench.http from the Retry-After header
    assert lowest.delay(1, told) == 7.0
    told.retry_after = 1e9  # type: ignore[attr-defined]
    assert lowest.delay(1, told) == MAX_RETRY_AFTER_S


def save(outbox: Path) -> Outbox:
    saved = Outbox(outbox)
    saved.save(PendingResult(7, "lease-old", RESULT))
    return saved


def test_a_saved_result_is_retried_at_start_up_then_delivered(tmp_path: Path) -> None:
    saved = save(tmp_path / "outbox")
    server = FakeServer(down_for_reports=SAVED_RESULT_TRIES - 1)
    reporter(server, FakeClock(), tmp_path / "outbox").deliver_saved()
    assert server.actions() == ["complete"] * SAVED_RESULT_TRIES
    assert saved.pending() == []


def test_a_saved_result_the_server_still_cannot_take_is_kept_for_the_next_start(tmp_path: Path) -> None:
    saved = save(tmp_path / "outbox")
    server = FakeServer(down_for_reports=1000)
    reporter(server, FakeClock(), tmp_path / "outbox").deliver_saved()
    assert server.actions() == ["complete"] * SAVED_RESULT_TRIES
    assert [pending.job_id for pending in saved.pending()] == [7]


def test_a_saved_result_answered_409_is_dropped(tmp_path: Path) -> None:
    saved = save(tmp_path / "outbox")
    reporter(FakeServer(refuse={"complete": 409}), FakeClock(), tmp_path / "outbox").deliver_saved()
    assert saved.pending() == []


def test_a_finished_result_feeds_the_kernel_speeds_table_under_its_job(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured on this machine whatever the server answers: the figures are kept even when the result is refused."""
    table = tmp_path / "kernel-speeds.json"
    monkeypatch.setenv("PADBENCH_KERNEL_SPEEDS_FILE", str(table))
    rows = [StrategyResult(strategy="static", attention=family, kernel=family, batch_size=8, status="ok",
                           tokens_per_s=rate) for family, rate in (("sdpa", 2000.0), ("eager", 500.0))]
    reporter(FakeServer(refuse={"complete": 422}), FakeClock()).complete(42, "lease-abc", padding_result(rows))
    figures = KernelSpeeds(table).figures()
    assert sorted((figure.family, figure.rate, figure.source) for figure in figures) == [
        ("eager", 500.0, "job 42"), ("sdpa", 2000.0, "job 42")]


def test_a_gangs_result_is_saved_then_reported_under_the_membership_and_forgotten(tmp_path: Path) -> None:
    server = FakeServer(down_for_reports=3)
    server.when_down = lambda: saved_while_down.append(Outbox(tmp_path).pending())
    saved_while_down: list[list[PendingResult]] = []
    reporter(server, FakeClock(), tmp_path).complete(5, "member-abc", RESULT, ReportRoute.GANG)
    assert server.actions() == ["complete"] * 4 and "lease_token" not in server.last("complete")
    assert server.last("complete")["member_token"] == "member-abc"
    assert saved_while_down[0] == [PendingResult(5, "member-abc", RESULT, ReportRoute.GANG)]
    assert Outbox(tmp_path).pending() == []


def test_a_gangs_result_refused_for_good_fails_nothing_a_membership_cannot_fail(tmp_path: Path) -> None:
    server = FakeServer(refuse={"complete": 422})
    reporter(server, FakeClock(), tmp_path).complete(5, "member-abc", RESULT, ReportRoute.GANG)
    assert server.actions() == ["complete"] and Outbox(tmp_path).pending() == []


class PathsServer(FakeServer):
    """Also records the path each call went to: the route a report took."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.paths: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return super().handle(request)


def test_a_saved_gang_result_is_delivered_at_start_up_under_the_membership(tmp_path: Path) -> None:
    saved = Outbox(tmp_path / "outbox")
    saved.save(PendingResult(7, "member-old", RESULT, ReportRoute.GANG))
    saved.save(PendingResult(8, "lease-old", RESULT))
    server = PathsServer(down_for_reports=1)
    reporter(server, FakeClock(), tmp_path / "outbox").deliver_saved()
    assert [path.removeprefix("/v1") for path in server.paths] == ["/gangs/7/complete"] * 2 + ["/leases/8/complete"]
    assert server.calls[1][1]["member_token"] == "member-old"
    assert saved.pending() == []


def test_a_gang_member_stopped_before_the_server_answers_keeps_the_result_for_the_next_start(tmp_path: Path) -> None:
    """The member whose node ran global rank 0 reports through the reporter: a stop mid-outage loses nothing."""
    server, clock = FakeServer(down_for_reports=1000), FakeClock(stop_after_s=600.0)
    sup = SimpleNamespace(config=SimpleNamespace(price_per_gpu_hour=None), reporter=reporter(server, clock, tmp_path))
    joined = SimpleNamespace(job=SimpleNamespace(id=5))
    member = GangMember(sup, joined, None, (), 1, "127.0.0.1")  # type: ignore[arg-type]
    member._report_result(RESULT, SimpleNamespace(token="member-abc"))  # type: ignore[arg-type]
    assert Outbox(tmp_path).pending() == [PendingResult(5, "member-abc", RESULT, ReportRoute.GANG)]
    reporter(FakeServer(), FakeClock(), tmp_path).deliver_saved()
    assert Outbox(tmp_path).pending() == []
