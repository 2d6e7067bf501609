"""How a padding job trains: what users' fine-tuning loops do besides forward, backward and AdamW.

Real fine-tunes (TRL, axolotl, torchtune, torchtitan) avoid the full logits with a fused or chunked linear
cross-entropy, keep fp32 master weights, checkpoint activations and often train LoRA adapters; a benchmark of
a loop without them answers for a loop nobody runs, with batch-size limits wrong by 2× or more. Every choice
here is recorded in the result as it actually ran.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from padbench.contract.bounds import Label

# What a training job keeps its weights in: `amp` keeps fp32 master weights and optimizer state and computes in
# the job's dtype (autocast on one GPU; FSDP2's mixed-precision policy, with fp32 gradient reduction, on several);
# `bf16` keeps everything in the job's dtype (pure half precision); `fp8` runs the linear layers' matmuls in
# float8 through torchao (Hopper GPUs and later), the rest as bf16; `auto` is amp on several GPUs (what
# multi-GPU fine-tunes run) and the job's dtype on one (the single-GPU default since the first release).
Precision = Literal["auto", "bf16", "amp", "fp8"]
# What a training job kept its weights in, as the result states it.
RunPrecision = Literal["bf16", "fp16", "fp32", "amp", "fp8"]
# `fused`: the LM head and the cross-entropy computed together, so the full logits never exist (Liger Kernel's
# fused linear cross-entropy where installed, else a chunked PyTorch version); `full`: logits, then the loss.
LossChoice = Literal["fused", "full"]
# Activations recomputed in the backward instead of kept: `full` every decoder layer, `selective` every other one,
# `ops` every layer but keeping what its matmuls and attention computed (only the cheap ops between them rerun:
# torchtitan's op-level selective checkpointing).
Checkpointing = Literal["none", "full", "selective", "ops"]
# What a spec may ask: one of those, or `auto`, the least recompute whose step fits at the batch sizes asked
# (decided by the memory plan's estimate and confirmed by the OOM probe), which the result states with why.
CheckpointingChoice = Literal["auto", "none", "full", "selective", "ops"]
# `lora`: low-rank adapters trained on frozen weights (PEFT); `qlora`: the same over a 4-bit base (bitsandbytes).
Method = Literal["full", "lora", "qlora"]


class TrainingSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# Published with `enum` rather than `const` (client generators turn `const` into a check that refuses the rest).
TargetModules = Annotated[
    Literal["all-linear"] | Annotated[list[Label], Field(min_length=1, max_length=64)],
    WithJsonSchema({"oneOf": [{"type": "string", "enum": ["all-linear"]},
                              {"type": "array", "items": {"type": "string", "maxLength": 200}, "minItems": 1,
                               "maxItems": 64}]}),
]


class LoraSpec(TrainingSection):
    r: Annotated[int, Field(ge=1, le=1024)] = 16
    alpha: Annotated[float, Field(gt=0, le=10_000)] = 32.0
    # `all-linear`: every linear layer of the decoder (PEFT's own spelling), or the module names to adapt.
    target_modules: TargetModules = "all-linear"


class TrainingSpec(TrainingSection):
    precision: Precision = "auto"
    loss: LossChoice = "fused"
    activation_checkpointing: CheckpointingChoice = "none"
    method: Method = "full"
    lora: LoraSpec = LoraSpec()


def concrete_checkpointing(choice: CheckpointingChoice) -> Checkpointing:
    """The recompute a model is built with: `auto` is decided before any model is built (by the worker's probe)."""
    if choice == "auto":
        raise ValueError("activation_checkpointing auto must be decided before the model is built")
    return choice


def precision_run(precision: Precision, dtype: Literal["bf16", "fp16", "fp32"], ranks: int) -> RunPrecision:
    """What a training job keeps its weights in: `amp` (fp32 master weights, compute in `dtype`), `fp8`, or
    `dtype`."""
    if precision == "fp8":
        return "fp8"
    if precision == "amp" or (precision == "auto" and ranks > 1 and dtype != "fp32"):
        return "amp"
    return dtype


# --- results ------------------------------------------------------------------------------------------------

class TrainingResultSection(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, str_max_length=100_000)


# How a level of recompute fared when `auto` chose: it fit the probe with room to spare, fit it with too little room
# for what the job holds besides (its data, references and measurement), ran out of memory there, was over the
# memory plan's estimate (not probed), or was not needed (a level with less recompute fit first).
RecomputeOutcome = Literal["fits", "no headroom", "out of memory", "over the plan", "not tried"]


class RecomputeCandidate(TrainingResultSection):
    checkpointing: Checkpointing
    outcome: RecomputeOutcome
    planned_bytes: Annotated[int, Field(ge=0)]  # the plan's estimate for the job's largest step, per GPU
    peak_bytes: Annotated[int, Field(ge=0)] | None = None  # the probe's largest peak, where it ran


class AutoCheckpointing(TrainingResultSection):
    """How `activation_checkpointing: auto` chose: each level of recompute, least first, and its fate."""

    chosen: Checkpointing
    available_bytes: Annotated[int, Field(ge=0)] | None  # what a step had to fit in per GPU (None: no limit known)
    candidates: Annotated[list[RecomputeCandidate], Field(max_length=4)]
    reason: Annotated[str, Field(max_length=1_000)]


class TrainingRun(TrainingResultSection):
    """How a training job actually trained (the same for each of its rows)."""

    precision: RunPrecision
    # The loss as it ran: e.g. `liger-fused-linear-cross-entropy`, `chunked-linear-cross-entropy`, `full-logits`.
    loss: Annotated[str, Field(max_length=100)]
    activation_checkpointing: Checkpointing
    method: Method
    trainable_parameters: Annotated[int, Field(ge=0)]
    total_parameters: Annotated[int, Field(ge=0)]
    auto_checkpointing: AutoCheckpointing | None = None  # set where the spec asked `auto`


class StepSplit(TrainingResultSection):
    """Where a training step's time goes, per step on average, from device events around each phase of a few
    steps timed apart from the measurement."""

    forward_s: Annotated[float, Field(ge=0)]
    backward_s: Annotated[float, Field(ge=0)]
    optimizer_s: Annotated[float, Field(ge=0)]
    steps: Annotated[int, Field(ge=1, le=10_000)]
