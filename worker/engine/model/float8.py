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
    for module in model.modules():
        if type(module).__name__ == "Float8Linear":
            module.__class__ = _token_aligned(type(module))
    return len(chosen)


_ALIGNED: dict[type, type] = {}


def _token_aligned(float8_linear: type) -> type:
    """Float8Linear taking any number of tokens: a float8 matmul needs its inner dimension divisible by 16, and
    the weight gradient's inner dimension is the tokens, which a pack or a padded batch rarely aligns. The
    tokens are padded with zero rows (which add nothing to any gradient) and the output cut back."""
    if float8_linear not in _ALIGNED:
        plain_forward = float8_linear.forward  # type: ignore[attr-defined]

        def forward(self: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
            tokens = hidden.numel() // hidden.shape[-1]
            missing = -tokens % FLOAT8_ALIGNMENT
            if missing == 0:
                return plain_forward(self, hidden)
            flat = torch.cat([hidden.reshape(tokens, hidden.shape[-1]), hidden.new_zeros(missing, hidden.shape[-1])])
            output = plain_forward(self, flat)
            return output[:tokens].reshape(*hidden.shape[:-1], output.shape[-1])

        _ALIGNED[float8_linear] = type(f"TokenAligned{float8_linear.__name__}", (float8_linear,), {"forward": forward})
    return _ALIGNED[float8_linear]


def _float8_capable(module: nn.Module) -> bool:
    return (type(module) is nn.Linear and module.in_features % FLOAT8_ALIGNMENT == 0
            and module.out_features % FLOAT8_ALIGNMENT == 0)
