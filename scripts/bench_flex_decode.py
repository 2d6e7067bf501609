"""Times one decode step's FlexAttention call as `flex-kvcache` makes it, under several kernel settings.

A decode step of a continuous batch hands FlexAttention one query per slot against each slot's cache region
(a block mask from each slot's attended range), compiled with static shapes, so inductor runs its split-KV
decoding kernel. This replays 28 such calls (one per layer of a Qwen3-1.7B-sized model) as a CUDA graph and
prints microseconds per call for inductor's default settings and for the split counts and tiles given here,
with each one's largest difference from the first one's output.

    python scripts/bench_flex_decode.py [--slots 64] [--heads 16 8] [--head-dim 128] [--block 64] \
        [--contexts 0 1 2] [--only "SPLIT_KV=2," "SPLIT_KV=1,"]

`--block` sets the key blocks the masks list (flex-kvcache's is DECODE_BLOCK); settings whose BLOCK_N does not
divide it are skipped. `--contexts` picks rows of CONTEXTS; `--only` the settings whose names contain one of
its words.

Needs a CUDA GPU. Random keys, values and ranges: the time depends on their sizes, not on their values.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from padbench.worker.engine.decoding.flex_decode import DECODE_BLOCK, slot_range_mask
from padbench.worker.runtime.graph_timing import graph_micros

LAYERS = 28
# (capacity of a slot's region, fewest and most keys a slot attends)
CONTEXTS = ((640, 100, 400), (640, 300, 640), (4224, 2048, 4096))
DEFAULT_BLOCK_N = 64  # inductor's default tile is no wider: its default setting runs on 64-key mask blocks


def _setting(splits: int, block_n: int, warps: int, stages: int) -> tuple[str, dict[str, Any]]:
    return (f"SPLIT_KV={splits}, BLOCK_N={block_n}, {warps} warps, {stages} stages",
            {"SPLIT_KV": splits, "BLOCK_N": block_n, "num_warps": warps, "num_stages": stages})


SETTINGS: dict[str, dict[str, Any] | None] = {
    "inductor's default": None,
    "SPLIT_KV=4": {"SPLIT_KV": 4},
    **dict(_setting(*grid) for grid in (
        (2, 64, 4, 2), (1, 64, 4, 2), (1, 64, 4, 3), (1, 64, 8, 2), (2, 64, 4, 3), (2, 64, 2, 2), (3, 64, 4, 2),
        (4, 64, 4, 2), (1, 32, 4, 3), (2, 32, 4, 3), (4, 32, 4, 2))),
}


@dataclass(frozen=True)
class DecodeCall:
    """One decode step's attention: queries (slots, heads, dim), the cache regions (slots, capacity, kv_heads,
    dim), each slot's attended range, its block mask, and the bytes of keys and values it attends."""

    query: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor
    first: torch.Tensor
    last: torch.Tensor
    mask: BlockMask
    kv_bytes: int


def decode_call(slots: int, heads: tuple[int, int], head_dim: int, capacity: int, fewest: int, most: int,
                block: int, device: torch.device) -> DecodeCall:
    query_heads, kv_heads = heads
    keys = torch.randn(slots, capacity, kv_heads, head_dim, device=device, dtype=torch.bfloat16)
    values = torch.randn_like(keys)
    query = torch.randn(slots, query_heads, head_dim, device=device, dtype=torch.bfloat16)
    used = torch.randint(fewest, most + 1, (slots,), device=device, dtype=torch.int32)
    # Each slot's first and last attended key, read by the mask function as flex-kvcache's are.
    first, last = torch.zeros(slots, dtype=torch.int32, device=device), used - 1

    def within_range(batch: Any, head: Any, q_index: Any, kv_index: Any) -> Any:
        return (kv_index >= first[batch]) & (kv_index <= last[batch])

    mask = slot_range_mask(first, last, capacity, block, within_range)
    kv_bytes = int(used.sum()) * kv_heads * head_dim * 2 * keys.element_size()
    return DecodeCall(query, keys, values, first, last, mask, kv_bytes)


def time_flex(case: DecodeCall, options: dict[str, Any] | None) -> tuple[float, torch.Tensor]:
    """Microseconds per call, replayed as a CUDA graph of LAYERS calls, and the call's (slots, heads, dim) output."""
    torch._dynamo.reset()
    attend: Any = torch.compile(flex_attention, dynamic=False)
    query, keys, values = case.query[:, :, None], case.keys.transpose(1, 2), case.values.transpose(1, 2)

    def call() -> torch.Tensor:
        return attend(query, keys, values, block_mask=case.mask, enable_gqa=True,  # type: ignore[no-any-return]
                      kernel_options=options)[:, :, 0]

    return graph_micros(lambda _: call(), LAYERS), call()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--heads", type=int, nargs=2, default=(16, 8), metavar=("QUERY", "KV"))
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--block", type=int, default=DECODE_BLOCK)
    parser.add_argument("--only", nargs="+", default=[], help="run the settings whose names contain one of these")
    parser.add_argument("--contexts", type=int, nargs="+", default=list(range(len(CONTEXTS))))
    args = parser.parse_args()
    device = torch.device("cuda")
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    runs: dict[str, Callable[[DecodeCall], tuple[float, torch.Tensor]]] = {
        name: partial(time_flex, options=options) for name, options in SETTINGS.items()
        if args.block % (options or {}).get("BLOCK_N", DEFAULT_BLOCK_N) == 0}
    runs = {name: run for name, run in runs.items() if not args.only or any(part in name for part in args.only)}
    for capacity, fewest, most in (CONTEXTS[index] for index in args.contexts):
        case = decode_call(args.slots, (args.heads[0], args.heads[1]), args.head_dim, capacity, fewest, most,
                           args.block, device)
        print(f"{args.slots} slots, {fewest}–{most} keys each (regions of {capacity}, {args.block}-key mask blocks), "
              f"{case.kv_bytes / 1e6:.1f} MB of KV")
        first: torch.Tensor | None = None
        for name, run in runs.items():
            try:
                micros, output = run(case)
            except Exception as error:  # e.g. a tile needing more shared memory than the GPU has
                print(f"  {name:52s} failed: {str(error).strip().splitlines()[0][:100]}")
                continue
            first = output if first is None else first
            difference = float((output.float() - first.float()).abs().max())
            print(f"  {name:52s} {micros:7.1f} µs/call  {case.kv_bytes / micros / 1e6:5.2f} TB/s  "
                  f"max difference {difference:.2g}")


if __name__ == "__main__":
    main()
