"""`sorted`: static batches of requests ordered by output length, then prompt length (generation's binning), so
that a batch's slots finish together."""

from __future__ import annotations

from collections.abc import Sequence

from padbench.worker.jobs.generate.schedule import Request, sorted_order
from padbench.worker.jobs.generate.strategies.base import register
from padbench.worker.jobs.generate.strategies.static import StaticBatches


class SortedBatches(StaticBatches):
    name = "sorted"

    def order(self, requests: Sequence[Request]) -> list[Request]:
        return sorted_order(requests)


register(SortedBatches())
