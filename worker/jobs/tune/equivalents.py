"""The chosen configuration as the settings to paste: a padbench spec, and the options of the tools its users
train with where they have one (TRL's `SFTConfig`, accelerate's FSDP plugin, torchtitan's job config), each
saying which settings it has no equivalent of."""

from __future__ import annotations

import json

from padbench.contract.spec import StrategySpec
from padbench.kinds.tune.contract import Equivalent, TuneConfig, TuneJobSpec
from padbench.worker.jobs.tune.trial_specs import generate_spec, padding_spec

# transformers' attn_implementation for each attention family (TRL and accelerate load models through it).
TRANSFORMERS_ATTENTION = {"flash-attn": "flash_attention_2", "flash-attn-3": "flash_attention_3",
                          "flash-attn-cute": "flash_attention_4", "sdpa": "sdpa", "flex": "flex_attention",
                          "eager": "eager", "torch-flash": "sdpa"}


def equivalents(spec: TuneJobSpec, config: TuneConfig, kernel_ran: str | None = None) -> list[Equivalent]:
    """`kernel_ran` is the kernel the chosen configuration ran (`flash` names none by itself)."""
    if spec.mode == "generate":  # the training tools below have no generation settings to compare
        return [padbench_generate_spec(spec, config)]
    found = [padbench_spec(spec, config)]
    if spec.mode == "training":
        found.append(trl(spec, config, kernel_ran))
        if spec.gpus != 1:
            found.append(accelerate_fsdp(config))
        found.append(torchtitan(spec, config))
    return found


def padbench_spec(spec: TuneJobSpec, config: TuneConfig) -> Equivalent:
    """The padding spec that measures the chosen configuration again, with padbench's own measurement."""
    job = padding_spec(spec, [config], batches=1).model_copy(update={
        "strategies": [StrategySpec.model_validate({"name": config.layout})], "batch_size": config.batch_size})
    document = job.model_dump(mode="json", exclude_defaults=True, exclude={"measurement", "name"})
    return Equivalent(tool="padbench", settings=json.dumps({"kind": "padding", **document}, indent=2))


def padbench_generate_spec(spec: TuneJobSpec, config: TuneConfig) -> Equivalent:
    """The generate spec that measures the chosen configuration again over all the prompts, beside transformers'
    own loops (the references the trials left out)."""
    job = generate_spec(spec, [config], batches=spec.data.num_samples)
    document = job.model_dump(mode="json", exclude_defaults=True, exclude={"measurement", "name", "references"})
    return Equivalent(tool="padbench", settings=json.dumps({"kind": "generate", **document}, indent=2))


def trl(spec: TuneJobSpec, config: TuneConfig, kernel_ran: str | None = None) -> Equivalent:
    settings: dict[str, object] = {"per_device_train_batch_size": config.batch_size, "max_length": spec.data.max_length,
                "bf16": spec.dtype == "bf16", "fp16": spec.dtype == "fp16",
                "gradient_checkpointing": config.checkpointing not in (None, "none"),
                "torch_compile": config.compile}
    missing = []
    if config.layout == "packed":
        settings |= {"packing": True, "padding_free": True}
    elif config.layout == "binned":
        settings["group_by_length"] = True
        missing.append("binned: TRL groups by length over the whole data set (group_by_length), not in fixed bins")
    elif config.layout == "static":
        missing.append("static: SFTConfig pads each batch to its longest sequence, never to max_length")
    if config.checkpointing in ("selective", "ops"):
        missing.append(f"activation_checkpointing {config.checkpointing}: gradient_checkpointing recomputes "
                       "whole layers only")
    if config.precision == "fp8":
        missing.append("precision fp8: SFTConfig has no FP8 training switch")
    attention = TRANSFORMERS_ATTENTION.get(config.kernel) or _transformers_name(kernel_ran)
    if attention is not None:
        settings["model_init_kwargs"] = {"attn_implementation": attention}
    else:
        missing.append(f"attention {config.kernel}: no transformers attn_implementation names it")
    return Equivalent(tool="TRL SFTConfig", settings=json.dumps(settings, indent=2), missing=missing)


def _transformers_name(kernel_ran: str | None) -> str | None:
    """transformers' name for the kernel that ran (`torch-flash-varlen` runs under transformers' sdpa)."""
    if kernel_ran is None:
        return None
    family = next((name for name in sorted(TRANSFORMERS_ATTENTION, key=len, reverse=True)
                   if kernel_ran.startswith(name)), None)
    return None if family is None else TRANSFORMERS_ATTENTION[family]


def accelerate_fsdp(config: TuneConfig) -> Equivalent:
    settings = {"fsdp_version": 2, "fsdp_reshard_after_forward": config.reshard_after_forward is not False,
                "fsdp_activation_checkpointing": config.checkpointing not in (None, "none"),
                "mixed_precision": "bf16" if config.precision in ("amp", "bf16") else "no"}
    missing = [f"activation_checkpointing {config.checkpointing}: accelerate checkpoints whole layers"] \
        if config.checkpointing in ("selective", "ops") else []
    return Equivalent(tool="accelerate FSDP", settings=json.dumps(settings, indent=2), missing=missing)


def torchtitan(spec: TuneJobSpec, config: TuneConfig) -> Equivalent:
    if config.layout != "packed":
        return Equivalent(tool="torchtitan", settings=None,
                          missing=[f"layout {config.layout}: torchtitan trains on packed sequences only"])
    # torchtitan's selective recompute saves chosen ops' outputs ("op") or every few layers' ("2", "3", …).
    mode = {"none": "none", "full": "full", "selective": "selective", "ops": "selective"}[
        config.checkpointing or "none"]
    lines = ["[training]", f"local_batch_size = {config.batch_size}", f"seq_len = {spec.data.max_length}",
             f'mixed_precision_param = "{"bfloat16" if spec.dtype == "bf16" else "float32"}"', "",
             "[activation_checkpoint]", f'mode = "{mode}"']
    if config.checkpointing == "ops":
        lines.append('selective_ac_option = "op"')
    if config.reshard_after_forward is not None:  # searched on several GPUs
        lines += ["", "[parallelism]",
                  f'fsdp_reshard_after_forward = "{"always" if config.reshard_after_forward else "never"}"']
    lines += ["", "[compile]", f"enable = {str(config.compile).lower()}"]
    if config.compile:
        lines.append('components = ["model", "loss"]')
    return Equivalent(tool="torchtitan", settings="\n".join(lines))
