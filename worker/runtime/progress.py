"""How work reports progress: a fraction of the whole (0..1) and a short message for the person waiting."""

from __future__ import annotations

from collections.abc import Callable

ProgressFn = Callable[[float, str], None]


def progress_span(progress: ProgressFn, start: float, end: float) -> ProgressFn:
    """A progress callback whose 0..1 maps onto start..end of the caller's bar."""
    return lambda fraction, message: progress(start + (end - start) * min(max(fraction, 0.0), 1.0), message)
