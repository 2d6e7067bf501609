"""The health process's view of the API's processes (padbench.server.health_beats): each API process's beat file
says when its event loop last ran and which database failures its requests met lately."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from padbench.server.health_beats import ApiBeats, beat_file, beat_periodically, write_beat

NOW = 1_000_000.0


class Failures:
    def __init__(self, *failures: str) -> None:
        self.failures = list(failures)

    def recent(self) -> list[str]:
        return self.failures


def beat(directory: Path, pid: int, at: float, *failures: str) -> None:
    beat_file(directory, pid).write_text(json.dumps({"pid": pid, "at": at, "failures": list(failures)}))


def beats(directory: Path, alive: set[int]) -> ApiBeats:
    return ApiBeats(directory, stall_limit_s=10.0, clock=lambda: NOW, exists=lambda pid: pid in alive)


def test_no_beat_yet_means_the_api_is_not_running(tmp_path: Path) -> None:
    assert beats(tmp_path, set()).problems() == ["no API process is running yet"]


def test_a_process_whose_beats_stopped_is_named_and_a_fresh_one_is_not(tmp_path: Path) -> None:
    beat(tmp_path, 11, NOW - 1.0)
    beat(tmp_path, 12, NOW - 30.4)
    assert beats(tmp_path, {11, 12}).problems() == ["API process 12: its event loop has not run for 30 s"]


def test_a_process_that_ended_is_left_out_and_a_half_written_file_skipped(tmp_path: Path) -> None:
    beat(tmp_path, 11, NOW - 1.0)
    beat(tmp_path, 12, NOW - 300.0)  # ended without removing its file (killed outright)
    beat_file(tmp_path, 13).write_text('{"pid": 13, "at"')
    assert [seen.pid for seen in beats(tmp_path, {11, 13}).read()] == [11]
    assert beats(tmp_path, {11, 13}).problems() == []


def test_the_failures_every_process_met_are_named_once(tmp_path: Path) -> None:
    beat(tmp_path, 11, NOW, "a request failed: the disk is full (3 s ago)")
    beat(tmp_path, 12, NOW, "a request failed: the disk is full (3 s ago)", "a request failed: corrupt (1 s ago)")
    assert beats(tmp_path, {11, 12}).recent() == ["a request failed: the disk is full (3 s ago)",
                                                   "a request failed: corrupt (1 s ago)"]


def test_a_beat_is_this_process_its_time_and_its_failures(tmp_path: Path) -> None:
    write_beat(tmp_path, Failures("a request failed: x (0 s ago)"), clock=lambda: NOW)
    seen = beats(tmp_path, {os.getpid()}).read()
    assert [(item.pid, item.at, item.failures) for item in seen] == \
        [(os.getpid(), NOW, ["a request failed: x (0 s ago)"])]
    assert not list(tmp_path.glob("*.tmp"))  # written beside it, then renamed over it


def test_beating_stops_with_its_file_removed(tmp_path: Path) -> None:
    async def beat_a_while() -> None:
        task = asyncio.create_task(beat_periodically(tmp_path, Failures()))
        await asyncio.sleep(0.05)
        assert beat_file(tmp_path, os.getpid()).exists()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(beat_a_while())
    assert not beat_file(tmp_path, os.getpid()).exists()  # a clean stop is not a stall
