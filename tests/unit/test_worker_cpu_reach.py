"""What a CPU worker advertises of its speed: its measured matrix-multiply rate times its job timeout, so the
server leaves it no `device: auto` job it would run for longer; a worker with GPUs advertises nothing."""

from __future__ import annotations

import pytest

from padbench.contract.api import Capabilities
from padbench.worker.cli import work
from padbench.worker.runtime.settings import WorkerSettings


def test_a_cpu_worker_advertises_its_rate_times_its_job_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(work, "cpu_matmul_flops", lambda: 2e11)
    settings = WorkerSettings(job_timeout_s=3600)
    assert work.cpu_flops_per_job(Capabilities(device="cpu"), settings) == pytest.approx(2e11 * 3600)
    assert work.cpu_flops_per_job(Capabilities(device="cuda"), settings) is None


def test_the_measured_rate_is_a_real_positive_figure() -> None:
    assert work.cpu_matmul_flops() > 1e6  # any CPU multiplies 512×512 matrices faster than a megaflop
