"""A tune's results for people (a table of every trial, the verdict, the settings to paste) and tools (CSV rows).

The winner leads, then the other finalists, then the configurations stopped in a round (the later the round, the
closer they came), those that failed, those the memory plan pruned and those the budget never reached; each
fate's reason is a numbered note. The verdict compares the winner with the next finalist by their repeats.
"""

from __future__ import annotations

from typing import Any

from padbench.contract.table import ResultTable, RowMark, TableColumn, TableRow
from padbench.contract.units import MISSING, format_bytes
from padbench.kinds.tune.contract import Finalist, TuneResult, TuneTrial
from padbench.report.cells import WINNER_MARK, library_line, note
from padbench.report.kind import CompareKey, CompareRule, RunFacts, Verdict
from padbench.report.noise import ratio_interval, within_noise
from padbench.report.partial import partial_lines
from padbench.report.table import plain_text

COLUMNS = ("configuration", "fate", "tokens/s", "peak memory", "plan (estimate)", "rounds", "compile s", "kernel")
RIGHT_ALIGNED = frozenset({"tokens/s", "peak memory", "plan (estimate)", "rounds", "compile s"})
DETAIL_COLUMNS = frozenset({"plan (estimate)", "rounds", "kernel"})
FATE_ORDER = {"finalist": 0, "stopped": 1, "failed": 2, "pruned": 3, "not reached": 4}
# On a GPU the peak is the allocator's, comparable with the plan; a CPU has no allocator to ask.
CPU_PEAK_NOTE = ("peak memory here is the trial process's resident memory, the Python and torch runtime included; "
                 "the plan estimates the model state and activations alone")


def ordered(result: TuneResult) -> list[int]:
    """Trial indices as the table reads: the finalists by their full figure, then by fate, faster first."""
    final = {finalist.trial: position for position, finalist in enumerate(result.finalists)}
    return sorted(range(len(result.trials)), key=lambda index: (
        FATE_ORDER[result.trials[index].fate], final.get(index, 0), -result.trials[index].rounds,
        -(result.trials[index].tokens_per_s or 0.0)))


def _figure(result: TuneResult, index: int) -> float | None:
    final = next((finalist for finalist in result.finalists if finalist.trial == index), None)
    return result.trials[index].tokens_per_s if final is None else final.tokens_per_s


def _fate(result: TuneResult, index: int, notes: list[str]) -> str:
    trial = result.trials[index]
    final = next((finalist for finalist in result.finalists if finalist.trial == index), None)
    if final is not None:
        return "finalist" if final.status == "ok" else f"finalist, {final.status} {note(notes, final.reason or '')}"
    return trial.fate if trial.reason is None else f"{trial.fate} {note(notes, trial.reason)}"


def _cells(result: TuneResult, index: int, notes: list[str]) -> tuple[str, ...]:
    trial = result.trials[index]
    figure = _figure(result, index)
    fate = _fate(result, index, notes)
    return (f"{WINNER_MARK if index == result.winner else ''}{trial.config.label}", fate,
            MISSING if figure is None else f"{figure:,.0f}", format_bytes(trial.peak_memory_bytes),
            format_bytes(trial.planned_bytes), str(trial.rounds),
            MISSING if trial.compile_seconds is None else f"{trial.compile_seconds:.1f}", trial.kernel_ran or MISSING)


def _mark(result: TuneResult, trial: TuneTrial, index: int) -> RowMark:
    if index == result.winner:
        return "winner"
    return "doubtful" if trial.fate in ("failed", "pruned", "not reached") else None


def header_lines(result: TuneResult) -> list[str]:
    spec, env = result.spec, result.environment
    fates = {fate: sum(trial.fate == fate for trial in result.trials) for fate in FATE_ORDER}
    on_gpus = env.device == "cuda"
    per = "per GPU" if on_gpus else "allowed (tune.memory_bytes)"
    memory = "no memory limit known" if result.memory_bytes is None else f"{format_bytes(result.memory_bytes)} {per}"
    one = spec.gpus == 1
    gpus = f"{spec.gpus} GPU{'' if one else 's'} · " if on_gpus else ""  # `all` GPUs, or a count
    return [*partial_lines(result.partial, "trials"),
            f"tune · {spec.model.label} · {spec.mode} · {spec.dtype} · {gpus}"
            f"{env.gpu_name or env.device} on {env.hostname} · {env.started_at}",
            f"{len(result.trials)} configurations: " + ", ".join(f"{count} {fate}" for fate, count in fates.items())
            + f"; {memory}; budget {spec.tune.budget:,.0f} s, the tune took {result.wall_seconds:,.0f} s"
            + _time_spent(result),
            *([] if on_gpus else [CPU_PEAK_NOTE]),
            library_line(env)]


def _time_spent(result: TuneResult) -> str:
    spent = result.spent
    if spent is None or not spent.trial_jobs:
        return ""
    finals = f", the finalists' {spent.finals_jobs} {_jobs(spent.finals_jobs)} {spent.finals_seconds:,.0f} s"
    return (f" ({spent.trial_jobs} trial {_jobs(spent.trial_jobs)} {spent.trial_seconds:,.0f} s"
            f"{finals if spent.finals_jobs else ''})")


