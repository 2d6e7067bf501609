"""Energy per token over a fake NVML: the cumulative counter read at both ends of the measured window, power
samples integrated where a GPU has no counter, ranks summed, nothing on CPU; and the lines the table shows."""

from __future__ import annotations

import itertools

import pytest
import torch

from padbench.contract.results import EnergyUse
from padbench.kinds.generate.report import render_table as generate_table
from padbench.kinds.padding.report import render_table
from padbench.report.efficiency import energy_lines, joules_per_token
from padbench.worker.runtime.energy import EnergyWindow, energy_window, summed
from tests.generate_result import generate_result
from tests.regression_results import STEADY, padding_result


class NVMLError(Exception):
    pass


class FakeNvml:
    """The NVML calls the energy window makes: a counter in millijoules that the test advances, and power."""

    def __init__(self, *, counter: bool = True, watts: float = 300.0) -> None:
        self.millijoules, self.counter, self.watts = 1_000_000.0, counter, watts

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: object) -> float:
        if not self.counter:
            raise NVMLError("Not Supported")
        return self.millijoules

    def nvmlDeviceGetPowerUsage(self, handle: object) -> float:
        return self.watts * 1000.0


def ticking() -> object:
    """A clock that advances one second per reading."""
    return itertools.count().__next__


def test_the_counter_read_at_both_ends_of_the_measured_repeats_gives_the_energy() -> None:
    nvml = FakeNvml()
    window = EnergyWindow(nvml, handle=None, clock=ticking())  # type: ignore[arg-type]
    seen: list[int] = []
    before_repeat = window.opening(seen.append)
    nvml.millijoules += 5_000_000  # the warm-up: before the window opens, not counted
    before_repeat(0)
    nvml.millijoules += 12_000_000  # the measured repeats
    before_repeat(1)
    reading = window.close()
    assert seen == [0, 1]
    assert reading == EnergyUse(joules=12_000.0, seconds=1.0, gpus=1, source="nvml-energy-counter")


def test_without_a_counter_power_samples_are_integrated_and_say_so() -> None:
    window = EnergyWindow(FakeNvml(counter=False, watts=300.0), handle=None, interval_s=3600,  # type: ignore[arg-type]
                          clock=ticking())
    window.open()  # opened at 0 s, first power sample at 1 s
    reading = window.close()  # closed at 2 s, last power sample at 3 s
    assert reading == EnergyUse(joules=600.0, seconds=2.0, gpus=1, source="power-samples")


def test_nothing_is_measured_on_cpu() -> None:
    with energy_window(torch.device("cpu")) as window:
        window.open()
        assert window.close() is None and window.reading is None


def test_every_ranks_gpu_is_summed_and_a_missing_rank_leaves_it_unmeasured() -> None:
    one = EnergyUse(joules=100.0, seconds=2.0, gpus=1, source="nvml-energy-counter")
    other = EnergyUse(joules=140.0, seconds=2.1, gpus=1, source="power-samples")
    assert summed([one, one]) == EnergyUse(joules=200.0, seconds=2.0, gpus=2, source="nvml-energy-counter")
    assert summed([one, other]) is not None and summed([one, other]).source == "power-samples"  # type: ignore[union-attr]
    assert summed([one, None]) is None and summed([]) is None


def test_joules_per_token_and_tokens_per_kwh_are_shown_where_measured() -> None:
    energy = EnergyUse(joules=1200.0, seconds=2.0, gpus=2, source="nvml-energy-counter", tokens=4000)
    assert joules_per_token(energy) == pytest.approx(0.3)
    assert joules_per_token(energy.model_copy(update={"tokens": None})) is None
    assert energy_lines([("static / sdpa", energy), ("packed / sdpa", None)], "real") == [
        "energy per real token over the measured repeats:",
        "  static / sdpa: 0.3 J/token, 12M tokens/kWh (600 W mean over 2 GPUs; NVML energy counter)"]
    assert energy_lines([("static / sdpa", None)], "real") == []
    result = padding_result({"static": STEADY})
    measured = result.model_copy(update={"strategies": [result.strategies[0].model_copy(update={"energy": energy})]})
    assert "0.3 J/token" in render_table(measured) and "J/token" not in render_table(result)


def test_a_generate_row_shows_joules_per_output_token() -> None:
    result = generate_result()
    energy = EnergyUse(joules=50.0, seconds=1.0, gpus=1, source="power-samples", tokens=1000)
    rows = [result.rows[0].model_copy(update={"energy": energy}), *result.rows[1:]]
    shown = generate_table(result.model_copy(update={"rows": rows}))
    assert "energy per output token over the measured repeats:" in shown and "0.05 J/token" in shown
    assert "power samples integrated" in shown and "J/token" not in generate_table(result)
