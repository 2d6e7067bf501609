"""What a strategy's ranks agree on, so they step together, and how their figures become the row's.

With one process every function here is the identity (or close to it): the single-GPU path is the one-rank
case of the same code, which is what lets a job on one GPU through the launcher give the same figures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import cycle, islice
from typing import TypeVar

import torch

from padbench.contract.parallel import RankFigures, RankShares
from padbench.worker.engine.measure.timing import Measurement, Throughput
from padbench.worker.engine.parallel.overlap import CollectiveTime
from padbench.worker.engine.parallel.rank_measure import RankRun, group_measurement, profile_collectives
from padbench.worker.engine.parallel.ranks import Ranks
from padbench.worker.engine.training.steps import StepFn

T = TypeVar("T")


class StrategyFailed(Exception):
    """A reason this strategy cannot be measured; the job goes on with the next one. On several ranks it is
    raised only where every rank reached the same decision (see `agreed_preparation`)."""


def agreed_preparation(ranks: Ranks, prepare: Callable[[], T]) -> T:
    """Run `prepare`; the strategy goes ahead only when it succeeded on every rank. A rank whose own share
    cannot be measured (a sanity check, an unavailable kernel) would otherwise leave the others stepping
    alone into a collective."""
    try:
        prepared, failure = prepare(), None
    except StrategyFailed as error:
        prepared, failure = None, error
    if not ranks.all_agree(failure is None):
        raise failure or StrategyFailed("another rank could not prepare this strategy (its reason is in its log)")
    assert prepared is not None
    return prepared


def equal_steps(ranks: Ranks, batches: list[T]) -> tuple[list[T], int]:
    """Every rank's first n batches, n the fewest any rank has, and how many of its own it left out."""
    kept = ranks.smallest(len(batches))
    return batches[:kept], len(batches) - kept


def equal_warmup(ranks: Ranks, order: list[int]) -> list[int]:
    """The warm-up's batches, lengthened (cycling its own) to the longest any rank has: a rank that warms up
    on more batch shapes than another must not leave it waiting."""
    longest = ranks.largest(len(order))
    return list(islice(cycle(order), longest)) if order else order


def collective_time(ranks: Ranks, step: StepFn, batches: int, device: torch.device) -> CollectiveTime | None:
    """Seconds per step in collectives and those of them exposed, profiled after the measurement; None on one
    process (there are none)."""
    return profile_collectives(step, batches, device) if ranks.spread else None


def rank_device(device: torch.device) -> str:
    """How the result names a rank's device: `cuda:1 NVIDIA H100 80GB HBM3`, or `cpu`."""
    if device.type != "cuda":
        return device.type
    return f"cuda:{device.index or 0} {torch.cuda.get_device_name(device)}"


@dataclass(frozen=True)
class GroupFigures:
    measurement: Measurement
    real_tokens: list[int]
    computed_tokens: list[int]
    flops: list[float | None]
    runs: list[RankRun]  # every rank's own, in rank order; one on a single process

    @property
    def matmul_flops(self) -> float | None:
        """The group's GEMM rate: the sum of what each rank measured on its own GPU."""
        rates = [run.matmul_flops for run in self.runs]
        return None if any(rate is None for rate in rates) else sum(rate for rate in rates if rate is not None)

    def shares(self, totals: Throughput) -> RankShares | None:
        if len(self.runs) == 1:
            return None
        per_gpu = totals.tokens_per_s / len(self.runs) if totals.tokens_per_s is not None else None
        ranks = [_rank_figures(rank, run) for rank, run in enumerate(self.runs)]
        return RankShares(ranks=ranks, tokens_per_s_per_gpu=per_gpu,
                          batches_left_out=sum(run.batches_left_out for run in self.runs),
                          work_imbalance=_work_imbalance(ranks), largest_step_gap_tokens=_largest_step_gap(self.runs))


def _measured_indices(run: RankRun) -> list[int]:
    return [index for repeat in run.measurement.repeats for index in repeat.batch_indices]


def _rank_figures(rank: int, run: RankRun) -> RankFigures:
    indices = _measured_indices(run)
    seconds = sum(repeat.seconds for repeat in run.measurement.repeats)
    return RankFigures(rank=rank, device=run.device, real_tokens=sum(run.real_tokens[i] for i in indices),
                       computed_tokens=sum(run.computed_tokens[i] for i in indices), batches=len(indices),
                       measured_seconds=seconds, peak_allocated_bytes=run.peak_allocated_bytes,
                       collective_seconds_per_step=None if run.collectives is None else run.collectives.total_s,
                       exposed_collective_seconds_per_step=None if run.collectives is None
                       else run.collectives.exposed_s)


def _work_imbalance(ranks: list[RankFigures]) -> float | None:
    work = [rank.computed_tokens or 0 for rank in ranks]
    mean = sum(work) / len(work)
    return max(work) / mean - 1 if mean > 0 else None


def _largest_step_gap(runs: list[RankRun]) -> int | None:
    """Ranks step together, so batch i of every rank is one step (`group_measurement` checks they agree)."""
    steps = sorted(set(_measured_indices(runs[0])))
    gaps = [max(run.real_tokens[i] for run in runs) - min(run.real_tokens[i] for run in runs) for i in steps]
    return max(gaps, default=None)


def group_figures(ranks: Ranks, mine: RankRun) -> GroupFigures:
    """Every rank's run, gathered on every rank, as the group's figures (one process: its own)."""
    runs: list[RankRun] = ranks.gather(mine)
    group = group_measurement(runs) if ranks.spread else None
    if group is None:
        return GroupFigures(mine.measurement, list(mine.real_tokens), list(mine.computed_tokens), list(mine.flops),
                            runs)
    return GroupFigures(group.measurement, group.real_tokens, group.computed_tokens, group.flops, runs)
