"""`static`: requests in arrival order, `slots` at a time; prompts left-padded to the batch's longest and
prefilled together, then the batch decodes until its longest request ends, finished slots computing on."""

from __future__ import annotations

from collections.abc import Sequence

from padbench.worker.jobs.generate.schedule import Request, Scheduler, static_batches
from padbench.worker.jobs.generate.strategies.base import GenerateStrategy, Steps, register


class StaticBatches(GenerateStrategy):
    name = "static"
    padded = True

    def order(self, requests: Sequence[Request]) -> list[Request]:
        """The order requests are cut into batches in."""
        return list(requests)

    def steps(self, scheduler: Scheduler, requests: Sequence[Request]) -> Steps:
        for batch in static_batches(self.order(requests), scheduler.slots):
            yield from scheduler.batch(batch)


register(StaticBatches())
