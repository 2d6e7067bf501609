"""A plain FSDP2 training loop on packed sequences over several GPUs, to compare padbench's `gpus: N` training with.

What a user writes with PyTorch's FSDP2 and no padbench: transformers' model built in fp32 (the master
weights), `fully_shard` on every decoder layer and then the root with bf16 compute and fp32 gradient reduction
(`MixedPrecisionPolicy`), torch's varlen flash kernel as its attention (`plain_packed_baseline.py`'s function),
full logits and `F.cross_entropy`, `torch.optim.AdamW(foreach=True)`, no compile. Each rank takes every
world-size-th sequence (DistributedSampler's order, as padbench deals them) and packs its share into
First-Fit-Decreasing packs of `--batch-size` × `--max-length` tokens (padbench's `packed` strategy); every rank
steps as many packs as the rank with the fewest has, so no collective waits for a rank that has stopped.
`--layout binned` trains on its share's padded batches of padbench's `binned` strategy instead (`--bins` length
groups), with the attention mask and transformers' `sdpa` attention, as plain_training_baseline.py does.
`--checkpointing` wraps every decoder layer in PyTorch's `checkpoint_wrapper` before sharding it, as accelerate's
and torchtitan's FSDP2 paths do, for GPUs whose memory does not hold a whole step's activations.

Run it under torchrun, one process per GPU (rank 0 writes the result):

    torchrun --standalone --nproc_per_node 2 scripts/plain_fsdp_training_baseline.py --preset llama-3.1-8b \\
        --source code.jsonl --tokenizer .data/bert-base-uncased --max-length 1024 --batch-size 8 --json plain.json

`--device cpu` runs the same loop on gloo with `--attention sdpa` and no mixed precision, for the tests.
"""

from __future__ import annotations

import argparse
import gc
import os
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

import padbench.worker.engine.strategies  # noqa: F401  (importing registers the strategies)
from padbench.contract.spec import DataSpec, StrategySpec
from padbench.worker.engine.data.batches import STRATEGIES, Batch, PackedBatch
from padbench.worker.engine.data.sources import load_sequences
from padbench.worker.engine.measure.matmul_rate import measure_matmul_tflops
from padbench.worker.engine.model import flops
from padbench.worker.engine.parallel.sharding import decoder_layers

try:  # run as `python3 scripts/…` (the script's folder is on the path) or as a module
    from plain_packed_baseline import PLAIN_VARLEN, plain_model, report
    from plain_training_baseline import TRAINING_FLOP_FACTOR, step_inputs, train_on, training_arguments
except ImportError:
    from scripts.plain_packed_baseline import PLAIN_VARLEN, plain_model, report
    from scripts.plain_training_baseline import TRAINING_FLOP_FACTOR, step_inputs, train_on, training_arguments

def arguments() -> argparse.Namespace:
    parser = training_arguments(max_length=1024, batch_size=8)
    parser.description = __doc__.splitlines()[0]
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--layout", choices=("packed", "binned"), default="packed")
    parser.add_argument("--bins", type=int, default=16, help="length groups of --layout binned")
    parser.add_argument("--checkpointing", action="store_true",
                        help="recompute each decoder layer's activations in the backward")
    parser.add_argument("--json")
    return parser.parse_args()


def rank_batches(args: argparse.Namespace, data: DataSpec, vocab_size: int, rank: int, world: int) -> list[Batch]:
    """This rank's share of the sequences (every world-th, from `rank`), packed as padbench's `packed` does or
    batched as its `binned` does."""
    share = load_sequences(data, vocab_size).sequences[rank::world]
    if args.layout == "binned":
        return list(STRATEGIES.get("binned").batches(share, StrategySpec(name="binned", n_bins=args.bins),
                                                     args.batch_size, data.max_length, 0, 0))
    return [batch for batch in STRATEGIES.get("packed").batches(
        share, StrategySpec(name="packed"), args.batch_size, data.max_length, 0, 0) if isinstance(batch, PackedBatch)]


