"""Process facts and limits: memory read through psutil, the peaks only /proc/self/status has, the
address-space cap, dying with the parent.

The CPU stand-ins for device memory (the OOM probe's budget, the sweep's per-cell budget, host peak RSS)
all read and cap the same process, so they read and cap it here. psutil gives what it can (resident and
mapped sizes, a host's memory, every process's memory); the peaks (VmHWM, VmPeak) it does not report, and
resetting the peak or capping the address space are kernel calls, so those stay Linux-only code here.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import resource
import signal
import sys
from pathlib import Path

import psutil

STATUS_FILE = Path("/proc/self/status")
CLEAR_REFS_FILE = Path("/proc/self/clear_refs")
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


class ProcfsUnavailable(OSError):
    """The field is not in /proc/self/status: not Linux, or a kernel without it."""


def status_bytes(field: str) -> int:
    """A `kB` field of /proc/self/status (VmSize, VmRSS, VmHWM, …) in bytes."""
    with contextlib.suppress(OSError):
        for line in STATUS_FILE.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise ProcfsUnavailable(f"{field} is missing from {STATUS_FILE}: this needs Linux /proc")


def group_rss_bytes(process_group: int) -> int:
    """The resident memory of every process in `process_group`, summed (processes that vanish count 0)."""
    total = 0
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):  # gone, or not ours to read
            if os.getpgid(process.pid) == process_group:
                total += process.memory_info().rss
    return total


def host_memory_bytes() -> int:
    """Physical memory of this machine."""
    return int(psutil.virtual_memory().total)


def reset_peak_rss() -> bool:
    """Restart VmHWM from the current resident set; False where the kernel does not allow it."""
    try:
        CLEAR_REFS_FILE.write_text("5")
    except OSError:
        return False
    return True


def cap_address_space(extra_bytes: int) -> int:
    """Let this process map at most `extra_bytes` more than it has mapped now; returns the mapped size.

    Past the cap an allocation fails with MemoryError, which is how a CPU run stands in for a GPU
    running out of memory. The hard limit is never raised.
    """
    mapped = int(psutil.Process().memory_info().vms)  # VmSize
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = mapped + extra_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    return mapped


def die_with_parent() -> None:
    """Linux: if the parent is SIGKILLed (a worker killed mid-job), this process is killed too.

    Without it a child in its own session — which no terminal signal reaches — would keep running its
    work on the GPU as an orphan, skewing or running out of memory whatever runs there next.
    """
    if not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    parent = multiprocessing.parent_process()
    if parent is not None and os.getppid() != parent.pid:  # the parent died before prctl took effect
        os._exit(1)
