"""What a finished job adds to the worker's table of kernel speeds: each measured row as a `Figure`.

- a padding job: every valid row, under its layout's entry point (padded rows or packs); a scaling axis's rows
  (several GPU counts) are left out;
- a generate job: every valid strategy row (the references run transformers' own kernels, not a family);
- a tune: its finalists' full measurements (repeats, the same rules as a job's rows), each kernel at the best
  configuration the tune found for it; its shorter trials ran different numbers of batches and are left out;
- an attention sweep: each measured cell's TFLOP/s as evidence for padding jobs (dense cells for padded rows,
  varlen cells for packs; forward for inference, forward and backward for training), a family's best sweep
  kernel at each length; a model's own rows, when there are any, are preferred to it.
Rows whose kernel belongs to no family (a plugin's, or transformers' own) add nothing.
"""

from __future__ import annotations

import json
import logging
from hashlib import sha256
from pathlib import Path
from typing import Any

from padbench.contract.kernel_families import BEST_FLASH, KERNEL_FAMILIES, families, sweep_declaration
from padbench.contract.kernel_family import ModelEntryPoint
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.model_spec import ModelSpec
from padbench.contract.registry import UnknownPlugin
from padbench.contract.results import JobResultBase
from padbench.contract.spec import strategy_entry_point
from padbench.kinds.attention.contract import AttentionResult
from padbench.kinds.generate.contract import GenerateResult
from padbench.kinds.padding.contract import PaddingResult
from padbench.kinds.tune.contract import TuneResult
from padbench.worker.runtime.kernel_speeds import ALONE_METRIC, Figure, KernelSpeeds, Place, length_band

log = logging.getLogger("padbench.worker")
PADDING_METRIC, GENERATE_METRIC = "tokens/s", "output tokens/s"


def model_digest(model: ModelSpec) -> str:
    document = model.model_dump(mode="json", exclude_none=True)
    return sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()[:16]


def family_of(attention: str, kernel: str, entry: ModelEntryPoint) -> str | None:
    """The family a row ran: the one it named, or for `flash` the family whose kernel there ran."""
    if attention != BEST_FLASH:
        return attention if attention in KERNEL_FAMILIES else None
    return next((family.name for family in families()
                 if (declared := family.kernel(entry)) is not None and declared.name == kernel), None)


def device_of(result: JobResultBase) -> str:
    return result.environment.gpu_name or result.environment.device


def padding_figures(result: PaddingResult, source: str) -> list[Figure]:
    spec = result.spec
    if isinstance(spec.gpus, list):  # a scaling axis: its rows ran at several GPU counts, one launch each
        return []
    found = []
    for row in result.strategies:
        entry = strategy_entry_point(row.strategy)
        family = family_of(row.attention, row.kernel, entry)
        if row.status != "ok" or not row.tokens_per_s or family is None:
            continue
        # A probed size is each kernel's own largest fit: rows asked `auto` compare as the user would run them.
        batch = "batch auto" if row.probe is not None or row.auto_times is not None else f"batch {row.batch_size}"
        setting = [row.label, batch, f"compile {spec.compile}"]
        setting += [f"experts {row.experts}"] if row.experts else []
        setting += [f"{result.parallel.gpus} GPUs"] if result.parallel is not None else []
        found.append(Figure(
            place=Place("padding", device_of(result), spec.dtype, spec.mode, entry),
            band=length_band(spec.data.max_length), model=spec.model.label, model_digest=model_digest(spec.model),
            setting=" · ".join(setting), family=family, kernel=row.kernel, rate=row.tokens_per_s,
            metric=PADDING_METRIC, source=source, measured_at=result.environment.started_at,
            torch=result.environment.torch))
    return found


def generate_figures(result: GenerateResult, source: str) -> list[Figure]:
    spec = result.spec
    found = []
    for row in result.rows:
        family = family_of(row.attention, row.kernel, "decode")
        if row.reference or row.status != "ok" or not row.output_tokens_per_s or family is None:
            continue
        setting = [row.strategy, f"batch {row.batch_size}", f"compile {spec.compile}",
                   f"cuda graphs {spec.cuda_graphs}"]
        setting += [f"context {row.context}"] if row.context is not None else []
        longest = (row.context + spec.max_output_tokens()) if row.context is not None else spec.longest_context()
        found.append(Figure(
            place=Place("generate", device_of(result), spec.dtype, "generate", "decode"),
            band=length_band(longest), model=spec.model.label, model_digest=model_digest(spec.model),
            setting=" · ".join(setting), family=family, kernel=row.kernel, rate=float(row.output_tokens_per_s),
            metric=GENERATE_METRIC, source=source, measured_at=result.environment.started_at,
            torch=result.environment.torch))
    return found


