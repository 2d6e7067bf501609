"""torch.compile as a row uses it: the whole model for inference, each decoder layer for training.

Inference compiles the model as one graph with every dimension symbolic (`steps.compiled`). Training compiles
each decoder layer on its own, in place, as torchtitan does: the layers are where the time goes, a layer's
graph is traced once and serves every layer of the same code, and checkpointing and FSDP2 keep wrapping layers
(a checkpointed layer is compiled together with its wrapper, so the compiler decides what its backward
recomputes). A checkpointed layer must compile whole (`fullgraph`): a graph break inside it would run the
recompute eagerly, outside the kernel context the timed forward traced.

`nn.Module.compile` compiles in place (the module keeps its parameters and names; `uncompile_layers` undoes it),
so the optimizer, the loss's LM head and the weight snapshots see the same model either way.
"""

from __future__ import annotations

from torch import nn

from padbench.worker.engine import steps
from padbench.worker.engine.checkpointing import is_checkpoint_wrapper, replay_kernel_context, unwrapped_layer_names


class NothingToCompile(ValueError):
    """The model names no decoder layers to compile one by one."""


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The model's decoder layers, each as it is called: its checkpoint wrapper where it has one."""
    names = unwrapped_layer_names(model)
    layers: list[nn.Module] = []
    for module in model.modules():
        inner = getattr(module, "_checkpoint_wrapped_module", None) if is_checkpoint_wrapper(module) else None
        if type(inner if inner is not None else module).__name__ in names and not _inside_wrapper(module, layers):
            layers.append(module)
    return layers


def _inside_wrapper(module: nn.Module, layers: list[nn.Module]) -> bool:
    # A wrapper comes before the layer it wraps in `modules()`; the layer itself is then already counted.
    return any(getattr(layer, "_checkpoint_wrapped_module", None) is module for layer in layers)


def compile_layers(model: nn.Module) -> int:
    """Compile every decoder layer in place; the number compiled."""
    layers = decoder_layers(model)
    if not layers:
        raise NothingToCompile(f"{type(model).__name__} names no decoder layer classes (_no_split_modules) to "
                               "compile one by one")
    replay_kernel_context(model, False)
    for layer in layers:
        layer.compile(backend=steps.COMPILE_BACKEND, dynamic=True, fullgraph=is_checkpoint_wrapper(layer))
    return len(layers)


def uncompile_layers(model: nn.Module) -> None:
    """Undo `compile_layers`: the layers run eagerly again, recomputing under the kernel's context."""
    for layer in decoder_layers(model):
        layer._compiled_call_impl = None  # what nn.Module.compile set: __call__ goes through it while it is set
    replay_kernel_context(model, True)
