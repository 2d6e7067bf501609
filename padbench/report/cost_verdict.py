"""What the kinds' verdicts by cost share: a row's cost at the price its job's worker was given, the ratio of two
rows' costs, and the lines that name the cheapest row and compare it with the runner-up and with static.

The kinds differ only in the rate their rows are priced by (a padding row's tokens/s, a generate row's output
tokens/s), the words for that rate and how a row is described, so `RowCosts` is handed those and each kind's
verdict by cost adds its own lines (contexts, references, scaling) around the ones here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from padbench.contract.results import JobResultBase
from padbench.report.efficiency import dollars, rate_cost
from padbench.report.noise import Vetted, compact_rate
from padbench.report.ranking import CHEAPEST_REASON, cost_ratio_interval


class StrategyRow(Vetted, Protocol):
    """A row a verdict by cost ranks: vetted like any row, and named by its strategy (`static` is the baseline)."""

    @property
    def strategy(self) -> str: ...


Row = TypeVar("Row", bound=StrategyRow)


def _job_gpus(row: object) -> int | None:
    """Every row priced on the GPUs the job held."""
    return None


@dataclass(frozen=True)
class RowCosts(Generic[Row]):
    """The rows of one priced job, costed by the rate its kind ranks them by."""

    result: JobResultBase
    rate: Callable[[Row], float | None]  # what a row is priced by: its tokens (of the kind's unit) per second
    describe: Callable[[Row], str]  # a row as the verdict names it
    unit: str  # the cost's unit: `per million tokens`
    rate_unit: str  # the rate's: `tokens/s`
    gpus: Callable[[Row], int | None] = _job_gpus  # a row priced on a GPU count of its own (a scaling axis)

    def cost(self, row: Row) -> str:
        cost = rate_cost(self.result, self.rate(row), self.gpus(row))
        return "no cost" if cost is None else dollars(cost)

    def versus(self, top: Row, base: Row, name: str) -> str:
        """`0.80× the runner-up's cost (dynamic / sdpa at batch 8: $0.3412), 95% interval 0.77–0.83×`."""
        top_rate, base_rate = self.rate(top), self.rate(base)
        assert top_rate and base_rate
        return (f"{base_rate / top_rate:.2f}× {name}'s cost ({self.describe(base)}: {self.cost(base)})"
                + cost_ratio_interval(top, base))

    def within_noise_line(self, top: Row, tied: Sequence[Row], where: str = "") -> str:
        """The cheapest row and those its repeats cannot tell it from, each with its cost."""
        names = ", ".join(f"{self.describe(row)} ({self.cost(row)})" for row in tied)
        return (f"verdict by cost{where}: within noise — {self.describe(top)} ({self.cost(top)} {self.unit}), "
                f"{names}: {CHEAPEST_REASON}")

    def cheapest_line(self, top: Row, where: str = "") -> str:
        return (f"verdict by cost{where}: cheapest {self.describe(top)}: {self.cost(top)} {self.unit} "
                f"({compact_rate(self.rate(top) or 0.0)} {self.rate_unit})")

    def comparisons(self, ranked: Sequence[Row], margin: bool = True) -> list[str]:
        """The cheapest row's (`ranked[0]`) cost against the runner-up's (where `margin`) and static's."""
        top, lines = ranked[0], []
        if margin and len(ranked) > 1 and ranked[1].strategy != "static":  # a static runner-up's ratio follows
            lines.append(f"  margin: {self.versus(top, ranked[1], 'the runner-up')}")
        statics = [row for row in ranked if row.strategy == "static"]
        if top.strategy != "static" and statics:
            lines.append(f"  saving: {self.versus(top, statics[0], 'static')}")
        return lines
