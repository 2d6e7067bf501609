"""A lease's spec crosses two process boundaries, and is parsed once at each: from the server's JSON into its
kind's model when the worker claims it (so a spec this worker's contract refuses — a Hub data set written as a
local path, a field it does not know — is failed before any child starts), and from JSON again in the job's
child (`padbench.worker.jobs:run_job`). Between them it stays typed: no part of it is re-validated or read as a
dict.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from padbench.contract.kinds import parse_job_spec
from padbench.contract.spec import JobSpecBase
from padbench.specfile import format_validation_error


class SpecRefused(ValueError):
    """The lease's spec is not one this worker's contract accepts; the message names the field and reason."""


def job_spec(document: dict[str, Any]) -> JobSpecBase:
    try:
        return parse_job_spec(document)
    except ValidationError as error:
        raise SpecRefused(f"spec: {format_validation_error(error)} (this worker's contract refuses it)") from None
