"""The energy a GPU uses over a measured window, for joules per token.

NVML keeps a cumulative energy counter on Volta and later GPUs (nvmlDeviceGetTotalEnergyConsumption, in
millijoules): read at both ends of the window, it gives the energy exactly, whatever the power did in
between. Where the GPU or driver has no counter, the power readings (nvmlDeviceGetPowerUsage, milliwatts) are
sampled on a thread and integrated by trapezoids, and the figure says so (`power-samples`). On CPU, or
without NVML, nothing is read: the figure is None, never a guess.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import ModuleType
from typing import Any

import torch

from padbench.contract.results import EnergyUse
from padbench.worker.runtime.gpu_activity import SAMPLE_INTERVAL_S, load_nvml
from padbench.worker.runtime.memory import nvml_device_index
from padbench.worker.runtime.polling import Poller


def _reading(call: Any, *args: Any) -> float | None:
    with suppress(Exception):  # not supported by this GPU or driver
        return float(call(*args))
    return None


class EnergyWindow:
    """Opened when the measured repeats start and closed when they end; `reading` is what it measured."""

    def __init__(self, nvml: ModuleType | None, handle: Any, interval_s: float = SAMPLE_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._nvml, self._handle, self._clock = nvml, handle, clock
        self._interval = interval_s
        self._start_mj: float | None = None
        self._opened_at: float | None = None
        self._powers: list[tuple[float, float]] = []  # (seconds, watts)
        self._poller: Poller | None = None
        self.reading: EnergyUse | None = None

    def open(self) -> None:
        if self._nvml is None:
            return
        self._opened_at = self._clock()
        self._start_mj = _reading(self._nvml.nvmlDeviceGetTotalEnergyConsumption, self._handle)
        if self._start_mj is None:  # the poller samples at its start and stop as well
            self._poller = Poller(self.sample_power, self._interval, "gpu-power-sampler")
            self._poller.start()

    def opening(self, then: Callable[[int], None]) -> Callable[[int], None]:
        """`then`, called before each measured repeat, opening the window before the first."""
        def before_repeat(repeat: int) -> None:
            if repeat == 0:
                self.open()
            then(repeat)
        return before_repeat

    def sample_power(self) -> None:
        milliwatts = _reading(self._nvml.nvmlDeviceGetPowerUsage, self._handle) if self._nvml else None
        if milliwatts is not None:
            self._powers.append((self._clock(), milliwatts / 1000.0))

    def close(self) -> EnergyUse | None:
        if self._nvml is None or self._opened_at is None:
            return None
        seconds = self._clock() - self._opened_at
        self.stop_sampling()
        self.reading = self._counted(seconds) if self._start_mj is not None else self._integrated(seconds)
        return self.reading

    def stop_sampling(self) -> None:
        if self._poller is not None:
            self._poller.stop()
            self._poller = None

    def _counted(self, seconds: float) -> EnergyUse | None:
        end_mj = _reading(self._nvml.nvmlDeviceGetTotalEnergyConsumption, self._handle) if self._nvml else None
        if end_mj is None or self._start_mj is None or end_mj < self._start_mj or seconds <= 0:
            return None
        return EnergyUse(joules=(end_mj - self._start_mj) / 1000.0, seconds=seconds, gpus=1,
                         source="nvml-energy-counter")

    def _integrated(self, seconds: float) -> EnergyUse | None:
        samples = self._powers
        if len(samples) < 2 or seconds <= 0:
            return None
        joules = sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in itertools.pairwise(samples))
        return EnergyUse(joules=joules, seconds=seconds, gpus=1, source="power-samples")


@contextmanager
def energy_window(device: torch.device) -> Iterator[EnergyWindow]:
    """An energy window on the device's GPU (inert on CPU or without NVML); NVML shut down on exit."""
    nvml = load_nvml() if device.type == "cuda" else None
    handle = None
    if nvml is not None:
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(nvml_device_index(device))
        except Exception:  # NVML present but this GPU cannot be read: not measured
            nvml.nvmlShutdown()
            nvml = None
    window = EnergyWindow(nvml, handle)
    try:
        yield window
    finally:
        window.stop_sampling()  # a measurement that raised never closed it
        if nvml is not None:
            nvml.nvmlShutdown()


def summed(readings: list[EnergyUse | None]) -> EnergyUse | None:
    """Every rank's reading summed; None unless every rank measured one (a partial sum would undercount)."""
    if not readings or any(reading is None for reading in readings):
        return None
    known = [reading for reading in readings if reading is not None]
    counted = all(reading.source == "nvml-energy-counter" for reading in known)
    return EnergyUse(joules=sum(r.joules for r in known), seconds=max(r.seconds for r in known),
                     gpus=sum(r.gpus for r in known), source="nvml-energy-counter" if counted else "power-samples")
