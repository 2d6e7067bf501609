"""A generate job end to end on the CPU: a tiny Llama, a dozen synthetic prompts, every strategy gated and
measured; the context table; output lengths read from a data field; transformers' generate as a reference row.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoTokenizer

from padbench.kinds.generate.contract import GenerateJobSpec, GenerateResult
from padbench.worker.jobs.generate.job import run_generate_job
from padbench.worker.jobs.generate.requests import load_requests, output_lengths
from padbench.worker.jobs.padding.job import data_with_tokenizer

SAMPLES = 12


def spec(**fields: Any) -> GenerateJobSpec:
    base: dict[str, Any] = {
        "kind": "generate", "model": "tiny-llama",
        "data": {"source": "synthetic", "num_samples": SAMPLES, "max_length": 16, "seed": 0},
        "output_length": {"uniform": [2, 8]}, "batch_size": 4, "attention": "sdpa", "dtype": "fp32",
        "device": "cpu", "cuda_graphs": False, "references": [],
        "measurement": {"repeats": 2, "warmup_requests": 2, "correctness_samples": 4, "correctness_tokens": 8}}
    return GenerateJobSpec.model_validate({**base, **fields})


def run(job: GenerateJobSpec) -> tuple[GenerateResult, list[GenerateResult], list[str]]:
    partials: list[GenerateResult] = []
    messages: list[str] = []
    result = run_generate_job(job, lambda fraction, message: messages.append(message), partials.append)
    return result, partials, messages


def no_progress(fraction: float, message: str) -> None:
    pass


def test_every_strategy_is_gated_and_measured() -> None:
    job = spec()
    lengths = output_lengths(job, job.data, 30522, SAMPLES, no_progress)
    assert len(set(lengths)) > 1 and all(2 <= n <= 8 for n in lengths)
    result, partials, messages = run(job)
    assert result.partial is None and result.num_requests == SAMPLES
    assert result.output_tokens_total == sum(lengths)
    assert [row.strategy for row in result.rows] == ["static", "sorted", "continuous"]
    for row in result.rows:
        assert row.status == "ok", row.error
        assert row.correctness_passed is True and row.gate_requests == 4
        assert row.kernel == "sdpa-kvcache" and row.batch_size == 4 and row.cuda_graphs is False
        assert row.context is None and not row.reference
        assert row.output_tokens == sum(lengths) and row.requests == SAMPLES
        assert row.output_tokens_per_s and row.output_tokens_per_s > 0
        assert row.repeat_tokens_per_s is not None and len(row.repeat_tokens_per_s) == 2
        assert row.speedup_vs_static is not None
        assert row.slot_utilization is not None and 0 < row.slot_utilization <= 1
    static, _, continuous = result.rows
    assert static.speedup_vs_static == 1.0
    assert static.prompt_pad_tokens and static.prompt_pad_tokens > 0 and continuous.prompt_pad_tokens == 0
    assert continuous.interleaved_prefills and continuous.interleaved_prefills > 0
    assert continuous.slot_utilization >= static.slot_utilization  # type: ignore[operator]
    # One partial result after each row, each holding the rows finished so far.
    assert [len(p.rows) for p in partials] == [1, 2, 3]
    assert [p.partial.rows_finished for p in partials if p.partial] == [1, 2, 3]
    assert any("correctness gate" in message for message in messages)


def test_context_rows_measure_prompts_of_exactly_that_length() -> None:
    result, partials, _ = run(spec(strategies=["static", "continuous"], context=[24]))
    assert [(row.strategy, row.context) for row in result.rows] == [
        ("static", None), ("continuous", None), ("static", 24), ("continuous", 24)]
    assert len(partials) == 4
    for row in result.rows:
        assert row.status == "ok" and row.correctness_passed, row.error
    for row in result.rows[2:]:
        assert row.requests == 4 and row.prompt_tokens == 4 * 24 and row.prompt_pad_tokens == 0
        assert row.speedup_vs_static is not None
    assert result.rows[2].speedup_vs_static == 1.0  # against the static row of its own context length


def test_transformers_generate_reference_row() -> None:
    result, partials, _ = run(spec(strategies=["static"], references=["transformers-generate"]))
    assert [row.strategy for row in result.rows] == ["static", "transformers-generate"]
    reference = result.rows[1]
    assert reference.reference is True and reference.status == "ok", reference.error
    assert reference.kernel == "transformers-sdpa" and reference.correctness_passed is None
    assert reference.output_tokens == result.output_tokens_total
    assert reference.output_tokens_per_s and reference.output_tokens_per_s > 0
    assert len(partials) == 2


# --- output lengths from a data field ------------------------------------------------------------------------

RECORDS = [
    ("the game began development in 2010", "yes"),
    ("it met with positive sales in japan", "the game was praised by both japanese and western critics"),
    ("a tactical role playing video game", "a large portion of the work"),
    ("the first game in the series", "chronicles"),
    ("carrying over a large portion of the work done on its predecessor", "it was praised"),
]
MAX_ANSWER = 6


@pytest.fixture
def answers_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PADBENCH_CACHE_DIR", str(tmp_path / "cache"))  # the tokenization cache stays here
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps({"text": text, "answer": answer}) + "\n" for text, answer in RECORDS),
                    encoding="utf-8")
    return path


def field_spec(source: Path, tokenizer: Path, **fields: Any) -> GenerateJobSpec:
    return spec(data={"source": str(source), "tokenizer": str(tokenizer), "num_samples": 10, "max_length": 32,
                      "seed": 1}, output_length={"field": "answer", "max_tokens": MAX_ANSWER}, **fields)


def test_output_lengths_are_the_answers_token_counts(answers_file: Path, tokenizer_dir: Path) -> None:
    job = field_spec(answers_file, tokenizer_dir)
    requests, _, _ = load_requests(job, data_with_tokenizer(job), 30522, no_progress)  # type: ignore[arg-type]
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    expected = {tuple(tokenizer(text)["input_ids"]): min(len(tokenizer(answer)["input_ids"]), MAX_ANSWER)
                for text, answer in RECORDS}
    assert len(requests) == 10
    assert {request.prompt for request in requests} <= set(expected)  # every prompt is one record's text
    assert [r.output_length for r in requests] == [expected[r.prompt] for r in requests]
    lengths = {r.output_length for r in requests}
    assert MAX_ANSWER in lengths and len(lengths) > 1  # the long answer is cut, the others are their own length


def test_an_empty_answer_is_refused_rather_than_misaligned(answers_file: Path, tokenizer_dir: Path) -> None:
    answers_file.write_text(answers_file.read_text(encoding="utf-8")
                            + json.dumps({"text": "one more record", "answer": ""}) + "\n", encoding="utf-8")
    job = field_spec(answers_file, tokenizer_dir)
    with pytest.raises(ValueError, match=r"output_length\.field 'answer': 5 records have a non-empty answer but 6"):
        load_requests(job, data_with_tokenizer(job), 30522, no_progress)  # type: ignore[arg-type]


def test_a_job_with_answer_lengths_runs(answers_file: Path, tokenizer_dir: Path) -> None:
    result, _, _ = run(field_spec(answers_file, tokenizer_dir, strategies=["continuous"]))
    (row,) = result.rows
    assert row.status == "ok" and row.correctness_passed, row.error
    assert row.output_tokens == result.output_tokens_total


def test_a_kernel_that_cannot_run_the_model_fails_its_row_with_the_reason() -> None:
    result, _, _ = run(spec(model="tiny-gemma2", strategies=["static"]))
    (row,) = result.rows
    assert row.status == "failed" and row.correctness_passed is None and row.output_tokens_per_s is None
    assert row.error == ("kernel sdpa-kvcache cannot run this model: sdpa-kvcache does not apply attention logit "
                         "soft-capping (the model caps at 50); eager-kvcache does")
    eager, _, _ = run(spec(model="tiny-gemma2", strategies=["static"], attention="eager"))
    assert eager.rows[0].status == "ok" and eager.rows[0].kernel == "eager-kvcache", eager.rows[0].error
