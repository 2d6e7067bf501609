"""The training loss, as users' trainers compute it: full logits then cross-entropy, or the two fused.

`full` is the textbook path: the LM head's logits for every token, then `F.cross_entropy`. Its fp32 logits
(and their gradient) dominate a large-vocabulary model's training peak, which is why fine-tuning loops use
a fused linear cross-entropy instead (`fused`, the default): Liger Kernel's Triton kernel where it is
installed and the device is a GPU, else the chunked PyTorch version (padbench.worker.engine.training.chunked_loss).

For a fused loss the model must hand over its final hidden states and its head instead of logits. The
attention kernels call the whole model (`model(...).logits`), and that call has to stay: on a model sharded
by FSDP2 the root module's hooks gather the head's weight before its forward and keep it until its backward.
So during the call the model's output embedding is swapped for `HeadPassthrough`, which returns its input
(the hidden states come back as `.logits`) and records the head's weight as the model presented it during
the call — the gathered one under FSDP2 — and the vocabulary it predicts (an aligned head's padding rows are
never predicted). Gemma 2's final logit soft-capping, applied by the model to whatever its head returns, is
switched off for the call and applied by the loss instead.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from padbench.contract.registry import Registry
from padbench.contract.training import LossChoice
from padbench.worker.engine.data.batches import Batch
from padbench.worker.engine.model.build import config_of
from padbench.worker.engine.model.lm_head import AlignedLMHead
from padbench.worker.engine.training.chunked_loss import IGNORE_INDEX, LossShape, chunked_linear_cross_entropy

ForwardFn = Callable[[nn.Module, Batch], torch.Tensor]  # an attention kernel's forward: what `.logits` holds
SOFTCAP_FIELD = "final_logit_softcapping"


class FusedLossUnsupported(ValueError):
    """The model's head is not a linear layer a fused loss can take the weight of."""


@dataclass(frozen=True)
class HeadWeights:
    """The LM head as one forward saw it."""

    weight: torch.Tensor  # (vocab, hidden): the real vocabulary's rows only
    bias: torch.Tensor | None
    padding_rows: int  # rows an aligned head pads its GEMM with (never predicted)
    softcap: float | None
    # What the head's GEMM computes in, as the forward saw it: autocast's dtype where the forward ran under it
    # (amp on one GPU), read during the forward because the loss runs after autocast has ended. None: the
    # hidden states' own dtype.
    compute_dtype: torch.dtype | None = None

    @property
    def vocab(self) -> int:
        return int(self.weight.shape[0])


class HeadPassthrough(nn.Module):
    """Stands in for the output embedding for one forward: returns the hidden states, records the head."""

    def __init__(self, head: nn.Module, softcap: float | None) -> None:
        super().__init__()
        self._head = [head]  # in a list: not registered, so parameters() and state_dict() stay the model's
        self._softcap = softcap
        self.seen: HeadWeights | None = None

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        head = self._head[0]
        dtype = compute_dtype(hidden_states)
        if isinstance(head, AlignedLMHead):
            self.seen = HeadWeights(head.weight, getattr(head, "head_bias", None), head.padding_rows, self._softcap,
                                    dtype)
        else:
            self.seen = HeadWeights(head.weight, head.bias, 0, self._softcap, dtype)  # type: ignore[arg-type]
        return hidden_states


def linear_head(model: nn.Module) -> nn.Module:
    """The model's output embedding, if a fused loss can take it; FusedLossUnsupported otherwise."""
    head = model.get_output_embeddings()  # type: ignore[operator]
    if not isinstance(head, nn.Linear | AlignedLMHead):
        raise FusedLossUnsupported(f"a fused loss needs a linear LM head; {type(model).__name__}'s is "
                                   f"{type(head).__name__}")
    return head


@contextlib.contextmanager
def passthrough_head(model: nn.Module) -> Iterator[HeadPassthrough]:
    """The model, for the duration, returning its final hidden states where it returned logits."""
    model = getattr(model, "_orig_mod", model)  # a compiled model's own modules
    head = linear_head(model)
    config = config_of(model)
    softcap = getattr(config, SOFTCAP_FIELD, None)
    passthrough = HeadPassthrough(head, softcap)
    model.set_output_embeddings(passthrough)  # type: ignore[operator]
    if softcap is not None:
        setattr(config, SOFTCAP_FIELD, None)
    try:
        yield passthrough
    finally:
        model.set_output_embeddings(head)  # type: ignore[operator]
        if softcap is not None:
            setattr(config, SOFTCAP_FIELD, softcap)


def compute_dtype(tensor: torch.Tensor) -> torch.dtype:
    """What autocast would compute the head's GEMM in here (amp on one GPU), else the tensor's own dtype."""
    device_type = tensor.device.type
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return tensor.dtype


class TrainingLoss(ABC):
    name: ClassVar[str]  # what ran, as the result records it

    @abstractmethod
    def __call__(self, model: nn.Module, forward: ForwardFn, batch: Batch, labels: torch.Tensor) -> torch.Tensor:
        """The mean next-token loss of one batch: the model's forward included."""


class FullLogitsLoss(TrainingLoss):
    name = "full-logits"

    def __call__(self, model: nn.Module, forward: ForwardFn, batch: Batch, labels: torch.Tensor) -> torch.Tensor:
        logits = forward(model, batch)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE_INDEX)


