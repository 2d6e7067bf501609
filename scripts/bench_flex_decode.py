"""Times one decode step's FlexAttention call as `flex-kvcache` makes it, under several kernel settings.

A decode step of a continuous batch hands FlexAttention one query per slot against each slot's cache region
(a block mask from each slot's attended range), compiled with static shapes, so inductor runs its split-KV
decoding kernel. This replays 28 such calls (one per layer of a Qwen3-1.7B-sized model) as a CUDA graph and
prints microseconds per call for inductor's default settings and for the split counts and tiles given here,
with each setting's largest difference from the default's output.

    python scripts/bench_flex_decode.py [--slots 64] [--heads 16 8] [--head-dim 128] [--block 64] [--contexts 0 1 2]

`--block` sets the key blocks the masks list (flex-kvcache's is DECODE_BLOCK); settings whose BLOCK_N does not
divide it are skipped. `--contexts` picks rows of CONTEXTS.

Needs a CUDA GPU. Random keys, values and ranges: the time depends on their sizes, not on their values.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from padbench.worker.engine.decoding.flex_decode import DECODE_BLOCK, slot_range_mask
from padbench.worker.runtime.graph_timing import graph_micros

LAYERS = 28
# (capacity of a slot's region, fewest and most keys a slot attends)
CONTEXTS = ((640, 100, 400), (640, 300, 640), (4224, 2048, 4096))
DEFAULT_BLOCK_N = 64  # at most what inductor's decoding kernel takes by default (it ran on 64-key blocks)


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


Tensors = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def decode_call(slots: int, heads: tuple[int, int], head_dim: int, capacity: int, fewest: int, most: int,
                block: int, device: torch.device) -> tuple[Tensors, BlockMask, int]:
    """Query, keys and values in flex's (batch, heads, length, head_dim), the step's block mask, and KV bytes."""
    query_heads, kv_heads = heads
    keys = torch.randn(slots, capacity, kv_heads, head_dim, device=device, dtype=torch.bfloat16)
    values = torch.randn_like(keys)
    query = torch.randn(slots, 1, query_heads, head_dim, device=device, dtype=torch.bfloat16)
    used = torch.randint(fewest, most + 1, (slots,), device=device, dtype=torch.int32)
    # Each slot's first and last attended key, read by the mask function as flex-kvcache's are.
    first, last = torch.zeros(slots, dtype=torch.int32, device=device), used - 1

    def within_range(batch: Any, head: Any, q_index: Any, kv_index: Any) -> Any:
        return (kv_index >= first[batch]) & (kv_index <= last[batch])

    mask = slot_range_mask(first, last, capacity, block, within_range)
    kv_bytes = int(used.sum()) * kv_heads * head_dim * 2 * keys.element_size()
    return (query.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)), mask, kv_bytes


def time_setting(tensors: tuple[torch.Tensor, torch.Tensor, torch.Tensor], mask: BlockMask,
                 options: dict[str, Any] | None) -> tuple[float, torch.Tensor]:
    """Microseconds per call, replayed as a CUDA graph of LAYERS calls, and the call's output."""
    torch._dynamo.reset()
    attend: Any = torch.compile(flex_attention, dynamic=False)
    query, key, value = tensors

    def call() -> torch.Tensor:
        return attend(query, key, value, block_mask=mask, enable_gqa=True, kernel_options=options)  # type: ignore[no-any-return]

    return graph_micros(lambda _: call(), LAYERS), call()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--heads", type=int, nargs=2, default=(16, 8), metavar=("QUERY", "KV"))
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--block", type=int, default=DECODE_BLOCK)
    parser.add_argument("--contexts", type=int, nargs="+", default=list(range(len(CONTEXTS))))
    args = parser.parse_args()
    device = torch.device("cuda")
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    settings = {name: options for name, options in SETTINGS.items()
                if args.block % (options or {}).get("BLOCK_N", DEFAULT_BLOCK_N) == 0}
    for capacity, fewest, most in (CONTEXTS[index] for index in args.contexts):
        tensors, mask, kv_bytes = decode_call(args.slots, (args.heads[0], args.heads[1]), args.head_dim, capacity,
                                              fewest, most, args.block, device)
        print(f"{args.slots} slots, {fewest}–{most} keys each (regions of {capacity}, {args.block}-key mask blocks), "
              f"{kv_bytes / 1e6:.1f} MB of KV")
        default: torch.Tensor | None = None
        for name, options in settings.items():
            try:
                micros, output = time_setting(tensors, mask, options)
            except Exception as error:  # e.g. a tile needing more shared memory than the GPU has
                print(f"  {name:44s} failed: {str(error).strip().splitlines()[0][:100]}")
                continue
            default = output if default is None else default
            difference = float((output.float() - default.float()).abs().max())
            print(f"  {name:44s} {micros:7.1f} µs/call  {kv_bytes / micros / 1e6:5.2f} TB/s  "
                  f"max difference {difference:.2g}")


if __name__ == "__main__":
    main()
