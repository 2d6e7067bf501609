"""Child-process targets for the supervisor's unit tests (importable by a spawned child, no torch)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from padbench.contract.results import Environment, PartialResult
from padbench.kinds.padding.contract import PaddingJobSpec, PaddingResult, StrategyResult
from padbench.worker.runtime.isolation import ChildContext


def finish_with_progress(ctx: ChildContext, spec_text: str) -> dict[str, Any]:
    """Reports progress for ~1.5 s (so a heartbeat carries it), then returns a contract-shaped result."""
    for step in range(3):
        ctx.progress((step + 1) / 3, f"step {step + 1} of 3")
        time.sleep(0.5)
    return padding_result([])


def padding_result(rows: list[StrategyResult], partial: PartialResult | None = None) -> dict[str, Any]:
    environment = Environment(hostname="unit", device="cpu", python="3", torch="none", started_at="2026-11-21")
    result = PaddingResult(spec=PaddingJobSpec(), environment=environment, model_parameters=1,
                           flops_per_token=1.0, num_sequences=0, real_tokens_total=0, strategies=rows,
                           partial=partial)
    return result.model_dump(mode="json")


FINISHED_ROW = StrategyResult(strategy="static", attention="sdpa", kernel="torch-sdpa", batch_size=8, status="ok",
                              tokens_per_s=1234.5)


def finish_a_row_then_wait(ctx: ChildContext, spec_text: str) -> dict[str, Any]:
    """Hands over one finished row of two (a partial result), says so, then works on until killed."""
    ctx.finished(padding_result([FINISHED_ROW], PartialResult(rows_finished=1, rows_planned=2)))
    while True:
        ctx.progress(0.5, "row 1 of 2 finished")
        time.sleep(0.1)


def finish_a_row_then_die(ctx: ChildContext, spec_text: str) -> dict[str, Any]:
    """Hands over one finished row of two, then dies as a crashing kernel would take the process down."""
    ctx.finished(padding_result([FINISHED_ROW], PartialResult(rows_finished=1, rows_planned=2)))
    time.sleep(0.2)
    os._exit(3)


def hand_over_rows(ctx: ChildContext, count: int) -> str:
    """Hands over `count` numbered pieces, then returns."""
    for number in range(count):
        ctx.finished({"row": number})
    return "done"


def return_non_result(ctx: ChildContext, spec_text: str) -> dict[str, Any]:
    spec = json.loads(spec_text)
    return {"echo": spec}


def fail_after_progress(ctx: ChildContext, spec_text: str) -> dict[str, Any]:
    """Reports progress (so a heartbeat goes out), works a little longer, then fails."""
    ctx.progress(0.5, "half way")
    time.sleep(1.5)
    raise RuntimeError("lost the device")


def raise_error(ctx: ChildContext, spec_text: str) -> dict[str, Any]:
    spec = json.loads(spec_text)
    raise ValueError(f"no such strategy in {spec}")


def run_until_killed(ctx: ChildContext, spec_text: str) -> dict[str, Any]:
    """Writes its pid where the test can find it, then reports progress forever."""
    spec = json.loads(spec_text)
    Path(spec["pid_file"]).write_text(str(os.getpid()))
    while True:
        ctx.progress(0.5, "working")
        time.sleep(0.1)


def hold_memory(ctx: ChildContext, spec_text: str) -> dict[str, Any]:
    """Touches `mib` MiB of host memory and keeps it, reporting progress, until killed."""
    spec = json.loads(spec_text)
    held = bytearray(spec["mib"] * 2**20)
    for offset in range(0, len(held), 4096):
        held[offset] = 1
    while True:
        ctx.progress(0.5, f"holding {len(held)} bytes")
        time.sleep(0.1)


def return_nan_result(ctx: ChildContext, spec_text: str) -> dict[str, Any]:
    spec = json.loads(spec_text)
    document = finish_with_progress(ctx, spec)
    return {**document, "flops_per_token": float("nan")}


def raise_with_nul(ctx: ChildContext, spec_text: str) -> dict[str, Any]:
    ctx.progress(0.1, "reading \x00 binary")
    raise ValueError("bad byte \x00 in input")


def write_in_cwd(ctx: ChildContext, spec_text: str) -> dict[str, Any]:
    """Creates a file and a directory as a job's cache would; reports where and with which permissions."""
    Path("made.txt").write_text("cached copy")
    Path("made-dir").mkdir()
    return {"cwd": os.getcwd(), "file_mode": Path("made.txt").stat().st_mode & 0o777,
            "dir_mode": Path("made-dir").stat().st_mode & 0o777}


def record_gpus_then_finish(ctx: ChildContext, spec_text: str) -> dict[str, Any]:
    """Records the GPUs it was given and when it ran (in `spec["record"]`), runs `spec["seconds"]`, then
    returns a result."""
    spec = json.loads(spec_text)
    started = time.time()
    time.sleep(spec["seconds"])
    record = {"gpus": os.environ.get("CUDA_VISIBLE_DEVICES"), "started": started, "ended": time.time()}
    Path(spec["record"]).write_text(json.dumps(record))
    return padding_result([])
