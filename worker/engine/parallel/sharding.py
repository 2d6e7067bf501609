"""Spreading one model over a job's ranks with FSDP2, and the precision its weights are kept in.

FSDP2 (`torch.distributed.fsdp.fully_shard`) is what PyTorch's own trainers (torchtitan) and most
multi-GPU fine-tunes use: each decoder layer and then the root are sharded, so a layer's full weights exist
only while it computes (all-gathered just before, freed just after), and gradients are reduce-scattered
back to their shards. Under `amp` the shards are fp32 master weights, cast to the compute dtype for the
forward and backward, with gradients reduced in fp32 (FSDP2's `MixedPrecisionPolicy`); AdamW then steps
fp32 shards. Pure half precision keeps everything, the reduction included, in the compute dtype.

Communication hides behind compute two ways (`Sharding`, from the spec's `distributed` section): each layer
prefetches its neighbour's all-gather explicitly (the next layer's in the forward, the previous one's in the
backward), and a training job may keep each layer's gathered weights from its forward to its backward
(`reshard_after_forward: false`), saving the backward's all-gathers at the memory of unsharded layers. The root
never reshards after its forward: its backward needs its weights at once.

The decoder layers are found through transformers' own `_no_split_modules`, the list of blocks its
device-map code never splits: for a causal LM, its decoder layer classes.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import cast

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor
from transformers import PreTrainedModel

from padbench.contract.model_spec import ModelSpec
from padbench.contract.parallel import DistributedSpec
from padbench.worker.engine.model.build import build_on_meta, config_of
from padbench.worker.engine.model.lm_head import AlignedLMHead
from padbench.worker.engine.parallel.ranks import Ranks
from padbench.worker.engine.training.checkpointing import decoder_layers as checkpointed_or_plain_layers


class CannotShard(ValueError):
    """The model has no decoder layers FSDP can wrap one by one."""


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The decoder layers FSDP2 wraps one by one (each checkpointed layer's wrapper, see `checkpointing`)."""
    layers = checkpointed_or_plain_layers(model)
    if not layers:
        raise CannotShard(f"{type(model).__name__} names no decoder layer classes (_no_split_modules) to shard "
                          "one by one")
    return layers


@dataclass(frozen=True)
class Sharding:
    """How FSDP2 overlaps communication with compute: see `DistributedSpec`."""

    reshard_after_forward: bool = True
    prefetch: bool = True

    @classmethod
    def of(cls, distributed: DistributedSpec, mode: str) -> Sharding:
        """The spec's settings; inference always reshards (no backward would ever free the gathered weights)."""
        return cls(reshard_after_forward=distributed.reshard_after_forward or mode != "training",
                   prefetch=distributed.prefetch)


def shard_model(model: torch.nn.Module, ranks: Ranks, device: torch.device, *,
                compute_dtype: torch.dtype | None, sharding: Sharding = Sharding()) -> None:
    """`fully_shard` every decoder layer, then the root, over all ranks. With `compute_dtype`, the weights as
    they are (fp32 master weights) are cast to it for compute and gradients reduced in fp32."""
    mesh = init_device_mesh(device.type, (ranks.world,))
    policy = MixedPrecisionPolicy() if compute_dtype is None else MixedPrecisionPolicy(
        param_dtype=compute_dtype, reduce_dtype=torch.float32)
    layers = decoder_layers(model)
    for layer in layers:
        fully_shard(layer, mesh=mesh, mp_policy=policy, reshard_after_forward=sharding.reshard_after_forward)
    fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=False)
    # Under the fused loss the root returns its final hidden states, which transformers slices before the head
    # (a view). FSDP2 warns, on every rank and step, that an in-place op on such an output would skip its
    # pre-backward hook; the loss reads them out of place, so the warning would only bury the job's own output.
    warnings.filterwarnings("ignore", message=r"FSDP2-wrapped module \(.*\) returned a view tensor")
    if sharding.prefetch:
        prefetch_neighbours(cast(list[FSDPModule], layers))


def prefetch_neighbours(layers: Sequence[FSDPModule]) -> None:
    """Each layer all-gathers the next layer's weights as its forward starts, and the previous layer's as its
    backward starts (the backward runs the layers in reverse)."""
    for index, layer in enumerate(layers):
        if index + 1 < len(layers):
            layer.set_modules_to_forward_prefetch([layers[index + 1]])
        if index > 0:
            layer.set_modules_to_backward_prefetch([layers[index - 1]])


