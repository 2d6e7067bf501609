"""Check every attention kernel × layout on this device: logits against the one-sequence reference, host
syncs inside the forward, and a small timing.

On the GPU box (gpt2-seed, bf16, WikiText-like lengths, batch 128 × 640):
    .venv/bin/python scripts/gpu_kernel_check.py
Here, on a CPU, with a tiny model and tiny batches:
    .venv/bin/python scripts/gpu_kernel_check.py --device cpu --tiny

The timing is a smoke figure (a few batches, mean of a few repeats), not the benchmark: `padbench run`
measures. The materialised-mask packed kernels run at a smaller token budget (`--masked-rows`), since their
O(total²) mask cannot hold a full 128 × 640 pack.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from padbench.contract.spec import ModelSpec, StrategySpec
from padbench.worker.engine.attention import ATTENTION_KERNELS, AttentionKernel
from padbench.worker.engine.attention.features import AttentionFeatures
from padbench.worker.engine.data.batches import STRATEGIES, Batch, PackedBatch
from padbench.worker.engine.data.synthetic import get_distribution
from padbench.worker.engine.measure.correctness import compare, gate_sample, logits_by_sequence, reference_logits
from padbench.worker.engine.model.build import build_model
from padbench.worker.engine.model.flops import ModelShape, batch_flops
from padbench.worker.engine.strategies import dynamic, packed  # noqa: F401  (registers the strategies)
from padbench.worker.runtime.device import torch_dtype
from padbench.worker.runtime.messages import first_line


@dataclass
class Row:
    layout: str
    kernel: str
    status: str  # ok | MISMATCH | unavailable | OOM | error
    max_error: str = "-"
    syncs: str = "-"
    ms_per_batch: float | None = None
    tokens_per_s: float | None = None
    tflops: float | None = None
    peak_mib: float | None = None
    note: str = ""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="tiny model and batches (CPU smoke run)")
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--max-length", type=int, default=640)
    parser.add_argument("--masked-rows", type=int, default=16, help="packed budget rows for masked kernels")
    parser.add_argument("--sequences", type=int, default=3000)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kernels", nargs="*", help="only these kernel names")
    args = parser.parse_args()
    if args.tiny:
        args.batch_size, args.max_length, args.masked_rows, args.sequences = 4, 64, 4, 48
        args.batches, args.warmup, args.repeats = 2, 1, 2
    return args


def draw_sequences(count: int, max_length: int, vocab: int, seed: int = 0) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    lengths = get_distribution("wikitext103-bert").sample(rng, count, max_length)
    return [rng.integers(1, vocab, size=int(length)).tolist() for length in lengths]


def make_batches(strategy: str, sequences: Sequence[Sequence[int]], batch_size: int, max_length: int,
                 count: int, device: torch.device) -> list[Batch]:
    spec = StrategySpec(name=strategy)
    batches = STRATEGIES.get(strategy).batches(sequences, spec, batch_size, max_length, pad_token_id=0, seed=0)
    return [batch.to(device) for batch in itertools.islice(batches, count)]


def check_correctness(kernel: AttentionKernel, model: torch.nn.Module, batches: list[Batch],
                      sequences: Sequence[Sequence[int]], dtype_name: str, device: torch.device) -> str | None:
    """The largest error over a sample of each batch, or None if any batch fails the gate (printed)."""
    worst = 0.0
    for batch in batches:
        sample = [batch.sequence_ids[i] for i in gate_sample(batch.lengths, 8)]
        references = reference_logits(model, [sequences[i] for i in sample], device)
        with torch.inference_mode():
            by_id = logits_by_sequence(batch, kernel.forward(model, batch))
        result = compare({index: by_id[seq_id] for index, seq_id in enumerate(sample)}, references, dtype_name)
        if not result.passed:
            print(f"  {kernel.name}: {result.reason}")
            return None
        worst = max(worst, result.max_error or 0.0)
    return f"{worst:.3g}"


def count_syncs(kernel: AttentionKernel, model: torch.nn.Module, batch: Batch, device: torch.device) -> str:
    """Run one forward with CUDA sync debugging set to error: any host sync inside it raises."""
    if device.type != "cuda":
        return "n/a"
    torch.cuda.synchronize(device)
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.inference_mode():
            kernel.forward(model, batch)
        return "none"
    except RuntimeError as error:
        return f"SYNC: {first_line(error, 80)}"
    finally:
        torch.cuda.set_sync_debug_mode("default")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_kernel(kernel: AttentionKernel, model: torch.nn.Module, batches: list[Batch], warmup: int,
                repeats: int, device: torch.device, shape: ModelShape, row: Row) -> None:
    with torch.inference_mode():
        for _ in range(warmup):
            kernel.forward(model, batches[0])
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        synchronize(device)
        start = time.perf_counter()
        for _ in range(repeats):
            for batch in batches:
                kernel.forward(model, batch)
        synchronize(device)
        elapsed = time.perf_counter() - start
    forwards = repeats * len(batches)
    row.ms_per_batch = 1e3 * elapsed / forwards
    row.tokens_per_s = repeats * sum(b.real_tokens for b in batches) / elapsed
    row.tflops = repeats * sum(batch_flops(shape, b).total for b in batches) / elapsed / 1e12
    if device.type == "cuda":
        row.peak_mib = torch.cuda.max_memory_allocated(device) / 2**20


def check_kernel(kernel: AttentionKernel, model: torch.nn.Module, batches: list[Batch],
                 sequences: Sequence[Sequence[int]], args: argparse.Namespace, device: torch.device) -> Row:
    layout = "packed" if kernel.layout is PackedBatch else "padded"
    row = Row(layout, kernel.name, "ok")
    reason = kernel.unavailable_reason(device, torch_dtype(args.dtype))
    if reason is not None:
        row.status, row.note = "unavailable", reason[:90]
        return row
    try:
        started = time.perf_counter()
        windows = AttentionFeatures.of(model.config).layer_windows
        prepared = [kernel.prepare(batch, windows) for batch in batches]
        error = check_correctness(kernel, model, prepared, sequences, args.dtype, device)
        row.note = f"first calls {time.perf_counter() - started:.1f}s"
        if error is None:
            row.status = "MISMATCH"
            return row
        row.max_error = error
        row.syncs = count_syncs(kernel, model, prepared[0], device)
        time_kernel(kernel, model, prepared, args.warmup, args.repeats, device, ModelShape.of(model.config), row)
    except torch.OutOfMemoryError:
        row.status = "OOM"
    except Exception as error:  # report and go on to the next kernel
        row.status, row.note = "error", f"{type(error).__name__}: {first_line(error, 90)}"
    finally:
        synchronize(device)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return row


def print_table(rows: list[Row]) -> None:
    def fmt(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    header = ("layout", "kernel", "status", "max err", "syncs", "ms/batch", "tokens/s", "TFLOP/s", "peak MiB", "note")
    print(" | ".join(header))
    for r in rows:
        print(" | ".join((r.layout, r.kernel, r.status, r.max_error, r.syncs, fmt(r.ms_per_batch, ".2f"),
                          fmt(r.tokens_per_s, ",.0f"), fmt(r.tflops, ".1f"), fmt(r.peak_mib, ",.0f"), r.note)))


def main() -> int:
    args = parse_args()
    device = torch.device(args.device)
    model_spec = ModelSpec(preset="tiny" if args.tiny else "gpt2-seed")
    model = build_model(model_spec, torch_dtype(args.dtype), device, seed=0)
    sequences = draw_sequences(args.sequences, args.max_length, model.config.vocab_size)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device {name} · torch {torch.__version__} · {model_spec.preset} · {args.dtype} · "
          f"batch {args.batch_size} × {args.max_length} · {args.batches} batches × {args.repeats} repeats")
    layouts = {
        "padded": make_batches("dynamic", sequences, args.batch_size, args.max_length, args.batches, device),
        "packed": make_batches("packed", sequences, args.batch_size, args.max_length, args.batches, device),
        "packed-masked": make_batches("packed", sequences, args.masked_rows, args.max_length, args.batches, device),
    }
    rows = []
    for kernel_name, kernel in ATTENTION_KERNELS.items():
        if args.kernels and kernel_name not in args.kernels:
            continue
        layout = "padded" if kernel.layout is not PackedBatch else (
            "packed-masked" if kernel.quadratic_memory else "packed")
        rows.append(check_kernel(kernel, model, layouts[layout], sequences, args, device))
        print(f"  checked {kernel_name}: {rows[-1].status}", flush=True)
    print_table(rows)
    return 0 if all(row.status in ("ok", "unavailable") for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
