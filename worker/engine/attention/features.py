"""What a model's attention asks of a kernel beyond causal softmax(QKᵀ/√d)·V, read from its config.

Kernels differ in what they implement: grouped-query attention natively or by expanding keys and values,
logit soft-capping (Gemma 2) or not, sliding windows (Mistral, Gemma) or not. A kernel that lacks a
feature the model uses is refused for that model with the reason, before anything is measured; the
attention bridge refuses the same features again at call time, so a feature is never silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

GqaHandling = Literal["native", "expanded"]


@dataclass(frozen=True)
class AttentionFeatures:
    query_heads: int
    kv_heads: int
    softcap: float | None  # tanh soft-capping of attention logits, as Gemma 2 does
    sliding_window: int | None  # keys further back than this many tokens are not attended to

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
        return cls(query_heads=heads, kv_heads=kv_heads, softcap=float(softcap) if softcap else None,
                   sliding_window=int(window) if window else None)

    @property
    def grouped(self) -> bool:
        return self.kv_heads < self.query_heads


def window_reason(sliding_window: int | None, longest: int) -> str | None:
    """Why a window-less kernel would compute a different function, or None when the window never bites."""
    if sliding_window is None or longest <= sliding_window:
        return None
    return (f"the model attends within a sliding window of {sliding_window} tokens and sequences reach {longest}; "
            "padbench's kernels attend to every earlier token, so they would measure a different model "
            f"(use data.max_length ≤ {sliding_window})")
