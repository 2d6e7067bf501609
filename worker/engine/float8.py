"""fp8 training: the linear layers' matmuls in float8 through torchao, the rest of the model in bf16.

torchao's `convert_to_float8_training` swaps each chosen `nn.Linear` for a `Float8Linear` that casts its
input, weight and output gradient to float8 with one scale per tensor (the default, "tensorwise" recipe)
for each matmul; weights and optimizer state stay in the job's dtype. Hardware float8 matmuls exist from
compute capability 8.9 (Ada, Hopper) on. A layer whose dimensions are not multiples of 16 (what float8
matmuls need) is left in bf16, as is the LM head (torchtitan leaves it too: the logits' precision matters
most, and its vocabulary dimension is rarely aligned); GPT-2's Conv1D layers are no `nn.Linear` and stay too.
"""

from __future__ import annotations

import importlib.util

import torch
from torch import nn
from transformers import PreTrainedModel

FLOAT8_CAPABILITY = (8, 9)  # Ada Lovelace and Hopper: the first GPUs with float8 tensor cores
FLOAT8_ALIGNMENT = 16  # float8 matmuls need both dimensions of the weight divisible by 16


def float8_unavailable_reason(device: torch.device) -> str | None:
    """Why fp8 training cannot run on `device` (None: it can)."""
    if device.type != "cuda":
        return (f"training.precision fp8 runs float8 matmuls on a CUDA GPU of compute capability "
                f"{capability_text(FLOAT8_CAPABILITY)} or later (Ada, Hopper); this job runs on {device.type}")
    capability = torch.cuda.get_device_capability(device)
    if capability < FLOAT8_CAPABILITY:
        return (f"training.precision fp8 needs a GPU of compute capability {capability_text(FLOAT8_CAPABILITY)} "
                f"or later (Ada, Hopper) for float8 matmuls; {torch.cuda.get_device_name(device)} is "
                f"{capability_text(capability)}")
    if importlib.util.find_spec("torchao") is None:
        return ("training.precision fp8 converts the linear layers through torchao, which is not installed on "
                "this worker (pip install torchao)")
    return None


def capability_text(capability: tuple[int, int]) -> str:
    return f"{capability[0]}.{capability[1]}"


def convert_linears_to_float8(model: nn.Module) -> int:
    """Swap the model's float8-capable linear layers for torchao's Float8Linear in place; the number swapped."""
    from torchao.float8 import convert_to_float8_training

    head = model.get_output_embeddings() if isinstance(model, PreTrainedModel) else None
    chosen = {id(module) for module in model.modules() if _float8_capable(module) and module is not head}
    convert_to_float8_training(model, module_filter_fn=lambda module, _name: id(module) in chosen)
    return len(chosen)


def _float8_capable(module: nn.Module) -> bool:
    return (type(module) is nn.Linear and module.in_features % FLOAT8_ALIGNMENT == 0
            and module.out_features % FLOAT8_ALIGNMENT == 0)
