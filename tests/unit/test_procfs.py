"""Process memory as the worker reads it: psutil's figures for a process group and the host, and the peak
only /proc/self/status reports."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from padbench.worker.runtime import procfs


def test_a_process_groups_resident_memory_counts_each_of_its_processes() -> None:
    sleeper = "import time; print('started', flush=True); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", sleeper], start_new_session=True, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"started\n"
        own = psutil.Process(child.pid).memory_info().rss  # a group of one: it leads a session of its own
        assert procfs.group_rss_bytes(child.pid) == pytest.approx(own, rel=0.05)
        assert procfs.group_rss_bytes(os.getpgid(0)) >= psutil.Process().memory_info().rss
    finally:
        child.kill()
        child.wait()


def test_the_host_memory_and_the_peak_resident_set() -> None:
    assert procfs.host_memory_bytes() == psutil.virtual_memory().total
    resident = psutil.Process().memory_info().rss
    assert procfs.status_bytes("VmHWM") >= resident  # the peak since start, read after the resident set
