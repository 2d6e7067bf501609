"""What a result is *of*: the job, model, device, dtype, mode and date that tell two results apart.

These columns lead every CSV row (so CSVs of several jobs concatenate into one table), title every plot
and label every column of a comparison.
"""

from __future__ import annotations

from typing import Any

from padbench.contract.results import AttentionResult, PaddingResult


def model_name(result: PaddingResult | AttentionResult) -> str:
    """The model a padding job ran (its preset, path or model type); an attention sweep's shape instead."""
    if isinstance(result, AttentionResult):
        spec = result.spec
        return f"attention B{spec.batch} H{spec.heads} D{spec.head_dim}"
    return result.spec.model.label


def device_name(result: PaddingResult | AttentionResult) -> str:
    return result.environment.gpu_name or result.environment.device


def run_mode(result: PaddingResult | AttentionResult) -> str:
    return result.spec.mode if isinstance(result, PaddingResult) else result.spec.direction


def run_date(result: PaddingResult | AttentionResult) -> str:
    """The day the run started (UTC), from the environment's ISO 8601 timestamp."""
    return result.environment.started_at[:10]


def identity(result: PaddingResult | AttentionResult, job_id: int | None = None) -> dict[str, Any]:
    return {"job_id": job_id, "model": model_name(result), "gpu": device_name(result),
            "dtype": result.spec.dtype, "mode": run_mode(result), "date": run_date(result)}


def title(result: PaddingResult | AttentionResult, job_id: int | None = None) -> str:
    """`job 7 · gpt2-seed · NVIDIA H100 80GB HBM3 · bf16 · inference · 2026-11-22`."""
    parts = [] if job_id is None else [f"job {job_id}"]
    parts += [model_name(result), device_name(result), result.spec.dtype, run_mode(result), run_date(result)]
    return " · ".join(parts)
