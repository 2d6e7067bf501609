"""Reading a job spec from a YAML or JSON file, with errors a person can act on."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError

from padbench.contract.kinds import JOB_KINDS, parse_job_spec
from padbench.contract.model_spec import nearest
from padbench.contract.spec import JobSpecBase

QUOTED = re.compile(r"'([^']*)'")
# What each kind's tag (the first part of an error's location, after `spec` on the server) validates.
def spec_kinds() -> dict[str, type[BaseModel]]:
    return {name: kind.spec for name, kind in JOB_KINDS.items()}
# pydantic's labels for errors raised in validators: its own words, not the user's.
VALIDATOR_PREFIXES = ("Value error, ", "Assertion failed, ")


class SpecError(Exception):
    """A spec file that cannot be read or does not validate; the message names field and reason."""


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for argument in get_args(annotation) for model in _models_in(argument)]


def spec_sections(model: type[BaseModel], path: tuple[str, ...] = ()) -> dict[tuple[str, ...], type[BaseModel]]:
    """Every section of a spec kind by its path (`()`, `("data",)`, `("strategies",)`, …)."""
    sections = {path: model}
    for name, field in model.model_fields.items():
        for nested in _models_in(field.annotation):
            sections.update(spec_sections(nested, (*path, name)))
    return sections


def _where_typed(location: tuple[Any, ...]) -> tuple[type[BaseModel], tuple[str, ...], str] | None:
    """(the spec kind, the section's path, the key) of an unknown key's location; None outside a spec."""
    names = [str(part) for part in location if not isinstance(part, int)]
    tags = [index for index, name in enumerate(names) if name in spec_kinds()]
    if not tags or len(names) < tags[0] + 2:
        return None
    inside = names[tags[0] + 1:]
    return spec_kinds()[names[tags[0]]], tuple(inside[:-1]), inside[-1]


def _unknown_key_hint(location: tuple[Any, ...]) -> str | None:
    """The key meant: the same key in another section (written in the wrong place: `repeats` is
    `measurement.repeats`, whatever key here it resembles), else a close one in the same section, else a close one
    in another."""
    where = _where_typed(location)
    if where is None:
        return None
    kind, section, typed = where
    sections = spec_sections(kind)
    elsewhere = {".".join((*path, key)): key for path, model in sections.items() if path != section
                 for key in model.model_fields}
    exact = sorted((dotted for dotted, key in elsewhere.items() if key == typed), key=len)
    if exact:
        return exact[0]
    here = sections.get(section)
    if here is not None and (close := nearest(typed, here.model_fields)):
        return close
    close = nearest(typed, set(elsewhere.values()))
    return min((dotted for dotted, key in elsewhere.items() if key == close), key=len) if close else None


def did_you_mean(item: Any) -> str:
    """` (did you mean 'max_length'?)` for a mistyped key or choice, `'measurement.repeats'` for a key written
    in the wrong section; empty when nothing is close."""
    if item["type"] == "extra_forbidden":
        meant = _unknown_key_hint(tuple(item.get("loc") or ()))
    elif item["type"] == "literal_error" and isinstance(item.get("input"), str):
        meant = nearest(item["input"], set(QUOTED.findall(str(item.get("ctx", {}).get("expected", "")))))
    else:
        meant = None
    return f" (did you mean {meant!r}?)" if meant else ""


def error_message(item: Any) -> str:
    """An error's reason in the user's words: no validator labels, `unknown key` for a key nothing takes, the
    value written beside the choices it missed."""
    if item["type"] == "extra_forbidden":
        return "unknown key"
    if item["type"] == "literal_error" and isinstance(item.get("input"), str):
        return f"{item['input'][:100]!r} is not one of {item.get('ctx', {}).get('expected', 'the choices')}"
    message = str(item["msg"])
    for prefix in VALIDATOR_PREFIXES:
        message = message.removeprefix(prefix)
    return message


def spec_location(location: tuple[Any, ...]) -> str:
    """`data.max_length`, `strategies.1.name`: the keys the user wrote, without the kind's tag or the labels
    pydantic gives validators and union members."""
    parts = [str(part) for part in location if isinstance(part, int) or str(part).isidentifier()]
    if parts and parts[0] in spec_kinds():
        parts = parts[1:]
    return ".".join(parts)


def format_validation_error(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        location = spec_location(tuple(item["loc"]))
        reason = error_message(item) + did_you_mean(item)
        lines.append(f"{location}: {reason}" if location else reason)
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


def check_new_job(document: dict[str, Any], source: str | Path) -> JobSpecBase:
    """The spec of a job about to be run or submitted; SpecError naming `source`, each field and why."""
    try:
        spec = parse_job_spec(document)
    except ValidationError as error:
        raise SpecError(f"{source}: {format_validation_error(error)}") from error
    problems = spec.new_job_problems()
    if problems:
        raise SpecError(f"{source}: " + "; ".join(f"{'.'.join(where)}: {why}" for where, why in problems))
    return spec


def load_spec(path: str | Path) -> JobSpecBase:
    return check_new_job(load_spec_document(path), path)
