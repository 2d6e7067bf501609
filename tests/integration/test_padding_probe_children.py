"""The OOM probe with real spawned children: a CPU memory budget, every way a child can end, the cache."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from padbench.contract.spec import DataSpec, MeasurementSpec, ModelSpec, ProbeSpec, StrategySpec
from padbench.kinds.padding.contract import PaddingJobSpec, PaddingResult
from padbench.worker.jobs.padding.probe.cache import ProbeCache
from padbench.worker.jobs.padding.probe.trials import find_batch_size
from padbench.worker.jobs.probing.oracle import ProbeFailed
from padbench.worker.jobs.probing.search import bracket_tolerance, choose_size

MIB = 2**20
TINY = ModelSpec(config={"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 1000,
                              "n_positions": 128})
STATIC = StrategySpec(name="static")
TARGETS = "tests.integration.probe_targets:"


def cpu_spec(budget: int = 64 * MIB, **probe: object) -> PaddingJobSpec:
    return PaddingJobSpec(model=TINY, device="cpu", dtype="fp32", attention="sdpa", batch_size="auto",
                          data={"max_length": 128}, strategies=[STATIC],
                          probe=ProbeSpec(cpu_memory_budget_bytes=budget, **probe))


@pytest.fixture
def cache(tmp_path: Path) -> ProbeCache:
    return ProbeCache(tmp_path / "probe-cache.json")


def quiet(fraction: float, message: str) -> None:
    pass


@pytest.mark.slow
def test_a_cpu_budget_bounds_the_search_and_the_cache_answers_the_second_time(cache: ProbeCache) -> None:
    spec = cpu_spec()
    report = find_batch_size(spec, STATIC, "sdpa", quiet, cache=cache)
    fits = [a for a in report.probes if a.outcome == "fits"]
    assert report.largest_fit > 1 and report.smallest_oom is not None
    assert report.smallest_oom - report.largest_fit <= bracket_tolerance(report.largest_fit)
    assert {a.outcome for a in report.probes} == {"fits", "oom"}
    assert max(a.size for a in fits) == report.largest_fit
    assert all(a.peak_allocated_bytes is not None and a.peak_allocated_bytes <= 64 * MIB for a in fits)
    # Usually 6 probes; a CPU's resident-memory peaks are noisy under load (8 seen on a busy 2-core CI box).
    # Doubling + bisection over 1..4096 needs 13; the strict probe counts are checked on simulated devices.
    assert len(report.probes) <= 10 and report.predicted_limit is not None
    assert report.chosen == choose_size(report.largest_fit, report.smallest_oom, 0.05, spec.probe.cap)
    assert not report.cached

    again = find_batch_size(spec, STATIC, "sdpa", quiet, cache=cache, probe_target=TARGETS + "must_not_run")
    assert again.cached and (again.largest_fit, again.chosen) == (report.largest_fit, report.chosen)

    forced = cpu_spec(force=True)
    with pytest.raises(ProbeFailed, match="a cached limit should have answered"):
        find_batch_size(forced, STATIC, "sdpa", quiet, cache=cache, probe_target=TARGETS + "must_not_run")


def test_children_that_fit_or_run_out_steer_the_search_to_the_limit(cache: ProbeCache) -> None:
    messages: list[str] = []
    report = find_batch_size(cpu_spec(), STATIC, "sdpa", lambda _, m: messages.append(m), cache=cache,
                             probe_target=TARGETS + "fake_device")
    assert (report.largest_fit, report.smallest_oom) == (30, 31)  # (100 − 10) / 3 MiB
    assert report.chosen == 29 and len(report.probes) <= 6
    assert messages and all(message.startswith("probe ") for message in messages)


@pytest.mark.slow  # ten sizes, each out-of-memory followed by a fresh child
def test_lightnings_binsearch_runs_its_sizes_in_children_and_is_recorded(cache: ProbeCache) -> None:
    report = find_batch_size(cpu_spec(mode="binsearch"), STATIC, "sdpa", quiet, cache=cache,
                             probe_target=TARGETS + "fake_device")
    # Doubling to the first out-of-memory, then bisection to neighbours (power stops after the doubling).
    assert [attempt.size for attempt in report.probes] == [1, 2, 4, 8, 16, 32, 24, 28, 30, 31]
    assert (report.largest_fit, report.smallest_oom, report.mode) == (30, 31, "binsearch")
    assert report.predicted_limit is None and report.chosen == 29
    with pytest.raises(ProbeFailed, match="a cached limit should have answered"):  # each mode keeps its own limit
        find_batch_size(cpu_spec(), STATIC, "sdpa", quiet, cache=cache, probe_target=TARGETS + "must_not_run")


def test_the_cap_limits_the_chosen_size_and_the_search(cache: ProbeCache) -> None:
    report = find_batch_size(cpu_spec(cap=8), STATIC, "sdpa", quiet, cache=cache,
                             probe_target=TARGETS + "fake_device")
    assert report.chosen == 8 and report.cap == 8
    assert max(a.size for a in report.probes) <= 9  # just enough above the cap to keep the 5% margin


@pytest.mark.parametrize(("target", "outcome", "detail"), [
    ("killed_by_signal", "crash", "SIGKILL"),
    ("raises_error", "error", "cannot take this input"),
    ("sticky_cuda_error", "cuda_error", "illegal memory access"),
])
def test_a_child_that_ends_otherwise_fails_the_probe_with_its_log(cache: ProbeCache, target: str, outcome: str,
                                                                   detail: str) -> None:
    with pytest.raises(ProbeFailed) as failure:
        find_batch_size(cpu_spec(), STATIC, "sdpa", quiet, cache=cache, probe_target=TARGETS + target)
    assert f"ended in {outcome}" in str(failure.value) and detail in str(failure.value)
    assert [a.outcome for a in failure.value.attempts] == [outcome]
    assert not cache.path.exists()  # nothing is cached from a failed probe


def test_a_child_past_its_time_limit_is_killed_and_reported(cache: ProbeCache) -> None:
    with pytest.raises(ProbeFailed, match="ended in timeout") as failure:
        find_batch_size(cpu_spec(probe_timeout_s=1.5), STATIC, "sdpa", quiet, cache=cache,
                        probe_target=TARGETS + "hangs")
    assert failure.value.attempts[0].outcome == "timeout"


def test_probing_on_the_cpu_without_a_budget_is_refused_before_any_child(cache: ProbeCache) -> None:
    spec = PaddingJobSpec(model=TINY, device="cpu", dtype="fp32", attention="sdpa", batch_size="auto",
                          data={"max_length": 128}, strategies=[STATIC])
    with pytest.raises(ProbeFailed, match="cpu_memory_budget_bytes"):
        find_batch_size(spec, STATIC, "sdpa", quiet, cache=cache, probe_target=TARGETS + "must_not_run")


def test_a_changed_budget_misses_the_cache_and_a_corrupt_cache_file_is_ignored(cache: ProbeCache) -> None:
    find_batch_size(cpu_spec(), STATIC, "sdpa", quiet, cache=cache, probe_target=TARGETS + "fake_device")
    with pytest.raises(ProbeFailed, match="should have answered"):  # another budget: another key
        find_batch_size(cpu_spec(budget=32 * MIB), STATIC, "sdpa", quiet, cache=cache,
                        probe_target=TARGETS + "must_not_run")
    assert len(json.loads(cache.path.read_text())) == 1
    cache.path.write_text("{not json")
    report = find_batch_size(cpu_spec(), STATIC, "sdpa", quiet, cache=cache, probe_target=TARGETS + "fake_device")
    assert not report.cached and report.largest_fit == 30


def run_auto_and_fixed_job(cache: ProbeCache, monkeypatch: pytest.MonkeyPatch, target: str) -> PaddingResult:
    """A two-strategy job: static at `auto` (probed by the test child `target`), dynamic at batch 4."""
    from padbench.worker.jobs.padding import auto_batch
    from padbench.worker.jobs.padding.job import run_padding_job

    monkeypatch.setattr(auto_batch, "find_batch_size",
                        functools.partial(find_batch_size, cache=cache, probe_target=TARGETS + target))
    spec = cpu_spec().model_copy(update={
        "strategies": [STATIC, StrategySpec(name="dynamic", batch_size=4)],
        "data": DataSpec(max_length=128, num_samples=64),
        "measurement": MeasurementSpec(warmup_batches=0, min_seconds=0, min_batches=1, correctness_samples=2)})
    return run_padding_job(spec, quiet)


def test_a_padding_job_with_auto_measures_at_the_probed_size(cache: ProbeCache,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_auto_and_fixed_job(cache, monkeypatch, "fake_device")
    static, dynamic = result.strategies
    assert result.spec.batch_size == "auto" and static.status == "ok", static.error
    assert static.probe is not None and static.batch_size == static.probe.chosen == 29
    assert dynamic.probe is None and dynamic.batch_size == 4


def test_a_failed_probe_fails_its_strategy_and_the_job_goes_on(cache: ProbeCache,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    static, dynamic = run_auto_and_fixed_job(cache, monkeypatch, "killed_by_signal").strategies
    assert static.status == "failed" and static.batch_size is None and static.tokens_per_s is None
    assert static.error is not None and static.error.startswith("batch_size auto:")
    assert dynamic.status == "ok" and dynamic.batch_size == 4


def test_one_child_serves_the_sizes_that_fit_and_a_fresh_one_follows_each_oom(cache: ProbeCache) -> None:
    report = find_batch_size(cpu_spec(), STATIC, "sdpa", quiet, cache=cache, probe_target=TARGETS + "fake_device")
    starts = [attempt.new_process for attempt in report.probes]
    after_oom = [report.probes[i - 1].outcome == "oom" for i in range(1, len(report.probes))]
    assert starts == [True, *after_oom]  # a new process only first and right after running out
    assert starts.count(True) < len(report.probes)


def test_probe_progress_moves_while_the_probe_runs(cache: ProbeCache) -> None:
    fractions: list[float] = []
    find_batch_size(cpu_spec(), STATIC, "sdpa", lambda fraction, _: fractions.append(fraction), cache=cache,
                    probe_target=TARGETS + "fake_device")
    assert fractions == sorted(fractions) and fractions[-1] > 0.5 and len(set(fractions)) > 3


def test_a_batch_size_list_with_auto_measures_every_strategy_at_each_size(cache: ProbeCache,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from padbench.kinds.padding.report import render_table
    from padbench.worker.jobs.padding import auto_batch
    from padbench.worker.jobs.padding.job import run_padding_job

    monkeypatch.setattr(auto_batch, "find_batch_size",
                        functools.partial(find_batch_size, cache=cache, probe_target=TARGETS + "fake_device"))
    spec = cpu_spec().model_copy(update={
        "batch_size": [2, 8, "auto"], "strategies": [STATIC, StrategySpec(name="packed", batch_size=[1, 4])],
        "data": DataSpec(max_length=128, num_samples=32),
        "measurement": MeasurementSpec(warmup_batches=0, min_seconds=0, min_batches=1, correctness_samples=2,
                                       repeats=2)})
    progress: list[tuple[float, str]] = []
    result = run_padding_job(spec, lambda fraction, message: progress.append((fraction, message)))
    sizes = [(row.strategy, row.batch_size, row.probe is not None) for row in result.strategies]
    assert sizes == [("static", 2, False), ("static", 8, False), ("static", 29, True),
                     ("packed", 1, False), ("packed", 4, False)]
    assert all(row.status == "ok" and row.padding_efficiency and row.memory and row.spread
               for row in result.strategies)
    probe_fractions = [fraction for fraction, message in progress if "probe" in message]
    assert probe_fractions and probe_fractions[-1] > 0.1  # the bar moves while the probe runs
    assert [fraction for fraction, _ in progress] == sorted(fraction for fraction, _ in progress)
    text = render_table(result)
    assert "static / sdpa: 2 → " in text and "29 (auto) → " in text and "fit 30, OOM 31 → 29" in text


@pytest.mark.slow  # a probe per tier, then both layouts measured
def test_auto_n_batches_binned_at_a_probed_size_per_length_tier(cache: ProbeCache,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from padbench.kinds.padding.report import render_table
    from padbench.worker.jobs.padding import auto_batch
    from padbench.worker.jobs.padding.job import run_padding_job

    monkeypatch.setattr(auto_batch, "find_batch_size",
                        functools.partial(find_batch_size, cache=cache, probe_target=TARGETS + "fake_rows"))
    spec = cpu_spec().model_copy(update={
        "batch_size": "auto:3", "strategies": [StrategySpec(name="binned", n_bins=3), STATIC],
        "data": DataSpec(max_length=128, num_samples=48),
        "measurement": MeasurementSpec(warmup_batches=0, min_seconds=0, min_batches=1, correctness_samples=2)})
    result = run_padding_job(spec, quiet)
    binned, static = result.strategies
    assert binned.status == static.status == "ok", binned.error or static.error
    assert binned.auto_times == static.auto_times == 3 and binned.batch_tiers and static.batch_tiers
    # Each tier probed at its longest sequence (3967 // longest rows fit); tiers that end at the same length (the
    # sequences cut at max_length) are one.
    for tier in binned.batch_tiers:
        assert tier.probe.largest_fit <= 3967 // tier.longest < (tier.probe.smallest_oom or 0)
    assert sum(tier.sequences or 0 for tier in binned.batch_tiers) == 48 and len(binned.batch_tiers) >= 2
    sizes = [tier.batch_size for tier in binned.batch_tiers]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > sizes[-1] == binned.batch_size
    [only] = static.batch_tiers  # static's batches are all max_length wide: one size
    assert only.longest == 128 and only.batch_size == static.batch_size == 29
    text = render_table(result)
    assert f"binned[3] / sdpa, batch_size auto:3: ≤ {binned.batch_tiers[0].longest} tokens" in text
    assert "static / sdpa, batch_size auto:3: one size, 29" in text


def test_a_fresh_child_per_size_when_reuse_is_off_finds_the_same_limit(cache: ProbeCache) -> None:
    report = find_batch_size(cpu_spec(reuse_child=False), STATIC, "sdpa", quiet, cache=cache,
                             probe_target=TARGETS + "fake_device")
    assert all(attempt.new_process for attempt in report.probes)
    assert (report.largest_fit, report.smallest_oom, report.chosen) == (30, 31, 29)


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["tiny-llama", "tiny-gemma2"])
def test_the_probe_brackets_the_limit_of_other_model_families(cache: ProbeCache, preset: str) -> None:
    """Grouped-query attention, gated MLPs, untied heads and (Gemma) soft-capping in the probe's children."""
    spec = cpu_spec(128 * MIB).model_copy(update={"model": ModelSpec(preset=preset),
                                                  "attention": "eager" if preset == "tiny-gemma2" else "sdpa"})
    report = find_batch_size(spec, STATIC, spec.attention, quiet, cache=cache)
    assert report.largest_fit >= 1 and report.smallest_oom is not None
    assert report.smallest_oom - report.largest_fit <= bracket_tolerance(report.largest_fit)


