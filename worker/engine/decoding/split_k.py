"""Decode-step matmuls split along their inner dimension, for the few rows a decode step multiplies.

A decode step of 64 slots multiplies 64 rows by each weight matrix: the work is reading the weight. cuBLAS
tiles such a product by output columns only, so a 2048-column output (an attention output or MLP down
projection) becomes ~64 thread blocks on a 132-multiprocessor H100 and reads its weight at ~2 TB/s of the
~3 TB/s the card copies at. Splitting the inner dimension as well gives every multiprocessor a share of the
weight: each of `splits` thread blocks per column tile multiplies its slice of the inner dimension and writes
fp32 partial sums, and the caller adds the `splits` partials. Under torch.compile that small sum fuses into
the kernel that consumes the product (a norm, an activation, a residual add), so the split costs no launch.

Whether it pays depends on the shape and the GPU (on an H200, 64 rows: a 2048×2048 output projection 4.9 µs
against cuBLAS's 6.2, the 2048×6144 down projection 8.9 against 11.9, while the wider query/key/value and
gate/up products were as fast or faster on cuBLAS), so `DecodeProducts.tune` times each of a model's decode
product shapes on both, on the model's own weights, and keeps split-K only where it is clearly faster.
Triton runs it on CUDA only; everywhere else, and for steps whose row count is not fixed, products stay
`F.linear`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F

from padbench.worker.runtime.graph_timing import graph_micros

BLOCK_M = 64  # every row of the product in one tile: the most rows a split-K product takes
CANDIDATES = ((64, 128, 4), (64, 128, 2), (32, 128, 4))  # (block_n, block_k, splits), fastest on an H200
# Split-K must beat cuBLAS by this share of cuBLAS's time: its consumer reads fp32 partials, not one bf16 output.
MARGIN = 0.1


@dataclass(frozen=True)
class SplitK:
    """One tiling: output columns per thread block, inner-dimension tile, splits, warps, pipeline stages."""

    block_n: int
    block_k: int
    splits: int
    warps: int = 4
    stages: int = 4

    def fits(self, rows: int, inner: int) -> bool:
        return 0 < rows <= BLOCK_M and inner % (self.splits * self.block_k) == 0

    def label(self) -> str:
        return f"n{self.block_n}·k{self.block_k}·split{self.splits}·w{self.warps}·s{self.stages}"


_OP: Any = None  # the registered custom op, once CUDA work asked for it


def _register() -> Any:
    """Registers `padbench::split_k_partials` (Triton, through torch.library so torch.compile sees one op)."""
    global _OP
    if _OP is not None:
        return _OP
    import triton
    import triton.language as tl

    @triton.jit
    def partials_kernel(x_ptr, w_ptr, out_ptr, rows, columns, inner_per_split, x_row_stride, w_row_stride,
                        out_split_stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        column_tile, split = tl.program_id(0), tl.program_id(1)
        offs_m = tl.arange(0, BLOCK_M)
        offs_n = column_tile * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = split * inner_per_split + tl.arange(0, BLOCK_K)
        x_ptrs = x_ptr + offs_m[:, None] * x_row_stride + offs_k[None, :]
        w_ptrs = w_ptr + offs_n[:, None] * w_row_stride + offs_k[None, :]
        row_ok, column_ok = offs_m[:, None] < rows, offs_n[:, None] < columns
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for _ in range(0, inner_per_split, BLOCK_K):
            acc = tl.dot(tl.load(x_ptrs, mask=row_ok, other=0.0),
                         tl.trans(tl.load(w_ptrs, mask=column_ok, other=0.0)), acc)
            x_ptrs += BLOCK_K
            w_ptrs += BLOCK_K
        out_ptrs = out_ptr + split * out_split_stride + offs_m[:, None] * columns + offs_n[None, :]
        tl.store(out_ptrs, acc, mask=row_ok & (offs_n[None, :] < columns))

    @torch.library.triton_op("padbench::split_k_partials", mutates_args=())
    def split_k_op(x: torch.Tensor, weight: torch.Tensor, block_n: int, block_k: int, splits: int, warps: int,
                   stages: int) -> torch.Tensor:
        rows, inner = x.shape
        columns = weight.shape[0]
        out = torch.empty(splits, rows, columns, device=x.device, dtype=torch.float32)
        grid = (triton.cdiv(columns, block_n), splits)
        torch.library.wrap_triton(partials_kernel)[grid](
            x, weight, out, rows, columns, inner // splits, x.stride(0), weight.stride(0), out.stride(0),
            BLOCK_M=BLOCK_M, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=warps, num_stages=stages)
        return out

    _OP = split_k_op
    return _OP


def split_k_partials(x: torch.Tensor, weight: torch.Tensor, tiling: SplitK) -> torch.Tensor:
    """(splits, rows, columns) fp32 partial products of `x @ weight.T` (x: contiguous rows ≤ BLOCK_M)."""
    return _register()(x, weight, tiling.block_n, tiling.block_k, tiling.splits, tiling.warps,  # type: ignore[no-any-return]
                       tiling.stages)


@dataclass
class DecodeProducts:
    """The split-K tiling of each (output columns, inner dimension) product shape that runs split-K; the rest,
    and every product whose row count is symbolic (steps compiled with dynamic shapes), run on `F.linear`."""

    tilings: dict[tuple[int, int], SplitK] = field(default_factory=dict)
    choices: list[str] = field(default_factory=list)  # what tuning measured and kept, for the result
    tuned: bool = False

    def linear(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        tiling = self.tilings.get((weight.shape[0], weight.shape[1])) if x.is_cuda else None
        rows = x.shape[:-1].numel()
        if tiling is None or not isinstance(rows, int) or not tiling.fits(rows, x.shape[-1]):
            return F.linear(x, weight, bias)
        product = split_k_partials(x.reshape(rows, x.shape[-1]).contiguous(), weight, tiling).sum(0)
        if bias is not None:
            product = product + bias
        return product.to(x.dtype).reshape(*x.shape[:-1], weight.shape[0])

    def tune(self, weights: dict[tuple[int, int], list[torch.Tensor]], rows: int) -> None:
        """Times cuBLAS and each candidate tiling on every shape's weights (all layers, from memory as in a
        step) and keeps a tiling where it is at least MARGIN faster. Once per model; CUDA only."""
        if self.tuned:
            return
        self.tuned = True
        for (columns, inner), layers in sorted(weights.items()):
            # Half-precision CUDA weights only: on fp32, Triton's dot rounds through tf32 where cuBLAS does not.
            if not layers[0].is_cuda or layers[0].dtype not in (torch.bfloat16, torch.float16):
                continue
            cublas, best = _time_shape(layers, rows)
            if best is not None and best[0] <= (1 - MARGIN) * cublas:
                self.keep((columns, inner), best[1], f"{best[0]:.1f} µs, cuBLAS {cublas:.1f} µs")

    def keep(self, shape: tuple[int, int], tiling: SplitK, why: str) -> None:
        """Runs products of this (output columns, inner dimension) shape split-K from now on. Registers the op
        first: it must exist before torch.compile traces a product, not be registered while it traces."""
        _register()
        self.tilings[shape] = tiling
        self.choices.append(f"{shape[0]}×{shape[1]}: split-K {tiling.label()} ({why})")


def _time_shape(layers: list[torch.Tensor], rows: int) -> tuple[float, tuple[float, SplitK] | None]:
    """cuBLAS's microseconds per product of `rows` rows by each layer's weight, and the fastest candidate's."""
    inner = layers[0].shape[1]
    x = torch.randn(rows, inner, device=layers[0].device, dtype=layers[0].dtype)
    cublas = graph_micros(lambda layer: F.linear(x, layers[layer]), len(layers))
    timed: list[tuple[float, SplitK]] = []
    for tiling in (SplitK(*candidate) for candidate in CANDIDATES):
        if tiling.fits(rows, inner) and _runs(x, layers[0], tiling):
            timed.append((graph_micros(partial(_split_product, x, layers, tiling), len(layers)), tiling))
    return cublas, min(timed, key=lambda entry: entry[0], default=None)


def _runs(x: torch.Tensor, weight: torch.Tensor, tiling: SplitK) -> bool:
    """Whether this GPU and Triton run the tiling (a GPU without bf16 tensor-core dots, or too little shared
    memory for its pipeline, fails to compile it): one that does not is no candidate, and cuBLAS stays."""
    try:
        split_k_partials(x, weight, tiling)
    except Exception:  # Triton's compile and resource errors have no common base class
        return False
    torch.cuda.synchronize()
    return True


def _split_product(x: torch.Tensor, layers: list[torch.Tensor], tiling: SplitK, layer: int) -> torch.Tensor:
    return split_k_partials(x, layers[layer], tiling)
