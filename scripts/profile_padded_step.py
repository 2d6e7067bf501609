"""Where does a padded training step of the decoder spend its time, per attention kernel?

Times forward and forward+backward of a preset's decoder layers (no LM head, so the kernels' share is not
drowned by the logits) on right-padded rows of a few widths, then prints the top CUDA kernels of one step (and of
one forward) per kernel. Random weights and tokens: the time does not depend on their values.

    python -P scripts/profile_padded_step.py --preset gemma-2-2b --kernels flex eager
"""

from __future__ import annotations

import argparse
import functools

import torch
from torch.profiler import ProfilerActivity, profile

from padbench.contract.model_spec import ModelSpec
from padbench.worker.engine.attention import AttentionKernel, resolve_kernel
from padbench.worker.engine.attention.features import AttentionFeatures
from padbench.worker.engine.data.batches import PaddedBatch
from padbench.worker.engine.measure.timing import mean_call_milliseconds
from padbench.worker.engine.model.build import build_model

# (rows, shortest, longest) of each batch: short binned rows, a long bin's rows, many short rows.
SHAPES = ((8, 100, 300), (8, 200, 500), (4, 700, 1024), (16, 50, 200))


def padded_batch(rows: int, shortest: int, longest: int, seed: int) -> PaddedBatch:
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(shortest, longest, (rows,), generator=generator).tolist()
    width = max(lengths)
    ids = torch.randint(1000, 30000, (rows, width), generator=generator)
    mask = (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()
    return PaddedBatch(ids, mask, tuple(lengths), tuple(range(rows)))


def step(model: torch.nn.Module, kernel: AttentionKernel, batch: PaddedBatch, windows: tuple[int | None, ...],
         backward: bool = True) -> None:
    batch = kernel.per_forward(batch, windows)
    with kernel.kernel_context(model):
        hidden = model.model(**kernel.model_inputs(batch)).last_hidden_state
    if backward:
        hidden.float().pow(2).mean().backward()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="gemma-2-2b")
    parser.add_argument("--kernels", nargs="+", default=["flex", "eager"])
    parser.add_argument("--rows", type=int, default=14, help="kernels listed per profile")
    args = parser.parse_args()
    device = torch.device("cuda")
    model = build_model(ModelSpec(preset=args.preset), torch.bfloat16, device, seed=0, init="on_device").train()
    windows = AttentionFeatures.of(model.config).layer_windows
    for name in args.kernels:
        kernel = resolve_kernel(name, PaddedBatch, device, torch.bfloat16)
        for seed, (rows, shortest, longest) in enumerate(SHAPES):
            batch = kernel.prepare(padded_batch(rows, shortest, longest, seed).to(device), windows)
            run = functools.partial(step, model, kernel, batch, windows)
            with torch.no_grad():
                forward = mean_call_milliseconds(functools.partial(run, backward=False), device, times=5)
            both = mean_call_milliseconds(run, device, times=5)
            print(f"{kernel.name:20s} rows {rows} width {batch.width}: forward {forward:.1f} ms, "
                  f"forward+backward {both:.1f} ms", flush=True)
        batch = kernel.prepare(padded_batch(*SHAPES[1], seed=1).to(device), windows)  # profiled: 8 rows to 500
        mean_call_milliseconds(functools.partial(step, model, kernel, batch, windows), device, times=5)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            step(model, kernel, batch, windows)
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.rows, max_name_column_width=60))
        with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
            step(model, kernel, batch, windows, backward=False)
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=60))


if __name__ == "__main__":
    main()
