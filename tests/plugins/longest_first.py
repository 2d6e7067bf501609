"""`longest-first`: a generate strategy of the tests' own, added as one module as every strategy of
worker/jobs/generate/strategies/ is: static batches of the requests with the longest answers first."""

from __future__ import annotations

from collections.abc import Sequence

from padbench.worker.jobs.generate.schedule import Request
from padbench.worker.jobs.generate.strategies.base import register
from padbench.worker.jobs.generate.strategies.static import StaticBatches


class LongestFirst(StaticBatches):
    name = "longest-first"

    def order(self, requests: Sequence[Request]) -> list[Request]:
        return sorted(requests, key=lambda request: (-request.output_length, request.row))


register(LongestFirst())
