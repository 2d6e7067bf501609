"""A measured padding row's figures: this rank's measurement gathered with every other rank's into the group's
totals, and the fields of the row's result that those totals give (tokens per second, MFU, the repeats' spread).

Every rank calls `group_totals` at the same point (it gathers), so every rank states the same figures.
"""

from __future__ import annotations

from padbench.contract.results import EnergyUse, GpuActivity, MemoryStats
from padbench.contract.training import StepSplit
from padbench.worker.engine.data.batches import Batch
from padbench.worker.engine.measure.spread import repeat_spread
from padbench.worker.engine.measure.timing import Measurement, Throughput, summarize
from padbench.worker.engine.model import flops
from padbench.worker.engine.parallel.overlap import CollectiveTime
from padbench.worker.engine.parallel.rank_measure import RankRun
from padbench.worker.engine.training.steps import compiled_graph_count
from padbench.worker.jobs.padding.rank_steps import GroupFigures, group_figures, rank_device
from padbench.worker.jobs.padding.setup import JobSetup


def recompile_reason(graphs_after_warmup: int | None) -> str | None:
    """Why a row is invalid when a graph was compiled after its warm-up (None: none was, or nothing counted)."""
    # Not only compiled models: a kernel may compile its own op (FlexAttention does, on CUDA).
    if graphs_after_warmup is None:
        return None
    new_graphs = compiled_graph_count() - graphs_after_warmup
    if new_graphs <= 0:
        return None
    return f"torch.compile compiled {new_graphs} new graph(s) during the measurement (a batch shape recompiled)"


def group_totals(job: JobSetup, measurement: Measurement, batches: list[Batch], peak_allocated_bytes: int | None,
                 collectives: CollectiveTime | None, batches_left_out: int) -> tuple[GroupFigures, Throughput]:
    """Every rank's run of the row gathered, and the tokens, FLOPs and seconds they add up to."""
    shape = flops.ModelShape.of(job.model)
    passes = job.flop_factor
    counted = [float(passes * flops.batch_flops(shape, batch).total) for batch in batches]
    mine = RankRun(measurement, tuple(b.real_tokens for b in batches), tuple(b.computed_tokens for b in batches),
                   tuple(counted), peak_allocated_bytes, collectives, rank_device(job.device), batches_left_out,
                   job.matmul_flops)
    group = group_figures(job.ranks, mine)
    return group, summarize(group.measurement, group.real_tokens, group.computed_tokens, group.flops)


def measured_fields(group: GroupFigures, totals: Throughput, memory: MemoryStats, activity: GpuActivity | None,
                    split: StepSplit | None, energy: EnergyUse | None) -> dict[str, object]:
    """What a measured row states whether its measurement is valid or not."""
    return {
        "real_tokens": totals.real_tokens, "computed_tokens": totals.computed_tokens,
        "padding_efficiency": totals.real_tokens / totals.computed_tokens, "batches": totals.batches,
        "measured_seconds": totals.seconds, "warmup_seconds": group.measurement.warmup_seconds,
        "memory": memory, "gpu_activity": activity, "per_rank": group.shares(totals), "step_split": split,
        "energy": None if energy is None else energy.model_copy(update={"tokens": totals.real_tokens}),
    }


def rate_fields(job: JobSetup, group: GroupFigures, totals: Throughput) -> dict[str, object]:
    """A valid row's rates: tokens per second, its batches' percentiles and repeats, their spread, and MFU."""
    mfu = mfu_vs_matmul = None
    if totals.flops is not None and totals.seconds > 0:
        achieved = totals.flops / totals.seconds
        world = job.ranks.world
        mfu = achieved / (job.peak_flops * world) if job.peak_flops else None
        mfu_vs_matmul = achieved / group.matmul_flops if group.matmul_flops else None
    rates = [rate for rate in totals.repeat_tokens_per_s if rate is not None]
    return {
        "tokens_per_s": totals.tokens_per_s, "median_batch_tokens_per_s": totals.median_batch_tokens_per_s,
        "p90_batch_tokens_per_s": totals.p90_batch_tokens_per_s, "repeat_tokens_per_s": rates,
        "spread": repeat_spread(rates, job.spec.measurement.noise_cv), "mfu": mfu, "mfu_vs_matmul": mfu_vs_matmul,
    }
