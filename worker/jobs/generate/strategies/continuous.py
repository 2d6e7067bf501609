"""`continuous`: a finished request's slot is refilled at the next step, the new prompts prefilled, packed, in
the same forward as the running slots' decode tokens; steps with no prefill are pure decode."""

from __future__ import annotations

from collections.abc import Sequence

from padbench.worker.jobs.generate.schedule import Request, Scheduler
from padbench.worker.jobs.generate.strategies.base import GenerateStrategy, Steps, register


class ContinuousBatching(GenerateStrategy):
    name = "continuous"
    padded = False
    prefills_beside_decodes = True

    def steps(self, scheduler: Scheduler, requests: Sequence[Request]) -> Steps:
        return scheduler.continuous(requests)


register(ContinuousBatching())
