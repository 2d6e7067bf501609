"""What `padbench plan` prints: the model's parameters, how the job would run, and its model state per rank.

Imported only when the command runs: building the CLI's parser must never load torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO

import torch
from rich import box
from rich.table import Table
from rich.text import Text

from padbench.contract.parallel import MAX_NODES, scaling_counts
from padbench.contract.spec import JobSpecBase
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.kinds.record import kind_spec
from padbench.machine import cuda_gpu_present
from padbench.report.terminal import console_for
from padbench.worker.engine.model.memory_plan import (
    GATHERED_DECODER_LAYERS,
    MemoryPlan,
    ModelFootprint,
    gib,
    job_plan,
    model_footprint,
    replica_needs,
)
from padbench.worker.jobs import get_job_runner
from padbench.worker.runtime.isolation import SpecProblem
from padbench.worker.runtime.memory import device_free_bytes
from padbench.worker.runtime.messages import first_line

EXIT_FITS, EXIT_DOES_NOT_FIT = 0, 1


class PlanInputError(ValueError):
    """A spec or option the plan cannot work from; the message says which and why."""


@dataclass(frozen=True)
class GpuMemory:
    """The free memory of each of the job's GPUs, where it is known, and where it comes from."""

    free_bytes: int | None
    source: str
    visible_gpus: int | None = None  # GPUs this machine shows, when the figure was read here


def report(job: JobSpecBase, gpus: int | None, gpu_memory: int | None, out: TextIO, nodes: int | None = None) -> int:
    spec = get_job_runner(job.kind).planned_run(job)
    if spec is None:
        noun = kind_spec(job.kind).report.noun
        raise PlanInputError(f"{noun} runs no model whose memory spreads over GPUs, so there is nothing to plan; "
                             "`padbench check` says whether it runs here")
    per_node, ranks_source = ranks_for(spec, gpus)
    node_count = nodes if nodes is not None else spec.nodes
    ranks = per_node * node_count  # FSDP2 shards over every rank of every node
    if node_count > 1:
        nodes_source = "--nodes" if nodes is not None else "the spec's nodes"
        ranks_source = f"{node_count} nodes ({nodes_source}) × {per_node} GPUs each ({ranks_source})"
    memory = memory_for(spec, per_node, gpu_memory)
    try:
        footprint = model_footprint(spec.model)
    except Exception as error:  # a refusal of the model (its type, its fields, its files): say it as it is
        raise PlanInputError(f"model: {first_line(error)}") from None
    try:
        plan = job_plan(spec, footprint, ranks, memory.free_bytes)
    except SpecProblem as error:  # adapters that cannot be counted here
        raise PlanInputError(str(error)) from None
    console = console_for(out)
    for line in header_lines(spec, footprint, plan, ranks_source):
        console.print(Text(line))
    console.print(parts_table(plan, footprint, drawn=console.is_terminal))
    fine = True
    for fits, line in fit_lines(spec, footprint, plan, memory, per_node):
        console.print(Text(line, style="" if fits else "bold red"))
        fine = fine and fits
    return EXIT_FITS if fine else EXIT_DOES_NOT_FIT


def visible_gpu_count() -> int:
    return torch.cuda.device_count() if cuda_gpu_present() else 0


def ranks_for(spec: PaddingJobSpec, gpus: int | None) -> tuple[int, str]:
    """The ranks to plan for and where the number comes from."""
    if gpus is not None:
        return gpus, "--gpus"
    if isinstance(spec.gpus, list):  # a scaling axis: its smallest count holds the most per GPU
        counts = scaling_counts(spec.gpus, visible_gpu_count())
        return counts[0], f"the smallest count of the spec's scaling axis {spec.gpus}"
    if spec.gpus != "all":
        return spec.gpus, "the spec's gpus"
    visible = visible_gpu_count()
    if visible == 0:
        raise PlanInputError("gpus: all runs on every GPU of the worker that takes the job, and this machine has "
                             "none to count: give --gpus N")
    return visible, f"gpus: all, which depends on the worker that takes the job; here, the {visible} GPUs visible"


