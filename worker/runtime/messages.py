"""An error in one line: what a table cell, a progress message or a refusal can show of it.

Library errors (CUDA, transformers, the flash kernels) run to many lines — tracebacks of their own, hints,
whole tensor shapes — and the first line is the one that says what went wrong.
"""

from __future__ import annotations

import logging


def first_line(message: BaseException | str | None, limit: int = 300) -> str:
    """The first line of an error or its message, at most `limit` characters; '' when it says nothing."""
    return next(iter(str(message or "").strip().splitlines()), "")[:limit]


def failed_row_line(what: str, error: BaseException, limit: int) -> str:
    """A failed row's error as its result keeps it, "Type: first line", at most `limit` characters.

    The whole traceback goes to the job's log (stderr) under `what`: a compiler's error (inductor's lowering, a
    kernel's refusal) is found only from the frames below that line.
    """
    logging.getLogger("padbench.worker").warning("%s failed: %s", what, first_line(error),
                                                 exc_info=(type(error), error, error.__traceback__))
    return f"{type(error).__name__}: {first_line(error, limit)}"[:limit]
