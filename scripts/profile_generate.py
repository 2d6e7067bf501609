"""Where does a generate row spend its time? Profiles one measured pass of a strategy on a generate spec's
requests (after a warm-up pass that compiles and captures) and prints the top CUDA kernels and the mean time of
each kind of step.

    python scripts/profile_generate.py examples/gpu-generate-qwen3-1.7b-code-uniform.yaml \
        [--strategy continuous] [--requests 128] [--attention flex] [--rows 30] \
        [--compile-mode max-autotune-no-cudagraphs] \
        [--fenced-attention] [--inductor combo_kernels=True] [--name-width 200] [--cublas-only]

`--compile-mode` compiles the graphed decode step in that torch.compile mode instead of the default, to see
what a mode would change before a job uses it: compare its decode steps' mean time with a run without it.
`--fenced-attention` keeps the attention out of the compiled decode step's graph, as steps with prefills keep it.
`--cublas-only` keeps every product on cuBLAS instead of timing split-K against it (`split_k`), as a job does.
`--inductor NAME=VALUE` (repeatable) sets one of `torch._inductor.config`'s settings before anything compiles,
to try a fusion setting on the step; with `TORCHINDUCTOR_CACHE_DIR` set, the generated kernels land there to read.
"""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict

import numpy as np
import torch._inductor.config
from torch.profiler import ProfilerActivity, profile

from padbench.kinds.generate.contract import GenerateJobSpec
from padbench.specfile import load_spec_document
from padbench.worker.engine.decoding.fused import fused_projections
from padbench.worker.engine.decoding.registry import resolve_decode_kernel
from padbench.worker.jobs.generate.job import prepare
from padbench.worker.jobs.generate.passes import PassTiming, run_pass
from padbench.worker.jobs.generate.row import StrategyRow


def step_kinds(timing: PassTiming) -> dict[str, list[float]]:
    kinds: dict[str, list[float]] = defaultdict(list)
    for seconds, record in zip(timing.step_seconds, timing.records, strict=True):
        how = "bucketed" if record.bucketed else "unpadded"
        kind = record.kind if record.kind == "decode" else f"{record.kind} ({how})"
        kinds[kind].append(seconds)
    return kinds


def set_inductor_options(assignments: list[str]) -> None:
    """Applies `NAME=VALUE` settings, VALUE a Python literal; an unknown name stops the script."""
    for assignment in assignments:
        name, _, value = assignment.partition("=")
        if not hasattr(torch._inductor.config, name):
            raise SystemExit(f"--inductor: torch._inductor.config has no setting {name!r}")
        setattr(torch._inductor.config, name, ast.literal_eval(value))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("spec")
    parser.add_argument("--strategy", default="continuous", choices=["static", "sorted", "continuous"])
    parser.add_argument("--requests", type=int, default=128)
    parser.add_argument("--attention", default=None, help="the spec's attention kernel, replaced")
    parser.add_argument("--rows", type=int, default=30)
    parser.add_argument("--compile-mode", choices=["max-autotune-no-cudagraphs"], default=None)
    parser.add_argument("--fenced-attention", action="store_true")
    parser.add_argument("--inductor", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--name-width", type=int, default=70)
    parser.add_argument("--cublas-only", action="store_true")
    args = parser.parse_args()
    set_inductor_options(args.inductor)
    document = load_spec_document(args.spec)
    document["data"] = {**document["data"], "num_samples": args.requests}
    if args.attention is not None:
        document["attention"] = args.attention
    spec = GenerateJobSpec.model_validate({**document, "references": []})
    job = prepare(spec, lambda fraction, message: print(f"{fraction:.2f} {message}", flush=True))
    row = StrategyRow(job, args.strategy, job.requests, None, lambda *_: None)
    kernel = resolve_decode_kernel(spec.attention, job.device, job.dtype)
    if not args.cublas_only:
        row.tune_products(kernel)
        print("split-K products:", job.fusable.products.choices or "none faster than cuBLAS")
    with fused_projections(job.model, job.fusable):
        decoder, scheduler = row.engine(kernel, job.requests, row.slots)
        decoder.compile_mode = args.compile_mode
        decoder.trace_attention = not args.fenced_attention
        run_pass(args.strategy, scheduler, decoder, job.requests, job.device)  # compiles and captures
        decoder.reset()
        # On a GPU, its activity only: tracing the host would slow the host side of every step.
        activity = ProfilerActivity.CUDA if job.device.type == "cuda" else ProfilerActivity.CPU
        with profile(activities=[activity]) as profiler:
            timing = run_pass(args.strategy, scheduler, decoder, job.requests, job.device)
    order = "cuda_time_total" if job.device.type == "cuda" else "cpu_time_total"
    print(profiler.key_averages().table(sort_by=order, row_limit=args.rows, max_name_column_width=args.name_width))
    print(f"pass: {timing.seconds * 1e3:.1f} ms, {len(timing.step_seconds)} steps")
    for kind, seconds in sorted(step_kinds(timing).items()):
        print(f"{kind:>22}: {len(seconds):5d} steps, mean {np.mean(seconds) * 1e3:7.2f} ms, "
              f"total {np.sum(seconds) * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
