"""Bounded field types shared by the whole contract.

Every value a client can send has a limit that fits real use, so a hostile or mistyped document is a 422
naming the field instead of a job that holds a GPU for days, a row the database cannot store (ids past
its integer range, NUL bytes on PostgreSQL, names past a column's length) or a result nobody can read
back (NaN is not JSON).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    Field,
    StringConstraints,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import PydanticCustomError

# Ids are INTEGER columns on both backends: SQLite would raise OverflowError and PostgreSQL
# NumericValueOutOfRange past 2**31 - 1.
MAX_DB_ID = 2**31 - 1
# Names match the String(200) columns (job and worker names, principals).
MAX_NAME_LENGTH = 200
# Free text a person writes or a worker reports (progress messages, kernel names, hostnames).
MAX_LABEL_LENGTH = 200
MAX_MESSAGE_LENGTH = 2000
MAX_IDEMPOTENCY_KEY_LENGTH = 200
# A job's `gpu:` (a part of a GPU's name, `H100`): the server stores it as a requirement in a String(100) column.
MAX_GPU_NAME_LENGTH = 64
# A worker label (`nvlink`, `team-a`): the server stores a job's as a requirement in a String(100) column.
MAX_WORKER_LABEL_LENGTH = 64
# Labels one worker carries, or one job asks for: a handful in real use.
MAX_WORKER_LABELS = 16
WORKER_LABEL = re.compile(r"[a-z0-9][a-z0-9._-]*")
# Whole measured runs of one row, whose spread gives its 95% interval (the worker's t table covers every
# number of degrees of freedom below this).
MAX_REPEATS = 100
# A seed is any 64-bit value torch and numpy accept.
MAX_SEED = 2**63 - 1
# How long finished jobs may be kept, in days: at most a century.
MAX_RETENTION_DAYS = 36_500
# A URL's scheme (RFC 3986, section 3.1: a letter, then letters, digits, '+', '-' or '.') followed by `://`.
URL_START = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")


def _no_nul(value: str) -> str:
    # PostgreSQL text cannot hold U+0000, so such a value would fail at the database instead of here.
    if "\x00" in value:
        raise ValueError("must not contain NUL characters (U+0000)")
    return value


def _printable_ascii(value: str) -> str:
    # What an HTTP header carries as it is: no control characters, nothing a proxy might re-encode.
    if not all(" " <= character <= "~" for character in value):
        raise ValueError("must be printable ASCII characters only (space to '~')")
    return value


def _worker_label(value: str) -> str:
    if not WORKER_LABEL.fullmatch(value):
        raise PydanticCustomError(
            "worker_label", "a label is letters, digits, '.', '_' and '-', starting with a letter or digit; "
                            "got {value!r}", {"value": value})
    return value


def _each_label_once(labels: list[str]) -> list[str]:
    # A repeat means nothing more; dropping it keeps `[nvlink, NVLink]` from reading as two requirements.
    return list(dict.fromkeys(labels))


def refusing_urls(instead: str) -> AfterValidator:
    """A check that a file or directory name is not written as a URL (`file:///…`, `https://…`, `s3://…`).

    A worker reads only from the roots its operator configured; a URL could only be meant to fetch from
    somewhere else, so it is refused with what to write `instead`.
    """

    def check(value: str) -> str:
        if URL_START.match(value):
            raise PydanticCustomError("url_not_accepted", f"URLs are not accepted; {instead}")
        return value

    return AfterValidator(check)


NoNul = AfterValidator(_no_nul)
DbId = Annotated[int, Field(ge=1, le=MAX_DB_ID)]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_LENGTH), NoNul]
Label = Annotated[str, Field(max_length=MAX_LABEL_LENGTH), NoNul]
Message = Annotated[str, Field(max_length=MAX_MESSAGE_LENGTH), NoNul]
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]
# A file or directory name in a spec; where it may point is the worker's decision (its roots).
PathName = Annotated[str, Field(min_length=1, max_length=1024), NoNul]
# A client's key for one submit (the `Idempotency-Key` header), as long as the jobs.idempotency_key column.
IdempotencyKey = Annotated[str, Field(min_length=1, max_length=MAX_IDEMPOTENCY_KEY_LENGTH),
                           AfterValidator(_printable_ascii)]
# A lease token is what `secrets.token_urlsafe(24)` makes (32 characters); 64 is the column's width.
LeaseToken = Annotated[str, Field(min_length=1, max_length=64), NoNul]
# Part of a GPU's name as workers advertise it (`H100`, `RTX 4090`), matched in any case.
GpuName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_GPU_NAME_LENGTH),
                    AfterValidator(_printable_ascii)]
# A worker's label, written by its operator and named by jobs that must run on such a worker; matched in
# any case, so it is kept in lower case.
WorkerLabel = Annotated[str, StringConstraints(strip_whitespace=True, to_lower=True, min_length=1,
                                               max_length=MAX_WORKER_LABEL_LENGTH), AfterValidator(_worker_label)]
WorkerLabels = Annotated[list[WorkerLabel], Field(max_length=MAX_WORKER_LABELS), AfterValidator(_each_label_once)]


def one_or_list(expected: str, item: str) -> WrapValidator:
    """A field taking one value or a list of them: one clear message instead of one per member of the union
    (`expected` says what it takes), and no value listed twice (`item` names one in that message)."""
    def check(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            values = handler(value)
        except ValidationError:
            raise ValueError(f"must be {expected}; got {repr(value)[:100]}") from None
        if isinstance(values, list) and len(set(values)) != len(values):
            raise ValueError(f"lists {item} twice: {values}")
        return values

    return WrapValidator(check)
