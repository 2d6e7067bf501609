"""Cells and lines that tables of every kind share: a figure not measured prints as "—", a row's validity
with its reasons as numbered notes, memory and the OOM probe's bracket, the versions and clocks of the run,
and the CSV fields of a row's spread, memory and GPU activity.
"""

from __future__ import annotations

from typing import Any, Protocol

from padbench.contract.results import Environment, GpuActivity, MemoryStats, ProbeReport, Spread
from padbench.contract.units import MISSING, format_bytes
from padbench.report.noise import Vetted

WINNER_MARK = "★ "


def format_memory(memory: MemoryStats | None) -> str:
    """Device runs show the allocator's peak; CPU runs the process's peak resident set, labelled as such."""
    if memory is None:
        return MISSING
    if memory.peak_allocated_bytes is not None:
        return format_bytes(memory.peak_allocated_bytes)
    if memory.host_peak_rss_bytes is not None:
        return f"{format_bytes(memory.host_peak_rss_bytes)} RSS"
    return MISSING


def number(value: float | None, pattern: str) -> str:
    return MISSING if value is None else format(value, pattern)


class Judged(Vetted, Protocol):
    """A row of any kind as its validity cell reads it: the verdict's view of it and why it was not measured."""

    @property
    def invalid_reason(self) -> str | None: ...

    @property
    def error(self) -> str | None: ...


def note(notes: list[str], text: str) -> str:
    notes.append(text)
    return f"[{len(notes)}]"


def activity_notes(activity: GpuActivity | None, notes: list[str]) -> list[str]:
    """`contended` and `throttled` markers, each with a note holding the sampled figures."""
    if activity is None:
        return []
    markers = []
    if activity.contended:
        allowed = " (allowed by measurement.allow_contention)" if activity.contention_allowed else \
            " — left out of the verdict"
        marker = note(notes, f"contended: up to {activity.other_processes_max} other process(es) computed on "
                              f"the GPU in {activity.contended_share:.0%} of {activity.samples} samples{allowed}")
        markers.append(f"contended {marker}")
    if activity.throttled:
        clocks = (f"; SM clock {activity.sm_clock_min_mhz}–{activity.sm_clock_max_mhz} MHz"
                  if activity.sm_clock_min_mhz is not None else "")
        reasons = ", ".join(activity.throttle_reasons) or "unspecified"
        text = f"throttled ({reasons}) in {activity.throttled_share:.0%} of samples{clocks}"
        # Held at the power limit is how a GPU runs at full load, unlike heat or a hardware slowdown: its
        # rows stay comparable with each other, so the mark says which it is rather than raising an alarm.
        at_power_cap = activity.throttle_reasons == ["sw_power_cap"]
        if at_power_cap:
            text += " — the GPU held its power limit, as it does at full load; rows under the same cap compare"
        markers.append(f"{'power cap' if at_power_cap else 'throttled'} {note(notes, text)}")
    return markers


def validity(row: Judged, notes: list[str]) -> str:
    """`yes`, or why not (`no [1]`, `failed [2]`, `noisy CV 7.1%`, `contended [3]`), with the reasons in `notes`."""
    if row.status != "ok":
        marker = note(notes, row.invalid_reason or row.error or "no reason recorded")
        return f"{'no' if row.status == 'invalid' else 'failed'} {marker}"
    markers = []
    if row.spread is not None and row.spread.noisy:
        markers.append(f"noisy CV {row.spread.cv:.1%}")
    markers += activity_notes(row.gpu_activity, notes)
    return ", ".join(markers) or "yes"


def probe_cell(probe: ProbeReport | None) -> str:
    """The OOM probe's bracket: the largest size that fitted, the smallest that ran out, and the size chosen."""
    if probe is None:
        return MISSING
    oom = f"OOM {probe.smallest_oom}" if probe.smallest_oom is not None else f"no OOM ≤ {probe.largest_fit}"
    mode = f" ({probe.mode})" if probe.mode != "predict" else ""
    return f"fit {probe.largest_fit}, {oom} → {probe.chosen}{mode}{' (cached)' if probe.cached else ''}"


def library_line(env: Environment) -> str:
    """`torch 2.11.0 · transformers 5.17.0 · CUDA 13.0 · driver 580.159.04`: the versions that were present."""
    return " · ".join([f"torch {env.torch}"] + [f"{name} {version}" for name, version in (
        ("transformers", env.transformers), ("flash-attn", env.flash_attn),
        ("flash-attn-cute", env.flash_attn_cute), ("CUDA", env.cuda), ("driver", env.driver)) if version])


def tflops(value: float | None) -> str:
    return MISSING if value is None else f"{value:,.0f} TFLOP/s" if value >= 10 else f"{value:.2f} TFLOP/s"


def clock_line(env: Environment) -> list[str]:
    start, end = env.clocks_at_start, env.clocks_at_end
    if start is None or end is None:
        return []
    return [f"GPU clocks: SM {start.sm_mhz or MISSING} MHz at the start, {end.sm_mhz or MISSING} MHz at the end; "
            f"{start.temperature_c if start.temperature_c is not None else MISSING} → "
            f"{end.temperature_c if end.temperature_c is not None else MISSING} °C"]


def table_text(header: list[str], table: list[str], notes: list[str], verdict: list[str], after: list[str]) -> str:
    """A kind's results as text: its header lines, the aligned table, the numbered notes, the verdict, the rest."""
    lines = [*header, "", *table]
    if notes:
        lines += ["", *(f"[{number}] {note}" for number, note in enumerate(notes, start=1))]
    lines += ["", *verdict]
    if after:
        lines += ["", *after]
    return "\n".join(lines) + "\n"


def spread_fields(spread: Spread | None) -> dict[str, Any]:
    return {"repeats": spread.repeats if spread else None,
            "ci95_low_tokens_per_s": spread.ci95_low_tokens_per_s if spread else None,
            "ci95_high_tokens_per_s": spread.ci95_high_tokens_per_s if spread else None,
            "min_repeat_tokens_per_s": spread.min_tokens_per_s if spread else None,
            "max_repeat_tokens_per_s": spread.max_tokens_per_s if spread else None,
            "cv": spread.cv if spread else None, "noisy": spread.noisy if spread else None}


def memory_fields(memory: MemoryStats | None) -> dict[str, Any]:
    memory = memory or MemoryStats()
    return {"peak_allocated_bytes": memory.peak_allocated_bytes, "peak_reserved_bytes": memory.peak_reserved_bytes,
            "device_used_bytes": memory.device_used_bytes, "host_peak_rss_bytes": memory.host_peak_rss_bytes}


def activity_fields(activity: GpuActivity | None) -> dict[str, Any]:
    return {"contended": activity.contended if activity else None,
            "contended_share": activity.contended_share if activity else None,
            "throttled": activity.throttled if activity else None}
