"""What each configuration runs as: a padding job (inference and training) whose rows are the configurations
sharing its job-level settings (compile, checkpointing, precision), so one child measures them all, each row a
(layout, kernel) at its batch sizes; in generate mode a generate job whose rows are the batching strategies
sharing its kernel, concurrency and compile setting, with no reference loops (the tune compares its own
configurations)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Literal

from padbench.contract.parallel import DistributedSpec
from padbench.contract.spec import MeasurementSpec, StrategySpec
from padbench.contract.training import TrainingSpec
from padbench.kinds.generate.contract import GenerateJobSpec, GenerateMeasurementSpec
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.kinds.tune.contract import TuneConfig, TuneJobSpec

# Settings one trial job holds for all its rows: compile, checkpointing, precision and reshard-after-forward
# (padding jobs); compile, kernel and concurrency (generate jobs).
JobSettings = tuple[bool, str | None, str | int | None, bool | None]
# Rows checked against the one-sequence reference before a trial is timed: enough to catch a broken layout or
# kernel, few enough that a short round measures more than it checks.
TRIAL_CORRECTNESS_SAMPLES = 2
# Requests a generate trial serves before timing: its decode step compiles and its CUDA graphs are captured there.
TRIAL_WARMUP_REQUESTS = 16


def job_settings(config: TuneConfig, mode: str) -> JobSettings:
    if mode == "generate":
        return config.compile, config.kernel, config.batch_size, None
    return config.compile, config.checkpointing, config.precision, config.reshard_after_forward


def grouped(indices: Sequence[int], configs: Sequence[TuneConfig], mode: str) -> dict[JobSettings, list[int]]:
    groups: dict[JobSettings, list[int]] = defaultdict(list)
    for index in indices:
        groups[job_settings(configs[index], mode)].append(index)
    return dict(groups)


def padding_spec(spec: TuneJobSpec, configs: Sequence[TuneConfig], batches: int, repeats: int = 1) -> PaddingJobSpec:
    """One padding job measuring `configs` (all with the same job settings) for `batches` batches each."""
    first = configs[0]
    sizes: dict[tuple[str, str], list[int]] = defaultdict(list)
    for config in configs:
        sizes[(config.layout, config.kernel)].append(config.batch_size)
    strategies = [StrategySpec.model_validate({"name": layout, "attention": kernel,
                                               "batch_size": sorted(set(batch_sizes))})
                  for (layout, kernel), batch_sizes in sizes.items()]
    training = TrainingSpec.model_validate({"precision": first.precision or "auto",
                                            "activation_checkpointing": first.checkpointing or "none"})
    # A trial keeps only its figures, so it skips the diagnostics after them (a step split, a profiler trace).
    measurement = MeasurementSpec(warmup_batches=2, min_seconds=0.0, min_batches=batches, max_batches=batches,
                                  repeats=repeats, correctness_samples=TRIAL_CORRECTNESS_SAMPLES, diagnostics=False)
    mode: Literal["inference", "training"] = "training" if spec.mode == "training" else "inference"
    distributed = DistributedSpec(reshard_after_forward=first.reshard_after_forward is not False)
    return PaddingJobSpec(model=spec.model, data=spec.data, dtype=spec.dtype, device=spec.device, gpus=spec.gpus,
                          mode=mode, strategies=strategies, attention=first.kernel, compile=first.compile,
                          training=training, measurement=measurement, distributed=distributed,
                          name=f"tune trial ({first.label})")


def generate_spec(spec: TuneJobSpec, configs: Sequence[TuneConfig], batches: int, repeats: int = 1) -> GenerateJobSpec:
    """One generate job measuring `configs` (one kernel, concurrency and compile setting; their strategies as rows)
    over `batches` full batches of requests (the spec's prompts, at most)."""
    first = configs[0]
    requests = min(spec.data.num_samples, first.batch_size * batches)
    strategies = list(dict.fromkeys(config.layout for config in configs))
    measurement = GenerateMeasurementSpec(repeats=repeats, warmup_requests=min(TRIAL_WARMUP_REQUESTS, requests),
                                          correctness_samples=TRIAL_CORRECTNESS_SAMPLES)
    return GenerateJobSpec.model_validate({
        "kind": "generate", "model": spec.model, "data": spec.data.model_copy(update={"num_samples": requests}),
        "dtype": spec.dtype, "device": spec.device, "output_length": spec.output_length, "strategies": strategies,
        "references": [], "attention": first.kernel, "batch_size": first.batch_size, "compile": first.compile,
        "measurement": measurement, "name": f"tune trial ({first.label})"})


def trial_spec(spec: TuneJobSpec, configs: Sequence[TuneConfig], batches: int,
               repeats: int = 1) -> PaddingJobSpec | GenerateJobSpec:
    if spec.mode == "generate":
        return generate_spec(spec, configs, batches, repeats)
    return padding_spec(spec, configs, batches, repeats)
