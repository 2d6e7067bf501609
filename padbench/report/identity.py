"""What a result is *of*: the job, model, device, dtype, mode and date that tell two results apart.

These columns lead every CSV row (so CSVs of several jobs concatenate into one table), title every plot
and label every column of a comparison. The model, dtype and mode are the kind's to say (`run_facts`).
"""

from __future__ import annotations

from typing import Any

from padbench.contract.results import JobResultBase
from padbench.kinds.record import kind_spec


def model_name(result: JobResultBase) -> str:
    """The model a padding job ran (its preset, path or model type); an attention sweep's shape instead."""
    return kind_spec(result.kind).report.run_facts(result).model


def device_name(result: JobResultBase) -> str:
    return result.environment.gpu_name or result.environment.device


def run_date(result: JobResultBase) -> str:
    """The day the run started (UTC), from the environment's ISO 8601 timestamp."""
    return result.environment.started_at[:10]


def identity(result: JobResultBase, job_id: int | None = None) -> dict[str, Any]:
    facts = kind_spec(result.kind).report.run_facts(result)
    return {"job_id": job_id, "model": facts.model, "gpu": device_name(result), "dtype": facts.dtype,
            "mode": facts.mode, "date": run_date(result)}


def title(result: JobResultBase, job_id: int | None = None) -> str:
    """`job 7 · gpt2-seed · NVIDIA H100 80GB HBM3 · bf16 · inference · 2026-11-22`."""
    parts = [] if job_id is None else [f"job {job_id}"]
    facts = kind_spec(result.kind).report.run_facts(result)
    parts += [facts.model, device_name(result), facts.dtype, facts.mode, run_date(result)]
    return " · ".join(parts)
