"""Whether a row runs compiled: `compile: true`, `false`, or `auto` — compiled where compiling pays for itself.

A few steps are timed eagerly, then the model is compiled (`worker/engine/training/compilation.py`) and the same steps
are timed again, the first of them on its own: its time beyond a compiled step's is the compile time. `auto`
weighs that against the run the benchmark stands for, not the benchmark's own few seconds: the spec's `horizon`
(`2h`, `5B tokens`), over which it keeps the compiled model when the time it saves exceeds the compile time; with
no horizon, a long run, where a compiled step that is faster pays for any compile (on a GPU; on the CPU, `auto`
compiles only for a stated horizon). A horizon too short for any
compile to pay back is not compiled at all: compiling a decoder takes tens of seconds, and saves at most a
fraction of each step. All of this happens before the warm-up; the row states the decision, its reason and the
times, so compile time is never hidden in (nor silently left out of) what the row reports.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

import torch
from torch import nn

from padbench.contract.horizon import RunHorizon
from padbench.contract.spec import CompileChoice
from padbench.kinds.padding.contract import CompileReport
from padbench.worker.engine.parallel.ranks import Ranks
from padbench.worker.engine.training import steps
from padbench.worker.engine.training.compilation import compile_layers, uncompile_layers
from padbench.worker.engine.training.steps import StepFn

# Steps timed each way: enough for a median, few enough to cost little next to the warm-up.
TIMED_STEPS = 3
# No compile of a transformer takes less than this (inductor, dynamic shapes, a warm cache), and none saves more
# than this share of an eager step: a run shorter than LEAST_COMPILE_SECONDS / MOST_SAVED_SHARE cannot pay back.
LEAST_COMPILE_SECONDS = 20.0
MOST_SAVED_SHARE = 0.5

Scope = Literal["model", "decoder-layers"]
# Inductor builds CPU kernels for minutes and they seldom beat a transformer's eager step on a CPU, so there `auto`
# compiles only for a run it is told of.
CPU_WITHOUT_HORIZON = ("not compiled: on the CPU, compile: auto compiles only for a stated horizon (horizon: 2h), "
                       "since compiling there takes minutes and seldom makes a step faster")


def pays_back(eager_step_s: float, compiled_step_s: float, compile_seconds: float, planned: float) -> bool:
    return (eager_step_s - compiled_step_s) * planned > compile_seconds


@dataclass(frozen=True)
class Horizon:
    """The run `compile: auto` decides for, in steps of this row: None, a long run (any faster step pays)."""

    steps: float | None
    words: str  # the run, as the row's reason names it

    @classmethod
    def of(cls, horizon: RunHorizon | None, eager_step_s: float, tokens_per_step: float) -> Horizon:
        if horizon is None:
            return cls(None, "a long run (no horizon set)")
        if horizon.seconds is not None:
            return cls(horizon.seconds / eager_step_s, f"the horizon's {horizon.seconds:,.0f} s")
        assert horizon.tokens is not None
        return cls(horizon.tokens / max(tokens_per_step, 1.0), f"the horizon's {horizon.tokens:,} tokens")


@dataclass(frozen=True)
class RowSettings:
    """What the decision needs of the row and its spec: the run it stands for and a step's real tokens."""

    horizon: RunHorizon | None
    tokens_per_step: float


@dataclass
class RowCompiler:
    """What compiling means for one row: the whole model (inference) or its decoder layers in place (training)."""

    model: nn.Module
    mode: Literal["inference", "training"]

    @property
    def scope(self) -> Scope:
        return "model" if self.mode == "inference" else "decoder-layers"

    def compile(self) -> nn.Module:
        torch._dynamo.reset()  # a fresh graph per row: never the recompile limit of the last row's kernel
        if self.mode == "inference":
            return steps.compiled(self.model)
        compile_layers(self.model)
        return self.model

    def undo(self) -> None:
        if self.mode == "training":
            uncompile_layers(self.model)


def _seconds(calls: Sequence[Callable[[], object]], device: torch.device) -> list[float]:
    """Wall seconds of each call, the device synchronised after each: a compile is host time the device
    events of the measurement would see only as a gap."""
    seconds = []
    for call in calls:
        start = time.perf_counter()
        call()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds.append(time.perf_counter() - start)
    return seconds


