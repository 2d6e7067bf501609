"""The same padding job in one plain child and through torch's elastic launcher with one rank, in the order
given, each result saved as JSON and its rows printed: the launcher must change no figure.

    python3 scripts/gpu_launcher_check.py SPEC.yaml OUT_DIR single,launcher,single,launcher
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from padbench.specfile import load_spec_document
from padbench.worker.runtime.isolation import ChildReport, run_in_child

JOB = "padbench.worker.jobs:run_job"
LIMIT_S = 280.0


def run(how: str, spec: dict[str, Any]) -> ChildReport:
    if how == "single":
        return run_in_child(JOB, spec, timeout_s=LIMIT_S)
    return run_in_child("padbench.worker.runtime.launcher:run_ranks", JOB, 1, (spec,), timeout_s=LIMIT_S)


def row_line(how: str, row: dict[str, Any]) -> str:
    spread = row.get("spread") or {}
    interval = f"[{spread.get('ci95_low_tokens_per_s')}, {spread.get('ci95_high_tokens_per_s')}]"
    peak = (row.get("memory") or {}).get("peak_allocated_bytes")
    return (f"  {how:9s} {row['strategy']:8s} {row['kernel']:22s} {row['status']:7s} tok/s={row['tokens_per_s']} "
            f"ci={interval} cv={spread.get('cv')} mfu={row.get('mfu_vs_matmul')} peak={peak}")


def main() -> None:
    spec, out, order = load_spec_document(sys.argv[1]), Path(sys.argv[2]), sys.argv[3].split(",")
    for number, how in enumerate(order):
        started = time.monotonic()
        report = run(how, spec)
        print(how, report.outcome, f"{time.monotonic() - started:.1f}s", report.error, flush=True)
        if report.outcome != "ok":
            continue
        (out / f"{spec['name']}-{number}-{how}.json").write_text(json.dumps(report.value))
        for row in report.value["strategies"]:
            print(row_line(how, row), flush=True)


if __name__ == "__main__":  # the launcher's children are spawned: they import this file without running it
    main()
