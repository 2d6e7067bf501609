"""A request's database work ends in the thread that did it, before its response is serialized.

FastAPI closes a `yield` dependency only after the response body is serialized, and for a sync endpoint
serialization needs a worker thread again. A session closed there holds its pooled connection (and, on
SQLite, the write lock) while it waits for a thread, and threads waiting for a connection hold the very
tokens it waits for: with as many busy requests as threads the server stops until the pool times out.

`UnitOfWorkRoute` wraps each sync endpoint so that the sessions it received are committed (rolled back on
an exception) and closed in the endpoint's own thread, right after it returns. Nothing is held across a
thread hop, a commit error reaches the exception handlers like any other error, and a client that reads
its own write right after the response always sees it committed. On SQLite a write session also takes
the process's writer lock for the endpoint's run (see `padbench.server.db.engine`), so concurrent writers
wait on a lock that wakes them at once instead of SQLite's polling busy handler.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from typing import Any

from fastapi.routing import APIRoute
from sqlalchemy.orm import Session

from padbench.server.db.engine import WRITE_LOCK_INFO_KEY


@contextmanager
def ended_with_the_call(sessions: list[Session]) -> Iterator[None]:
    """Commit `sessions` when the block succeeds, roll them back when it raises; close them either way."""
    try:
        yield
        for session in sessions:
            session.commit()
    except BaseException:
        for session in sessions:
            session.rollback()
        raise
    finally:
        for session in sessions:
            session.close()


def write_lock(session: Session) -> AbstractContextManager[Any]:
    lock = session.info.get(WRITE_LOCK_INFO_KEY)
    return lock if lock is not None else nullcontext()


def ending_sessions_on_return(endpoint: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(endpoint)  # FastAPI reads the parameters through __wrapped__
    def run(**arguments: Any) -> Any:
        sessions = [value for value in arguments.values() if isinstance(value, Session)]
        with ExitStack() as stack:
            for session in sessions:
                stack.enter_context(write_lock(session))
            stack.enter_context(ended_with_the_call(sessions))
            return endpoint(**arguments)

    return run


class UnitOfWorkRoute(APIRoute):
    """An APIRoute whose sync endpoint ends its database sessions before it returns (see the module doc)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        if not inspect.iscoroutinefunction(endpoint):
            endpoint = ending_sessions_on_return(endpoint)
        super().__init__(path, endpoint, **kwargs)
