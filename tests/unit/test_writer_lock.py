"""Server processes sharing one SQLite file take turns at its writer lock: a second holder waits for the first
and is let in within milliseconds of its release, and gives up with DatabaseBusy at the busy timeout."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from padbench.server.db.engine import DatabaseBusy, WriterLock


def test_a_second_process_waits_for_the_first_and_gives_up_at_its_timeout(tmp_path: Path) -> None:
    lock_file = tmp_path / "padbench.sqlite3.writer-lock"
    # Two locks on one file stand for two processes: each opens the file itself, and flock locks conflict
    # between open files even within one process.
    first, second = WriterLock(5, lock_file), WriterLock(0.1, lock_file)
    with first:
        started = time.monotonic()
        with pytest.raises(DatabaseBusy):
            second.__enter__()
        assert 0.1 <= time.monotonic() - started < 1
    with second:
        pass


def test_the_next_writer_gets_the_lock_within_milliseconds_of_its_release(tmp_path: Path) -> None:
    lock_file = tmp_path / "padbench.sqlite3.writer-lock"
    holder, waiter = WriterLock(5, lock_file), WriterLock(5, lock_file)
    released_at: list[float] = []

    def hold_then_release() -> None:
        with holder:
            time.sleep(0.2)
            released_at.append(time.monotonic())

    thread = threading.Thread(target=hold_then_release)
    thread.start()
    time.sleep(0.05)
    with waiter:
        entered_at = time.monotonic()
    thread.join()
    assert entered_at - released_at[0] < 0.05
