"""The generate strategies' plugin interface and registry: how a pass serves its requests, step by step.

A strategy owns its name and its facts and turns a pass's requests into the steps the scheduler plans
(`schedule.Scheduler`); the job, the correctness gate and the CUDA graphs follow from those facts, so nothing else
asks which strategy runs. A generate spec names strategies by `GenerateStrategyName`; each module of this package
registers one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import ClassVar

from padbench.contract.registry import Registry
from padbench.worker.engine.decoding.cache import HostPlan
from padbench.worker.jobs.generate.schedule import Request, Scheduler, StepRecord

Steps = Iterator[tuple[HostPlan, StepRecord]]


class GenerateStrategy(ABC):
    name: ClassVar[str]  # what a spec's `strategies` and the result's rows name it
    # Whether prompts are left-padded into batches whose slots all decode until the batch's longest request ends
    # (generation paying for padding twice); otherwise a finished request's slot is refilled at once.
    padded: ClassVar[bool]
    # Whether steps prefill new prompts beside the running slots' decodes: their token counts vary from step to
    # step, so with CUDA graphs they are padded to a few token buckets, each replayed as a graph of its own.
    prefills_beside_decodes: ClassVar[bool] = False

    @abstractmethod
    def steps(self, scheduler: Scheduler, requests: Sequence[Request]) -> Steps:
        """Every step of one pass over `requests`, planned by `scheduler`, with what each step did."""


GENERATE_STRATEGIES: Registry[GenerateStrategy] = Registry("generate strategy")


def register(strategy: GenerateStrategy) -> GenerateStrategy:
    return GENERATE_STRATEGIES.add(strategy.name, strategy)
