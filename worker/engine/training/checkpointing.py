"""Activation checkpointing: decoder layers whose activations are recomputed in the backward instead of kept.

Each chosen decoder layer is wrapped in PyTorch's own `checkpoint_wrapper` (non-reentrant
`torch.utils.checkpoint`), as torchtitan does: the layer keeps only its inputs for the backward and runs its
forward again there. Non-reentrant checkpointing passes keyword arguments through, so the `padbench_*` inputs
the attention kernels hand every decoder layer reach the recomputed forward too, and it needs no input that
requires a gradient (a LoRA model's frozen embeddings give none). Wrapping happens before FSDP2 shards the
model: `decoder_layers` then names the wrapper, so FSDP2's hooks sit outside the recomputed region and gather
the layer's weights once for its forward and once for its backward.

A kernel routes attention to itself only while its forward runs (`attention_implementation`, an SDPA
backend pinned); the recompute runs later, inside the backward. So the kernel's forward runs under
`replayed_in_recompute`, and each checkpointed layer captures that context as its forward starts and enters it
again around its recompute (non-reentrant checkpointing's `context_fn`): the recomputed layer runs the kernel
the timed forward ran, saving the same tensors.

A layer compiled by torch.compile recomputes inside its compiled backward instead (the compiler partitions
the layer's graph into what is saved and what is recomputed), with the kernel it traced; dynamo accepts no
`context_fn` of this kind, so `replay_kernel_context(model, False)` takes it off the wrappers of a model whose
layers are compiled, and `True` puts it back when they are not.

`ops` wraps every decoder layer under a selective-checkpoint policy (`torch.utils.checkpoint`'s
`create_selective_checkpoint_contexts`): the outputs of matmuls and attention are kept, everything between them
(norms, activations, rotary embeddings, residual adds) is recomputed, which costs little time and frees most of a
layer's activations; torch.compile honours the same policy inside a compiled layer.

`selective` wraps every other decoder layer (the second, fourth, …: torchtitan's "selective layer"
checkpointing at frequency 2), keeping about half the activations a `full` run recomputes.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from functools import partial
from typing import Any

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    CheckpointWrapper,
    checkpoint_wrapper,
)
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from padbench.contract.training import Checkpointing

# The attribute a checkpoint wrapper carries when it runs under the `ops` policy.
OPS_POLICY = "padbench_ops_policy"
# `selective`: one decoder layer in this many is recomputed.
SELECTIVE_EVERY = 2


ContextFactory = Callable[[], contextlib.AbstractContextManager[Any]]
# The context the forward running now was entered under, for a checkpointed layer to enter again in its recompute.
_FORWARD_CONTEXT: ContextVar[ContextFactory | None] = ContextVar("padbench_forward_context", default=None)


@contextlib.contextmanager
def replayed_in_recompute(enter: ContextFactory) -> Iterator[None]:
    """Run the body under `enter()`; a checkpointed layer the body runs enters `enter()` again when the backward
    recomputes it."""
    token = _FORWARD_CONTEXT.set(enter)
    try:
        with enter():
            yield
    finally:
        _FORWARD_CONTEXT.reset(token)


def _forward_and_recompute_contexts() -> tuple[contextlib.AbstractContextManager[Any],
                                                 contextlib.AbstractContextManager[Any]]:
    """`context_fn` of non-reentrant checkpointing, called as a checkpointed forward starts: nothing more
    around the forward (it already runs in its context), the forward's context again around the recompute."""
    enter = _FORWARD_CONTEXT.get()
    return contextlib.nullcontext(), enter() if enter is not None else contextlib.nullcontext()


@contextlib.contextmanager
def _together(*managers: contextlib.AbstractContextManager[Any]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for manager in managers:
            stack.enter_context(manager)
        yield


@functools.cache
def kept_ops() -> frozenset[object]:
    """What `ops` checkpointing keeps: the outputs of the ops a recompute would repeat at cost (matmuls, attention)."""
    aten = torch.ops.aten
    ops: set[object] = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default,
                        aten._scaled_mm.default, aten._scaled_dot_product_flash_attention.default,
                        aten._scaled_dot_product_efficient_attention.default,
                        aten._scaled_dot_product_cudnn_attention.default, aten._flash_attention_forward.default,
                        aten._efficient_attention_forward.default}
    # torch's varlen_attn is a custom op of its own namespace (registered when its module is imported), and
    # FlexAttention a higher-order op; either is absent from older builds.
    with contextlib.suppress(ImportError):
        importlib.import_module("torch.nn.attention.varlen")
    for namespace, name in (("torch_attn", "_varlen_attn"), ("higher_order", "flex_attention")):
        with contextlib.suppress(AttributeError, RuntimeError):
            operator = getattr(getattr(torch.ops, namespace), name)
            ops.add(getattr(operator, "default", operator))
    return frozenset(ops)


