"""Reading a job spec from a YAML or JSON file, with errors a person can act on."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from padbench.contract.kinds import parse_job_spec
from padbench.contract.spec import JobSpecBase, StrictModel

QUOTED = re.compile(r"'([^']*)'")


class SpecError(Exception):
    """A spec file that cannot be read or does not validate; the message names field and reason."""


def _spec_keys() -> set[str]:
    """Every key any part of a job spec accepts (the models' field names), for "did you mean" hints."""
    keys: set[str] = set()
    pending: list[type[BaseModel]] = [StrictModel]
    while pending:
        model = pending.pop()
        keys.update(model.model_fields)
        pending.extend(model.__subclasses__())
    return keys


def did_you_mean(item: Any) -> str:
    """` (did you mean 'max_length'?)` for a mistyped key or choice; empty when nothing is close."""
    loc = item.get("loc") or ("",)
    if item["type"] == "extra_forbidden":
        typed, choices = str(loc[-1]), _spec_keys()
    elif item["type"] == "literal_error" and isinstance(item.get("input"), str):
        typed, choices = item["input"], set(QUOTED.findall(str(item.get("ctx", {}).get("expected", ""))))
    else:
        return ""
    close = difflib.get_close_matches(typed, sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def format_validation_error(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        location = ".".join(str(part) for part in item["loc"] if not str(part).startswith("function-"))
        lines.append(f"{location or '(spec)'}: {item['msg']}{did_you_mean(item)}")
    return "; ".join(lines)


def load_spec_document(path: str | Path) -> dict[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise SpecError(f"cannot read spec {path}: {error.strerror}") from error
    try:
        document = yaml.safe_load(text)  # YAML is a superset of JSON
    except yaml.YAMLError as error:
        raise SpecError(f"{path} is not valid YAML/JSON: {error}") from error
    if not isinstance(document, dict):
        raise SpecError(f"{path}: a job spec must be a mapping, not {type(document).__name__}")
    return document


def load_spec(path: str | Path) -> JobSpecBase:
    document = load_spec_document(path)
    try:
        return parse_job_spec(document)
    except ValidationError as error:
        raise SpecError(f"{path}: {format_validation_error(error)}") from error
