"""A plain transformers training loop on packed sequences, to compare padbench's training figures with.

What a user writes without padbench: the model from transformers in bf16, torch's varlen flash kernel
registered as its attention (cumulative lengths found from the position ids inside it; `--attention` picks
transformers' own for models that soft-cap, as in plain_packed_baseline.py), full logits and `F.cross_entropy`,
backward, `torch.optim.AdamW(foreach=True)`, no compile (`--compile`: `torch.compile(model)`, as users turn it on,
its compile time reported apart and never timed), the packs timed in order in one loop until `--min-seconds`
have passed (checked every few steps, so a long pass over many packs still ends on time). It packs the same
sequences, drawn by padbench's data loader with the same seed, into the same packs as padbench's `packed`
strategy, so the figures differ only in how the step is run.

`--layout binned` trains on the padded batches of padbench's `binned` strategy instead (`--bins` length
groups, `--batch-size` rows each), passing the attention mask as users do, on transformers' default `sdpa`
attention unless `--attention` names another; labels of padding positions are ignored.

    python3 scripts/plain_training_baseline.py --preset qwen3-1.7b --source code.jsonl \\
        --tokenizer .data/bert-base-uncased --max-length 640 --batch-size 16 --json plain-training.json
    python3 scripts/plain_training_baseline.py ... --layout binned --bins 16 --attention sdpa
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

import padbench.worker.engine.strategies  # noqa: F401  (importing registers the strategies)
from padbench.contract.spec import DataSpec, StrategySpec
from padbench.worker.engine.data.batches import STRATEGIES, Batch, PackedBatch
from padbench.worker.engine.data.sources import load_sequences
from padbench.worker.engine.measure.matmul_rate import measure_matmul_tflops
from padbench.worker.engine.model import flops
from padbench.worker.engine.training.steps import next_token_labels

try:  # run as `python3 scripts/…` (the script's folder is on the path) or as a module
    from plain_packed_baseline import PLAIN_VARLEN, add_attention_argument, plain_model, report, same_packs
except ImportError:
    from scripts.plain_packed_baseline import PLAIN_VARLEN, add_attention_argument, plain_model, report, same_packs

TRAINING_FLOP_FACTOR = 3  # backward costs twice the forward, as padbench counts it
SYNC_EVERY = 8  # steps between the checks of the clock


def training_arguments(max_length: int, batch_size: int) -> argparse.ArgumentParser:
    """The model, data, pack and timing options the plain training loops share."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--text-field", default="text")
    parser.add_argument("--num-samples", type=int, default=4000)
    parser.add_argument("--max-length", type=int, default=max_length)
    parser.add_argument("--batch-size", type=int, default=batch_size, help="pack budget in rows of max_length tokens")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--min-seconds", type=float, default=10.0)
    add_attention_argument(parser)
    return parser


def train_on(model: torch.nn.Module, optimizer: torch.optim.Optimizer, input_ids: torch.Tensor,
             inputs: dict[str, torch.Tensor], labels: torch.Tensor) -> None:
    """One step as users write it: full logits, cross-entropy in fp32, backward, the optimizer's step."""
    logits = model(input_ids=input_ids, **inputs).logits
    loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def arguments() -> argparse.Namespace:
    parser = training_arguments(max_length=640, batch_size=16)
    parser.add_argument("--layout", choices=("packed", "binned"), default="packed")
    parser.add_argument("--bins", type=int, default=16, help="length groups of --layout binned")
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile(model) before the warm-up; the warm-up steps then include compiling")
    parser.add_argument("--json")
    return parser.parse_args()


def same_binned_batches(data: DataSpec, vocab_size: int, batch_size: int, bins: int) -> list[Batch]:
    """The padded batches padbench's `binned` strategy makes of the same sequences."""
    sequences = load_sequences(data, vocab_size).sequences
    return list(STRATEGIES.get("binned").batches(sequences, StrategySpec(name="binned", n_bins=bins), batch_size,
                                                 data.max_length, 0, 0))


def step_inputs(batch: Batch, device: torch.device) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
    """input_ids, the keyword arguments a user passes with them, and the labels, on the device."""
    labels = next_token_labels(batch).to(device)
    if isinstance(batch, PackedBatch):
        return batch.input_ids.to(device), {"position_ids": batch.position_ids.to(device)}, labels
    return batch.input_ids.to(device), {"attention_mask": batch.attention_mask.to(device)}, labels


def main() -> None:
    args = arguments()
    device, dtype = torch.device("cuda"), torch.bfloat16
    # The varlen function reads packed position ids; padded batches take transformers' default instead.
    attention = "sdpa" if args.layout == "binned" and args.attention == PLAIN_VARLEN else args.attention
    model = plain_model(args.preset, device, dtype, attention).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    data = DataSpec(source=args.source, tokenizer=args.tokenizer, text_field=args.text_field,
                    max_length=args.max_length, num_samples=args.num_samples)
    packs: list[Batch] = (list(same_packs(data, model.config.vocab_size, args.batch_size)) if args.layout == "packed"
                          else same_binned_batches(data, model.config.vocab_size, args.batch_size, args.bins))
    steps = [step_inputs(pack, device) for pack in packs]
    # Packs vary in their number of sequences; dynamic shapes keep one graph rather than one per length.
    run = torch.compile(model, dynamic=True) if args.compile else model

    def step(index: int) -> None:
        train_on(run, optimizer, *steps[index % len(steps)])

    warmup_start = time.perf_counter()
    for index in range(args.warmup):
        step(index)
    torch.cuda.synchronize()
    warmup_seconds = time.perf_counter() - warmup_start
    torch.cuda.reset_peak_memory_stats()
    done, start = 0, time.perf_counter()
    while True:
        step(done)
        done += 1
        # A sync every few steps, not every step, keeps the host queueing ahead as a user's loop does.
        if done % SYNC_EVERY == 0:
            torch.cuda.synchronize()
            if time.perf_counter() - start >= args.min_seconds:
                break
    seconds = time.perf_counter() - start

    shape = flops.ModelShape.of(model)
    work = sum(TRAINING_FLOP_FACTOR * flops.batch_flops(shape, packs[i % len(packs)]).total for i in range(done))
    real_tokens = sum(packs[i % len(packs)].real_tokens for i in range(done))
    matmul = measure_matmul_tflops(device, dtype) * 1e12
    result = {"preset": args.preset, "layout": args.layout, "attention": attention, "gpu": torch.cuda.get_device_name(),
              "torch": torch.__version__, "compiled": args.compile, "warmup_seconds_with_compile": warmup_seconds,
              "packs": len(packs), "steps": done, "real_tokens": real_tokens,
              "seconds": seconds,
              "tokens_per_s": real_tokens / seconds, "matmul_tflops": matmul / 1e12,
              "mfu_vs_matmul": work / seconds / matmul, "peak_allocated_bytes": torch.cuda.max_memory_allocated()}
    report(result, args.json)


if __name__ == "__main__":
    main()
