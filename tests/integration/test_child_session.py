"""A child that serves several calls: reused while calls succeed, replaced after any failure, spares ready."""

from __future__ import annotations

from padbench.worker.runtime.child_session import ChildSession

TARGETS = "tests.integration.session_targets:"


def test_calls_share_one_child_until_one_fails_then_a_fresh_one_serves() -> None:
    with ChildSession(TARGETS + "pid_or_fail") as session:
        first, second = session.call(False), session.call(False)
        assert first.outcome == second.outcome == "ok" and first.value == second.value and session.starts == 1
        failed = session.call(True)
        assert failed.outcome == "oom" and failed.error is not None and "pretend" in failed.error
        fresh = session.call(False)
        assert fresh.outcome == "ok" and fresh.value != first.value and session.starts == 2


def test_without_reuse_every_call_gets_its_own_child() -> None:
    with ChildSession(TARGETS + "pid_or_fail", reuse=False) as session:
        pids = {session.call(False).value for _ in range(3)}
        assert len(pids) == 3 and session.starts == 3


def test_a_prestarted_spare_takes_over_after_a_failure_and_timeouts_kill() -> None:
    with ChildSession(TARGETS + "pid_or_fail", prestart=True) as session:
        first = session.call(False).value
        assert session.call(True).outcome == "oom"
        assert session.call(False).value != first and session.starts == 2
        slow = session.call(None, timeout_s=1.0)
        assert slow.outcome == "timeout"
        assert session.call(False).outcome == "ok" and session.starts == 3


def test_a_target_that_cannot_be_imported_is_reported_to_the_call() -> None:
    with ChildSession("tests.integration.no_such_module:target") as session:
        report = session.call(False)
        assert report.outcome == "error" and report.error is not None and "ModuleNotFoundError" in report.error


def test_a_call_may_name_another_target_and_runs_in_the_same_child() -> None:
    with ChildSession(TARGETS + "pid_or_fail") as session:
        pid = session.call(False).value
        assert session.call(1, target=TARGETS + "pid_plus").value == pid + 1 and session.starts == 1


def test_retiring_ends_the_live_child_and_the_spare_serves_the_next_call() -> None:
    with ChildSession(TARGETS + "pid_or_fail", prestart=True) as session:
        first = session.call(False).value
        spare = session._spare
        assert spare is not None
        session.retire()
        assert session.call(False).value == spare[0].pid != first and session.starts == 2