def _jobs(count: int) -> str:
    return "job" if count == 1 else "jobs"


def verdict_lines(result: TuneResult) -> list[str]:
    if result.winner is None:
        return ["verdict: no configuration was measured in full: " + (
            "none fitted the memory plan" if result.trials and all(trial.fate == "pruned" for trial in result.trials)
            else "the finalists failed, or the budget ran out first")]
    ok = [finalist for finalist in result.finalists if finalist.status == "ok"]
    best, label = ok[0], result.trials[ok[0].trial].config.label
    unit = "output tokens/s" if result.spec.mode == "generate" else "tokens/s"
    lines = [f"verdict: fastest that fits: {label}, {best.tokens_per_s:,.0f} {unit}"]
    if len(ok) > 1:
        second = ok[1]
        ratio = (best.tokens_per_s or 0.0) / (second.tokens_per_s or 1.0)
        noise = " — within noise of it" if within_noise(best, second) else ""
        lines.append(f"  {ratio:.2f}× the next finalist ({result.trials[second.trial].config.label})"
                     f"{ratio_interval(best, second)}{noise}")
    lines += _faster_but_failed(result, best.tokens_per_s or 0.0, unit)
    compiled = result.trials[best.trial].compile_seconds
    if compiled:
        lines.append(f"  compiling took {compiled:.1f} s once, before the measured steps (never inside them)")
    return lines


def _faster_but_failed(result: TuneResult, winner_rate: float, unit: str) -> list[str]:
    """Finalists that ran faster than the winner in their rounds but failed in full: the verdict is the fastest that
    ran to the end, and says so."""
    lines = []
    for finalist in result.finalists:
        trial = result.trials[finalist.trial]
        if finalist.status != "ok" and (trial.tokens_per_s or 0.0) > winner_rate:
            lines.append(f"  note: {trial.config.label} ran {trial.tokens_per_s:,.0f} {unit} in round {trial.rounds} "
                         f"but failed in the finalists' run ({(finalist.reason or finalist.status)[:200]})")
    return lines


def paste_lines(result: TuneResult) -> list[str]:
    lines: list[str] = []
    for equivalent in result.equivalents:
        lines.append(f"{equivalent.tool}:" if equivalent.settings else f"{equivalent.tool}: no equivalent")
        lines += [f"  {line}" for line in (equivalent.settings or "").splitlines()]
        lines += [f"  (no equivalent: {missing})" for missing in equivalent.missing]
    return ["settings to paste:", *lines] if lines else []


def result_table(result: TuneResult) -> ResultTable:
    notes: list[str] = []
    order = ordered(result)
    return ResultTable(
        header=header_lines(result),
        columns=[TableColumn(name=name, right=name in RIGHT_ALIGNED, detail=name in DETAIL_COLUMNS)
                 for name in COLUMNS],
        rows=[TableRow(cells=list(_cells(result, index, notes)), row=index,
                       mark=_mark(result, result.trials[index], index)) for index in order],
        notes=notes, verdict=verdict_lines(result), after=paste_lines(result))


def render_table(result: TuneResult) -> str:
    return plain_text(result_table(result))


def csv_rows(result: TuneResult) -> list[dict[str, Any]]:
    return [{**trial.config.model_dump(), "fate": trial.fate, "reason": trial.reason, "rounds": trial.rounds,
             "tokens_per_s": _figure(result, index), "peak_memory_bytes": trial.peak_memory_bytes,
             "planned_bytes": trial.planned_bytes, "compile_seconds": trial.compile_seconds,
             "kernel_ran": trial.kernel_ran, "winner": index == result.winner}
            for index, trial in enumerate(result.trials)]


def run_facts(result: TuneResult) -> RunFacts:
    return RunFacts(model=result.spec.model.label, dtype=result.spec.dtype, mode=f"tune {result.spec.mode}")


def comparison_figures(result: TuneResult) -> dict[CompareKey, float | None]:
    """The finalists, by configuration: two tunes (two GPUs, two versions) compare where their finalists meet."""
    return {(result.trials[finalist.trial].config.label, "finalist"): finalist.tokens_per_s
            for finalist in result.finalists}


def tune_verdict(result: TuneResult) -> Verdict:
    ok: list[Finalist] = [finalist for finalist in result.finalists if finalist.status == "ok"]
    summary = None if not ok else (f"{result.trials[ok[0].trial].config.label}: "
                                   f"{ok[0].tokens_per_s or 0:,.0f} tokens/s")
    return Verdict(lines=verdict_lines(result), summary=summary, rows=result.finalists,
                   winner=ok[0] if ok else None, ranked=result.finalists)


COMPARE = CompareRule[TuneResult](
    figures=comparison_figures, key_names=("configuration", "as"), metric="tokens_per_s", metric_label="tokens/s",
    show=lambda value: f"{value:,.0f}", higher_is_faster=True)
