"""An error in one line: what a table cell, a progress message or a refusal can show of it.

Library errors (CUDA, transformers, the flash kernels) run to many lines — tracebacks of their own, hints,
whole tensor shapes — and the first line is the one that says what went wrong.
"""

from __future__ import annotations


def first_line(message: BaseException | str | None, limit: int = 300) -> str:
    """The first line of an error or its message, at most `limit` characters; '' when it says nothing."""
    return next(iter(str(message or "").strip().splitlines()), "")[:limit]
