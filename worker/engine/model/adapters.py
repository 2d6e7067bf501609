"""LoRA and QLoRA: low-rank adapters trained over frozen weights, as PEFT adds them.

The adapters are injected into the transformers model in place (PEFT's `inject_adapter_in_model`), not by
wrapping it in a `PeftModel`: the job's model stays the transformers model, so the attention kernels'
forward, `config`, `get_output_embeddings` and FSDP2's decoder layers are exactly what they are without
adapters. PEFT freezes every base weight; only the adapters' matrices require gradients, so the optimizer
(which takes the parameters that require gradients) keeps state for them alone. `all-linear` is PEFT's own
target: every linear layer of the decoder, the LM head left out.

QLoRA first replaces the decoder's linear layers with bitsandbytes' 4-bit NF4 layers (the QLoRA paper's
storage: double-quantized NF4 blocks of 64, computing in the job's dtype), then adds the same adapters.
bitsandbytes quantizes a weight as it moves to a CUDA device, so QLoRA runs on CUDA GPUs only, and on one
rank: FSDP2 cannot shard bitsandbytes' packed weights.
"""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedModel

from padbench.contract.training import LoraSpec, Method
from padbench.worker.runtime.isolation import SpecProblem

NF4 = "nf4"  # QLoRA's 4-bit NormalFloat


class AdaptersUnsupported(SpecProblem):
    """The adapters asked for cannot be added here; the message names the field and why."""


def missing_library_reason(method: Method, device: torch.device, ranks: int) -> str | None:
    """Why `method` cannot train here (None: it can): its library is not installed, or its device or ranks
    are not ones it runs on."""
    if method == "full":
        return None
    if importlib.util.find_spec("peft") is None:
        return (f"training.method {method} adds adapters through PEFT, which is not installed on this worker "
                "(pip install 'padbench[training]')")
    if method != "qlora":
        return None
    if importlib.util.find_spec("bitsandbytes") is None:
        return ("training.method qlora keeps the base weights in 4 bits through bitsandbytes, which is not "
                "installed on this worker (pip install bitsandbytes)")
    if device.type != "cuda":
        return (f"training.method qlora quantizes the base weights with bitsandbytes on a CUDA GPU; this job runs "
                f"on {device.type}")
    if ranks > 1:
        return (f"training.method qlora runs on one GPU: FSDP2 cannot shard bitsandbytes' 4-bit weights over "
                f"{ranks} ranks")
    return None


def add_adapters(model: nn.Module, method: Method, lora: LoraSpec, compute_dtype: torch.dtype) -> None:
    """Freeze the model's weights and add trainable LoRA adapters in place (over a 4-bit base for qlora)."""
    if method == "full":
        return
    if method == "qlora":
        quantize_linears_4bit(model, compute_dtype)
    from peft import LoraConfig, inject_adapter_in_model

    target: Any = lora.target_modules if isinstance(lora.target_modules, str) else list(lora.target_modules)
    # PEFT annotates lora_alpha as int but scales by alpha / r, so a fractional alpha scales as written.
    config = LoraConfig(r=lora.r, lora_alpha=lora.alpha, target_modules=target,  # type: ignore[arg-type]
                        lora_dropout=0.0, bias="none")
    try:
        with warnings.catch_warnings():
            # GPT-2's Conv1D stores its weight transposed; PEFT notices, adapts it so, and warns every layer.
            warnings.filterwarnings("ignore", message="fan_in_fan_out is set to False")
            inject_adapter_in_model(config, model, low_cpu_mem_usage=on_meta(model))
    except ValueError as error:  # PEFT: "Target modules {...} not found in the base model"
        raise AdaptersUnsupported(f"training.lora.target_modules {lora.target_modules!r}: {error}") from None


def on_meta(model: nn.Module) -> bool:
    """Whether the model has shapes only (built to be sharded, or counted): its adapters are made so too."""
    return any(parameter.is_meta for parameter in model.parameters())


def quantizable_linears(model: nn.Module) -> list[tuple[nn.Module, str, nn.Linear]]:
    """(parent, name, layer) of every plain linear layer but the LM head: what QLoRA keeps in 4 bits."""
    head = model.get_output_embeddings() if isinstance(model, PreTrainedModel) else None
    return [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
            if type(child) is nn.Linear and child is not head]


def quantize_linears_4bit(model: nn.Module, compute_dtype: torch.dtype) -> int:
    """Replace every linear layer but the LM head with a 4-bit NF4 layer holding the same weights, quantized
    on the layer's CUDA device; the number replaced."""
    import bitsandbytes as bnb

    replaced = quantizable_linears(model)
    for parent, name, linear in replaced:
        quantized = bnb.nn.Linear4bit(linear.in_features, linear.out_features, bias=linear.bias is not None,
                                      compute_dtype=compute_dtype, compress_statistics=True, quant_type=NF4,
                                      device="meta")
        # Params4bit quantizes its data as it moves to a CUDA device (`.to`), and tells its layer the state.
        quantized.weight = bnb.nn.Params4bit(linear.weight.data, requires_grad=False, compress_statistics=True,
                                             quant_type=NF4, module=quantized).to(linear.weight.device)
        if linear.bias is not None:
            quantized.bias = nn.Parameter(linear.bias.data, requires_grad=False)
        setattr(parent, name, quantized)
    return len(replaced)
