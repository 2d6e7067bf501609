"""`padbench run` on a machine without a CUDA GPU says at once when a spec is sized for one, and how long."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from padbench.cli import main
from padbench.contract.kinds import parse_job_spec
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.cli import run as run_command
from padbench.worker.cli import sizing
from padbench.worker.runtime.isolation import ChildReport

# A CPU doing 100 GFLOP/s of fp32 matrix multiplies.
MATMUL_FLOPS = 1e11


def padding_spec(**fields: object) -> PaddingJobSpec:
    spec = parse_job_spec(fields)
    assert isinstance(spec, PaddingJobSpec)
    return spec


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sizing, "cuda_gpu_present", lambda: False)


GPU_STARTER = {"model": "gpt2-seed", "data": {"num_samples": 2000}, "measurement": {"repeats": 1}}
CPU_STARTER = {"model": {"config": {"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4,
                                    "vocab_size": 2048, "n_positions": 512}},
               "data": {"max_length": 512, "num_samples": 128}, "attention": "sdpa", "batch_size": 8,
               "dtype": "fp32", "device": "cpu", "measurement": {"repeats": 1}}


def test_a_gpu_spec_on_a_cpu_is_named_with_a_rough_time_and_the_way_to_a_small_one(no_gpu: None) -> None:
    warning = sizing.gpu_sizing_warning(padding_spec(**GPU_STARTER), "my.yaml", MATMUL_FLOPS)
    assert warning is not None and warning.refused  # hours on this CPU: not started without --anyway
    assert "no CUDA GPU, and my.yaml is sized for one: on this CPU it would take roughly " in warning.text
    assert "(gpt2-seed, bf16, 2,000 sequences × 4 layouts × 1 repeat)" in warning.text
    assert "padbench init --cpu" in warning.text and "tiny-* preset" in warning.text
    assert warning.text.endswith("or pass --anyway to run it here regardless.")
    on_purpose = sizing.gpu_sizing_warning(padding_spec(**{**GPU_STARTER, "device": "cpu"}), "my.yaml", MATMUL_FLOPS)
    assert on_purpose is not None and not on_purpose.refused  # device: cpu is the user's choice: warned only


def test_the_time_grows_with_the_work(no_gpu: None) -> None:
    small = sizing.cpu_seconds(padding_spec(**GPU_STARTER), MATMUL_FLOPS)
    twice = sizing.cpu_seconds(padding_spec(**{**GPU_STARTER, "data": {"num_samples": 4000}}), MATMUL_FLOPS)
    training = sizing.cpu_seconds(padding_spec(**{**GPU_STARTER, "mode": "training"}), MATMUL_FLOPS)
    fp32 = sizing.cpu_seconds(padding_spec(**{**GPU_STARTER, "dtype": "fp32", "attention": "sdpa"}), MATMUL_FLOPS)
    assert small is not None and twice == pytest.approx(2 * small) and training == pytest.approx(3 * small)
    assert fp32 is not None and fp32 < small  # bf16 matmuls are slow on most CPUs


def test_a_spec_sized_for_a_cpu_or_a_machine_with_a_gpu_gets_no_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sizing, "cuda_gpu_present", lambda: False)
    assert sizing.gpu_sizing_warning(padding_spec(**CPU_STARTER), "cpu.yaml", MATMUL_FLOPS) is None
    assert sizing.gpu_sizing_warning(padding_spec(**{**CPU_STARTER, "device": "auto"}), "cpu.yaml",
                                     MATMUL_FLOPS) is None
    monkeypatch.setattr(sizing, "cuda_gpu_present", lambda: True)
    assert sizing.gpu_sizing_warning(padding_spec(**GPU_STARTER), "my.yaml", MATMUL_FLOPS) is None


def test_device_cuda_without_a_gpu_is_named(no_gpu: None) -> None:
    warning = sizing.gpu_sizing_warning(padding_spec(**{**CPU_STARTER, "device": "cuda"}), "my.yaml", MATMUL_FLOPS)
    assert warning is not None and "device: cuda, but this machine has no CUDA GPU" in warning.text
    sweep = parse_job_spec({"kind": "attention", "device": "cuda"})
    said = sizing.gpu_sizing_warning(sweep, "sweep.yaml", MATMUL_FLOPS)
    assert said is not None and "device: cuda" in said.text


def test_the_matmul_rate_is_measured_in_a_moment() -> None:
    start = time.perf_counter()
    rate = sizing.cpu_matmul_flops()
    assert time.perf_counter() - start < 1.0 and rate > 1e8


def test_run_refuses_hours_on_a_cpu_and_with_anyway_warns_before_the_job_starts(
        tmp_path: Path, no_gpu: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "my.yaml"
    assert main(["init", str(spec), "--gpu"]) == 0
    started: list[float] = []

    def launch_job(*args: object, **kwargs: object) -> ChildReport:
        started.append(time.perf_counter())
        return ChildReport(outcome="error", error="stopped by the test")

    monkeypatch.setattr(run_command, "launch_job", launch_job)
    monkeypatch.setattr(sizing, "cpu_matmul_flops", lambda: MATMUL_FLOPS)  # hours of work on this CPU
    assert main(["run", str(spec)]) == 2 and not started  # refused before anything starts
    assert "or pass --anyway to run it here regardless." in capsys.readouterr().err
    before = time.perf_counter()
    assert main(["run", str(spec), "--anyway"]) == 1
    assert started and started[0] - before < 1.0
    err = capsys.readouterr().err
    assert err.index("is sized for one: on this CPU it would take roughly") < err.index("stopped by the test")