class FusedLoss(TrainingLoss):
    def __call__(self, model: nn.Module, forward: ForwardFn, batch: Batch, labels: torch.Tensor) -> torch.Tensor:
        with passthrough_head(model) as passthrough:
            hidden = forward(model, batch)
        assert passthrough.seen is not None, "the model's forward never called its output embedding"
        return self.of_hidden(hidden.reshape(-1, hidden.shape[-1]), passthrough.seen, labels.reshape(-1))

    def of_hidden(self, hidden: torch.Tensor, head: HeadWeights, labels: torch.Tensor) -> torch.Tensor:
        """The loss of flat hidden states (tokens × hidden size) through `head`, in the dtype autocast would
        give the head's GEMM; the kernel itself runs outside autocast, on operands of one dtype. Under amp on one
        GPU the final norm's fp32 weight leaves the hidden states in fp32, so the dtype is the one the forward
        recorded, not theirs: an fp32 GEMM over a 128k vocabulary took half of a 1B model's step on an H100."""
        dtype = head.compute_dtype or compute_dtype(hidden)
        bias = None if head.bias is None else head.bias.to(dtype)
        with torch.autocast(hidden.device.type, enabled=False):
            return self.fused(hidden.to(dtype), head.weight.to(dtype), bias, labels, head)

    @abstractmethod
    def fused(self, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, labels: torch.Tensor,
              head: HeadWeights) -> torch.Tensor:
        """The mean cross-entropy over labels not IGNORE_INDEX, through the real vocabulary's rows only."""


class ChunkedLoss(FusedLoss):
    name = "chunked-linear-cross-entropy"

    def fused(self, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, labels: torch.Tensor,
              head: HeadWeights) -> torch.Tensor:
        # The aligned head's padding again (its reason holds for each chunk's GEMM): the rows are masked out.
        weight = F.pad(weight, (0, 0, 0, head.padding_rows))
        bias = None if bias is None else F.pad(bias, (0, head.padding_rows))
        return chunked_linear_cross_entropy(hidden, weight, bias, labels, LossShape(head.vocab, head.softcap))


# Liger sizes its chunks by default so that a chunk's logits take no more memory than the hidden states: on a
# 150k–256k vocabulary that is 64–256 tokens a chunk, and each chunk reads the whole head weight three times
# (its logits, the input's gradient, the weight's gradient): at Gemma 2's 256k × 2304 head and 4,096 tokens a
# step, 64 chunks read 226 GB, ~75 ms at an H100's bandwidth against 18 ms of the GEMMs' arithmetic. Chunks of
# about a thousand tokens or more make those GEMMs compute-bound for well under a GiB of transient logits.
LIGER_CHUNK_LOGITS_BYTES = 512 * 2**20  # one chunk's logits, in the GEMMs' dtype (Liger rounds up to 2× this)


def liger_chunk_mem_const(tokens: int, hidden: int, vocab: int, itemsize: int,
                          budget: int = LIGER_CHUNK_LOGITS_BYTES) -> int:
    """Liger's `chunk_mem_const` for chunks of about `budget` bytes of logits. Liger splits `tokens` into
    ceil(vocab / (chunk_mem_const × hidden)) chunks, rounding a chunk's tokens up to a power of two."""
    chunk = max(1, budget // (vocab * itemsize))  # the tokens a chunk of `budget` bytes holds
    return max(1, vocab * chunk // (hidden * max(tokens, 1)))


class LigerLoss(FusedLoss):
    name = "liger-fused-linear-cross-entropy"

    def fused(self, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, labels: torch.Tensor,
              head: HeadWeights) -> torch.Tensor:
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss
        from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy

        options = {} if head.softcap is None else {"softcap": head.softcap}  # older releases take no softcap
        if liger_takes_chunking():
            tokens, width = hidden.shape
            chunking = liger_chunk_mem_const(tokens, width, int(weight.shape[0]), hidden.element_size())
            loss = liger_fused_linear_cross_entropy(hidden, weight, labels, bias, ignore_index=IGNORE_INDEX,
                                                    chunk_mem_const=chunking, **options)
        else:  # releases without the option size their chunks themselves
            loss = LigerFusedLinearCrossEntropyLoss(ignore_index=IGNORE_INDEX, **options)(weight, hidden, labels, bias)
        return loss[0] if isinstance(loss, tuple) else loss  # releases with z-loss return (loss, z_loss)


@functools.cache  # asked at every training step: the installed release does not change
def liger_takes_chunking() -> bool:
    """Whether the installed Liger's fused linear cross-entropy takes `chunk_mem_const`."""
    from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy

    return "chunk_mem_const" in inspect.signature(liger_fused_linear_cross_entropy).parameters


@functools.cache  # a failed import is retried on every call otherwise
def liger_available() -> bool:
    try:
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss  # noqa: F401
    except Exception:  # not installed, or its Triton import failing on this machine
        return False
    return True


def _fused(device: torch.device) -> TrainingLoss:
    return LigerLoss() if device.type == "cuda" and liger_available() else ChunkedLoss()


LOSSES: Registry[Callable[[torch.device], TrainingLoss]] = Registry("training loss")
LOSSES.add("full", lambda device: FullLogitsLoss())
LOSSES.add("fused", _fused)


def resolve_loss(choice: LossChoice, device: torch.device) -> TrainingLoss:
    """The loss `training.loss` asks for, as it runs on `device`."""
    return LOSSES.get(choice)(device)
