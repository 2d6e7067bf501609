"""Schema-driven fuzzing (schemathesis) of every endpoint, as each role and unauthenticated, on SQLite and
PostgreSQL: no request may get a response ≥ 500.

Bounded so it stays in the suite: FUZZ_EXAMPLES cases per operation, role and generation mode (valid and
invalid inputs), which is a few thousand requests per backend and a minute or two in all. Set
PADBENCH_FUZZ_EXAMPLES higher for a longer hunt; the test prints the request and 5xx counts it saw.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis.generation import GenerationMode

from tests.integration.conftest import LiveServer, empty_postgres, serve

pytestmark = pytest.mark.slow
FUZZ_EXAMPLES = int(os.environ.get("PADBENCH_FUZZ_EXAMPLES", "15"))
ROLES: list[str | None] = ["submitter", "worker", "admin", None]
SERVER_ERROR = 500


def fuzz_operation(server: LiveServer, operation: Any, role: str | None, mode: GenerationMode,
                   statuses: Counter[int], failures: list[str]) -> None:
    headers = server.headers(role) if role else {}

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        case = data.draw(operation.as_strategy(generation_mode=mode))
        response = case.call(base_url=server.base_url, headers=headers, timeout=30)
        statuses[response.status_code] += 1
        if response.status_code >= SERVER_ERROR:
            failures.append(f"{role}: {case.method} {case.formatted_path} {case.body!r:.300} → "
                            f"{response.status_code} {response.text[:300]}")

    try:
        run()
    except Unsatisfiable:
        # An operation with nothing to make invalid (no parameters, no body) has no negative cases.
        assert mode is GenerationMode.NEGATIVE, f"{operation.label}: no valid case could be generated"


def fuzz_every_endpoint(server: LiveServer) -> tuple[Counter[int], list[str]]:
    document = httpx.get(f"{server.base_url}/openapi.json").json()
    schema = schemathesis.openapi.from_dict(document)
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for role in ROLES:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                fuzz_operation(server, operation, role, mode, statuses, failures)
    return statuses, failures


def check(server: LiveServer, backend: str) -> None:
    statuses, failures = fuzz_every_endpoint(server)
    total = sum(statuses.values())
    print(f"\n{backend}: {total} requests fuzzed, {len(failures)} responses >= 500; statuses {dict(statuses)}")
    assert total > 0 and not failures, "\n".join(failures[:20])


def test_no_5xx_from_a_fuzz_of_every_endpoint_on_sqlite(tmp_path: Path) -> None:
    # No 429s from the fuzzer's own unauthenticated requests: they would hide the authenticated roles' answers.
    with serve(f"sqlite:///{tmp_path / 'fuzz.sqlite3'}", tmp_path, auth_failure_limit=10**9) as server:
        check(server, "sqlite")


def test_no_5xx_from_a_fuzz_of_every_endpoint_on_postgresql(tmp_path: Path, postgres_database: str) -> None:
    empty_postgres(postgres_database)
    with serve(postgres_database, tmp_path, auth_failure_limit=10**9) as server:
        check(server, "postgresql")