def sharding_held(model: torch.nn.Module) -> Sharding | None:
    """The settings the model's sharded decoder layers hold, read back from FSDP2's own state (what the result
    states ran, not what was asked); None for a model that is not sharded. FSDP2 keeps them in private fields:
    `post_forward_mesh_info` is set where a layer reshards after its forward, and the modules a layer prefetches
    are listed on its state."""
    layers = [layer for layer in checkpointed_or_plain_layers(model) if isinstance(layer, FSDPModule)]
    if not layers:
        return None
    states = [layer._get_fsdp_state() for layer in layers]
    groups = [state._fsdp_param_group for state in states if state._fsdp_param_group is not None]
    reshards = all(group.post_forward_mesh_info is not None for group in groups)
    prefetches = len(layers) > 1 and all(state._states_to_forward_prefetch for state in states[:-1]) and all(
        state._states_to_backward_prefetch for state in states[1:])
    return Sharding(reshard_after_forward=reshards, prefetch=prefetches)


ModelChange = Callable[[PreTrainedModel], None]


def build_sharded(spec: ModelSpec, weights_dtype: torch.dtype, device: torch.device, seed: int, ranks: Ranks,
                  compute_dtype: torch.dtype | None, before_sharding: ModelChange | None = None,
                  sharding: Sharding = Sharding()) -> PreTrainedModel:
    """A model too large to build whole on one GPU: built with shapes only, changed by `before_sharding`
    (adapters, checkpointing), sharded, then each rank's shards allocated on its own GPU and initialised there
    as transformers initialises the model (seeded; FSDP2's random-number tracker keeps the ranks' draws
    consistent), adapters included. Weights from a checkpoint are not read here."""
    if spec.load_weights:
        raise CannotShard("a checkpoint's weights are loaded whole on every rank before sharding, so a model "
                          "that does not fit one GPU cannot load its checkpoint; leave load_weights off")
    model = build_on_meta(spec, weights_dtype)
    if before_sharding is not None:
        before_sharding(model)
    shard_model(model, ranks, device, compute_dtype=compute_dtype, sharding=sharding)
    model.to_empty(device=device)
    torch.manual_seed(seed)
    with torch.no_grad():
        # Not `init_weights`, which ties the head to the embedding again by assigning its weight: a tied aligned
        # head already reads the embedding's weight at every call.
        model.initialize_weights()
        _initialise_aligned_head(model)
    return model.eval()


def _initialise_aligned_head(model: PreTrainedModel) -> None:
    """transformers initialises the modules it knows; an untied aligned head holds its own weight (and
    bias), which it initialises as the linear layer it replaced."""
    head = model.get_output_embeddings()
    if isinstance(head, AlignedLMHead) and hasattr(head, "head_weight"):
        std = float(getattr(config_of(model), "initializer_range", 0.02))
        torch.nn.init.normal_(head.head_weight, mean=0.0, std=std)
        if hasattr(head, "head_bias"):
            torch.nn.init.zeros_(head.head_bias)


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """The part of a tensor this rank holds: its shard of a sharded weight, all of an ordinary one."""
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def reshard(model: torch.nn.Module) -> None:
    """Back to shards everywhere: after a forward without backward, the root keeps its weights gathered (FSDP2
    expects the backward to need them at once), and its parameters are then the full tensors."""
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


def snapshot_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A host copy of this rank's trainable weights (its shards, when sharded), to start every strategy from.
    Frozen weights (a LoRA model's base) never move, so they need no copy."""
    reshard(model)
    return {name: _local(parameter).detach().to("cpu", copy=True) for name, parameter in model.named_parameters()
            if parameter.requires_grad}


def restore_weights(model: torch.nn.Module, snapshot: dict[str, torch.Tensor]) -> None:
    reshard(model)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name in snapshot:
                _local(parameter).copy_(snapshot[name])


ForwardFn = Callable[..., torch.Tensor]


def autocast_forward(forward: ForwardFn, device: torch.device, dtype: torch.dtype) -> ForwardFn:
    """`forward` computing in `dtype` over fp32 weights: one GPU's `amp` (FSDP2 casts by itself)."""

    def cast(*args: object, **kwargs: object) -> torch.Tensor:
        with torch.autocast(device.type, dtype=dtype):
            return forward(*args, **kwargs)

    return cast


@contextlib.contextmanager
def autocast_if(enabled: bool, device: torch.device, dtype: torch.dtype) -> Iterator[None]:
    with torch.autocast(device.type, dtype=dtype) if enabled else contextlib.nullcontext():
        yield
