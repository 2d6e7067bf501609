"""Every field of the contract has a bound: abusive specs are refused naming the field, and what each field
allows on its own but is too much together is refused by the server's cost estimate.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from padbench.contract.api import Capabilities, Heartbeat, LeaseRequest, WorkerRegister
from padbench.contract.kinds import parse_job_spec
from padbench.server.core.config import Settings
from padbench.server.cost import job_cost, over_limits
from padbench.specfile import load_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SWEEP: dict[str, Any] = {"kind": "attention"}
# (document, the field its error names): the abusive specs a hostile submitter tried.
ABUSIVE_SPECS: list[tuple[dict[str, Any], str]] = [
    ({"data": {"num_samples": 10**12}}, "data.num_samples"),
    ({"data": {"max_length": 10**9}}, "data.max_length"),
    ({"measurement": {"repeats": 10**9}}, "measurement.repeats"),
    ({"measurement": {"min_seconds": 1e12}}, "measurement.min_seconds"),
    ({"measurement": {"warmup_batches": 10**9}}, "measurement.warmup_batches"),
    ({"probe": {"cap": 10**12}}, "probe.cap"),
    ({"probe": {"probe_timeout_s": 1e300}}, "probe.probe_timeout_s"),
    ({"batch_size": 10**9}, "batch_size"),
    ({"name": "x" * (7 * 2**20)}, "name"),
    ({"strategies": ["static"] * 100_000}, "strategies"),
    ({"data": {"seed": 2**64}}, "data.seed"),
    ({**SWEEP, "seq_lens": [10**9]}, "seq_lens.0"),
    ({**SWEEP, "seq_lens": list(range(1, 100_001))}, "seq_lens"),
    ({**SWEEP, "cell_timeout_s": 1e300}, "cell_timeout_s"),
    ({**SWEEP, "repeats": 10**9}, "repeats"),
    ({**SWEEP, "heads": 10**6}, "heads"),
]


def error_locations(error: ValidationError) -> set[str]:
    # Drop the union tag ("padding"/"attention") and validator labels, as the server's errors do.
    return {".".join(str(p) for p in e["loc"] if isinstance(p, int) or str(p).isidentifier())
            .removeprefix("padding.").removeprefix("attention.") for e in error.errors()}


@pytest.mark.parametrize(("document", "field"), ABUSIVE_SPECS, ids=[field for _, field in ABUSIVE_SPECS])
def test_abusive_specs_are_refused_naming_the_field(document: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        parse_job_spec(document)
    assert field in error_locations(refused.value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_refused(value: float) -> None:
    with pytest.raises(ValidationError, match="finite"):
        parse_job_spec({"measurement": {"min_seconds": value}})
    with pytest.raises(ValidationError, match="finite"):
        Heartbeat(lease_token="t", progress=value)


def test_api_bodies_are_bounded() -> None:
    with pytest.raises(ValidationError):
        LeaseRequest(worker_id=2**31)
    with pytest.raises(ValidationError):
        WorkerRegister(name="w\x00", capabilities=Capabilities(device="cpu"))
    with pytest.raises(ValidationError):
        Capabilities(device="cpu", kernels=["k"] * 1000)


def test_every_example_fits_the_default_limits() -> None:
    settings = Settings(database_url="sqlite://")
    for path in sorted(EXAMPLES.glob("*.yaml")):
        spec = load_spec(path)
        assert over_limits(spec, max_tokens=settings.max_job_tokens, max_flops=settings.max_job_flops) is None, path


def test_within_every_field_bound_but_too_costly_together_is_refused() -> None:
    settings = Settings(database_url="sqlite://")
    limits = {"max_tokens": settings.max_job_tokens, "max_flops": settings.max_job_flops}
    huge = parse_job_spec({"model": "gpt2", "data": {"num_samples": 10_000_000, "max_length": 1024},
                           "measurement": {"repeats": 100}})
    assert "PADBENCH_MAX_JOB_TOKENS" in (over_limits(huge, **limits) or "")
    deep = parse_job_spec({"model": {"config": {"n_layer": 10_000, "n_embd": 8192, "n_head": 64}},
                           "data": {"max_length": 1024, "num_samples": 100_000}})
    assert "PADBENCH_MAX_JOB_FLOPS" in (over_limits(deep, **limits) or "")
    sweep = parse_job_spec({**SWEEP, "batch": 4096, "heads": 1024, "seq_lens": [1_048_576], "repeats": 10_000})
    assert "PADBENCH_MAX_JOB_FLOPS" in (over_limits(sweep, **limits) or "")


def test_the_estimate_counts_tokens_per_strategy_and_repeat() -> None:
    spec = parse_job_spec({"data": {"num_samples": 100, "max_length": 64}, "measurement": {"repeats": 3}})
    assert job_cost(spec).tokens == 100 * 64 * 4 * 3  # four default strategies


def test_a_generate_estimate_counts_every_row_context_and_request_at_its_longest() -> None:
    base = {"kind": "generate", "data": {"num_samples": 10, "max_length": 64}, "output_length": 16,
            "strategies": ["static", "continuous"], "references": ["transformers-generate"],
            "measurement": {"repeats": 2, "warmup_requests": 4, "correctness_samples": 3}}
    requests_per_row = 10 * 2 + 4 + 2 * 3  # measured, warm-up, and the gate (reference and row)
    assert job_cost(parse_job_spec(base)).tokens == 3 * requests_per_row * (64 + 16)
    table = parse_job_spec({**base, "model": "llama-3.2-1b", "context": [128, 1024]})
    assert job_cost(table).tokens == 3 * 2 * requests_per_row * (1024 + 16)
    assert job_cost(parse_job_spec({**base, "model": "./my-model"})).flops is None  # no architecture to count


def test_a_generate_job_at_a_long_context_is_refused_by_its_attention_flops() -> None:
    settings = Settings(database_url="sqlite://")
    # 1,000 requests, each attending over 128k tokens: the weights alone would be about 2e18 FLOPs.
    spec = parse_job_spec({"kind": "generate", "model": "llama-3.1-8b", "data": {"num_samples": 1000},
                           "output_length": 4096, "context": [131_072 - 4096], "strategies": ["static"],
                           "references": [], "measurement": {"repeats": 1, "warmup_requests": 0,
                                                             "correctness_samples": 1}})
    assert "PADBENCH_MAX_JOB_FLOPS" in (over_limits(spec, max_tokens=settings.max_job_tokens,
                                                    max_flops=settings.max_job_flops) or "")


def test_result_strings_are_bounded() -> None:
    from padbench.contract.results import Environment

    with pytest.raises(ValidationError, match="at most 100000 characters"):
        Environment(hostname="h" * 100_001, device="cpu", python="3", torch="2", started_at="2026-11-23")


def test_a_list_of_batch_sizes_multiplies_the_estimate() -> None:
    one = parse_job_spec({"data": {"num_samples": 100, "max_length": 64}, "measurement": {"repeats": 1}})
    curve = parse_job_spec({"data": {"num_samples": 100, "max_length": 64}, "measurement": {"repeats": 1},
                            "batch_size": ["auto", 800]})
    assert job_cost(curve).tokens == 2 * job_cost(one).tokens  # each strategy at each size


def test_a_list_of_experts_multiplies_the_estimate_and_a_mixture_counts_its_top_k_experts() -> None:
    base = {"model": "olmoe-1b-7b", "data": {"num_samples": 100, "max_length": 64}, "measurement": {"repeats": 1}}
    one, both = parse_job_spec(base), parse_job_spec({**base, "experts": ["grouped_mm", "eager"]})
    assert job_cost(both).tokens == 2 * job_cost(one).tokens  # each strategy with each implementation
    # 16 layers × (4·2048² attention + 3·2048·(8 experts × 1024)) + head 2048·50,304: the 8 routed experts, not 64.
    per_token = 16 * (4 * 2048**2 + 3 * 2048 * 8 * 1024) + 2048 * 50_304
    assert job_cost(one).flops == 2.0 * per_token * job_cost(one).tokens


URLS = ["file:///etc", "http://example.org/model", "https://host/x.txt", "s3://bucket/key", "HF://org/name",
        "git+ssh://host/repo"]
# (where the name goes in a spec, the field its error names)
NAMED_FILES: list[tuple[Any, str]] = [
    (lambda url: {"model": url}, "model.path"),
    (lambda url: {"model": {"path": url}}, "model.path"),
    (lambda url: {"data": {"source": url, "tokenizer": "bert-base-uncased"}}, "data.source"),
    (lambda url: {"data": {"tokenizer": url}}, "data.tokenizer"),
]


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize(("document", "field"), NAMED_FILES, ids=[field for _, field in NAMED_FILES])
def test_urls_are_refused_wherever_a_spec_names_a_file(document: Any, field: str, url: str) -> None:
    with pytest.raises(ValidationError) as refused:
        parse_job_spec(document(url))
    assert error_locations(refused.value) == {field}
    assert refused.value.errors()[0]["msg"].startswith("URLs are not accepted; name a local ")


def test_the_model_refusal_says_what_to_write_instead() -> None:
    with pytest.raises(ValidationError) as refused:
        parse_job_spec({"model": "file:///etc"})
    assert refused.value.errors()[0]["msg"] == ("URLs are not accepted; name a local path (relative to the "
                                                "worker's model root), a Hub model (org/name) or a preset")


@pytest.mark.parametrize("document", [
    {"model": "meta-llama/Llama-3.2-1B"},  # a hub ID is a name, not a URL
    {"model": "models/qwen:latest"},
    {"data": {"source": "hf:wikitext:wikitext-103-raw-v1:train", "tokenizer": "org/tokenizer"}},
    {"data": {"source": "corpora/http_logs.txt", "tokenizer": "bert-base-uncased"}},
])
def test_names_that_only_resemble_urls_are_kept(document: dict[str, Any]) -> None:
    parse_job_spec(document)
