"""`padbench worker --label NAME` (repeatable) and PADBENCH_WORKER_LABELS: the labels a worker advertises."""

from __future__ import annotations

import argparse

import pytest

from padbench.worker.cli.work import add_worker_command, load_settings
from tests.unit.test_worker_token_file import worker_args


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_worker_command(parser.add_subparsers())
    return parser.parse_args(["worker", *argv])


def test_labels_from_the_options_or_the_variable_the_options_winning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PADBENCH_WORKER_LABELS", "rack-3, Team-A")
    assert load_settings(worker_args()).label_list == ["rack-3", "team-a"]
    given = load_settings(parsed("--label", "NVLink", "--label", "team-a", "--label", "nvlink"))
    assert given is not None and given.label_list == ["nvlink", "team-a"]
    monkeypatch.setenv("PADBENCH_WORKER_LABELS", "")
    assert load_settings(worker_args()).label_list == []


@pytest.mark.parametrize(("given", "reason"), [("a,,b", "has an empty entry"),
                                               ("team/a", "a label is letters, digits, '.', '_' and '-'")])
def test_a_bad_label_is_refused_at_start_up(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                            given: str, reason: str) -> None:
    monkeypatch.setenv("PADBENCH_WORKER_LABELS", given)
    assert load_settings(worker_args()) is None
    error = capsys.readouterr().err
    assert error.startswith("padbench worker: invalid settings: worker_labels") and reason in error
