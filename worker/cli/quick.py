"""`padbench run --model NAME …`: a job from flags, as serving benchmarks take theirs, without a spec file.

`--input-len N --output-len M --num-prompts K` is a generate job (every prompt N tokens, M output tokens each, K
requests: vLLM's benchmark_serving on its random data set); without `--output-len` it is a padding job (sequences up
to N tokens). The flags build a spec document, which `--set`/`--sweep` then change and the spec loader checks exactly
as a file's; with a spec file they set their keys in it. Without a file, the job is sized for this machine: its
GPU (bf16, the fastest flash kernel), or the CPU (fp32, SDPA) where there is none.
"""

from __future__ import annotations

import argparse
from typing import Any

from padbench.machine import cuda_gpu_present
from padbench.spec_overrides import yaml_value

# A CPU runs fp32 and SDPA: flash kernels and bf16 matmuls are a GPU's.
CPU_SETTINGS = {"device": "cpu", "dtype": "fp32", "attention": "sdpa"}
GPU_SETTINGS = {"device": "cuda", "dtype": "bf16"}
QUICK_FLAGS = ("model", "data", "input_len", "output_len", "num_prompts", "batch_size")


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value


def add_quick_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "a job from flags (no SPEC.yaml needed; with one, each flag sets its key in it)",
        "--output-len makes a generate job, otherwise a padding job; --set and --sweep change the rest",
    )
    group.add_argument(
        "--model",
        metavar="NAME",
        help="a preset (tiny-llama, gpt2-seed, …), a Hub id (org/name, hub:NAME) or a local model "
        "directory, as a spec's `model` reads it",
    )
    group.add_argument(
        "--data",
        metavar="SOURCE",
        help="where the prompts or sequences come from: synthetic (default), hf:NAME[:CONFIG[:SPLIT]] "
        "or a local text file (data.source)",
    )
    group.add_argument(
        "--input-len",
        type=positive_int,
        metavar="N",
        help="generate: every prompt N tokens (synthetic data; a data source's are cut to N); "
        "padding: sequences up to N tokens (data.max_length)",
    )
    group.add_argument(
        "--output-len",
        type=positive_int,
        metavar="M",
        help="a generate job, M output tokens per request (output_length)",
    )
    group.add_argument(
        "--num-prompts",
        type=positive_int,
        metavar="K",
        help="how many prompts (generate) or sequences (padding) to draw (data.num_samples)",
    )
    group.add_argument(
        "--batch-size",
        metavar="B|auto",
        help="sequences per batch, or `auto` to probe the largest that fits (batch_size)",
    )


def quick_flags_given(args: argparse.Namespace) -> bool:
    return any(getattr(args, flag, None) is not None for flag in QUICK_FLAGS)


def quick_document(args: argparse.Namespace) -> dict[str, Any]:
    """The spec document the flags alone make, sized for this machine."""
    kind = "generate" if args.output_len is not None else "padding"
    document: dict[str, Any] = {"kind": kind, "name": f"{kind}-{args.model or 'default'}"[:100]}
    if cuda_gpu_present():
        document |= GPU_SETTINGS
    else:
        document |= CPU_SETTINGS | ({"cuda_graphs": False} if kind == "generate" else {})
    return with_flags(document, args)


def with_flags(document: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """`document` with the keys the flags name set to theirs (a spec file's document, or the flags' own)."""
    updated = dict(document)
    data = dict(updated.get("data") or {})
    if args.model is not None:
        updated["model"] = args.model
    if args.data is not None:
        data["source"] = args.data
    if args.input_len is not None:
        data["max_length"] = args.input_len
        if updated.get("kind") == "generate" and data.get("source", "synthetic") == "synthetic":
            data["distribution"] = f"fixed:{args.input_len}"  # every prompt the same length, as `random` data
    if args.num_prompts is not None:
        data["num_samples"] = args.num_prompts
    if data:
        updated["data"] = data
    if args.output_len is not None:
        updated["output_length"] = args.output_len
    if args.batch_size is not None:
        updated["batch_size"] = yaml_value(args.batch_size)
    return updated
