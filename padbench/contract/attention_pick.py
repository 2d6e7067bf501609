"""How a job whose spec left `attention` to the worker (`auto`) got its kernel: the family picked per entry point
(padded rows, packs, the KV cache), the figures that decided it and where they were measured, or why the static
default ran instead. The worker that runs the job picks, from the table of kernel speeds it keeps."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from padbench.contract.bounds import Label, Message
from padbench.contract.kernel_family import ModelEntryPoint
from padbench.contract.results import Rate, ResultModel

# The kinds whose workers settle `attention: auto` (a worker offers `attention:<kind>:auto` for each).
AUTO_ATTENTION_KINDS = ("padding", "generate")


class KernelFigure(ResultModel):
    """One family's figure in the measurement that decided: its rate, and which job measured it, when and where."""

    family: Label
    rate: Rate  # the measurement's figure: tokens/s (padding), output tokens/s (generate), TFLOP/s (a sweep)
    metric: Label  # what `rate` counts: `tokens/s`, `output tokens/s`, `TFLOP/s (attention alone)`
    source: Label  # the job that measured it: `job 42`, `padbench run`, `tune job 7`
    measured_at: Label  # ISO 8601 date and time, UTC
    setting: Label  # what the rows compared had in common: `packed · batch 32`, `static · batch 16 · context 512`


class AttentionPick(ResultModel):
    """`attention: auto` at one entry point: the family that ran there and why."""

    entry: ModelEntryPoint
    chosen: Label  # a family's name, or `flash` (the static default)
    measured: bool  # False: no comparable measurement here, the static default ran
    reason: Message  # in words: `fastest measured: flex 18.1k tokens/s on … in job 42 on 2026-11-27`
    device: Label  # the device the table was read for: a GPU's model name, or `cpu`
    # The decisive measurement: the chosen family's figure and the runner-up's beside it (None: the default).
    fastest: KernelFigure | None = None
    runner_up: KernelFigure | None = None


# One per entry point; a layout whose other strategies name families has a pick of its own.
AttentionPicks = Annotated[list[AttentionPick], Field(max_length=32)]
