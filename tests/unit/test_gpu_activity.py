"""Contention and throttling marks from NVML samples, with a fake NVML module standing in for a GPU."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from types import ModuleType, SimpleNamespace

import pytest
import torch

from padbench.contract.results import GpuActivity
from padbench.worker.runtime.gpu_activity import GpuActivitySampler, read_gpu_clocks, sample_gpu_activity

OWN_PID = 4242


class FakeNvml(ModuleType):
    """Replays a script of (other pids, utilisation, SM clock, reason bits), one entry per sample."""

    def __init__(self, script: list[tuple[list[int], int, int, int]], own_pid: int = OWN_PID) -> None:
        super().__init__("pynvml")
        self.script, self.own_pid, self.reads, self.inits = script, own_pid, 0, 0

    def _now(self) -> tuple[list[int], int, int, int]:
        return self.script[min(self.reads, len(self.script) - 1)]

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.inits -= 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list[SimpleNamespace]:
        others = self._now()[0]
        return [SimpleNamespace(pid=pid, usedGpuMemory=1 << 30) for pid in [self.own_pid, *others]]

    def nvmlDeviceGetUtilizationRates(self, handle: str) -> SimpleNamespace:
        return SimpleNamespace(gpu=self._now()[1], memory=10)

    def nvmlDeviceGetClockInfo(self, handle: str, clock: int) -> int:
        return self._now()[2] if clock == 1 else 2619

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: str) -> int:
        bits = self._now()[3]
        self.reads += 1  # the last reading of a sample: the next sample reads the next script entry
        return bits

    def nvmlDeviceGetTemperature(self, handle: str, sensor: int) -> int:
        return 61

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        return 512_000


Installer = Callable[[FakeNvml], FakeNvml]


@pytest.fixture
def install_nvml(monkeypatch: pytest.MonkeyPatch) -> Installer:
    def install(fake: FakeNvml) -> FakeNvml:
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake
    return install


def sampled(fake: FakeNvml, *, allow: bool = False, own_pid: int = OWN_PID) -> GpuActivity:
    sampler = GpuActivitySampler(fake, 0, allow_contention=allow, own_pid=own_pid)
    for _ in fake.script:
        sampler.sample()
    return sampler.summary()


def test_a_quiet_gpu_is_neither_contended_nor_throttled() -> None:
    activity = sampled(FakeNvml([([], 99, 1980, 0x1)] * 4))  # 0x1 = idle between passes: not a slowdown
    assert not activity.contended and not activity.throttled and activity.other_processes_max == 0
    assert activity.utilization_mean_percent == 99 and activity.sm_clock_min_mhz == 1980


def test_another_process_marks_the_row_contended_with_count_and_share() -> None:
    script = [([], 99, 1980, 0)] * 2 + [([7001], 100, 1980, 0), ([7001, 7002], 100, 1980, 0)]
    activity = sampled(FakeNvml(script))
    assert activity.contended and activity.other_processes_max == 2 and activity.contended_share == 0.5
    assert activity.own_process_identified and not activity.contention_allowed
    assert sampled(FakeNvml(script), allow=True).contention_allowed


def test_power_and_thermal_slowdowns_mark_the_row_throttled() -> None:
    script = [([], 100, 1980, 0), ([], 100, 1755, 0x4), ([], 100, 1410, 0x4 | 0x20), ([], 100, 1980, 0)]
    activity = sampled(FakeNvml(script))
    assert activity.throttled and activity.throttled_share == 0.5
    assert activity.throttle_reasons == ["sw_power_cap", "sw_thermal"]
    assert (activity.sm_clock_min_mhz, activity.sm_clock_max_mhz) == (1410, 1980)


def test_in_another_pid_namespace_every_process_beyond_one_is_another() -> None:
    fake = FakeNvml([([9001], 100, 1980, 0)], own_pid=1)  # NVML shows host pids 1 (us) and 9001
    activity = sampled(fake, own_pid=55)
    assert not activity.own_process_identified and activity.other_processes_max == 1 and activity.contended


def test_the_sampler_thread_samples_while_the_block_runs(install_nvml: Installer) -> None:
    fake = install_nvml(FakeNvml([([], 99, 1980, 0)] * 3 + [([7001], 100, 1980, 0)], own_pid=os.getpid()))
    with sample_gpu_activity(torch.device("cuda", 0), allow_contention=False) as collected:
        time.sleep(0.3)
    (activity,) = collected
    assert activity.samples >= 4 and activity.contended and fake.inits == 0


def test_without_nvml_or_on_cpu_nothing_is_sampled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails as when nvidia-ml-py is not installed
    with sample_gpu_activity(torch.device("cuda", 0), allow_contention=False) as collected:
        pass
    assert collected == [] and read_gpu_clocks(torch.device("cuda", 0)) is None
    with sample_gpu_activity(torch.device("cpu"), allow_contention=False) as collected:
        pass
    assert collected == [] and read_gpu_clocks(torch.device("cpu")) is None


def test_clocks_at_start_and_end_read_from_nvml(install_nvml: Installer) -> None:
    install_nvml(FakeNvml([([], 0, 1980, 0x4)]))
    clocks = read_gpu_clocks(torch.device("cuda", 0))
    assert clocks is not None and clocks.sm_mhz == 1980 and clocks.memory_mhz == 2619
    assert clocks.temperature_c == 61 and clocks.power_w == 512.0 and clocks.throttle_reasons == ["sw_power_cap"]
