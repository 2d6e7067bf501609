"""Quantities as every table and message of padbench writes them, so a figure reads the same everywhere."""

from __future__ import annotations

MISSING = "—"  # a figure that was not measured: never printed as a number


def format_bytes(count: int | None) -> str:
    if count is None:
        return MISSING
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"
