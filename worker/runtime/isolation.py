"""Run one piece of GPU work in a spawned child process, and say how it ended.

The worker's supervisor, the OOM probe and the attention sweep all go through `run_in_child`, so a CUDA
OOM, a sticky CUDA error, a segfault or a hang costs one child and never the caller. The child is
spawned (never forked: forking after CUDA initialisation is unsafe), becomes its own process-group
leader so a kill reaches anything it started (compile workers), applies the environment it was given
*before* importing the target (so `PYTORCH_CUDA_ALLOC_CONF` and `CUDA_VISIBLE_DEVICES` take effect), and
reports progress and its result over a pipe. The parent blocks on the pipe and the process sentinel
together: no busy-wait, no files left in /tmp. `padbench.worker.runtime.child_session` keeps one such
child for several calls, on the same helpers.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import pickle
import signal
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Literal

from padbench.worker.runtime.procfs import die_with_parent, group_rss_bytes
from padbench.worker.runtime.progress import ProgressFn

FinishedFn = Callable[[Any], None]
Outcome = Literal["ok", "oom", "cuda_error", "error", "timeout", "crash", "cancelled"]

# Messages that mean "the device (or the CPU budget) ran out of memory", matched after the exception
# type, because some libraries (flash-attn, cuBLAS) surface OOM as a plain RuntimeError.
_OOM_MARKERS = ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "cannot allocate memory")
# Errors after which the CUDA context is unusable; only a new process recovers.
_STICKY_CUDA_MARKERS = ("illegal memory access", "device-side assert", "CUDA error", "unspecified launch failure")


class SpecProblem(ValueError):
    """What the spec asks cannot be done here. The message names the spec field and the reason in the words
    of whoever wrote the spec, so it is reported as it stands, without this class's name."""


def describe_exception(error: BaseException) -> str:
    """One line for a report: the message of a spec problem; the type and message of anything else."""
    return str(error) if isinstance(error, SpecProblem) else f"{type(error).__name__}: {error}"


class LatestPartial:
    """The last partial result a job's child handed over (`ctx.finished`): the rows kept when a cancel, a time
    limit or the child's death stops the job. Pass `keep` as `on_finished`."""

    def __init__(self) -> None:
        self.latest: dict[str, Any] | None = None

    def keep(self, document: Any) -> None:
        self.latest = document


@dataclass(frozen=True)
class ChildReport:
    outcome: Outcome
    value: Any = None  # the target's return value when outcome == "ok"
    error: str | None = None  # one line: exception type and message, or how the process ended
    traceback: str | None = None
    exit_code: int | None = None
    seconds: float = 0.0


