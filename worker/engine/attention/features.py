"""What a model's attention asks of a kernel beyond causal softmax(QKᵀ/√d)·V, read from its config.

Kernels differ in what they implement: grouped-query attention natively or by expanding keys and values,
logit soft-capping (Gemma 2), sliding windows (Mistral, Gemma) and attention sinks (gpt-oss) or not. A kernel
that lacks a feature the model uses is refused for that model with the reason, before anything is measured; the
attention bridge refuses the same features again at call time, so a feature is never silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from padbench.worker.engine.attention.libraries import KernelUnavailable

GqaHandling = Literal["native", "expanded"]

# Model types whose attention adds a learned logit per head to every softmax's denominator ("attention
# sinks"). transformers' gpt-oss attention always has them (its `sinks` parameter, handed to the attention
# function as `s_aux`) and its config has no field that says so, so the model type is the fact to read.
SINK_MODEL_TYPES = frozenset({"gpt_oss"})


@dataclass(frozen=True)
class AttentionFeatures:
    query_heads: int
    kv_heads: int
    softcap: float | None  # tanh soft-capping of attention logits, as Gemma 2 does
    sliding_window: int | None  # keys further back than this many tokens are not attended to
    # Whether some layer attends to every earlier token: all of them without a window; with one, the layers
    # `layer_types` names full (Gemma 2/3, gpt-oss) and none where it names none (Mistral names none at all).
    full_layers: bool = True
    sinks: bool = False  # a learned per-head sink logit in every softmax's denominator, as gpt-oss has

    @classmethod
    def of(cls, config: Any) -> AttentionFeatures:
        heads = int(config.num_attention_heads)
        kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
        window = getattr(config, "sliding_window", None)
        layer_types = getattr(config, "layer_types", None)
        if layer_types is not None and "sliding_attention" not in layer_types:
            window = None  # e.g. Qwen 2 states a window but uses it on no layer (use_sliding_window: false)
        if getattr(config, "use_sliding_window", True) is False:
            window = None
        softcap = getattr(config, "attn_logit_softcapping", None)
        full_layers = not window or (layer_types is not None and "full_attention" in layer_types)
        return cls(query_heads=heads, kv_heads=kv_heads, softcap=float(softcap) if softcap else None,
                   sliding_window=int(window) if window else None, full_layers=full_layers,
                   sinks=getattr(config, "model_type", None) in SINK_MODEL_TYPES)

    @property
    def grouped(self) -> bool:
        return self.kv_heads < self.query_heads

    @property
    def layer_windows(self) -> tuple[int | None, ...]:
        """The windows the model's layers attend within, None for full attention: what a kernel prepares."""
        return ((None,) if self.full_layers else ()) + ((self.sliding_window,) if self.sliding_window else ())


def missing_feature_reason(kernel: str, features: AttentionFeatures, *, applies_softcap: bool, applies_sinks: bool,
                           library_reason: Callable[[str], str | None]) -> str | None:
    """Why `kernel` would drop soft-capping or sinks the model uses; None when it applies all it needs.

    `library_reason(parameter)` says why the installed library takes no such parameter (`softcap`,
    `learnable_sink`), for kernels that apply a feature only where their library's version does.
    """
    if features.softcap is not None:
        reason = _feature_reason(kernel, f"attention logit soft-capping (the model caps at {features.softcap:g})",
                                 applies_softcap, library_reason("softcap") if applies_softcap else None,
                                 "eager and flex do, and flash-attn and flash-attn-cute where their version takes "
                                 "softcap")
        if reason is not None:
            return reason
    if features.sinks:
        return _feature_reason(kernel, "attention sinks (the model adds a learned logit per head to every "
                                       "softmax's denominator)",
                               applies_sinks, library_reason("learnable_sink") if applies_sinks else None,
                               "eager and flex do, and flash-attn-cute where its version takes learnable_sink")
    return None


def _feature_reason(kernel: str, feature: str, applies: bool, library_lacks: str | None, others: str) -> str | None:
    if not applies:
        return f"{kernel} does not apply {feature}; {others}"
    return None if library_lacks is None else f"{kernel} cannot apply {feature}: {library_lacks}; {others}"


def window_reason(kernel: str, sliding_window: int | None, longest: int) -> str | None:
    """Why a window-less kernel would compute a different function, or None when the window never bites."""
    if not window_bites(sliding_window, longest):
        return None
    return (f"{kernel} does not apply a sliding window; the model attends within one of {sliding_window} tokens and "
            f"sequences reach {longest}, so it would measure a different model (use a kernel that applies the "
            f"window, or data.max_length ≤ {sliding_window})")


def window_bites(sliding_window: int | None, longest: int) -> bool:
    """Whether a window changes anything for sequences up to `longest` tokens."""
    return sliding_window is not None and longest > sliding_window


def batch_windows(windows: tuple[int | None, ...], longest: int) -> tuple[int | None, ...]:
    """The masks one batch needs: a window no sequence of it outgrows is full attention there."""
    return tuple(dict.fromkeys(window if window_bites(window, longest) else None for window in windows))


Mask = TypeVar("Mask")


def mask_for(masks: dict[int | None, Mask], window: int | None, kernel: str) -> Mask:
    """The mask prepared for a layer's window (None: full attention); an error when none was prepared."""
    if window not in masks:
        prepared = ", ".join("full" if key is None else f"window {key}" for key in masks)
        raise KernelUnavailable(kernel, f"a layer attends within a sliding window of {window} tokens but the batch "
                                        f"was prepared for {prepared} only (prepare it with the model's windows)")
    return masks[window]
