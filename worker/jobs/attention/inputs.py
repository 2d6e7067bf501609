"""One sweep cell's problem (shapes, masking, direction) and the random tensors it runs on.

Every kernel sees the same canonical tensors: dense (batch, seq, heads, head_dim), contiguous, so the
(batch, heads, seq, head_dim) view SDPA wants and the (total_tokens, heads, head_dim) view the varlen
kernels want are both free views, and no kernel pays for a transpose or copy inside the timed region.

The `varlen` layout packs documents into each row: lengths are drawn from a named distribution until the
row holds exactly `seq_len` tokens (the last document is cut to fit), and attention never crosses a
document boundary. FLOPs are counted from those document lengths — the work a kernel must do — so a
kernel that computes the full row under a mask gets no credit for the masked-out part.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from padbench.contract.spec import Dtype
from padbench.kinds.attention.contract import AttentionJobSpec
from padbench.worker.engine.data.synthetic import get_distribution

TORCH_DTYPES: dict[Dtype, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# Forward + backward costs 2.5× the forward: the backward does five N² matmuls to the forward's two.
BACKWARD_FLOP_FACTOR = 2.5


@dataclass(frozen=True)
class Problem:
    batch: int
    heads: int
    kv_heads: int
    head_dim: int
    seq_len: int
    causal: bool
    dtype: torch.dtype
    backward: bool
    layout: Literal["dense", "varlen"]
    # varlen only: the document lengths of each row, each row summing to seq_len
    documents: tuple[tuple[int, ...], ...] = ()

    @classmethod
    def from_spec(cls, spec: AttentionJobSpec, seq_len: int) -> Problem:
        documents = draw_documents(spec, seq_len) if spec.layout == "varlen" else ()
        return cls(batch=spec.batch, heads=spec.heads, kv_heads=spec.kv_heads or spec.heads,
                   head_dim=spec.head_dim, seq_len=seq_len, causal=spec.causal, dtype=TORCH_DTYPES[spec.dtype],
                   backward=spec.direction == "forward+backward", layout=spec.layout, documents=documents)

    @property
    def flops(self) -> float:
        """4·B·H·N²·D for a dense forward (two matmuls, 2 FLOP per multiply-add); causal halves it."""
        if self.layout == "varlen":
            squared_lengths = sum(length * length for row in self.documents for length in row)
        else:
            squared_lengths = self.batch * self.seq_len * self.seq_len
        forward = 4.0 * self.heads * self.head_dim * squared_lengths * (0.5 if self.causal else 1.0)
        return forward * (BACKWARD_FLOP_FACTOR if self.backward else 1.0)

    @property
    def element_bytes(self) -> int:
        return torch.empty((), dtype=self.dtype).element_size()

    @property
    def score_matrix_bytes(self) -> int:
        """One materialised (batch, heads, N, N) score matrix in the problem's dtype."""
        return self.batch * self.heads * self.seq_len * self.seq_len * self.element_bytes

    @property
    def max_document(self) -> int:
        return max((length for row in self.documents for length in row), default=self.seq_len)


def draw_documents(spec: AttentionJobSpec, seq_len: int) -> tuple[tuple[int, ...], ...]:
    """Fill each row with documents from the named distribution; seeded by (varlen.seed, seq_len)."""
    distribution = get_distribution(spec.varlen.distribution)
    rng = np.random.default_rng([spec.varlen.seed, seq_len])
    rows = []
    for _ in range(spec.batch):
        lengths: list[int] = []
        while sum(lengths) < seq_len:
            lengths.extend(int(n) for n in distribution.sample(rng, 64, seq_len))
        rows.append(_cut_to(lengths, seq_len))
    return tuple(rows)


def _cut_to(lengths: list[int], total: int) -> tuple[int, ...]:
    kept: list[int] = []
    for length in lengths:
        room = total - sum(kept)
        if room <= 0:
            break
        kept.append(min(length, room))
    return tuple(kept)


@dataclass
class DocumentStructure:
    """The varlen boundaries on the device, shared by every input set of one problem."""

    cu_seqlens: torch.Tensor  # int32 (documents + 1,), offsets into the flattened batch × seq_len tokens
    document_ids: torch.Tensor  # int32 (batch, seq_len): document index of each token, unique per batch
    max_document: int
    # Masks built from the structure on first use, shared between the input sets of one problem.
    _built: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(cls, problem: Problem, device: torch.device) -> DocumentStructure:
        lengths = [length for row in problem.documents for length in row]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        ids = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths).reshape(problem.batch, problem.seq_len)
        return cls(cu_seqlens=torch.from_numpy(offsets).to(device), document_ids=torch.from_numpy(ids).to(device),
                   max_document=problem.max_document)

    def cache_get(self, name: str, build: Callable[[DocumentStructure], Any]) -> Any:
        if name not in self._built:
            self._built[name] = build(self)
        return self._built[name]

    def allowed(self, causal: bool) -> torch.Tensor:
        """(batch, 1, N, N) bool, True where a query may attend a key: same document (and not ahead)."""
        same = self.document_ids[:, :, None] == self.document_ids[:, None, :]
        return (same.tril_() if causal else same).unsqueeze(1)


@dataclass
class InputSet:
    query: torch.Tensor  # (batch, seq, heads, head_dim)
    key: torch.Tensor  # (batch, seq, kv_heads, head_dim)
    value: torch.Tensor
    grad_output: torch.Tensor | None  # for forward+backward: the upstream gradient of the output
    documents: DocumentStructure | None


def make_input_sets(problem: Problem, device: torch.device, count: int, seed: int = 0) -> list[InputSet]:
    """`count` independent sets with the same shapes (and document structure), so timing can rotate them."""
    documents = DocumentStructure.build(problem, device) if problem.layout == "varlen" else None
    generator = torch.Generator(device=device)
    sets = []
    for index in range(count):
        generator.manual_seed(seed * 1_000 + index)
        sets.append(_random_set(problem, device, generator, documents))
    return sets


def _random_set(problem: Problem, device: torch.device, generator: torch.Generator,
                documents: DocumentStructure | None) -> InputSet:
    def tensor(heads: int, grad: bool) -> torch.Tensor:
        shape = (problem.batch, problem.seq_len, heads, problem.head_dim)
        values = torch.randn(shape, generator=generator, device=device, dtype=problem.dtype)
        return values.requires_grad_(grad)

    grad = problem.backward
    return InputSet(query=tensor(problem.heads, grad), key=tensor(problem.kv_heads, grad),
                    value=tensor(problem.kv_heads, grad),
                    grad_output=tensor(problem.heads, False) if grad else None, documents=documents)
