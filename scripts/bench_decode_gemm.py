"""Times a decode step's matmuls (64 rows × each weight of a Qwen3-1.7B-sized layer) on cuBLAS and split-K.

Each shape is replayed as a CUDA graph of 28 products over 28 distinct weights, as a decode step walks its
layers, so every weight comes from memory rather than from the L2 cache. Prints microseconds per product and
the weight bytes read per second for cuBLAS (torch's `F.linear`), for each split-K tiling
(`worker/engine/decoding/split_k.py`; the kernel alone, its fp32 partials not yet summed), and for the best
tiling and cuBLAS each followed by the compiled consumer a decode step has (sum of the partials, cast, and a
residual add), which is the comparison that counts.

    python scripts/bench_decode_gemm.py [--rows 64] [--shapes o down qkv gate_up]

Needs a CUDA GPU with Triton.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from triton.runtime.errors import OutOfResources

from padbench.worker.engine.decoding.split_k import SplitK, split_k_partials
from padbench.worker.engine.measure.copy_rate import measure_copy_bytes_per_s
from padbench.worker.runtime.graph_timing import graph_micros

LAYERS = 28
SHAPES = {  # name: (output columns, inner dimension) of Qwen3-1.7B's decode matmuls, with fused q/k/v and gate/up
    "qkv": (4096, 2048),
    "o": (2048, 2048),
    "gate_up": (12288, 2048),
    "down": (2048, 6144),
}
TILINGS = [SplitK(n, k, s) for n, k, s in itertools.product((32, 64, 128), (64, 128, 256), (1, 2, 3, 4, 8))]


def graph_time(call: Callable[[int], object]) -> float:
    return graph_micros(call, LAYERS)


def time_tiling(x: torch.Tensor, weights: list[torch.Tensor], tiling: SplitK) -> float | None:
    """Microseconds per split-K product, or None for a tiling whose pipeline needs more shared memory than the
    GPU has."""
    try:
        return graph_time(lambda layer: split_k_partials(x, weights[layer], tiling))
    except OutOfResources:
        return None


def report(name: str, micros: float, weight_bytes: int, note: str = "") -> None:
    print(f"  {name:34s} {micros:7.2f} µs  {weight_bytes / micros / 1e6:5.2f} TB/s {note}")


def bench_shape(label: str, columns: int, inner: int, rows: int) -> None:
    device = torch.device("cuda")
    weights = [torch.randn(columns, inner, device=device, dtype=torch.bfloat16) / inner ** 0.5
               for _ in range(LAYERS)]
    x = torch.randn(rows, inner, device=device, dtype=torch.bfloat16)
    residual = torch.randn(rows, columns, device=device, dtype=torch.bfloat16)
    weight_bytes = columns * inner * 2
    print(f"{label}: {rows}×{inner} @ {inner}×{columns}ᵀ, {weight_bytes / 1e6:.1f} MB of weight")
    report("cuBLAS", graph_time(lambda layer: F.linear(x, weights[layer])), weight_bytes)
    reference = F.linear(x, weights[0]).float()
    timed: list[tuple[float, SplitK]] = []
    for tiling in (t for t in TILINGS if t.fits(rows, inner) and t.block_n <= columns):
        if (micros := time_tiling(x, weights, tiling)) is not None:
            error = float((split_k_partials(x, weights[0], tiling).sum(0) - reference).abs().max())
            timed.append((micros, tiling))
            report(tiling.label(), micros, weight_bytes, f"max |Δ| {error:.2g}")
    best = min(timed, key=lambda entry: entry[0])[1]
    for warps, stages in ((4, 3), (4, 6), (8, 4)):
        variant = SplitK(best.block_n, best.block_k, best.splits, warps, stages)
        if (micros := time_tiling(x, weights, variant)) is not None:
            timed.append((micros, variant))
            report(variant.label(), micros, weight_bytes)
    best = min(timed, key=lambda entry: entry[0])[1]
    sum_add = torch.compile(lambda partials, r: (partials.sum(0) + r.float()).to(torch.bfloat16))
    add = torch.compile(lambda y, r: y + r)
    report("cuBLAS + residual add", graph_time(lambda layer: add(F.linear(x, weights[layer]), residual)),
           weight_bytes)
    report(f"{best.label()} + sum + add",
           graph_time(lambda layer: sum_add(split_k_partials(x, weights[layer], best), residual)), weight_bytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES))
    args = parser.parse_args()
    torch.manual_seed(0)
    copy = measure_copy_bytes_per_s(torch.device("cuda"))
    print(torch.cuda.get_device_name(), "torch", torch.__version__, f"copy {copy / 1e12:.2f} TB/s")
    for label in args.shapes:
        columns, inner = SHAPES[label]
        bench_shape(label, columns, inner, args.rows)


if __name__ == "__main__":
    main()