def _timed(step: StepFn, indices: Sequence[int], device: torch.device) -> list[float]:
    return _seconds([partial(step, index) for index in indices], device)


def choose_compiled_step(requested: CompileChoice, compiler: RowCompiler, build_step: Callable[[nn.Module], StepFn],
                         indices: Sequence[int], settings: RowSettings, device: torch.device,
                         ranks: Ranks) -> tuple[StepFn, CompileReport | None]:
    """The step the row measures and what the row reports of compiling it (None for `compile: false`).

    On several ranks every decision is agreed (a rank compiles only where all do), so no rank runs a model the
    others do not: FSDP2's collectives pair the ranks' layers one by one.
    """
    eager = build_step(compiler.model)
    if requested is False:
        return eager, None
    # One batch, repeated: a second shape would recompile inside the compiled steps timed here (binned batches
    # differ in width and rows), which is compile time counted as step time. The warm-up shows the compiled
    # model every shape before the measurement.
    indices = [indices[0]] * TIMED_STEPS
    eager_step_s = statistics.median(_timed(eager, indices, device))
    horizon = Horizon.of(settings.horizon, eager_step_s, settings.tokens_per_step)
    report = CompileReport(requested=requested, compiled=False, eager_step_s=eager_step_s, reason="")
    if requested == "auto" and horizon.steps is None and device.type == "cpu":
        return eager, report.model_copy(update={"reason": CPU_WITHOUT_HORIZON})
    if requested == "auto" and horizon.steps is not None and not ranks.all_agree(
            eager_step_s * horizon.steps * MOST_SAVED_SHARE >= LEAST_COMPILE_SECONDS):
        return eager, report.model_copy(update={"reason": (
            f"not compiled: {horizon.words} take about {eager_step_s * horizon.steps:,.1f} s eagerly; compiling "
            f"takes at least {LEAST_COMPILE_SECONDS:g} s and saves at most {MOST_SAVED_SHARE:.0%} of a step, so it "
            "cannot pay back")})
    try:
        compiled = build_step(compiler.compile())
        first, *rest = _timed(compiled, indices, device)
    except Exception as error:  # the compiler refused this model or kernel: eager, saying why
        compiler.undo()
        if requested is True or ranks.spread:  # the other ranks are inside a step's collectives: no way back
            raise
        return eager, report.model_copy(update={"reason": f"not compiled: torch.compile failed: {error}"[:1000]})
    if device.type == "cuda":  # the eager steps' cached blocks would count as reserved at the measurement's start
        torch.cuda.empty_cache()
    compiled_step_s = statistics.median(rest)
    compile_seconds = max(0.0, first - compiled_step_s)
    report = report.model_copy(update={"compiled_step_s": compiled_step_s, "compile_seconds": compile_seconds})
    keep, why = _decide(requested, horizon, eager_step_s, compiled_step_s, compile_seconds)
    if ranks.all_agree(keep):
        return compiled, report.model_copy(update={"compiled": True, "scope": compiler.scope,
                                                   "reason": f"compiled: {why}"})
    compiler.undo()
    return eager, report.model_copy(update={"reason": f"not compiled: {why}"})


def _decide(requested: CompileChoice, horizon: Horizon, eager_step_s: float, compiled_step_s: float,
            compile_seconds: float) -> tuple[bool, str]:
    """Whether to keep the compiled model, and why, in the row's words."""
    if requested is True:
        return True, "compile: true"
    steps = f"a step in {compiled_step_s:.3g} s against {eager_step_s:.3g} s eagerly"
    if horizon.steps is None:
        faster = compiled_step_s < eager_step_s
        return faster, (f"{steps}, {'faster' if faster else 'no faster'}; over {horizon.words} the "
                        f"{compile_seconds:.1f} s of compiling are paid once")
    saved = (eager_step_s - compiled_step_s) * horizon.steps
    keep = pays_back(eager_step_s, compiled_step_s, compile_seconds, horizon.steps)
    return keep, (f"{steps}: it saves {max(saved, 0.0):,.1f} s over {horizon.words}, "
                  f"{'more' if keep else 'less'} than the {compile_seconds:.1f} s it took to compile")