def _keep_matmuls_and_attention(ctx: Any, op: object, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    return CheckpointPolicy.MUST_SAVE if op in kept_ops() else CheckpointPolicy.PREFER_RECOMPUTE


def _policy_contexts() -> tuple[Any, Any]:
    """`context_fn` of an `ops` layer inside a compiled graph: the policy's two dispatch modes, nothing else (the
    compiler traced the kernel)."""
    return create_selective_checkpoint_contexts(_keep_matmuls_and_attention)


def _policy_and_recompute_contexts() -> tuple[Any, Any]:
    """`context_fn` of an eager `ops` layer: the policy's modes, and the forward's kernel context around the
    recompute too."""
    keep, recompute = _policy_contexts()
    enter = _FORWARD_CONTEXT.get()
    return keep, (_together(enter(), recompute) if enter is not None else recompute)


def _context_fn(ops_policy: bool, replay: bool) -> Callable[[], tuple[Any, Any]] | None:
    if ops_policy:
        return _policy_and_recompute_contexts if replay else _policy_contexts
    return _forward_and_recompute_contexts if replay else None


class CannotCheckpoint(ValueError):
    """The model has no decoder layers to checkpoint one by one."""


def unwrapped_layer_names(model: nn.Module) -> set[str]:
    """The class names transformers gives the model's decoder layers (its `_no_split_modules`)."""
    return set(getattr(model, "_no_split_modules", None) or ())


def is_decoder_layer(module: nn.Module, names: set[str]) -> bool:
    """Whether `module` is one of the classes `names` lists, also once FSDP2 has swapped its class for a subclass
    (`FSDPLlamaDecoderLayer`)."""
    return any(cls.__name__ in names for cls in type(module).__mro__)


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The model's decoder layers, each as the module that runs it: its checkpoint wrapper where it has one, so
    that hooks put on a layer (FSDP2's gathering) and a compiled forward stay outside the recomputed region."""
    names = unwrapped_layer_names(model)
    wrappers = {id(module._checkpoint_wrapped_module): module for module in model.modules()
                if is_checkpoint_wrapper(module)}
    return [wrappers.get(id(module), module) for module in model.modules() if is_decoder_layer(module, names)]


def checkpoint_layers(model: nn.Module, choice: Checkpointing) -> int:
    """Wrap the decoder layers `choice` names in place; the number wrapped (0 for `none`)."""
    if choice == "none":
        return 0
    names = unwrapped_layer_names(model)
    # Collected first: replacing children while iterating `named_modules` would visit the wrappers too.
    layers = [(parent, child_name, child) for parent in model.modules()
              for child_name, child in parent.named_children() if is_decoder_layer(child, names)]
    if not layers:
        raise CannotCheckpoint(f"training.activation_checkpointing {choice}: {type(model).__name__} names no decoder "
                               "layer classes (_no_split_modules) to checkpoint one by one")
    chosen = layers[SELECTIVE_EVERY - 1::SELECTIVE_EVERY] if choice == "selective" else layers
    for parent, child_name, child in chosen:
        # preserve_rng_state=False, as torchtitan: the benchmark model has no dropout, so no random draw to
        # replay, and saving the generators' states costs a device synchronisation per layer.
        wrapper = checkpoint_wrapper(child, checkpoint_impl=CheckpointImpl.NO_REENTRANT, preserve_rng_state=False,
                                     context_fn=_context_fn(choice == "ops", replay=True))
        setattr(wrapper, OPS_POLICY, choice == "ops")  # read back by replay_kernel_context
        setattr(parent, child_name, wrapper)
    return len(chosen)


def replay_kernel_context(model: nn.Module, replay: bool) -> None:
    """Whether each checkpointed layer enters the timed forward's kernel context around its recompute (see the
    module's docstring: an eager layer must, a compiled one cannot)."""
    for module in model.modules():
        if isinstance(module, CheckpointWrapper):
            context_fn = _context_fn(bool(getattr(module, OPS_POLICY, False)), replay)
            call = partial(checkpoint, use_reentrant=False, preserve_rng_state=False)
            # The wrapper's own attribute: the checkpoint call it makes with the layer (CheckpointWrapper.__init__).
            module.checkpoint_fn = call if context_fn is None else partial(call, context_fn=context_fn)


def checkpointed_layers(model: nn.Module) -> int:
    """How many of the model's modules recompute their forward in the backward."""
    return sum(1 for module in model.modules() if is_checkpoint_wrapper(module))


def is_checkpoint_wrapper(module: nn.Module) -> bool:
    # FSDP2 swaps a sharded module's class for a subclass of it, so the check is isinstance, not the type's name.
    return isinstance(module, CheckpointWrapper)
