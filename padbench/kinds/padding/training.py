"""How a training job is reported: one header line on how it trained, and each row's step split."""

from __future__ import annotations

from typing import Any

from padbench.kinds.padding.contract import PaddingResult, StrategyResult
from padbench.kinds.padding.experts import compare_kernel


def training_lines(result: PaddingResult) -> list[str]:
    """`trained: bf16, loss liger-fused-linear-cross-entropy, checkpointing none, full (1.7B of 1.7B trainable)`."""
    run = result.training
    if run is None:
        return []
    trainable = f"{run.trainable_parameters / 1e6:,.1f}M of {run.total_parameters / 1e6:,.1f}M parameters trainable"
    lines = [f"trained: weights in {run.precision}, loss {run.loss}, activation checkpointing "
             f"{run.activation_checkpointing}, method {run.method} ({trainable})"]
    if run.auto_checkpointing is not None:
        lines.append(f"activation checkpointing auto chose {run.auto_checkpointing.chosen}: "
                     f"{run.auto_checkpointing.reason}")
    return lines


def _split_line(row: StrategyResult) -> list[str]:
    split = row.step_split
    if split is None:
        return []
    total = split.forward_s + split.backward_s + split.optimizer_s
    phases = (f"forward {split.forward_s * 1e3:.1f} ms, backward {split.backward_s * 1e3:.1f} ms, "
              f"optimizer {split.optimizer_s * 1e3:.1f} ms")
    return [f"{row.label} / {compare_kernel(row)}: {phases} per step ({total * 1e3:.1f} ms, {split.steps} steps "
            "timed apart)"]


def step_split_lines(result: PaddingResult) -> list[str]:
    lines = [line for row in result.strategies for line in _split_line(row)]
    return ["step split:", *(f"  {line}" for line in lines)] if lines else []


def step_split_fields(row: StrategyResult) -> dict[str, Any]:
    split = row.step_split
    return {"forward_s": split.forward_s if split else None, "backward_s": split.backward_s if split else None,
            "optimizer_s": split.optimizer_s if split else None}
