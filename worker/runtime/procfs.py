"""Linux process facts and limits: /proc/self/status fields, the address-space cap, dying with the parent.

The CPU stand-ins for device memory (the OOM probe's budget, the sweep's per-cell budget, host peak RSS)
all read the same status file and cap the same limit, so they read and cap it here.
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
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            # /proc/PID/stat: "pid (comm) state ppid pgrp …"; comm may hold spaces, so split after its ')'.
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
            if int(fields[2]) == process_group:
                total += int(fields[21]) * resource.getpagesize()  # rss, in pages
    return total


def host_memory_bytes() -> int:
    """Physical memory of this machine."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


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
    mapped = status_bytes("VmSize")
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
