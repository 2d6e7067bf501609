"""Batch sizes as a spec writes them: a number of rows, `auto`, `auto:N`, or a list of them (a curve)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, ValidatorFunctionWrapHandler, WithJsonSchema, WrapValidator

MAX_BATCH_SIZE = 1_048_576
MAX_BATCH_SIZES = 16
MAX_AUTO_TIMES = 16
# `auto:N` (lm-eval-harness's `--batch_size auto:N`): the OOM probe chooses a size N times over the data's
# lengths, each for its share of the sequences (see auto_times).
AUTO_TIMES_PATTERN = rf"^auto:([1-9]|1[0-{MAX_AUTO_TIMES - 10}])$"
AutoTimes = Annotated[str, Field(pattern=AUTO_TIMES_PATTERN)]
# One batch size: rows (for packed, a token budget in units of max_length rows), or `auto` / `auto:N` for the
# OOM probe.
BatchSize = Annotated[int, Field(ge=1, le=MAX_BATCH_SIZE)] | Literal["auto"] | AutoTimes
# The published JSON Schema of a batch size says `oneOf` with `enum: ["auto"]`, which means the same as the
# `anyOf` with `const: "auto"` that pydantic derives, but which client generators read: openapi-python-client,
# for one, turns a `const` branch into a check that refuses every integer. Validation is pydantic's either way.
ONE_BATCH_SIZE_SCHEMA: dict[str, Any] = {"oneOf": [
    {"type": "integer", "minimum": 1, "maximum": MAX_BATCH_SIZE},
    {"type": "string", "enum": ["auto"]},
    {"type": "string", "pattern": AUTO_TIMES_PATTERN},
]}
BATCH_SIZE_CHOICE_SCHEMA: dict[str, Any] = {
    "oneOf": [*ONE_BATCH_SIZE_SCHEMA["oneOf"],
              {"type": "array", "items": ONE_BATCH_SIZE_SCHEMA, "minItems": 1, "maxItems": MAX_BATCH_SIZES}],
    "description": f"rows per batch (for packed, a token budget in units of max_length rows) from 1 to "
                   f"{MAX_BATCH_SIZE}, `auto` (the largest that fits, found by the OOM probe), `auto:N` (N from 1 "
                   f"to {MAX_AUTO_TIMES}: binned chooses the largest N times, for N length ranges of the data; "
                   f"other layouts' batches share one worst case, so one size), or a list of up to "
                   f"{MAX_BATCH_SIZES} of them, each measured",
}


def _one_batch_size_error(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """One clear message for the field, instead of one per member of the union, and no size listed twice."""
    try:
        sizes = handler(value)
    except ValidationError:
        raise ValueError(f"must be a size from 1 to {MAX_BATCH_SIZE}, 'auto', 'auto:N' (N from 1 to "
                         f"{MAX_AUTO_TIMES}), or a list of up to {MAX_BATCH_SIZES} of them (e.g. [16, 64, auto]); "
                         f"got {repr(value)[:100]}") from None
    if isinstance(sizes, list) and len(set(sizes)) != len(sizes):
        raise ValueError(f"lists a size twice: {sizes}")
    return sizes


# A list measures every strategy at each size (a batch-size curve); it may include `auto`.
BatchSizeChoice = Annotated[
    BatchSize | Annotated[list[BatchSize], Field(min_length=1, max_length=MAX_BATCH_SIZES)],
    WrapValidator(_one_batch_size_error),
    WithJsonSchema(BATCH_SIZE_CHOICE_SCHEMA),
]


def sizes_of(choice: BatchSizeChoice) -> list[int | str]:
    return list(choice) if isinstance(choice, list) else [choice]


def auto_times(size: int | str) -> int | None:
    """How many times the OOM probe chooses this size: 1 for `auto`, N for `auto:N`, None for a number."""
    if isinstance(size, int):
        return None
    return 1 if size == "auto" else int(size.removeprefix("auto:"))
