"""Run one piece of GPU work in a spawned child process, and say how it ended.

The worker's supervisor, the OOM probe and the attention sweep all go through `run_in_child`, so a CUDA
OOM, a sticky CUDA error, a segfault or a hang costs one child and never the caller. The child is
spawned (never forked: forking after CUDA initialisation is unsafe), becomes its own process-group
leader so a kill reaches anything it started (compile workers), applies the environment it was given
*before* importing the target (so `PYTORCH_CUDA_ALLOC_CONF` and `CUDA_VISIBLE_DEVICES` take effect), and
reports progress and its result over a pipe. The parent blocks on the pipe and the process sentinel
together: no busy-wait, no files left in /tmp. `ChildSession` keeps one such child for several calls of
the same target until one of them fails, so work the target built once is not rebuilt per call.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Literal

from padbench.worker.runtime.procfs import die_with_parent
from padbench.worker.runtime.progress import ProgressFn

Outcome = Literal["ok", "oom", "cuda_error", "error", "timeout", "crash", "cancelled"]

# Messages that mean "the device (or the CPU budget) ran out of memory", matched after the exception
# type, because some libraries (flash-attn, cuBLAS) surface OOM as a plain RuntimeError.
_OOM_MARKERS = ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "cannot allocate memory")
# Errors after which the CUDA context is unusable; only a new process recovers.
_STICKY_CUDA_MARKERS = ("illegal memory access", "device-side assert", "CUDA error", "unspecified launch failure")


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


def classify_exception(error: BaseException) -> Outcome:
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError":
        return "oom"
    if any(marker.lower() in text.lower() for marker in _OOM_MARKERS):
        return "oom"
    if any(marker in text for marker in _STICKY_CUDA_MARKERS):
        return "cuda_error"
    return "error"


def _resolve(target: str) -> Callable[..., Any]:
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def _send_error(connection: Connection, error: BaseException) -> None:
    detail = f"{type(error).__name__}: {error}"
    outcome = classify_exception(error)
    # Drop the frame references before sending, so a failed allocation's tensors can be freed.
    formatted = traceback.format_exc()
    del error
    connection.send(("error", (outcome, detail, formatted)))
    connection.close()


def _enter_child(env: Mapping[str, str]) -> None:
    os.setsid()  # own process group: the parent's killpg reaches our descendants too
    die_with_parent()
    os.environ.update(env)


def _child_main(connection: Connection, target: str, args: tuple[Any, ...], env: Mapping[str, str]) -> None:
    _enter_child(env)
    try:
        value = _resolve(target)(ChildContext(connection), *args)
    except BaseException as error:  # report everything, including KeyboardInterrupt and MemoryError
        _send_error(connection, error)
        sys.exit(1)
    connection.send(("result", value))
    connection.close()


def _session_main(connection: Connection, target: str, env: Mapping[str, str]) -> None:
    """Serve calls of `target` until told to stop (None) or the parent goes; the first failure ends the child,
    so whatever state it left (a fragmented allocator, a sticky CUDA error) dies with it."""
    _enter_child(env)
    function = _resolve(target)
    context = ChildContext(connection)
    while True:
        try:
            args = connection.recv()
        except EOFError:
            return
        if args is None:
            return
        try:
            value = function(context, *args)
        except BaseException as error:
            _send_error(connection, error)
            sys.exit(1)
        connection.send(("result", value))


def _kill_group(process: multiprocessing.process.BaseProcess) -> None:
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


def _await_reply(receiver: Connection, process: multiprocessing.process.BaseProcess, started: float, *,
                 timeout_s: float | None, on_progress: ProgressFn | None, should_stop: Callable[[], bool] | None,
                 poll_s: float, join_on_result: bool) -> ChildReport:
    """Wait for the child's result or error, forwarding its progress; kill it past the deadline or on stop."""
    deadline = None if timeout_s is None else started + timeout_s

    def report(outcome: Outcome, **fields: Any) -> ChildReport:
        return ChildReport(outcome=outcome, seconds=time.monotonic() - started, **fields)

    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            _kill_group(process)
            return report("timeout", error=f"child ran past its {timeout_s:.0f} s limit")
        if should_stop is not None and should_stop():
            _kill_group(process)
            return report("cancelled", error="stopped by the parent")
        ready = wait([receiver, process.sentinel], timeout=min(poll_s, remaining or poll_s))
        if receiver in ready:
            try:
                kind, payload = receiver.recv()
            except EOFError:
                process.join(timeout=5)
                return report("crash", error=_describe_exit(process.exitcode), exit_code=process.exitcode)
            if kind == "progress" and on_progress is not None:
                on_progress(*payload)
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
) -> ChildReport:
    """Run `module:function(ctx, *args)` in a spawned child; never raises for anything the child does.

    `should_stop` is consulted every `poll_s` seconds (e.g. a cancel seen on a heartbeat); when it
    returns True the child's process group is killed and the outcome is "cancelled".
    """
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child_main, args=(sender, target, args, dict(env or {})), daemon=False)
    started = time.monotonic()
    process.start()
    sender.close()  # so the parent sees EOF when the child dies
    try:
        return _await_reply(receiver, process, started, timeout_s=timeout_s, on_progress=on_progress,
                            should_stop=should_stop, poll_s=poll_s, join_on_result=True)
    finally:
        if process.is_alive():
            _kill_group(process)
        receiver.close()


class ChildSession:
    """One spawned child that serves several calls of `module:function(ctx, *args)` in turn.

    What the target builds once (a model, imported libraries) is reused by the next call, so a call costs
    its own work rather than a process start. Isolation is kept where it matters: a call that fails in any
    way — out of memory included — ends that child, and the next call starts a fresh one (`starts` counts
    them). Use as a context manager; closing stops the child.
    """

    def __init__(self, target: str, *, env: Mapping[str, str] | None = None,
                 on_progress: ProgressFn | None = None, poll_s: float = 0.5) -> None:
        self.target, self.env, self.on_progress, self.poll_s = target, dict(env or {}), on_progress, poll_s
        self.starts = 0
        self._process: multiprocessing.process.BaseProcess | None = None
        self._connection: Connection | None = None

    def __enter__(self) -> ChildSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> tuple[multiprocessing.process.BaseProcess, Connection]:
        context = multiprocessing.get_context("spawn")
        parent_end, child_end = context.Pipe(duplex=True)
        process = context.Process(target=_session_main, args=(child_end, self.target, self.env), daemon=False)
        process.start()
        child_end.close()  # so the parent sees EOF when the child dies
        self._process, self._connection = process, parent_end
        self.starts += 1
        return process, parent_end

    def call(self, *args: Any, timeout_s: float | None = None) -> ChildReport:
        """One call in the live child (started now if there is none); never raises for what the child does."""
        started = time.monotonic()
        if self._process is None or self._connection is None or not self._process.is_alive():
            self.close()
            process, connection = self._start()
        else:
            process, connection = self._process, self._connection
        with contextlib.suppress(OSError):  # the child died between calls: the wait below reports how
            connection.send(args)
        reply = _await_reply(connection, process, started, timeout_s=timeout_s, on_progress=self.on_progress,
                             should_stop=None, poll_s=self.poll_s, join_on_result=False)
        if reply.outcome != "ok":
            self.close()
        return reply

    def close(self) -> None:
        process, connection = self._process, self._connection
        self._process = self._connection = None
        if connection is not None:
            with contextlib.suppress(OSError):
                connection.send(None)
            connection.close()
        if process is not None:
            process.join(timeout=5)
            if process.is_alive():
                _kill_group(process)
