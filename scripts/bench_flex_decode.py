"""Times one decode step's FlexAttention call as `flex-kvcache` makes it, under several kernel settings.

A decode step of a continuous batch hands FlexAttention one query per slot against each slot's cache region
(a block mask from each slot's attended range), compiled with static shapes, so inductor runs its split-KV
decoding kernel. This replays 28 such calls (one per layer of a Qwen3-1.7B-sized model) as a CUDA graph and
prints microseconds per call for inductor's default settings and for the split counts and tiles given here,
with each setting's largest difference from the default's output.

    python scripts/bench_flex_decode.py [--slots 64] [--heads 16 8] [--head-dim 128]

Needs a CUDA GPU. Random keys, values and ranges: the time depends on their sizes, not on their values.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from padbench.worker.engine.decoding.flex_decode import DECODE_BLOCK
from padbench.worker.runtime.graph_timing import graph_micros

BLOCK = DECODE_BLOCK  # the key blocks flex-kvcache's decode masks list
LAYERS = 28
# (capacity of a slot's region, fewest and most keys a slot attends)
CONTEXTS = ((640, 100, 400), (640, 300, 640), (4224, 2048, 4096))
SETTINGS: dict[str, dict[str, Any] | None] = {
    "inductor's default": None,
    "SPLIT_KV=2": {"SPLIT_KV": 2},
    "SPLIT_KV=4": {"SPLIT_KV": 4},
    "SPLIT_KV=8": {"SPLIT_KV": 8},
    "SPLIT_KV=16": {"SPLIT_KV": 16},
    "SPLIT_KV=2, BLOCK_N=32": {"SPLIT_KV": 2, "BLOCK_N": 32},
    "SPLIT_KV=2, BLOCK_N=64, 4 warps, 2 stages": {"SPLIT_KV": 2, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2},
    "SPLIT_KV=4, BLOCK_N=64, 4 warps, 2 stages": {"SPLIT_KV": 4, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2},
}


def decode_call(slots: int, heads: tuple[int, int], head_dim: int, capacity: int, fewest: int, most: int,
                device: torch.device) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], BlockMask, int]:
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

    blocks = -(-capacity // BLOCK)
    count = (last // BLOCK - first // BLOCK + 1).clamp(min=0).to(torch.int32)
    indices = (first[:, None] // BLOCK + torch.arange(blocks, device=device, dtype=torch.int32)).clamp(
        max=blocks - 1).to(torch.int32)
    mask = BlockMask.from_kv_blocks(count[:, None, None], indices[:, None, None], BLOCK_SIZE=BLOCK,
                                    mask_mod=within_range, seq_lengths=(1, capacity), compute_q_blocks=False)
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
    args = parser.parse_args()
    device = torch.device("cuda")
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    for capacity, fewest, most in CONTEXTS:
        tensors, mask, kv_bytes = decode_call(args.slots, (args.heads[0], args.heads[1]), args.head_dim, capacity,
                                              fewest, most, device)
        print(f"{args.slots} slots, {fewest}–{most} keys each (regions of {capacity}), {kv_bytes / 1e6:.1f} MB of KV")
        default: torch.Tensor | None = None
        for name, options in SETTINGS.items():
            micros, output = time_setting(tensors, mask, options)
            default = output if default is None else default
            difference = float((output.float() - default.float()).abs().max())
            print(f"  {name:44s} {micros:7.1f} µs/call  {kv_bytes / micros / 1e6:5.2f} TB/s  "
                  f"max difference {difference:.2g}")


if __name__ == "__main__":
    main()
