"""FlexAttention's forward and backward on padded rows at head_dim 256 (Gemma 2's attention), against the eager op.

Gemma 2 2B's attention alone, as padbench's binned training rows call it: 8 query heads over 4 key/value heads of
256, logits soft-capped at 50, a causal padding block mask. For each of a few batch shapes it times the
materialised eager op (`ops.naive_dense`, keys and values expanded), then FlexAttention compiled with dynamic
shapes under inductor's default configuration for this GPU (`{}`), under padbench's (`None`: `flex.default_tuning`)
and, unless `--defaults-only`, under each further backward configuration of `CONFIGS` (FlexAttention's
`kernel_options`; unprefixed `num_warps` and `num_stages` apply to the forward too). One compile per configuration
serves every shape. Prints milliseconds per call, forward alone and forward plus backward. A layer's call takes
about a millisecond, so the host's launches weigh in these figures: whole training steps decide a configuration.

    python -P scripts/bench_flex_backward.py [--defaults-only]       # on a CUDA GPU
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from typing import Any

import torch

from padbench.worker.engine.attention import flex, masks, ops
from padbench.worker.engine.measure.timing import mean_call_milliseconds

HEADS, KV_HEADS, HEAD_DIM, SOFTCAP = 8, 4, 256, 50.0
SHAPES = ((8, 439), (4, 1005), (16, 191))  # (rows, width): a middle bin, the longest bin, a short bin
_SQUARE = ("BLOCK_M1", "BLOCK_N1", "BLOCK_M2", "BLOCK_N2")
DEFAULTS: tuple[dict[str, Any] | None, ...] = ({}, None)  # inductor's choice; padbench's for this head size
CONFIGS: tuple[dict[str, Any] | None, ...] = (
    {**dict.fromkeys(_SQUARE, 64), "num_stages": 2, "num_warps": 8},
    {"BLOCK_M1": 32, "BLOCK_N1": 64, "BLOCK_M2": 64, "BLOCK_N2": 32, "num_stages": 2, "num_warps": 4},
    {"BLOCK_M1": 32, "BLOCK_N1": 64, "BLOCK_M2": 64, "BLOCK_N2": 32, "num_stages": 3, "num_warps": 4},
    {"BLOCK_M1": 32, "BLOCK_N1": 64, "BLOCK_M2": 64, "BLOCK_N2": 32, "num_stages": 2, "num_warps": 8},
    {**dict.fromkeys(_SQUARE, 64), "num_stages": 1, "num_warps": 8},
    {**dict.fromkeys(_SQUARE, 32), "num_stages": 2, "num_warps": 4},
    {"BLOCK_M1": 64, "BLOCK_N1": 128, "BLOCK_M2": 128, "BLOCK_N2": 64, "num_stages": 1, "num_warps": 8},
    {"BLOCK_M1": 32, "BLOCK_N1": 128, "BLOCK_M2": 128, "BLOCK_N2": 32, "num_stages": 2, "num_warps": 8},
)
LABELS = {"{}": "inductor's default", "None": "padbench's default"}
SCALE = HEAD_DIM ** -0.5
TIMES = 20  # timed calls per figure


class Case:
    """One batch shape's inputs, masks and output gradient."""

    def __init__(self, rows: int, width: int, device: torch.device) -> None:
        self.rows, self.width = rows, width
        lengths = torch.randint(width // 3, width + 1, (rows,), device=device)
        lengths[0] = width  # the batch's width is its longest row

        def tensor(heads: int) -> torch.Tensor:
            return torch.randn(rows, width, heads, HEAD_DIM, device=device, dtype=torch.bfloat16,
                               requires_grad=True)

        self.query, self.key, self.value = tensor(HEADS), tensor(KV_HEADS), tensor(KV_HEADS)
        self.block_mask = masks.padding_causal_block_mask(lengths, width)
        self.dense_mask = masks.padding_causal(lengths, width)
        self.grad = torch.randn(rows, width, HEADS, HEAD_DIM, device=device, dtype=torch.bfloat16)

    def eager(self) -> torch.Tensor:
        key, value = ops.expand_kv_heads(self.query, self.key, self.value)
        return ops.naive_dense(self.query, key, value, causal=False, scale=SCALE, mask=self.dense_mask,
                               softcap=SOFTCAP)

    def flex(self, options: dict[str, Any] | None) -> torch.Tensor:
        return flex.flex_dense(self.query, self.key, self.value, self.block_mask, scale=SCALE, softcap=SOFTCAP,
                               kernel_options=options)


def report(label: str, case: Case, forward: Callable[[], torch.Tensor]) -> None:
    device = case.grad.device
    with torch.no_grad():
        alone = mean_call_milliseconds(forward, device, TIMES, warmup=3)
    both = mean_call_milliseconds(lambda: forward().backward(case.grad), device, TIMES, warmup=3)
    print(f"{label} rows {case.rows} width {case.width}: fwd {alone:.3f} ms, fwd+bwd {both:.3f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--defaults-only", action="store_true", help="inductor's and padbench's defaults alone")
    configs = DEFAULTS if parser.parse_args().defaults_only else DEFAULTS + CONFIGS
    device = torch.device("cuda")
    torch.manual_seed(0)
    cases = [Case(rows, width, device) for rows, width in SHAPES]
    for case in cases:
        report("eager op", case, case.eager)
    for options in configs:
        torch._dynamo.reset()  # a fresh compile per configuration
        for case in cases:
            try:
                report(LABELS.get(str(options), str(options)), case, functools.partial(case.flex, options))
            except Exception as error:  # a configuration the GPU cannot hold (shared memory): say so, go on
                print(f"{options}: failed: {type(error).__name__}: {str(error)[:150]}", flush=True)
                break


if __name__ == "__main__":
    main()