def sharded_model(args: argparse.Namespace, device: torch.device, attention: str) -> torch.nn.Module:
    model = plain_model(args.preset, device, torch.float32, attention).train()
    if args.checkpointing:
        names = set(model._no_split_modules)  # transformers' decoder layer classes
        for layers in [module for module in model.modules() if isinstance(module, torch.nn.ModuleList)]:
            for index, layer in enumerate(layers):
                if type(layer).__name__ in names:
                    layers[index] = checkpoint_wrapper(layer, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    policy = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if device.type == "cuda"
              else MixedPrecisionPolicy())
    for layer in decoder_layers(model):
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model


def total(value: float, op: dist.ReduceOp.RedOpType, device: torch.device) -> float:
    tensor = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=op)
    return float(tensor.item())


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    args = arguments()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if args.device == "cuda":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    attention = "sdpa" if args.layout == "binned" and args.attention == PLAIN_VARLEN else args.attention
    model = sharded_model(args, device, attention)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    data = DataSpec(source=args.source, tokenizer=args.tokenizer, text_field=args.text_field,
                    max_length=args.max_length, num_samples=args.num_samples)
    packs = rank_batches(args, data, model.config.vocab_size, rank, world)
    count = int(total(len(packs), dist.ReduceOp.MIN, device))
    packs = packs[:count]
    steps = [step_inputs(pack, device) for pack in packs]
    for index in range(args.warmup):
        train_on(model, optimizer, *steps[index % count])
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    dist.barrier()
    done, start = 0, time.perf_counter()
    while True:  # whole passes over the packs; every rank stops after the same pass (rank 0's clock decides)
        for _ in range(count):
            train_on(model, optimizer, *steps[done % count])
            done += 1
        synchronize(device)
        if total(float(time.perf_counter() - start >= args.min_seconds), dist.ReduceOp.MAX, device):
            break
    seconds = total(time.perf_counter() - start, dist.ReduceOp.MAX, device)

    shape = flops.ModelShape.of(model)
    work = sum(TRAINING_FLOP_FACTOR * flops.batch_flops(shape, packs[i % count]).total for i in range(done))
    real_tokens = total(sum(packs[i % count].real_tokens for i in range(done)), dist.ReduceOp.SUM, device)
    work = total(work, dist.ReduceOp.SUM, device)
    peak = total(torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0, dist.ReduceOp.MAX, device)
    result = {"preset": args.preset, "layout": args.layout, "attention": attention, "world_size": world,
              "batch_size": args.batch_size, "checkpointing": args.checkpointing,
              "device": str(device),
              "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
              "torch": torch.__version__, "packs_per_rank": count, "steps": done, "real_tokens": int(real_tokens),
              "seconds": seconds, "tokens_per_s": real_tokens / seconds,
              "tokens_per_s_per_gpu": real_tokens / seconds / world, "peak_allocated_bytes_per_rank": int(peak)}
    if device.type == "cuda":  # MFU against each GPU's own measured GEMM rate, averaged over the ranks
        matmul = total(measure_matmul_tflops(device, torch.bfloat16) * 1e12, dist.ReduceOp.SUM, device)
        result |= {"matmul_tflops_per_gpu": matmul / world / 1e12, "mfu_vs_matmul": work / seconds / matmul}
    if rank == 0:
        report(result, args.json)
    # On gloo, rank 0 sometimes aborted at exit after writing its report ("terminate called without an active
    # exception"). Gloo's worker threads hold the collectives' work objects, and those hold tensors: freed by the
    # interpreter's own teardown, they take the GIL of a finalising interpreter and abort (the mechanism is
    # described in pytorch/pytorch#179291). So the sharded model, its optimizer and their work go while the
    # interpreter is whole, and no rank tears its group down while another still works.
    del model, optimizer, steps
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
