"""The OOM probe's check: does `batch_size: auto` find the right size, in few probes, and does it run?

For gpt2-seed, bf16, max_length 640 and four layouts (static, binned, packed + flash, packed + materialised
mask), this script
1. runs the probe (forced, so the cache cannot answer) and prints the size found, the probes and seconds;
2. finds the true limit inside the probe's final bracket (a fit and an out-of-memory at most 4% apart) by
   bisection, every size in its own child, down to a fitting size whose successor runs out — both probed —
   and checks that the chosen size is at most 5% below it;
3. measures the strategy at the chosen size through the real job entry point (a small measurement) and
   checks that it completes without running out of memory.
This process never touches CUDA itself: everything device-side runs in spawned children.

    GPU:  .venv/bin/python scripts/probe_gpu_check.py --json probe-check.json
    CPU:  .venv/bin/python scripts/probe_gpu_check.py --device cpu --tiny --budget-bytes 67108864
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.results import ProbeReport
from padbench.contract.spec import ModelSpec, ProbeSpec, StrategySpec
from padbench.kinds.padding.contract import PaddingJobSpec, PaddingResult
from padbench.worker.engine.data.batches import STRATEGIES, PackedBatch
from padbench.worker.engine.strategies import packed  # noqa: F401  (registers the strategies)
from padbench.worker.jobs.padding.probe.cache import ProbeCache
from padbench.worker.jobs.padding.probe.trials import PROBE_TARGET, find_batch_size, probe_request
from padbench.worker.jobs.probing.oracle import allocator_environment
from padbench.worker.runtime.isolation import run_in_child

# (strategy, attention on a GPU, attention on the CPU, where flash kernels do not run)
CASES: tuple[tuple[str, str, str], ...] = (
    ("static", "flash", "sdpa"),
    ("binned", "flash", "sdpa"),
    ("packed", "flash", "sdpa"),
    ("packed", "eager", "eager"),
)
TINY = ModelSpec(config={"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 1000,
                              "n_positions": 128})
MIN_SHARE_OF_TRUE_LIMIT = 0.95


@dataclass
class CaseOutcome:
    strategy: str
    kernel: str
    chosen: int
    largest_fit: int
    predicted_limit: int | None
    probes: int
    new_processes: int  # probes that started a child (the rest reused the previous one)
    probe_seconds: float
    true_limit: int | None
    scan: dict[int, str]
    measurement: str
    tokens_per_s: float | None
    peak_reserved_bytes: int | None

    @property
    def within_margin(self) -> bool:
        return self.true_limit is not None and self.chosen >= MIN_SHARE_OF_TRUE_LIMIT * self.true_limit

    @property
    def passed(self) -> bool:
        return self.within_margin and self.measurement == "ok"


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model at max_length 128 (CPU testing)")
    parser.add_argument("--budget-bytes", type=int, default=None, help="CPU memory budget standing in for a GPU")
    parser.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default=None,
                        help="default: bf16 on cuda, fp32 on cpu")
    parser.add_argument("--cases", default="0,1,2,3",
                        help="which of static, binned, packed+flash, packed+mask to run (0-3, comma-separated), "
                             "to split the check over several commands")
    parser.add_argument("--fresh-child-per-size", action="store_true",
                        help="probe every size in a new child (probe.reuse_child: false), to time the probe "
                             "without reusing its child")
    parser.add_argument("--json", dest="json_path", default=None, help="also write the outcomes here")
    return parser.parse_args()


def job_spec(arguments: argparse.Namespace, strategy: str, attention: str) -> PaddingJobSpec:
    if arguments.device == "cpu" and arguments.budget_bytes is None:
        sys.exit("--device cpu needs --budget-bytes")
    return PaddingJobSpec(
        model=TINY if arguments.tiny else ModelSpec(preset="gpt2-seed"),
        data={"source": "synthetic", "max_length": 128 if arguments.tiny else 640, "seed": 0},
        strategies=[StrategySpec(name=strategy)], attention=attention, batch_size="auto",
        dtype=arguments.dtype or ("bf16" if arguments.device == "cuda" else "fp32"), device=arguments.device,
        measurement={"warmup_batches": 1, "min_seconds": 0.0, "min_batches": 1, "max_batches": 5,
                     "correctness_samples": 2},
        probe=ProbeSpec(force=True, cpu_memory_budget_bytes=arguments.budget_bytes,
                        reuse_child=not arguments.fresh_child_per_size))


def resolved_kernel(spec: PaddingJobSpec) -> str:
    strategy = spec.strategies[0]
    child = run_in_child("padbench.worker.jobs.padding.probe.child:resolve_kernel_name",
                         spec.attention_for(strategy), strategy.name, spec.device, spec.dtype, timeout_s=300)
    if child.outcome != "ok":
        sys.exit(f"{strategy.label}: kernel {spec.attention_for(strategy)!r} cannot run: {child.error}")
    return child.value


def locate_true_limit(spec: PaddingJobSpec, kernel: str, report: ProbeReport) -> tuple[int | None, dict[int, str]]:
    """Bisect the probe's bracket to adjacent sizes, each in its own child exactly as the probe runs it.

    Returns the largest size that fits (its successor ran out: both are in the outcomes) and every outcome
    seen; None when the probe never ran out (it stopped at its ceiling) or a child ended other than fits/OOM.
    """
    if report.smallest_oom is None:
        return None, {}
    fits, runs_out = report.largest_fit, report.smallest_oom
    outcomes = {fits: "fits", runs_out: "oom"}
    while runs_out - fits > 1:
        middle = (fits + runs_out) // 2
        outcomes[middle] = _probe_once(spec, kernel, middle)
        print(f"   bisect: {middle} {outcomes[middle]}", flush=True)
        if outcomes[middle] == "fits":
            fits = middle
        elif outcomes[middle] == "oom":
            runs_out = middle
        else:
            return None, outcomes
    return fits, outcomes


def _probe_once(spec: PaddingJobSpec, kernel: str, size: int) -> str:
    request = probe_request(spec, spec.strategies[0], kernel, spec.device, size)  # type: ignore[arg-type]
    child = run_in_child(PROBE_TARGET, request, timeout_s=spec.probe.probe_timeout_s, env=allocator_environment())
    return "fits" if child.outcome == "ok" else child.outcome


def measure_at(spec: PaddingJobSpec, chosen: int) -> PaddingResult | str:
    strategy = spec.strategies[0].model_copy(update={"batch_size": chosen})
    # Enough sequences for a few full batches: packs of chosen × max_length tokens hold ~7 sequences per row.
    per_batch = chosen * (8 if STRATEGIES.get(strategy.name).layout is PackedBatch else 1)
    measured = spec.model_copy(update={"strategies": [strategy], "batch_size": chosen,
                                       "data": spec.data.model_copy(update={"num_samples": 4 * per_batch})})
    child = run_in_child("padbench.worker.jobs:run_job", measured.model_dump(mode="json"), timeout_s=600,
                         env=allocator_environment())
    if child.outcome != "ok":
        return f"{child.outcome}: {child.error}"
    result = JOB_RESULT_ADAPTER.validate_python(child.value)
    assert isinstance(result, PaddingResult)
    return result


def check_case(arguments: argparse.Namespace, strategy: str, attention: str, cache: ProbeCache) -> CaseOutcome:
    spec = job_spec(arguments, strategy, attention)
    kernel = resolved_kernel(spec)
    print(f"\n== {spec.strategies[0].label} / {kernel}", flush=True)
    report: ProbeReport = find_batch_size(spec, spec.strategies[0], kernel,
                                          lambda _, message: print("  ", message, flush=True), cache=cache)
    print(f"   chosen {report.chosen} (largest fit {report.largest_fit}, smallest oom {report.smallest_oom}, "
          f"predicted {report.predicted_limit}) in {len(report.probes)} probes, {report.seconds:.1f} s "
          f"(per probe: {[round(probe.seconds, 1) for probe in report.probes]})", flush=True)
    limit, outcomes = locate_true_limit(spec, kernel, report)
    print(f"   true limit {limit}: {dict(sorted(outcomes.items()))}", flush=True)
    measured = measure_at(spec, report.chosen)
    row = measured.strategies[0] if isinstance(measured, PaddingResult) else None
    status = (row.status if row.status != "failed" else f"failed: {row.error}") if row else measured
    return CaseOutcome(
        strategy=spec.strategies[0].label, kernel=kernel, chosen=report.chosen, largest_fit=report.largest_fit,
        predicted_limit=report.predicted_limit, probes=len(report.probes),
        new_processes=sum(1 for probe in report.probes if probe.new_process), probe_seconds=report.seconds,
        true_limit=limit, scan=dict(sorted(outcomes.items())), measurement=status,
        tokens_per_s=row.tokens_per_s if row else None,
        peak_reserved_bytes=row.memory.peak_reserved_bytes if row and row.memory else None)


def print_table(outcomes: list[CaseOutcome]) -> None:
    header = (f"{'strategy':<12} {'kernel':<24} {'chosen':>7} {'limit':>6} {'pred.':>6} {'probes':>6} {'new':>4} "
              f"{'secs':>6} {'true':>6} {'chosen/true':>11} {'measurement':<12} {'tokens/s':>10}")
    print("\n" + header + "\n" + "-" * len(header))
    for o in outcomes:
        ratio = f"{o.chosen / o.true_limit:.3f}" if o.true_limit else "n/a"
        tokens = f"{o.tokens_per_s:,.0f}" if o.tokens_per_s else "-"
        print(f"{o.strategy:<12} {o.kernel:<24} {o.chosen:>7} {o.largest_fit:>6} {o.predicted_limit or '-':>6} "
              f"{o.probes:>6} {o.new_processes:>4} {o.probe_seconds:>6.1f} {o.true_limit or '?':>6} {ratio:>11} "
              f"{o.measurement[:12]:<12} {tokens:>10}")


def write_json(path: str, outcomes: list[CaseOutcome]) -> None:
    document: list[dict[str, Any]] = [{**asdict(o), "passed": o.passed} for o in outcomes]
    with open(path, "w") as stream:
        json.dump(document, stream, indent=2)


def main() -> int:
    arguments = parse_arguments()
    started = time.monotonic()
    cache = ProbeCache()
    chosen_cases = [CASES[int(index)] for index in arguments.cases.split(",")]
    outcomes: list[CaseOutcome] = []
    for strategy, gpu_attention, cpu_attention in chosen_cases:
        outcomes.append(check_case(arguments, strategy, gpu_attention if arguments.device == "cuda" else cpu_attention,
                                   cache))
        if arguments.json_path:  # after every case, so a command stopped at its time limit keeps what it did
            write_json(arguments.json_path, outcomes)
    print_table(outcomes)
    print(f"\ntotal {time.monotonic() - started:.0f} s")
    failed = [o.strategy + "/" + o.kernel for o in outcomes if not o.passed]
    if failed:
        print(f"FAILED: {', '.join(failed)} (chosen below 95% of the true limit, or the measurement failed)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
