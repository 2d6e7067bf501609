"""Reading a job spec from a YAML or JSON file, with errors a person can act on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from padbench.contract.spec import AttentionJobSpec, PaddingJobSpec, parse_job_spec


class SpecError(Exception):
    """A spec file that cannot be read or does not validate; the message names field and reason."""


def format_validation_error(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        location = ".".join(str(part) for part in item["loc"] if not str(part).startswith("function-"))
        lines.append(f"{location or '(spec)'}: {item['msg']}")
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


def load_spec(path: str | Path) -> PaddingJobSpec | AttentionJobSpec:
    document = load_spec_document(path)
    try:
        return parse_job_spec(document)
    except ValidationError as error:
        raise SpecError(f"{path}: {format_validation_error(error)}") from error
