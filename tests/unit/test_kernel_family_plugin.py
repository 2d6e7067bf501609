"""A kernel family is one module and its implementation: `math` (tests/plugins/), which only the tests define, is
a name specs take, with its alias; the worker runs its padded rows, packs and KV-cache rows on the CPU through the
correctness gate; the worker advertises it per kind and the server requires it per kind. A generate strategy is
one module too: `longest-first` runs a gated row. Nothing else in padbench is edited for either."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from padbench.contract.api import Capabilities
from padbench.contract.kernel_families import KERNEL_FAMILIES
from padbench.contract.kernel_family import KernelFamily
from padbench.contract.kinds import JOB_SPEC_ADAPTER, parse_job_spec
from padbench.kinds.generate.contract import GenerateJobSpec, GenerateStrategyName
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.server.requirements import job_requirements, offered_capabilities
from padbench.worker.jobs import get_job_runner
from padbench.worker.jobs.generate.job import prepare
from padbench.worker.jobs.generate.row import StrategyRow
from padbench.worker.jobs.generate.strategies import GENERATE_STRATEGIES
from padbench.worker.jobs.padding.job import run_padding_job
from tests.plugins import registered_family, registered_strategy
from tests.unit.test_generate_job import run as run_generate
from tests.unit.test_generate_job import spec as generate_spec
from tests.unit.test_padding_job import tiny_spec


@pytest.fixture
def math_family() -> Iterator[KernelFamily]:
    with registered_family() as family:
        yield family


@pytest.fixture(autouse=True)
def one_cpu_thread() -> Iterator[None]:
    """Tiny matmuls on a shared two-core machine run several times faster without OpenMP spin-waits."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def no_progress(fraction: float, message: str) -> None:
    pass


def test_specs_take_its_name_and_alias_and_the_schema_lists_it(math_family: KernelFamily) -> None:
    spec = parse_job_spec({"attention": "math_attention", "dtype": "fp32", "device": "cpu",
                           "strategies": ["static", {"name": "packed", "attention": "math"}]})
    assert isinstance(spec, PaddingJobSpec) and spec.attention == "math" and spec.new_job_problems() == []
    generate = parse_job_spec({"kind": "generate", "attention": "math", "dtype": "fp32", "device": "cpu"})
    assert generate.new_job_problems() == []
    definitions = JOB_SPEC_ADAPTER.json_schema()["$defs"]
    assert "math" in definitions["GenerateJobSpec"]["properties"]["attention"]["enum"]
    assert job_requirements(generate) == {"kind:generate", "attention:generate:math"}


def test_without_its_registration_the_name_is_refused() -> None:
    with pytest.raises(ValueError, match=r"attention\n  Input should be 'auto', 'flash', 'eager'"):
        parse_job_spec({"attention": "math"})


def test_a_padding_job_runs_its_padded_rows_and_packs_through_the_gate(math_family: KernelFamily) -> None:
    result = run_padding_job(tiny_spec(attention="math", strategies=["static", "packed"]), no_progress)
    assert [(row.strategy, row.kernel) for row in result.strategies] == [("static", "math-padding-mask"),
                                                                         ("packed", "math-block-mask")]
    for row in result.strategies:
        assert row.status == "ok" and row.correctness_passed, row.error or row.invalid_reason


def test_a_generate_job_runs_its_kv_cache_rows_through_the_gate(math_family: KernelFamily) -> None:
    result, _, _ = run_generate(generate_spec(attention="math", strategies=["static", "continuous"]))
    assert [(row.strategy, row.kernel) for row in result.rows] == [("static", "math-kvcache"),
                                                                   ("continuous", "math-kvcache")]
    for row in result.rows:
        assert row.status == "ok" and row.correctness_passed, row.error


def test_the_worker_offers_it_per_kind_and_the_server_matches_it(math_family: KernelFamily) -> None:
    by_kind = {kind: get_job_runner(kind).kernel_names("cpu") for kind in ("padding", "generate")}
    assert "math" in by_kind["padding"] and "math" in by_kind["generate"]
    offered = offered_capabilities(Capabilities(device="cpu", kernels_by_kind=by_kind))
    assert {"attention:padding:math", "attention:generate:math"} <= offered


def test_a_family_without_packs_or_a_kv_cache_is_refused_where_it_is_named_for_them(
        math_family: KernelFamily) -> None:
    padded_only = dataclasses.replace(math_family, name="math-padded", aliases=(), packed=None, decode=None)
    KERNEL_FAMILIES.add(padded_only.name, padded_only)
    try:
        document: dict[str, Any] = {"attention": "math-padded", "dtype": "fp32", "device": "cpu",
                                    "strategies": ["static", "packed", {"name": "wrapped", "attention": "math"}]}
        assert parse_job_spec(document).new_job_problems() == [(("attention",), (
            "math-padded has no packed-rows (varlen) path; families with one: eager, flash-attn, flash-attn-3, "
            "flash-attn-cute, flex, sdpa, torch-flash, math (strategy packed)"))]
        generate = parse_job_spec({"kind": "generate", "attention": "math-padded"})
        [(where, why)] = generate.new_job_problems()
        assert where == ("attention",) and why.startswith("math-padded has no KV-cache (decode) path")
        assert "math-padded" not in get_job_runner("generate").kernel_names("cpu")
    finally:
        KERNEL_FAMILIES.remove(padded_only.name)


def test_every_strategy_a_generate_spec_names_is_registered() -> None:
    assert set(typing.get_args(GenerateStrategyName)) <= set(GENERATE_STRATEGIES)
    assert {name: GENERATE_STRATEGIES.get(name).padded for name in ("static", "sorted", "continuous")} == {
        "static": True, "sorted": True, "continuous": False}


def test_a_strategy_added_as_one_module_runs_a_gated_row() -> None:
    job: GenerateJobSpec = generate_spec(strategies=["static"])
    setup = prepare(job, no_progress)
    with registered_strategy() as name:
        row = StrategyRow(setup, name, setup.requests, None, no_progress).run()
    assert name not in GENERATE_STRATEGIES
    assert (row.strategy, row.kernel, row.status, row.correctness_passed) == (name, "sdpa-kvcache", "ok", True)
    assert row.prompt_pad_tokens and row.prompt_pad_tokens > 0  # static batches of its own order: padded prompts
