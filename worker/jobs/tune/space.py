"""The configurations a tune tries: every combination of its space's settings that can run together.

What cannot run together is never tried: flash kernels in fp32, FP8 or bf16 training in another dtype, and the
training settings (checkpointing, precision) in inference and generation, where they mean nothing. Kernels the
spec leaves unset are every attention family this worker runs for the job's layouts (decode kernels in generate
mode).
"""

from __future__ import annotations

import itertools

from padbench.contract.kernel_families import BEST_FLASH, attention_names, needs_half_precision
from padbench.contract.kernel_family import ModelEntryPoint
from padbench.contract.training import Precision
from padbench.kinds.tune.contract import TuneConfig, TuneJobSpec, TuneMode, layout_entry


def worker_families(kernel_names: list[str], mode: TuneMode = "training") -> list[str]:
    """The attention names a tune tries when its spec names none: `flash` (the best flash implementation the
    worker has) and every other family it runs, the flash implementations left to `flash`; in generate mode,
    the families with a KV-cache (decode) kernel."""
    entries: tuple[ModelEntryPoint, ...] = ("decode",) if mode == "generate" else ("padded", "packed")
    named = [name for name in attention_names(entries) if name in kernel_names]
    flash = [name for name in named if name != BEST_FLASH and needs_half_precision(name, entries[0])]
    return [BEST_FLASH, *(name for name in named if name not in flash)] if flash else named


def configurations(spec: TuneJobSpec, families: list[str], ranks: int = 1) -> list[TuneConfig]:
    """`ranks`: the processes each trial runs as; reshard-after-forward is searched only where they shard."""
    if spec.mode == "generate":
        return generate_configurations(spec, families)
    space = spec.tune.space
    kernels = [str(kernel) for kernel in space.kernels] if space.kernels is not None else families
    training = spec.mode == "training"
    checkpointing = list(space.checkpointing) if training else [None]
    # fp32 keeps everything in fp32 whatever is asked: `auto` is its one precision.
    precisions: list[Precision | None] = \
        ([precision for precision in space.precision if _precision_runs(precision, spec)] or ["auto"]) \
        if training else [None]
    reshards: list[bool | None] = list(space.reshard_after_forward) if training and ranks > 1 else [None]
    found = []
    for layout, kernel, size, ckpt, compiled, precision, reshard in itertools.product(
            space.layouts, kernels, space.batch_sizes, checkpointing, space.compile, precisions, reshards):
        if not spec.kernel_runs(kernel, layout_entry(layout)):
            continue
        found.append(TuneConfig(layout=layout, kernel=kernel, batch_size=size, checkpointing=ckpt,
                                compile=compiled, precision=precision, reshard_after_forward=reshard))
    return found


def _precision_runs(precision: str, spec: TuneJobSpec) -> bool:
    """fp8 and bf16 keep (part of) the model in bf16; amp computes in a half-precision dtype."""
    if precision in ("fp8", "bf16"):
        return spec.dtype == "bf16"
    if precision == "amp":
        return spec.dtype != "fp32"
    return True


def generate_configurations(spec: TuneJobSpec, families: list[str]) -> list[TuneConfig]:
    """Batching strategy × decode kernel × concurrency × compile; the training settings mean nothing here."""
    space = spec.tune.space
    kernels = [str(kernel) for kernel in space.kernels] if space.kernels is not None else families
    return [TuneConfig(layout=strategy, kernel=kernel, batch_size=size, compile=compiled)
            for strategy, kernel, size, compiled in itertools.product(
                space.strategies, kernels, space.batch_sizes, space.compile)
            if spec.kernel_runs(kernel, "decode")]