def tune_figures(result: TuneResult, source: str) -> list[Figure]:
    """Each kernel's fastest finalist: the best configuration the tune found for it, measured in full."""
    spec = result.spec
    generate = spec.mode == "generate"
    best: dict[tuple[str, ModelEntryPoint], Figure] = {}
    for finalist in result.finalists:
        trial = result.trials[finalist.trial]
        entry: ModelEntryPoint = "decode" if generate else strategy_entry_point(trial.config.layout)
        family = family_of(trial.config.kernel, trial.kernel_ran or "", entry)
        if finalist.status != "ok" or not finalist.tokens_per_s or family is None:
            continue
        longest = spec.data.max_length + (spec.max_output_tokens() if generate else 0)
        figure = Figure(
            place=Place("generate" if generate else "padding", device_of(result), spec.dtype, spec.mode, entry),
            band=length_band(longest), model=spec.model.label, model_digest=model_digest(spec.model),
            setting=f"tune finalists ({entry})", family=family, kernel=trial.kernel_ran or family,
            rate=finalist.tokens_per_s, metric=GENERATE_METRIC if generate else PADDING_METRIC, source=source,
            measured_at=result.environment.started_at, torch=result.environment.torch)
        kept = best.get((family, entry))
        if kept is None or figure.rate > kept.rate:
            best[(family, entry)] = figure
    return list(best.values())


def sweep_family(kernel: str) -> str | None:
    """The family of a sweep kernel; None for one that stands for no model's attention: FP8 (`flash-attn-fp8`)
    quantizes what a model's rows compute in the job's dtype."""
    if "fp8" in kernel:
        return None
    try:
        return sweep_declaration(kernel)[0].name
    except UnknownPlugin:  # a plugin's kernel no longer registered
        return None


def sweep_figures(result: AttentionResult, source: str) -> list[Figure]:
    """Each family's fastest sweep kernel at each length, as TFLOP/s of the attention alone."""
    spec = result.spec
    shape = f"{spec.heads} heads × {spec.head_dim}" + (f", {spec.kv_heads} kv heads" if spec.kv_heads else "") + \
        (", causal" if spec.causal else "")
    best: dict[tuple[str, int], Figure] = {}
    for cell in result.cells:
        family = sweep_family(cell.kernel)
        if cell.status != "ok" or not cell.tflops or family is None:
            continue
        figure = Figure(
            place=Place("padding", device_of(result), spec.dtype,
                        "inference" if spec.direction == "forward" else "training",
                        "padded" if spec.layout == "dense" else "packed"),
            band=length_band(cell.seq_len), model=f"attention alone ({shape})",
            model_digest="sweep:" + sha256(shape.encode()).hexdigest()[:16],
            setting=f"sweep · batch {spec.batch} · length {cell.seq_len}", family=family, kernel=cell.kernel,
            rate=cell.tflops, metric=ALONE_METRIC, source=source, measured_at=result.environment.started_at,
            torch=result.environment.torch)
        kept = best.get((family, cell.seq_len))
        if kept is None or figure.rate > kept.rate:
            best[(family, cell.seq_len)] = figure
    return list(best.values())


def figures_of(result: JobResultBase, source: str) -> list[Figure]:
    """Every figure `result` adds to the table, measured by `source` (`job 42`, `padbench run`)."""
    if isinstance(result, PaddingResult):
        return padding_figures(result, source)
    if isinstance(result, GenerateResult):
        return generate_figures(result, source)
    if isinstance(result, TuneResult):
        return tune_figures(result, f"tune {source}")
    if isinstance(result, AttentionResult):
        return sweep_figures(result, f"sweep {source}")
    return []


def record_result(document: Any, source: str, path: Path) -> int:
    """Add a finished job's figures to the table at `path`; how many. Never raises for the table itself: a
    measurement that cannot be kept is logged, and the job's result goes on as it would without the table."""
    try:
        figures = figures_of(JOB_RESULT_ADAPTER.validate_python(document), source)
        KernelSpeeds(path).record(figures)
    except (OSError, ValueError) as error:
        log.warning("the kernel speeds table %s was not updated: %s", path, error)
        return 0
    return len(figures)