def memory_for(spec: PaddingJobSpec, ranks: int, gpu_memory: int | None) -> GpuMemory:
    """The free memory per GPU to plan against: given, else the least free of this machine's first `ranks`."""
    if gpu_memory is not None:
        return GpuMemory(gpu_memory, "--gpu-memory")
    if spec.device == "cpu":
        return GpuMemory(None, "device cpu: its ranks share the host's memory")
    if visible_gpu_count() == 0:
        return GpuMemory(None, "no GPU here")
    visible = visible_gpu_count()
    readings = [device_free_bytes(torch.device("cuda", index)) for index in range(min(ranks, visible))]
    free = [reading[0] for reading in readings if reading is not None]
    if len(free) < len(readings):
        return GpuMemory(None, "NVML cannot read the GPUs' memory here", visible)
    name = torch.cuda.get_device_name(0)
    return GpuMemory(min(free), f"the least free of this machine's {len(free)} × {name}", visible)


def header_lines(spec: PaddingJobSpec, footprint: ModelFootprint, plan: MemoryPlan, ranks_source: str) -> list[str]:
    return [
        f"model: {spec.model.label}, {footprint.parameters:,} parameters ({footprint.parameters / 1e9:.2f} B): "
        f"{footprint.decoder_layers} decoder layers of up to {footprint.largest_layer_parameters:,}, "
        f"{footprint.root_parameters:,} outside them (embeddings, final norm, LM head)",
        *active_lines(footprint),
        f"gpus: {plan.ranks} ({ranks_source})",
        f"runs: {spec.mode}, {run_description(plan)}",
        *([f"trains: {spec.training.method} adapters (r {spec.training.lora.r}), {plan.trainable_parameters:,} "
           "parameters; the base weights frozen"] if plan.trainable_parameters is not None else []),
    ]


def active_lines(footprint: ModelFootprint) -> list[str]:
    """A mixture of experts' parameters per token (none for a dense model, whose parameters are all active)."""
    active = footprint.active_parameters
    if active is None:
        return []
    return [f"active: {active:,} parameters per token ({active / 1e9:.2f} B): the top-k experts a token is routed to "
            "and every parameter outside the experts; memory holds every expert"]


def run_description(plan: MemoryPlan) -> str:
    where = {"single": "on one GPU", "replicated": f"replicated on {plan.ranks} GPUs (a full copy on each)",
             "sharded": f"sharded over {plan.ranks} GPUs (FSDP2)"}[plan.parallelism]
    if plan.precision == "amp":
        return f"{where}, precision amp: fp32 weights, gradients and AdamW state, computing in {plan.compute_dtype}"
    return f"{where}, everything in {plan.precision}"


def parts_table(plan: MemoryPlan, footprint: ModelFootprint, drawn: bool) -> Table:
    """The parts per rank; ruled on a terminal, plain columns for a pipe or a file (what scripts read)."""
    table = Table(show_edge=False, header_style="bold", pad_edge=False, box=box.HEAVY_HEAD if drawn else None)
    table.add_column("per rank", no_wrap=True)
    table.add_column("GiB", justify="right", no_wrap=True)
    table.add_column("bytes", justify="right", no_wrap=True)
    table.add_column("what")
    for name, count in plan.parts():
        table.add_row(name, f"{count / 2**30:.1f}", f"{count:,}", part_description(name, plan, footprint))
    table.add_row("total", f"{plan.total / 2**30:.1f}", f"{plan.total:,}", "model state; activations come on top",
                  style="bold")
    return table