class ChildContext:
    """Handed to the target as its first argument: the only channel back to the parent."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def progress(self, fraction: float, message: str = "") -> None:
        self._connection.send(("progress", (float(fraction), message)))

    def finished(self, value: Any) -> None:
        """Hand the parent a piece of work as soon as it is done (picklable), so that it is kept even when
        the child is stopped before its result; what a piece is, the target and its caller agree on."""
        self._connection.send(("finished", value))


def classify_exception(error: BaseException) -> Outcome:
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError":
        return "oom"
    if any(marker.lower() in text.lower() for marker in _OOM_MARKERS):
        return "oom"
    if any(marker in text for marker in _STICKY_CUDA_MARKERS):
        return "cuda_error"
    return "error"


def resolve_target(target: str) -> Callable[..., Any]:
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def send_error(connection: Connection, error: BaseException) -> None:
    detail = describe_exception(error)
    outcome = classify_exception(error)
    # Drop the frame references before sending, so a failed allocation's tensors can be freed.
    formatted = traceback.format_exc()
    del error
    connection.send(("error", (outcome, detail, formatted)))
    connection.close()


def enter_child(env: Mapping[str, str], workdir: str | None = None) -> None:
    os.setsid()  # own process group: the parent's killpg reaches our descendants too
    die_with_parent()
    # Whatever a job writes (tokenized data, probe limits) is readable by this user only: it may copy data
    # that was itself private.
    os.umask(0o077)
    if workdir is not None:
        os.chdir(workdir)
    os.environ.update(env)


def _child_main(connection: Connection, target: str, args: tuple[Any, ...], env: Mapping[str, str],
                workdir: str | None) -> None:
    enter_child(env, workdir)
    try:
        value = resolve_target(target)(ChildContext(connection), *args)
    except BaseException as error:  # report everything, including KeyboardInterrupt and MemoryError
        send_error(connection, error)
        sys.exit(1)
    connection.send(("result", value))
    connection.close()


def kill_group(process: multiprocessing.process.BaseProcess) -> None:
    if process.pid is None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        process.join(timeout=3)
        if not process.is_alive():
            return


def _describe_exit(code: int | None) -> str:
    if code is not None and code < 0:
        return f"child killed by signal {signal.Signals(-code).name}"
    return f"child exited with code {code} without a result"


def _drain_finished(receiver: Connection, on_finished: FinishedFn | None) -> None:
    """Deliver the pieces a stopped child handed over that are still unread in the pipe, so a stop that
    lands just after a piece was sent does not lose it. A message the kill cut short ends the drain."""
    if on_finished is None:
        return
    try:
        while receiver.poll():
            kind, payload = receiver.recv()
            if kind == "finished":
                on_finished(payload)
    except (EOFError, OSError, pickle.UnpicklingError):
        return


def await_reply(receiver: Connection, process: multiprocessing.process.BaseProcess, started: float, *,
                 timeout_s: float | None, on_progress: ProgressFn | None, should_stop: Callable[[], bool] | None,
                 poll_s: float, join_on_result: bool, memory_cap_bytes: int | None = None,
                 on_finished: FinishedFn | None = None) -> ChildReport:
    """Wait for the child's result or error, forwarding its progress and finished pieces; kill it past the
    deadline, on stop, or when its process group's resident memory passes `memory_cap_bytes`."""
    deadline = None if timeout_s is None else started + timeout_s

    def report(outcome: Outcome, **fields: Any) -> ChildReport:
        return ChildReport(outcome=outcome, seconds=time.monotonic() - started, **fields)

    def stopped(outcome: Outcome, error: str) -> ChildReport:
        kill_group(process)
        _drain_finished(receiver, on_finished)
        return report(outcome, error=error)

    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return stopped("timeout", f"child ran past its {timeout_s:.0f} s limit")
        if should_stop is not None and should_stop():
            return stopped("cancelled", "stopped by the parent")
        if memory_cap_bytes is not None and process.pid is not None:
            resident = group_rss_bytes(process.pid)
            if resident > memory_cap_bytes:
                return stopped("oom", f"the job's processes held {resident / 2**30:.2f} GiB of host memory, "
                               f"over the worker's cap of {memory_cap_bytes / 2**30:.2f} GiB")
        ready = wait([receiver, process.sentinel], timeout=min(poll_s, remaining or poll_s))
        if receiver in ready:
            try:
                kind, payload = receiver.recv()
            except EOFError:
                process.join(timeout=5)
                return report("crash", error=_describe_exit(process.exitcode), exit_code=process.exitcode)
            if kind == "progress" and on_progress is not None:
                on_progress(*payload)
            elif kind == "finished" and on_finished is not None:
                on_finished(payload)
            elif kind == "result":
                if join_on_result:
                    process.join(timeout=30)
                return report("ok", value=payload, exit_code=process.exitcode)
            elif kind == "error":
                outcome, detail, formatted = payload
                process.join(timeout=30)
                return report(outcome, error=detail, traceback=formatted, exit_code=process.exitcode)
        elif process.sentinel in ready and not receiver.poll():
            process.join(timeout=5)
            return report("crash", error=_describe_exit(process.exitcode), exit_code=process.exitcode)


def run_in_child(
    target: str,
    *args: Any,
    timeout_s: float | None = None,
    env: Mapping[str, str] | None = None,
    on_progress: ProgressFn | None = None,
    should_stop: Callable[[], bool] | None = None,
    poll_s: float = 0.5,
    memory_cap_bytes: int | None = None,
    workdir: str | None = None,
    on_finished: FinishedFn | None = None,
) -> ChildReport:
    """Run `module:function(ctx, *args)` in a spawned child; never raises for anything the child does.

    `should_stop` is consulted every `poll_s` seconds (e.g. a cancel seen on a heartbeat); when it
    returns True the child's process group is killed and the outcome is "cancelled". The child's whole
    process group's resident memory is checked as often: past `memory_cap_bytes` it is killed ("oom").
    `on_finished` receives, in order, each value the child hands over with `ctx.finished` before it ends;
    they are all delivered before the report, however the child ends.
    The cap is watched from outside rather than set with RLIMIT_AS because CUDA reserves far more address
    space than it uses, and RSS is what actually starves the host.
    """
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child_main, args=(sender, target, args, dict(env or {}), workdir),
                              daemon=False)
    started = time.monotonic()
    process.start()
    sender.close()  # so the parent sees EOF when the child dies
    try:
        return await_reply(receiver, process, started, timeout_s=timeout_s, on_progress=on_progress,
                            should_stop=should_stop, poll_s=poll_s, join_on_result=True,
                            memory_cap_bytes=memory_cap_bytes, on_finished=on_finished)
    finally:
        if process.is_alive():
            kill_group(process)
        receiver.close()
