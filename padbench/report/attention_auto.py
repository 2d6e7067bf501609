"""How a result says which attention family `attention: auto` ran, and why: a header line per entry point, as
the compile and checkpointing choices are stated."""

from __future__ import annotations

from collections.abc import Sequence

from padbench.contract.attention_pick import AttentionPick

ENTRY_WORDS = {"padded": "padded rows", "packed": "packs", "decode": "the KV cache"}


def attention_auto_lines(picks: Sequence[AttentionPick] | None) -> list[str]:
    """`attention auto chose flex for packs: fastest measured: …`; nothing where the spec named its attention."""
    return [f"attention auto chose {pick.chosen} for {ENTRY_WORDS.get(pick.entry, pick.entry)}: {pick.reason}"
            for pick in picks or ()]
