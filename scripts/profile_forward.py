"""Where does a packed forward spend its time? Prints the top CUDA kernels of a few forwards of a preset.

    python scripts/profile_forward.py [--preset gpt2-seed] [--kernel torch-flash] [--tokens 81920]
"""

from __future__ import annotations

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from padbench.contract.model_spec import ModelSpec
from padbench.worker.engine.attention import resolve_kernel
from padbench.worker.engine.attention.features import AttentionFeatures
from padbench.worker.engine.data.batches import PackedBatch
from padbench.worker.engine.model.build import build_model


def packed_batch(tokens: int, vocab: int, seed: int = 0) -> PackedBatch:
    generator = torch.Generator().manual_seed(seed)
    lengths: list[int] = []
    while sum(lengths) < tokens - 600:
        lengths.append(int(torch.randint(20, 250, (1,), generator=generator)))
    ids = torch.randint(1000, vocab, (1, sum(lengths)), generator=generator)
    positions = torch.cat([torch.arange(n) for n in lengths])[None]
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    return PackedBatch(input_ids=ids, position_ids=positions, cu_seqlens=cu, max_seqlen=max(lengths),
                       lengths=tuple(lengths), sequence_ids=tuple(range(len(lengths))), token_budget=tokens)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="gpt2-seed")
    parser.add_argument("--kernel", default="torch-flash")
    parser.add_argument("--tokens", type=int, default=81920)
    parser.add_argument("--rows", type=int, default=25)
    args = parser.parse_args()
    device = torch.device("cuda")
    model = build_model(ModelSpec(preset=args.preset), torch.bfloat16, device, seed=0)
    kernel = resolve_kernel(args.kernel, PackedBatch, device, torch.bfloat16)
    batch = kernel.prepare(packed_batch(args.tokens, model.config.vocab_size).to(device),
                           AttentionFeatures.of(model.config).layer_windows)
    with torch.inference_mode():
        for _ in range(3):
            kernel.forward(model, batch)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            kernel.forward(model, batch)
        end.record()
        torch.cuda.synchronize()
        ms = start.elapsed_time(end) / 5
        print(f"{kernel.name}: {ms:.2f} ms/forward, {batch.real_tokens / ms * 1e3:,.0f} tokens/s")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
            kernel.forward(model, batch)
            torch.cuda.synchronize()
    # Grouped by input shape, so an operator that costs time (e.g. a copy) shows which tensor it touched.
    print(prof.key_averages(group_by_input_shape=True).table(
        sort_by="cuda_time_total", row_limit=args.rows, max_name_column_width=40, max_shapes_column_width=80))


if __name__ == "__main__":
    main()
