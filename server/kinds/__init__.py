"""Job kinds as the server sees them: one KindPolicy per kind (`base`), registered by importing its module."""

from __future__ import annotations

from typing import Any

from padbench.contract.spec import JobSpecBase
from padbench.server.kinds import attention, generate, padding
from padbench.server.kinds.base import KIND_POLICIES, KindPolicy

__all__ = ["KIND_POLICIES", "attention", "generate", "padding", "policy_for"]


def policy_for(spec: JobSpecBase) -> KindPolicy[Any]:
    return KIND_POLICIES.get(spec.kind)
