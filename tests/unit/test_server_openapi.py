"""The server's OpenAPI document as client generators read it: batch sizes as `oneOf` with `enum: ["auto"]`
(a `const` branch makes openapi-python-client refuse every integer), and every error a route can answer
documented with its body.

The last test generates a client with openapi-python-client and reads a result with it. The tool is not a
dependency of padbench (it pins its own typer), so the test runs where it is installed on its own
(`pipx install openapi-python-client`, or PADBENCH_OPENAPI_PYTHON_CLIENT naming its command) and skips,
saying so, elsewhere.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from padbench.contract.batch_size import AUTO_TIMES_PATTERN, MAX_BATCH_SIZE, MAX_BATCH_SIZES
from padbench.contract.kinds import JOB_RESULT_ADAPTER, parse_job_spec
from padbench.server.core.config import Settings
from padbench.server.core.security import Role, token_file_line
from padbench.server.main import create_app

H100_RESULT = Path(__file__).parents[2] / "docs" / "results" / "h100-2026-11-22" / "gpu-demo.json"
ONE_SIZE = [{"type": "integer", "minimum": 1, "maximum": MAX_BATCH_SIZE}, {"type": "string", "enum": ["auto"]},
            {"type": "string", "pattern": AUTO_TIMES_PATTERN}]
LEASE_CALLS = ("heartbeat", "complete", "cancelled", "fail", "release")


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("openapi")
    tokens = folder / "tokens"
    tokens.write_text(token_file_line(Role.admin, "root", "t" * 43) + "\n", encoding="utf-8")
    app = create_app(Settings(database_url=f"sqlite:///{folder / 'unused.db'}", tokens_file=tokens))
    return app.openapi()  # the schema alone: the database is touched only when the app starts


def nodes(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from nodes(item)
    elif isinstance(value, list):
        for item in value:
            yield from nodes(item)


def test_a_batch_size_is_one_of_an_integer_auto_auto_n_or_a_list_of_them(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    choice = schemas["PaddingJobSpec"]["properties"]["batch_size"]
    assert choice["oneOf"][:3] == ONE_SIZE and choice["default"] == 32
    # exactly one branch takes each value, as `oneOf` requires: `auto` is no `auto:N`
    assert not re.match(AUTO_TIMES_PATTERN, "auto") and re.match(AUTO_TIMES_PATTERN, "auto:16")
    assert not re.match(AUTO_TIMES_PATTERN, "auto:17") and not re.match(AUTO_TIMES_PATTERN, "auto:0")
    assert choice["oneOf"][3] == {"type": "array", "items": {"oneOf": ONE_SIZE}, "minItems": 1,
                                  "maxItems": MAX_BATCH_SIZES}
    override = schemas["StrategySpec"]["properties"]["batch_size"]["anyOf"]
    assert override[0]["oneOf"] == choice["oneOf"] and override[1] == {"type": "null"}
    unions = [node for node in nodes(document) if "anyOf" in node or "oneOf" in node]
    assert not any("const" in branch for node in unions for branch in node.get("anyOf", node.get("oneOf")))


@pytest.mark.parametrize(("value", "stored"), [(32, 32), ("auto", "auto"), ([16, "auto"], [16, "auto"]),
                                               ("auto:4", "auto:4")])
def test_validation_of_batch_sizes_is_unchanged(value: object, stored: object) -> None:
    assert parse_job_spec({"batch_size": value, "attention": "sdpa"}).batch_size == stored


def test_every_v1_route_documents_the_errors_it_can_answer(document: dict[str, Any]) -> None:
    operations = {(method, path): operation for path, methods in document["paths"].items()
                  for method, operation in methods.items() if path.startswith("/v1/")}
    assert len(operations) > 10
    for (method, path), operation in operations.items():
        assert {"400", "401", "403", "429", "503"} <= set(operation["responses"]), f"{method} {path}"
        if "{job_id}" in path:
            assert "404" in operation["responses"], f"{method} {path}"
    assert "409" in operations["post", "/v1/jobs"]["responses"]
    assert "409" in operations["post", "/v1/jobs/{job_id}/cancel"]["responses"]
    assert "409" in operations["post", "/v1/workers"]["responses"]
    assert "409" not in operations["get", "/v1/jobs/{job_id}"]["responses"]
    for call in LEASE_CALLS:
        conflict = operations["post", f"/v1/leases/{{job_id}}/{call}"]["responses"]["409"]
        assert conflict["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/LeaseConflictOut"}
    busy = operations["get", "/v1/jobs"]["responses"]["503"]
    assert "Retry-After" in busy["headers"]
    assert busy["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorOut"}


def generator() -> str:
    command = os.environ.get("PADBENCH_OPENAPI_PYTHON_CLIENT") or shutil.which("openapi-python-client")
    if not command:
        pytest.skip("openapi-python-client is not installed (pipx install openapi-python-client, or set "
                    "PADBENCH_OPENAPI_PYTHON_CLIENT to its command)")
    return command


@pytest.mark.slow
def test_a_generated_client_reads_every_form_of_batch_size(document: dict[str, Any], tmp_path: Path) -> None:
    command = generator()
    (tmp_path / "openapi.json").write_text(json.dumps(document), encoding="utf-8")
    generated = subprocess.run([command, "generate", "--path", "openapi.json", "--output-path", "padbench_api",
                                "--meta", "none"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert generated.returncode == 0, generated.stdout + generated.stderr
    result = json.loads(H100_RESULT.read_text(encoding="utf-8"))
    result["spec"]["batch_size"] = [16, "auto"]
    result["spec"]["strategies"][0]["batch_size"] = "auto"
    result["spec"]["strategies"][1]["batch_size"] = 64
    (tmp_path / "result.json").write_text(JOB_RESULT_ADAPTER.validate_python(result).model_dump_json(), "utf-8")
    # The generated code needs attrs, which padbench does not: it runs on the generator's own interpreter.
    reader = ("import json; from padbench_api.models import PaddingResult\n"
              "r = PaddingResult.from_dict(json.load(open('result.json')))\n"
              "plain = lambda v: [plain(x) for x in v] if isinstance(v, list) else getattr(v, 'value', v)\n"
              "print(json.dumps([plain(r.spec.batch_size), *(plain(s.batch_size) for s in r.spec.strategies[:2]),"
              " r.strategies[0].batch_size]))")
    python = Path(command).resolve().parent / "python"
    read = subprocess.run([str(python), "-c", reader], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout) == [[16, "auto"], "auto", 64, 128]
