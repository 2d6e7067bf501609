"""Time from the database clock, never Python's: every lease deadline and timestamp is computed by the
database that stores it, so workers and server processes with skewed clocks still agree.

`db_now(offset_seconds)` compiles per dialect. SQLite stores timestamps as text, so every SQLite
timestamp is written in one fixed format (millisecond precision) and text comparison orders correctly.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import DateTime
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import TypeDecorator


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every dialect (SQLite hands back naive values)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value


class db_now(FunctionElement[datetime]):  # lower case: it reads as the SQL function it is
    """The database's current UTC time, plus `offset_seconds` (may be negative)."""

    type = UtcDateTime()
    inherit_cache = True
    name = "db_now"

    def __init__(self, offset_seconds: float = 0) -> None:
        # The offset is rendered into the SQL text; only numbers from our own settings reach it.
        self.offset_seconds = float(offset_seconds)
        super().__init__()

    # Part of the statement cache key, so statements with different offsets are compiled separately.
    # Not ClassVar: SQLAlchemy declares it as an instance attribute on the base class, so mypy refuses one.
    _traverse_internals: list[tuple[str, InternalTraversal]] = [  # noqa: RUF012
        ("offset_seconds", InternalTraversal.dp_plain_obj)
    ]


@compiles(db_now, "sqlite")
def _sqlite_now(element: db_now, compiler: SQLCompiler, **kw: Any) -> str:
    return f"strftime('%Y-%m-%d %H:%M:%f', 'now', '{element.offset_seconds:+.3f} seconds')"


@compiles(db_now, "postgresql")
def _postgresql_now(element: db_now, compiler: SQLCompiler, **kw: Any) -> str:
    # now() is the transaction's start time: one consistent instant per statement's transaction.
    return f"(now() + interval '{element.offset_seconds:.3f} seconds')"
