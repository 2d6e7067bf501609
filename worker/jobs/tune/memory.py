"""Which configurations cannot fit, decided before anything runs: each configuration's step on the engine's
estimate (the model state each rank holds, exact, plus the activations its batch and checkpointing keep; in
generate mode the weights, the KV cache of its concurrency and one prefill). What
the estimate lets through is confirmed in the configuration's own trial: one it wrongly admits runs out of
memory there, and is stopped with that reason.
"""

from __future__ import annotations

import torch

from padbench.kinds.tune.contract import TuneConfig, TuneJobSpec
from padbench.worker.engine.model.memory_plan import DTYPE_BYTES, model_footprint
from padbench.worker.engine.model.step_memory import Fit, StepPlanner
from padbench.worker.jobs.tune.trial_specs import padding_spec
from padbench.worker.runtime.memory import device_free_bytes


def available_bytes(spec: TuneJobSpec) -> int | None:
    """What every configuration must fit in per GPU: the spec's figure, else the GPU's free memory."""
    if spec.tune.memory_bytes is not None:
        return spec.tune.memory_bytes
    if spec.device == "cpu" or not torch.cuda.is_available():
        return None
    reading = device_free_bytes(torch.device("cuda", 0))
    return None if reading is None else reading[0]


def planner(spec: TuneJobSpec, ranks: int) -> ConfigPlanner:
    return ConfigPlanner(spec, ranks)


class ConfigPlanner:
    def __init__(self, spec: TuneJobSpec, ranks: int) -> None:
        self.spec, self.ranks = spec, ranks
        self.footprint = model_footprint(spec.model)

    def fit(self, config: TuneConfig, available: int | None) -> Fit:
        if self.spec.mode == "generate":
            return self.generate_fit(config, available)
        # The configuration's own job settings (precision decides the model state's bytes).
        job = padding_spec(self.spec, [config], batches=1)
        return StepPlanner(job, self.ranks, self.footprint).fit(config.batch_size, config.checkpointing, available)

    def generate_fit(self, config: TuneConfig, available: int | None) -> Fit:
        """The weights, a KV cache for `batch_size` sequences of the longest prompt and output, and one prefill's
        activations (the weights as an inference padding job on one GPU holds them: layout and kernel aside)."""
        as_forward = config.model_copy(update={"layout": "static", "kernel": "sdpa"})
        planner = StepPlanner(padding_spec(self.spec, [as_forward], batches=1), 1, self.footprint)
        state = planner.fit(1, None, available).state
        longest = self.spec.data.max_length + self.spec.max_output_tokens()
        cache = planner.shape.kv_cache_bytes(config.batch_size, longest, DTYPE_BYTES[self.spec.dtype])
        prefill = planner.shape.activation_bytes(config.batch_size * self.spec.data.max_length, "inference", None)
        return Fit(state + cache + prefill, available, state)