def test_on_a_gpu_a_job_reads_the_device_once_in_the_child_that_probes_and_that_child_goes_on(
        cache: ProbeCache, monkeypatch: pytest.MonkeyPatch) -> None:
    from padbench.worker.jobs.padding.probe import trials

    monkeypatch.setattr(trials, "FACTS_TARGET", TARGETS + "fake_gpu_facts")
    monkeypatch.setattr(trials, "PROBE_TARGET", TARGETS + "fake_device")  # the spares import this, not torch
    spec = cpu_spec(cap=8).model_copy(update={"device": "cuda", "dtype": "bf16"})  # the last size fits
    messages: list[str] = []
    with trials.SharedProbes(spec) as shared:
        first = find_batch_size(spec, STATIC, "sdpa", lambda _, m: messages.append(m), cache=cache,
                                probe_target=TARGETS + "fake_device", shared=shared)
        # No process of its own for reading the device: one start per new_process, the first included.
        assert first.probes[0].new_process and shared.session.starts == sum(a.new_process for a in first.probes)
        assert first.probes[-1].outcome == "fits"
        starts = shared.session.starts
        packed = find_batch_size(spec, StrategySpec(name="packed"), "sdpa", lambda _, m: messages.append(m),
                                 cache=cache, probe_target=TARGETS + "fake_device", shared=shared)
        # The child that fit last serves the next strategy (after an OOM a spare would).
        assert not any(a.new_process for a in packed.probes) and shared.session.starts == starts
    assert (first.chosen, packed.chosen) == (8, 8)
    assert sum(message.startswith("device read in") for message in messages) == 1


def test_on_the_cpu_every_strategy_of_a_job_starts_in_a_fresh_child(cache: ProbeCache) -> None:
    from padbench.worker.jobs.padding.probe.trials import SharedProbes

    with SharedProbes(cpu_spec()) as shared:
        for strategy in (STATIC, StrategySpec(name="packed")):
            report = find_batch_size(cpu_spec(), strategy, "sdpa", quiet, cache=cache,
                                     probe_target=TARGETS + "fake_device", shared=shared)
            assert report.probes[0].new_process and shared.session._live is None