def part_description(name: str, plan: MemoryPlan, footprint: ModelFootprint) -> str:
    kept = "fp32" if plan.precision == "amp" else plan.precision
    share = f"1/{plan.ranks} of the parameters" if plan.parallelism == "sharded" else "every parameter"
    if name == "gathered layers":
        layers = min(GATHERED_DECODER_LAYERS, footprint.decoder_layers)
        return (f"{plan.compute_dtype} copies FSDP2 all-gathers: the root's {footprint.root_parameters:,} "
                f"parameters and {layers} decoder layers of {footprint.largest_layer_parameters:,}")
    if plan.trainable_parameters is not None and name != "weights":
        trained = f"the {plan.trainable_parameters:,} adapter parameters"
        what = {"gradients": "gradients", "optimizer state": "AdamW's two moments"}[name]
        return f"{what} of {trained}" + (f", 1/{plan.ranks} of them" if plan.parallelism == "sharded" else "")
    what = {"weights": f"{kept} weights", "gradients": f"{kept} gradients",
            "optimizer state": f"AdamW's two moments in {kept}"}[name]
    if plan.trainable_parameters is not None:
        what = "the frozen base weights (a qlora base's linear layers in 4 bits) and the adapters"
    return f"{what}, {share}"


def fit_lines(spec: PaddingJobSpec, footprint: ModelFootprint, plan: MemoryPlan,
              memory: GpuMemory, per_node: int | None = None) -> list[tuple[bool, str]]:
    """(fine, line) for each thing said about the fit (`per_node`: the GPUs each node gives; all on one)."""
    per_node = plan.ranks if per_node is None else per_node
    lines: list[tuple[bool, str]] = []
    if spec.mode == "inference" and spec.distributed.inference == "auto" and plan.ranks > 1:
        needs = gib(replica_needs(footprint, spec.dtype))
        planned = "" if memory.free_bytes is not None else "; planned as replicated, the GPUs' memory not known"
        lines.append((True, f"distributed.inference auto: replicated when each GPU has {needs} free "
                            f"(the weights and headroom), sharded otherwise{planned}"))
    if memory.visible_gpus is not None and memory.visible_gpus < per_node:
        lines.append((False, f"this machine has {memory.visible_gpus} GPUs visible; the job needs {per_node}"
                             f"{' on each node' if per_node < plan.ranks else ''}"))
    if memory.free_bytes is None:
        lines.append((True, f"fit: not checked ({memory.source}; give --gpu-memory SIZE to compare)"))
    elif plan.total <= memory.free_bytes:
        lines.append((True, f"fits: {gib(plan.total)} per rank of {gib(memory.free_bytes)} free ({memory.source}), "
                            f"{gib(memory.free_bytes - plan.total)} left for activations"))
    else:
        lines.append((False, f"does not fit: {gib(plan.total)} per rank needed, {gib(memory.free_bytes)} free "
                             f"({memory.source})"))
        lines.extend((False, line) for line in fewest_gpus_line(spec, footprint, plan, memory.free_bytes))
    return lines


# GPU counts tried for a model that does not fit: the sizes of one host, then nodes of eight (the H100 and H200
# hosts the published multi-node figures use) up to MAX_NODES of them.
HOST_GPUS = 8
GPU_COUNTS = (2, 4, 8, *(HOST_GPUS * nodes for nodes in (2, 4, 8, 16, 32, MAX_NODES)))


def fewest_gpus_line(spec: PaddingJobSpec, footprint: ModelFootprint, plan: MemoryPlan, free: int) -> list[str]:
    """Where more GPUs would hold it: the fewest that do, with the bytes each holds then."""
    for ranks in (count for count in GPU_COUNTS if count > plan.ranks):
        spread = job_plan(spec, footprint, ranks, free)
        if spread.total <= free:
            settings = f"gpus: {ranks}" if ranks <= HOST_GPUS else f"nodes: {ranks // HOST_GPUS}, gpus: {HOST_GPUS}"
            return [f"needs at least {ranks} GPUs of this memory: {gib(spread.total)} ({spread.total:,} bytes) per "
                    f"GPU, {spread.parallelism} ({settings})"]
    return []
