"""`padbench schema` (the JSON Schema of a job spec) and `padbench init` (a commented starter spec).

The starter is a real spec: it validates, and `padbench run` runs it as written. It is sized for this
machine: for its GPU, or, where the driver lists no CUDA GPU, for the CPU (`--gpu`, `--cpu` choose).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from padbench.client.spec_reference import render_reference
from padbench.contract.kinds import JOB_SPEC_ADAPTER
from padbench.machine import cuda_gpu_present

STARTER_SPEC = """\
# A padbench job spec: which batching layout and attention kernel gives the most tokens/s for this model,
# data and GPU. Run it here or on the service; both check every key first:
#   padbench run {name}                 # on this machine, no server
#   padbench submit {name} --wait       # on the service (PADBENCH_SERVER, PADBENCH_TOKEN)
# Every key: `padbench schema`. Unknown keys are errors, so a typo never falls back to a default.
kind: padding
name: my-first-benchmark

# A preset (tiny-llama | gpt2-seed | llama-3.2-1b | …), a Hugging Face Hub model (org/name), a local model
# directory written as a path (./my-model), or {{config: {{model_type: llama, …}}}}.
model:{model}

data:
  # `synthetic` draws lengths from a fitted distribution and needs no download; for real text give
  # hf:NAME[:CONFIG[:SPLIT]] or a local .txt/.jsonl/.parquet/.csv file, plus `tokenizer`.
  source: synthetic
  distribution: wikitext103-bert
  max_length: {max_length:<13} # longer sequences are truncated
  num_samples: {num_samples:<12} # sequences measured per layout

# The layouts to compare; each may override `attention` and `batch_size`.
strategies:
  - static                  # pad every batch to max_length
  - dynamic                 # pad each batch to its longest sequence
  - {{name: binned, n_bins: 16}}  # group similar lengths, then pad
  - packed                  # concatenate sequences, no padding (varlen kernels on a GPU)

attention: {attention:<16} # auto: the kernel this worker measured fastest (flash where it has no figure);
                            # flash: the best flash kernel present; or sdpa, eager, flex, torch-flash, …
                            # (transformers' names work too: flash_attention_2, sdpa, flex_attention, eager)
batch_size: {batch_size:<15} # or `auto`: the largest batch that fits, found by an OOM probe
dtype: {dtype:<20} # bf16 | fp16 | fp32 (also bfloat16, float16, float32); flash needs bf16/fp16
device: {device:<19} # auto: cuda when present (`padbench init --cpu` / `--gpu` write a spec sized for one)
mode: inference             # or training: forward, backward and an AdamW step

measurement:
  min_seconds: {min_seconds:<12} # a layout measured for less time, or fewer batches, is marked invalid
  min_batches: 10
  repeats: 2                # each layout measured twice: the verdict gets an interval (more: a narrower one)
"""

# What the starter measures on a GPU, and a CPU-sized version that finishes in well under a minute on two busy
# cores (a small GPT-2 with a small vocabulary, fp32 and SDPA: flash kernels need a GPU and bf16/fp16). GPT-2's
# special ids (50256) lie outside that vocabulary, and a benchmark forward never uses them: none are set.
# Both measure each layout twice, so the first verdict has an interval.
GPU_VALUES = {"model": " gpt2-seed", "max_length": 640, "num_samples": 2000, "attention": "auto", "batch_size": 32,
              "dtype": "bf16", "device": "auto", "min_seconds": 5.0}
CPU_VALUES = {"model": "\n  config: {model_type: gpt2, n_layer: 2, n_embd: 64, n_head: 4, vocab_size: 2048, "
                       "n_positions: 512,\n           bos_token_id: null, eos_token_id: null}",
              "max_length": 512, "num_samples": 128, "attention": "sdpa", "batch_size": 8, "dtype": "fp32",
              "device": "cpu", "min_seconds": 0.5}


def print_schema(args: argparse.Namespace) -> int:
    if args.format == "markdown":
        sys.stdout.write(render_reference())
    else:
        sys.stdout.write(json.dumps(JOB_SPEC_ADAPTER.json_schema(), indent=2) + "\n")
    return 0


def write_starter(args: argparse.Namespace) -> int:
    path: Path = args.path
    if path.exists() and not args.force:
        print(f"padbench init: {path} exists; pass --force to overwrite it", file=sys.stderr)
        return 2
    for_cpu, why = starter_size(args.cpu, args.gpu)
    try:
        path.write_text(STARTER_SPEC.format(name=path, **(CPU_VALUES if for_cpu else GPU_VALUES)), encoding="utf-8")
    except OSError as error:
        print(f"padbench init: cannot write {path}: {error.strerror}", file=sys.stderr)
        return 2
    print(f"wrote {path}, {why}: edit it, then `padbench run {path}` or `padbench submit {path} --wait`",
          file=sys.stderr)
    return 0


def starter_size(cpu: bool, gpu: bool) -> tuple[bool, str]:
    """(whether to write the CPU starter, the reason in words) for the options given and this machine."""
    if cpu or gpu:
        return cpu, f"sized for a {'CPU' if cpu else 'GPU'} as asked"
    if cuda_gpu_present():
        return False, "sized for this machine's GPU (--cpu: one for a CPU)"
    return True, ("sized for a CPU, as this machine has no CUDA GPU (--gpu: one for the service's GPUs, "
                  "to submit)")


def register_starter(subparsers: argparse._SubParsersAction) -> None:
    schema = subparsers.add_parser(
        "schema", help="print the JSON Schema of a job spec",
        description="Print the JSON Schema every job spec is checked against (padding jobs and attention "
                    "sweeps), e.g. for an editor's YAML completion.")
    schema.add_argument("--format", choices=("json", "markdown"), default="json",
                        help="json: the JSON Schema (default); markdown: a reference table per section")
    schema.set_defaults(handler=print_schema)
    init = subparsers.add_parser(
        "init", help="write a commented starter job spec",
        description="Write a padding job spec with every common key explained, ready to run, sized for this "
                    "machine: for its GPU, or for the CPU where there is no CUDA GPU.")
    init.add_argument("path", type=Path, nargs="?", default=Path("padbench.yaml"), metavar="FILE",
                      help="where to write it (default: padbench.yaml)")
    init.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    size = init.add_mutually_exclusive_group()
    size.add_argument("--cpu", action="store_true", help="a spec sized for a CPU: runs in well under a minute "
                                                         "(the default on a machine without a CUDA GPU)")
    size.add_argument("--gpu", action="store_true", help="a spec sized for a GPU (the default where one is present)")
    init.set_defaults(handler=write_starter)
