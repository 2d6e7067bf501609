"""torch.compile as a row uses it: the whole model for inference, each decoder layer for training.

Inference compiles the model as one graph with every dimension symbolic (`steps.compiled`). Training compiles
each decoder layer on its own, in place, as torchtitan does: the layers are where the time goes, a layer's
graph is traced once and serves every layer of the same code, and checkpointing and FSDP2 keep wrapping layers
(a checkpointed layer is compiled together with its wrapper, so the compiler decides what its backward
recomputes). What is compiled is the layer's `forward`, not its whole call: hooks on the layer stay outside the
graph and run eagerly around it, which is how FSDP2 gathers a sharded layer's weights before it computes and
frees them after (torchtitan gets the same by sharding the compiled block). A checkpointed layer must compile
whole (`fullgraph`): a graph break inside it would run the recompute eagerly, outside the kernel context the
timed forward traced.

The layers compile in place (each keeps its parameters and names; `uncompile_layers` undoes it), so the
optimizer, the loss's LM head and the weight snapshots see the same model either way.
"""

from __future__ import annotations

import torch
from torch import nn

from padbench.worker.engine.training import steps
from padbench.worker.engine.training.checkpointing import decoder_layers, is_checkpoint_wrapper, replay_kernel_context


class NothingToCompile(ValueError):
    """The model names no decoder layers to compile one by one."""


def compile_layers(model: nn.Module) -> int:
    """Compile every decoder layer in place; the number compiled."""
    layers = decoder_layers(model)
    if not layers:
        raise NothingToCompile(f"{type(model).__name__} names no decoder layer classes (_no_split_modules) to "
                               "compile one by one")
    replay_kernel_context(model, False)
    for layer in layers:
        # An instance attribute: the module's __call__ finds it in place of the class's forward.
        vars(layer)["forward"] = torch.compile(layer.forward, backend=steps.COMPILE_BACKEND, dynamic=True,
                                               fullgraph=is_checkpoint_wrapper(layer))
    return len(layers)


def is_compiled(layer: nn.Module) -> bool:
    return "forward" in vars(layer)


def uncompile_layers(model: nn.Module) -> None:
    """Undo `compile_layers`: the layers run eagerly again, recomputing under the kernel's context."""
    for layer in decoder_layers(model):
        vars(layer).pop("forward", None)  # the class's forward shows through again
    replay_kernel_context(model, True)
