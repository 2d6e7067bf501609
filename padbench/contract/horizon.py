"""Lengths of time and of runs as specs write them: a duration (`900`, `15m`, `2h`) and the run a benchmark stands
for (`horizon: 2h`, or a token count, `horizon: 5B tokens`), against which `compile: auto` weighs the compile time.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d)?\s*$")
DURATION_UNITS = {None: 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86_400.0}
TOKENS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kMBT])?\s*tokens?\s*$")
TOKEN_UNITS = {None: 1, "k": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}
MAX_BUDGET_S = 24 * 3600.0


def duration_seconds(value: Any) -> Any:
    """`900`, `"15m"`, `"2h"`, `"90s"` as seconds; anything else is left for the number check to refuse."""
    if isinstance(value, str):
        match = DURATION.match(value)
        if match is None:
            raise ValueError(f"{value!r} is not a duration: write seconds (900) or a number with s, m or h (15m)")
        return float(match[1]) * DURATION_UNITS[match[2]]
    return value


Duration = Annotated[float, BeforeValidator(duration_seconds), Field(gt=0, le=MAX_BUDGET_S), WithJsonSchema({
    "oneOf": [{"type": "number", "exclusiveMinimum": 0, "maximum": MAX_BUDGET_S},
              {"type": "string", "pattern": DURATION.pattern}],
    "description": "seconds, or a number with s, m or h (15m, 2h)"})]


class RunHorizon(BaseModel):
    """How long the run the benchmark stands for lasts: a time or a number of tokens, exactly one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seconds: Annotated[float, Field(gt=0, le=366 * 86_400)] | None = None
    tokens: Annotated[int, Field(ge=1, le=10**16)] | None = None


def _horizon(value: Any) -> Any:
    """`2h` (a duration needs its unit here), `5B tokens`, or a bare number of tokens."""
    if isinstance(value, bool):
        raise ValueError("write a duration with its unit (2h) or a number of tokens (5B tokens)")
    if isinstance(value, int | float):
        return {"tokens": int(value)}
    if isinstance(value, str):
        tokens, duration = TOKENS.match(value), DURATION.match(value)
        if tokens is not None:
            return {"tokens": int(float(tokens[1]) * TOKEN_UNITS[tokens[2]])}
        if duration is not None and duration[2] is not None:
            return {"seconds": float(duration[1]) * DURATION_UNITS[duration[2]]}
        raise ValueError(f"{value!r} is neither a duration with its unit (2h, 90m) nor a number of tokens "
                         "(5B tokens)")
    return value


Horizon = Annotated[RunHorizon, BeforeValidator(_horizon), WithJsonSchema({
    "oneOf": [{"type": "string", "description": "a duration with its unit (2h, 90m) or tokens (5B tokens)"},
              {"type": "integer", "minimum": 1, "description": "tokens"}]})]
