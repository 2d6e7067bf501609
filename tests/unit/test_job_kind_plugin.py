"""A job kind is one folder and one line: `echo`, which only the tests define (tests/echo_kind/), flows through
the contract, the worker's runner and capabilities, `check` and `plan`, the reports, the plot, the server's
policy, `/metrics` and the dashboard, with no other module edited."""

from __future__ import annotations

import io
import json
import multiprocessing
from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from padbench.contract.kinds import BUILT_IN_KINDS, JOB_KINDS, JOB_RESULT_ADAPTER, JOB_SPEC_ADAPTER, parse_job_spec
from padbench.kinds.record import kind_spec
from padbench.report import render
from padbench.report.compare import compare, render_compare_json
from padbench.report.identity import title
from padbench.report.terminal import write_table
from padbench.server.cost import over_limits
from padbench.server.paths import path_errors
from padbench.server.requirements import job_requirements
from padbench.worker.jobs import run_job, spec_json
from padbench.worker.runtime.isolation import ChildContext
from tests.echo_kind import registered
from tests.echo_kind.contract import EchoJobSpec, EchoResult

SPEC = {"kind": "echo", "word": "hi", "times": 3}


@pytest.fixture
def echo() -> Iterator[None]:
    with registered():
        yield


def run_in_this_process(spec_document: dict[str, object]) -> tuple[dict[str, object], list[dict[str, object]]]:
    """`run_job` as a worker's child runs it, with its hand-overs read back from the pipe."""
    receiver, sender = multiprocessing.Pipe(duplex=False)
    document = run_job(ChildContext(sender), spec_json(parse_job_spec(spec_document)))
    handed_over = []
    while receiver.poll():
        what, value = receiver.recv()
        if what == "finished":
            handed_over.append(value)
    return document, handed_over


def test_the_contract_validates_a_registered_kind_and_its_schema_lists_it(echo: None) -> None:
    spec = parse_job_spec(SPEC)
    assert isinstance(spec, EchoJobSpec) and spec.times == 3
    assert "EchoJobSpec" in JOB_SPEC_ADAPTER.json_schema()["$defs"]
    with pytest.raises(ValidationError, match="times"):
        parse_job_spec({**SPEC, "times": 11})


def test_the_worker_runs_it_and_hands_over_its_rows_as_it_goes(echo: None) -> None:
    document, handed_over = run_in_this_process(SPEC)
    result = JOB_RESULT_ADAPTER.validate_python(document)
    assert isinstance(result, EchoResult) and result.lines == ["1: hi", "2: hi", "3: hi"]
    partials = [JOB_RESULT_ADAPTER.validate_python(partial) for partial in handed_over]
    assert [partial.partial.rows_finished for partial in partials if partial.partial] == [1, 2]


def test_reports_render_compare_and_title_it(echo: None) -> None:
    result = JOB_RESULT_ADAPTER.validate_python(run_in_this_process(SPEC)[0])
    assert render(result, "table") == "echo of 'hi'\n1: hi\n2: hi\n3: hi\n"
    assert render(result, "csv", job_id=5).splitlines()[1].startswith("5,echo hi,cpu,text,aloud,2026-11-25,1: hi")
    assert json.loads(render(result, "json"))["kind"] == "echo"
    assert title(result, 5) == "job 5 · echo hi · cpu · text · aloud · 2026-11-25"
    stream = io.StringIO()
    write_table(result, stream)
    assert stream.getvalue().startswith("echo of 'hi'")
    compared = json.loads(render_compare_json(compare([(1, result), (2, result)])))
    assert compared["rows"] == [{"word": "hi", "what": "lines", "values": [3.0, 3.0], "ratios_vs_first": [1.0, 1.0]}]


def test_the_servers_policy_gates_and_costs_it(echo: None) -> None:
    spec = parse_job_spec({**SPEC, "device": "cuda"})
    assert job_requirements(spec) == {"kind:echo", "device:cuda"}
    assert path_errors(spec) == []
    assert over_limits(spec, max_tokens=1, max_flops=1.0) is None


def test_without_its_registration_the_kind_is_unknown() -> None:
    with pytest.raises(ValidationError, match="'padding', 'attention'"):
        parse_job_spec(SPEC)


def test_every_kind_the_contract_registers_has_a_record_with_a_report_plot_policy_and_dashboard_view() -> None:
    """The layers outside the worker (whose runners its own tests list): a kind missing one would be refused
    with a 500 at submission, printed as an unknown kind, or shown raw on the dashboard."""
    assert list(JOB_KINDS) == ["padding", "attention", "generate", "tune"]
    assert [JOB_KINDS.get(name).package for name in JOB_KINDS] == list(BUILT_IN_KINDS)
    for name in JOB_KINDS:
        record = kind_spec(name)
        assert record.plot is not None and record.report.plural and record.policy is not None
        view = record.view_path()
        assert view is not None and view.is_file() and f'registerKind("{name}"' in view.read_text()
