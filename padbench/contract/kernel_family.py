"""What an attention kernel family is to the contract: the names it goes by, its kernels and their facts, no torch.

A family is the name a spec writes for attention (`sdpa`, `flex`, `torch-flash`, …). Each module of
`padbench/kernels/` ends with one `FAMILY = KernelFamily(...)`, which `padbench.contract.kernel_families`
registers. A family has one kernel per entry point it implements:

- `padded`: right-padded rows of a padding job (its static, dynamic and binned strategies);
- `packed`: packed rows (packed, wrapped), each sequence bounded by cu_seqlens;
- `decode`: attention over the KV cache of a generate job;
- `sweep`: the columns of an attention sweep (`kind: attention`), where a family may have several.

A kernel names its worker implementation by dotted path (module, then attribute), imported by the worker alone
(it needs torch), which binds the name and facts declared here to it: they are said once, and the contract, the
server and the worker's capabilities read them without importing the implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

EntryPoint = Literal["padded", "packed", "decode", "sweep"]
ModelEntryPoint = Literal["padded", "packed", "decode"]
# How messages name each entry point: `flash-attn has no KV-cache (decode) path`.
ENTRY_POINT_WORDS: dict[EntryPoint, str] = {
    "padded": "padded-rows", "packed": "packed-rows (varlen)", "decode": "KV-cache (decode)",
    "sweep": "attention-sweep",
}


# What a `KernelDeclaration` says its kernel can do, beyond its name and implementation.
KERNEL_FACTS = ("half_precision_only", "applies_softcap", "applies_sinks", "applies_window")


@dataclass(frozen=True)
class KernelDeclaration:
    """A kernel of a model's attention layers at one entry point: what results record, and what it applies.

    A model feature the kernel does not apply refuses the kernel for that model (never silently dropped).
    """

    name: str  # what results record: `torch-flash-varlen`
    implementation: str  # dotted path of the worker's class: `padbench.worker.engine.attention.packed.…`
    half_precision_only: bool = False  # bf16 and fp16 only
    applies_softcap: bool = False  # Gemma 2's attention logit soft-capping
    applies_sinks: bool = False  # gpt-oss's learned per-head logit in every softmax's denominator
    applies_window: bool = False  # a sliding window (Mistral; Gemma 2/3 and gpt-oss on their local layers)

    def facts(self) -> dict[str, bool]:
        """The facts by name, as the worker's kernels carry them."""
        return {name: getattr(self, name) for name in KERNEL_FACTS}


@dataclass(frozen=True)
class SweepDeclaration:
    """A column of the attention sweep: a kernel called on random query, key and value tensors, no model."""

    name: str  # what a sweep spec's `kernels` names and its cells record
    implementation: str  # dotted path of the worker's binding: `padbench.worker.jobs.attention.kernels.NAIVE`
    needs_cuda: bool = False
    half_precision_only: bool = False
    # The oldest GPU generation it runs on, as a CUDA compute capability: (9, 0) is Hopper.
    min_compute_capability: tuple[int, int] | None = None
    # How many (batch, heads, N, N) score matrices it holds at its peak (forward, forward+backward); zero for
    # tiled kernels. Cells that cannot fit are skipped rather than waited for.
    score_matrices: tuple[int, int] = (0, 0)
    dense_only: str | None = None  # why it runs no documents (a `varlen` layout); None: it runs them
    forward_only: str | None = None  # why it has no backward to time; None: it has one


@dataclass(frozen=True)
class KernelFamily:
    name: str  # what a spec writes and results record as the attention asked for
    description: str  # one line, for the spec reference and messages
    # Other names people bring for it (transformers' `attn_implementation`: `flash_attention_2`), stored as `name`.
    aliases: tuple[str, ...] = ()
    padded: KernelDeclaration | None = None
    packed: KernelDeclaration | None = None
    decode: KernelDeclaration | None = None
    sweep: tuple[SweepDeclaration, ...] = ()
    # The sweep kernel an alias of the family stands for in a sweep's `kernels` (`eager` → `naive`); None: the
    # aliases name no one sweep kernel there (sdpa's backends are three columns).
    sweep_alias: str | None = None
    # A flash implementation's place in `flash`, the fastest flash implementation present: lowest first.
    flash_rank: int | None = None

    def __post_init__(self) -> None:
        if self.sweep_alias is not None and self.sweep_alias not in {kernel.name for kernel in self.sweep}:
            raise ValueError(f"kernel family {self.name!r}: sweep_alias {self.sweep_alias!r} is none of its sweep "
                             "kernels")

    def kernel(self, entry: ModelEntryPoint) -> KernelDeclaration | None:
        """Its kernel at a model's entry point; None where it has none."""
        declared: KernelDeclaration | None = getattr(self, entry)
        return declared

    def has(self, entry: EntryPoint) -> bool:
        return bool(self.sweep) if entry == "sweep" else self.kernel(entry) is not None

    @property
    def entry_points(self) -> tuple[EntryPoint, ...]:
        every: tuple[EntryPoint, ...] = ("padded", "packed", "decode", "sweep")
        return tuple(entry for entry in every if self.has(entry))
