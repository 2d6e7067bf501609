"""One spawned child serving several calls of the same target, for work whose set-up dwarfs each call.

The OOM probe builds a model per child, which costs most of a probe; trying the next size in the same
child skips that. Isolation is kept where it matters: the child is spawned and supervised exactly as
`run_in_child`'s, and a call that fails in any way — out of memory included — ends it, so whatever state
the failure left (a fragmented allocator, a sticky CUDA error) dies with it and the next call starts a fresh
one. With `prestart`, a spare child is kept ready with the target's imports done (it touches no device
until it is handed a call), so a fresh start after a failure skips the imports too.

A call may name another target than the session's (`call(..., target=...)`): the OOM probe reads the device
in the child that then probes it, rather than paying a process start for that one reading.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import sys
import time
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from typing import Any

from padbench.worker.runtime.isolation import (
    ChildContext,
    ChildReport,
    await_reply,
    enter_child,
    kill_group,
    resolve_target,
    send_error,
)
from padbench.worker.runtime.progress import ProgressFn


def _session_main(connection: Connection, target: str, env: Mapping[str, str]) -> None:
    """Serve calls until told to stop (None) or the parent goes; each call is (target, args). The session's
    own target is imported first, so a spare is ready for it. The first failure ends the child, so whatever
    state it left (a fragmented allocator, a sticky CUDA error) dies with it."""
    enter_child(env)
    try:
        functions = {target: resolve_target(target)}
    except BaseException as error:  # e.g. an import error: reported to the first call, as run_in_child would
        with contextlib.suppress(EOFError):
            connection.recv()
        send_error(connection, error)
        sys.exit(1)
    context = ChildContext(connection)
    while True:
        try:
            message = connection.recv()
        except EOFError:
            return
        if message is None:
            return
        called, args = message
        try:
            function = functions.get(called) or functions.setdefault(called, resolve_target(called))
            value = function(context, *args)
        except BaseException as error:
            send_error(connection, error)
            sys.exit(1)
        connection.send(("result", value))


Child = tuple[multiprocessing.process.BaseProcess, Connection]


class ChildSession:
    """Calls of `module:function(ctx, *args)` in a spawned child that stays for the next call while calls
    succeed (`reuse=False`: a fresh child per call, as `run_in_child`). `starts` counts the children that
    served a call. Use as a context manager; closing stops the children.
    """

    def __init__(self, target: str, *, env: Mapping[str, str] | None = None, reuse: bool = True,
                 prestart: bool = False, on_progress: ProgressFn | None = None, poll_s: float = 0.5) -> None:
        self.target, self.env, self.on_progress, self.poll_s = target, dict(env or {}), on_progress, poll_s
        self.reuse, self.prestart = reuse, prestart
        self.starts = 0
        self._live: Child | None = None
        self._spare: Child | None = None

    def __enter__(self) -> ChildSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _spawn(self) -> Child:
        context = multiprocessing.get_context("spawn")
        parent_end, child_end = context.Pipe(duplex=True)
        process = context.Process(target=_session_main, args=(child_end, self.target, self.env), daemon=False)
        process.start()
        child_end.close()  # so the parent sees EOF when the child dies
        return process, parent_end

    def _next_child(self) -> Child:
        spare, self._spare = self._spare, None
        child = spare if spare is not None and spare[0].is_alive() else self._spawn()
        if spare is not None and child is not spare:
            _stop(spare)
        if self.prestart:
            self._spare = self._spawn()  # imports while this child works, ready for the next fresh start
        self.starts += 1
        return child

    def call(self, *args: Any, target: str | None = None, timeout_s: float | None = None,
             should_stop: Callable[[], bool] | None = None) -> ChildReport:
        """One call of `target` (the session's by default) in the live child, a fresh one if there is none;
        never raises for what the child does. `should_stop`, asked every `poll_s`, ends the child ("cancelled")."""
        started = time.monotonic()
        if self._live is None or not self._live[0].is_alive():
            self._end_live()
            self._live = self._next_child()
        process, connection = self._live
        with contextlib.suppress(OSError):  # the child died between calls: the wait below reports how
            connection.send((target or self.target, args))
        reply = await_reply(connection, process, started, timeout_s=timeout_s, on_progress=self.on_progress,
                            should_stop=should_stop, poll_s=self.poll_s, join_on_result=False)
        if reply.outcome != "ok" or not self.reuse:
            self._end_live()
        return reply

    def retire(self) -> None:
        """End the live child (waiting until it has gone, so its memory is free) but keep the spare: the next
        call starts afresh without paying for the imports."""
        self._end_live()

    def _end_live(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            _stop(live)

    def close(self) -> None:
        self._end_live()
        spare, self._spare = self._spare, None
        if spare is not None:  # it never touched a device and may still be importing: no need to wait for it
            spare[1].close()
            kill_group(spare[0])


def _stop(child: Child) -> None:
    """Ask the child to end (it finishes nothing more), then make sure it has."""
    process, connection = child
    with contextlib.suppress(OSError):
        connection.send(None)
    connection.close()
    process.join(timeout=5)
    if process.is_alive():
        kill_group(process)
