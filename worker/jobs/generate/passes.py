"""One pass of a strategy over a set of requests, timed step by step on the device's clock.

Each step is issued as soon as it is planned and marked with a device event; the host waits for the device
once, at the end of the pass, then reads every step's time. Nothing in between reads the device.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from padbench.worker.engine.decoding.cache import HostPlan
from padbench.worker.engine.decoding.decoder import Decoder
from padbench.worker.engine.measure.timing import clock_for
from padbench.worker.jobs.generate.schedule import Request, Scheduler, StepRecord
from padbench.worker.jobs.generate.strategies import GENERATE_STRATEGIES


@dataclass(frozen=True)
class PassTiming:
    step_seconds: tuple[float, ...]
    records: tuple[StepRecord, ...]

    @property
    def seconds(self) -> float:
        return sum(self.step_seconds)


def plans(strategy: str, scheduler: Scheduler, requests: Sequence[Request]) -> Iterator[tuple[HostPlan, StepRecord]]:
    """The steps of one pass of the registered strategy `strategy` over `requests`."""
    return GENERATE_STRATEGIES.get(strategy).steps(scheduler, requests)


def run_pass(strategy: str, scheduler: Scheduler, decoder: Decoder, requests: Sequence[Request],
             device: torch.device) -> PassTiming:
    clock = clock_for(device)
    records = []
    with torch.inference_mode():
        clock.start()
        for plan, record in plans(strategy, scheduler, requests):
            decoder.step(plan)
            clock.mark()
            records.append(record)
        seconds = clock.collect()
    return PassTiming(tuple(seconds), tuple(records))
