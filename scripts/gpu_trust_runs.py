"""The GPU runs behind docs/benchmarks.md's section on trusting a verdict, each writing its table and JSON.

    python3 scripts/gpu_trust_runs.py OUT_DIR                       # every run, in order
    python3 scripts/gpu_trust_runs.py OUT_DIR --runs repeats,curves  # some of them (one per command fits
                                                                     # a 10-minute limit)
    python3 scripts/gpu_trust_runs.py OUT_DIR --runs probe-reuse,probe-fresh --probe-cases 0

Runs (gpt2-seed, bf16 inference, max_length 640, 20,000 WikiText sequences as in docs/benchmarks.md):
- repeats:     static, dynamic, binned[16] and packed on flash, 3 repeats: every row's 95% interval and the
               verdict;
- contention:  the same job while a second process keeps the GPU busy with bf16 matmuls: rows marked
               `contended` (needs nvidia-ml-py, the `gpu` extra);
- curves:      batch_size [16, 64, 256, 1024, auto] for static, binned and packed: the table and each curve;
- probe-reuse / probe-fresh: scripts/probe_gpu_check.py for static, binned and packed + flash — the probe
               with one child per strategy, then with a fresh child per size (the probe before reuse) — each
               with the true limit bisected and the chosen size measured.

Each run writes OUT_DIR/<run>.yaml (the spec, for the job runs), <run>.json (the full result), <run>.txt (the
table, or the probe check's output) and <run>.log (progress); OUT_DIR/summary.txt lists each run's exit
status and wall time. Jobs go through `python3 -m padbench.cli run SPEC --json FILE`, exactly as a user runs
them. The corpus and tokenizer are the local copies docs/benchmarks.md describes (`--data`, `--tokenizer`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

RUNS = ("repeats", "contention", "curves", "probe-reuse", "probe-fresh")
MAIN_STRATEGIES = ["static", "dynamic", {"name": "binned", "n_bins": 16}, "packed"]
CURVE_SIZES: list[int | str] = [16, 64, 256, 1024, "auto"]
# The second process of the contention run: bf16 matmuls back to back until it is stopped. It prints a line
# once the first one has run, so the job starts only when the GPU is really shared.
MATMUL_LOAD = (
    "import torch\n"
    "a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)\n"
    "b = a @ a; torch.cuda.synchronize(); print('busy', flush=True)\n"
    "while True:\n"
    "    b = a @ a\n"
)


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path, help="where the specs, tables, JSON results and logs go")
    parser.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated, of: {', '.join(RUNS)}")
    parser.add_argument("--data", default=".data/wikitext/all.raw", help="the WikiText file of docs/benchmarks.md")
    parser.add_argument("--tokenizer", default=".data/bert-base-uncased", help="the bert-base-uncased folder")
    parser.add_argument("--python", default=sys.executable, help="the interpreter padbench is installed in")
    parser.add_argument("--probe-cases", default="0,1,2",
                        help="probe_gpu_check.py's cases for the probe runs (0 static, 1 binned, 2 packed + flash); "
                             "one case per command keeps each under 10 minutes")
    arguments = parser.parse_args()
    unknown = set(arguments.runs.split(",")) - set(RUNS)
    if unknown:
        parser.error(f"unknown runs {sorted(unknown)}; choose from {', '.join(RUNS)}")
    return arguments


def job_spec(arguments: argparse.Namespace, name: str, **overrides: Any) -> dict[str, Any]:
    """The gpt2-seed WikiText job of docs/benchmarks.md, with 3 repeats of at least 5 s each by default."""
    spec: dict[str, Any] = {
        "kind": "padding", "name": name, "model": "gpt2-seed",
        "data": {"source": arguments.data, "tokenizer": arguments.tokenizer, "max_length": 640,
                 "num_samples": 20000, "with_replacement": True, "seed": 0},
        "attention": "flash", "batch_size": 128, "dtype": "bf16", "device": "cuda", "mode": "inference",
        "strategies": MAIN_STRATEGIES,
        "measurement": {"warmup_batches": 10, "min_seconds": 5, "min_batches": 10, "repeats": 3,
                        "correctness_samples": 8},
    }
    spec.update(overrides)
    return spec


def run_job(arguments: argparse.Namespace, run: str, spec: dict[str, Any]) -> int:
    spec_path = arguments.out_dir / f"{run}.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    # -P: the checkout's padbench/ folder (the contract alone) must not shadow the installed package.
    command = [arguments.python, "-P", "-m", "padbench.cli", "run", str(spec_path),
               "--json", str(arguments.out_dir / f"{run}.json")]
    return run_logged(arguments, run, command)


def run_logged(arguments: argparse.Namespace, run: str, command: list[str]) -> int:
    print(f"== {run}: {' '.join(command)}", flush=True)
    with open(arguments.out_dir / f"{run}.txt", "w") as table, open(arguments.out_dir / f"{run}.log", "w") as log:
        code = subprocess.call(command, stdout=table, stderr=log)
    print((arguments.out_dir / f"{run}.txt").read_text(), flush=True)
    return code


def run_contended(arguments: argparse.Namespace) -> int:
    try:
        import pynvml  # noqa: F401  (the job's sampler needs it; without it nothing can be marked)
    except ImportError:
        print("contention: nvidia-ml-py is not installed (pip install 'padbench[gpu]'): rows cannot be marked")
    load = subprocess.Popen([arguments.python, "-c", MATMUL_LOAD], stdout=subprocess.PIPE, text=True)
    try:
        ready = load.stdout.readline() if load.stdout is not None else ""
        if ready.strip() != "busy":
            print(f"contention: the matmul process did not start (exit {load.poll()})")
            return 1
        return run_job(arguments, "contention", job_spec(arguments, "trust-contention"))
    finally:
        load.terminate()
        load.wait(timeout=30)


def run_probe_check(arguments: argparse.Namespace, run: str) -> int:
    suffix = arguments.probe_cases.replace(",", "")
    name = run if arguments.probe_cases == "0,1,2" else f"{run}-{suffix}"
    command = [arguments.python, "scripts/probe_gpu_check.py", "--cases", arguments.probe_cases,
               "--json", str(arguments.out_dir / f"{name}.json")]
    if run == "probe-fresh":
        command.append("--fresh-child-per-size")
    return run_logged(arguments, name, command)


def run_one(arguments: argparse.Namespace, run: str) -> int:
    if run == "repeats":
        return run_job(arguments, run, job_spec(arguments, "trust-repeats"))
    if run == "contention":
        return run_contended(arguments)
    if run == "curves":
        strategies = ["static", {"name": "binned", "n_bins": 16}, "packed"]
        # Shorter repeats: 15 rows (3 strategies × 5 sizes) must fit one command's time.
        measurement = {"warmup_batches": 5, "min_seconds": 2, "min_batches": 10, "repeats": 3,
                       "correctness_samples": 8}
        return run_job(arguments, run, job_spec(arguments, "trust-curves", strategies=strategies,
                                                batch_size=CURVE_SIZES, measurement=measurement,
                                                probe={"force": True}))
    return run_probe_check(arguments, run)


def main() -> int:
    arguments = parse_arguments()
    arguments.out_dir.mkdir(parents=True, exist_ok=True)
    needs_corpus = any(not run.startswith("probe") for run in arguments.runs.split(","))
    for path in (arguments.data, arguments.tokenizer) if needs_corpus else ():
        if not Path(path).exists():
            sys.exit(f"{path} is missing: make the local corpus and tokenizer copies docs/benchmarks.md describes")
    lines = []
    for run in arguments.runs.split(","):
        started = time.monotonic()
        code = run_one(arguments, run)
        lines.append(f"{run}: exit {code}, {time.monotonic() - started:.0f} s")
        print(lines[-1], flush=True)
        with open(arguments.out_dir / "summary.txt", "a") as summary:
            summary.write(lines[-1] + "\n")
    return 0 if all(" exit 0," in line for line in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
