"""Check the padding runner's measurement machinery on this device, and print what it saw.

1. timing: CUDA events (or perf_counter) summed over a run agree with the wall clock, and issuing a pass
   takes far less host time than the device spends on it — no host sync per batch in the timed loop;
2. memory: an allocation of known size shows in the allocator peak and in NVML (CPU: the process RSS peak);
3. environment: GPU name, driver, CUDA and library versions are filled in;
4. the runner end to end: every strategy on the flash kernels (CPU: SDPA), then torch.compile on binned
   and packed, which must not recompile inside the measurement.

On the GPU box:  .venv/bin/python scripts/runner_device_check.py
Here, on a CPU:  .venv/bin/python scripts/runner_device_check.py --device cpu
Exit status 0 when every check passes.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import torch

from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.report import render_table
from padbench.worker.engine.measure.timing import clock_for
from padbench.worker.jobs.padding.job import run_padding_job
from padbench.worker.runtime.device import resolve_device
from padbench.worker.runtime.environment import collect_environment
from padbench.worker.runtime.memory import track_peak_memory

FAILURES: list[str] = []


def check(condition: bool, what: str) -> None:
    print(f"{'PASS' if condition else 'FAIL'}  {what}")
    if not condition:
        FAILURES.append(what)


def check_timing(device: torch.device) -> None:
    size = 8192 if device.type == "cuda" else 512
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    a @ a  # warm-up: cuBLAS handles and kernels
    clock = clock_for(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    wall_start = time.perf_counter()
    clock.start()
    for _ in range(20):
        a @ a
        clock.mark()
    issued = time.perf_counter() - wall_start
    seconds = sum(clock.collect())
    wall = time.perf_counter() - wall_start
    print(f"      20 matmuls {size}²: clock {seconds * 1e3:.1f} ms, wall {wall * 1e3:.1f} ms, "
          f"host issue {issued * 1e3:.1f} ms")
    check(abs(seconds - wall) <= 0.1 * wall + 1e-3, "the batch clock's total agrees with the wall clock (±10%)")
    if device.type == "cuda":
        check(issued < 0.5 * seconds, "issuing the loop took under half the device time: no per-batch host sync")


def check_memory(device: torch.device) -> None:
    size = 1 << 30 if device.type == "cuda" else 256 << 20
    with track_peak_memory(device) as stats:
        block = torch.ones(size, dtype=torch.uint8, device=device)
        del block
    memory = stats[0]
    print(f"      {memory}")
    if device.type == "cuda":
        check((memory.peak_allocated_bytes or 0) >= size, "allocator peak covers a 1 GiB allocation")
        check(memory.device_used_bytes is None or memory.device_used_bytes >= size,
              "NVML device usage (when pynvml is importable) covers it too")
    else:
        check((memory.host_peak_rss_bytes or 0) >= size, "process RSS peak covers a 256 MiB allocation")


def check_environment(device: torch.device) -> None:
    environment = collect_environment(device, dataset_digest=None, seeds={}, peak_flops=None, peak_source=None)
    print(f"      {environment}")
    if device.type == "cuda":
        check(bool(environment.gpu_name and environment.cuda), "GPU name and CUDA version recorded")
        check(environment.driver is not None, "driver version recorded (needs pynvml)")
    check(environment.transformers is not None, "transformers version recorded")


def job_spec(device: torch.device, **overrides: Any) -> PaddingJobSpec:
    on_gpu = device.type == "cuda"
    document: dict[str, Any] = {
        "model": "gpt2-seed" if on_gpu else {"config": {"n_layer": 2, "n_embd": 64, "n_head": 4,
                                                         "vocab_size": 2048, "n_positions": 128}},
        "data": {"source": "synthetic", "max_length": 640 if on_gpu else 128,
                 "num_samples": 4000 if on_gpu else 96, "seed": 0},
        "strategies": ["static", "dynamic", {"name": "binned", "n_bins": 16}, "packed"],
        "attention": "flash" if on_gpu else "sdpa", "dtype": "bf16" if on_gpu else "fp32",
        "batch_size": 64 if on_gpu else 8, "device": device.type,
        "measurement": {"warmup_batches": 3, "min_seconds": 2.0 if on_gpu else 0.2, "min_batches": 10},
    }
    document.update(overrides)
    return PaddingJobSpec.model_validate(document)


def check_runner(spec: PaddingJobSpec, what: str) -> None:
    result = run_padding_job(spec, lambda fraction, message: print(f"      [{fraction:4.0%}] {message}",
                                                                  file=sys.stderr))
    print(render_table(result))
    for row in result.strategies:
        check(row.status == "ok", f"{what}: {row.label} on {row.kernel} measured and valid "
                                  f"({row.error or row.invalid_reason or 'ok'})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    parser.add_argument("--skip-compile", action="store_true", help="leave out the torch.compile run")
    args = parser.parse_args()
    device = resolve_device(args.device)
    print(f"device: {device} · torch {torch.__version__}")
    check_timing(device)
    check_memory(device)
    check_environment(device)
    check_runner(job_spec(device), "eager")
    if not args.skip_compile:
        check_runner(job_spec(device, compile=True, strategies=[{"name": "binned", "n_bins": 16}, "packed"]),
                     "compiled")
    print(f"\n{len(FAILURES)} check(s) failed" if FAILURES else "\nall checks passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
