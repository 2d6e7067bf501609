"""The server's OpenAPI document as client generators read it: batch sizes as `oneOf` with `enum: ["auto"]`
(a `const` branch makes openapi-python-client refuse every integer), and every error a route can answer
documented with its body.

The last test generates a client with openapi-python-client and reads a result of each kind with it. The
tool is not a dependency of padbench (it pins its own typer): `scripts/test.sh` installs it into a venv of
its own (`.venv-openapi/`) and names its command in PADBENCH_OPENAPI_PYTHON_CLIENT; where neither that nor
an `openapi-python-client` on PATH is found (the install needs PyPI), the test skips, saying so.
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

RESULTS = Path(__file__).parents[2] / "docs" / "results"
H100_RESULT = RESULTS / "h100-2026-11-22" / "gpu-demo.json"
SWEEP_RESULT = RESULTS / "h200-2026-11-21" / "attention-sweep.json"  # a list of sweeps: the first is read
GENERATE_RESULT = RESULTS / "h100-2026-11-25" / "generate-qwen3-1.7b-code-128.json"
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
        pytest.skip("openapi-python-client is not installed: scripts/test.sh installs it into .venv-openapi/ "
                    "(it needs PyPI), or set PADBENCH_OPENAPI_PYTHON_CLIENT to its command")
    return command


def write_result(path: Path, document: dict[str, Any]) -> None:
    """The document as the API serves it: validated by the contract and dumped again."""
    path.write_text(JOB_RESULT_ADAPTER.validate_python(document).model_dump_json(), "utf-8")


# Runs on the generator's own interpreter: the generated code needs attrs, which padbench does not.
READER = """\
import json
from padbench_api.models import AttentionResult, GenerateResult, PaddingResult
plain = lambda v: [plain(x) for x in v] if isinstance(v, list) else getattr(v, "value", v)
load = lambda name: json.load(open(name))
padding = PaddingResult.from_dict(load("padding.json"))
sweep = AttentionResult.from_dict(load("attention.json"))
generate = GenerateResult.from_dict(load("generate.json"))
print(json.dumps({
    "padding": [plain(padding.spec.batch_size), *(plain(s.batch_size) for s in padding.spec.strategies[:2]),
                padding.strategies[0].batch_size, padding.strategies[0].tokens_per_s],
    "attention": [plain(sweep.kind), len(sweep.cells), sweep.cells[0].kernel, sweep.cells[0].seq_len,
                  sweep.cells[0].median_ms],
    "generate": [plain(generate.kind), [(plain(r.strategy), r.output_tokens_per_s) for r in generate.rows]],
}))
"""


@pytest.mark.slow
def test_a_generated_client_reads_each_kind_of_result(document: dict[str, Any], tmp_path: Path) -> None:
    command = generator()
    (tmp_path / "openapi.json").write_text(json.dumps(document), encoding="utf-8")
    generated = subprocess.run([command, "generate", "--path", "openapi.json", "--output-path", "padbench_api",
                                "--meta", "none"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert generated.returncode == 0, generated.stdout + generated.stderr
    padding = json.loads(H100_RESULT.read_text(encoding="utf-8"))
    padding["spec"]["batch_size"] = [16, "auto"]  # every form of batch size: a list, `auto` and a number
    padding["spec"]["strategies"][0]["batch_size"] = "auto"
    padding["spec"]["strategies"][1]["batch_size"] = 64
    sweep = json.loads(SWEEP_RESULT.read_text(encoding="utf-8"))[0]
    generate = json.loads(GENERATE_RESULT.read_text(encoding="utf-8"))
    for name, result in (("padding", padding), ("attention", sweep), ("generate", generate)):
        write_result(tmp_path / f"{name}.json", result)
    python = Path(command).resolve().parent / "python"
    read = subprocess.run([str(python), "-c", READER], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert read.returncode == 0, read.stderr
    cell = sweep["cells"][0]
    assert json.loads(read.stdout) == {
        "padding": [[16, "auto"], "auto", 64, 128, padding["strategies"][0]["tokens_per_s"]],
        "attention": ["attention", len(sweep["cells"]), cell["kernel"], cell["seq_len"], cell["median_ms"]],
        "generate": ["generate", [[row["strategy"], row["output_tokens_per_s"]] for row in generate["rows"]]],
    }
