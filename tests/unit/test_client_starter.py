"""`padbench init` sizes the starter for this machine: its GPU, or the CPU where the driver lists none."""

from __future__ import annotations

from pathlib import Path

import pytest

from padbench import machine
from padbench.cli import main
from padbench.client import starter
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.specfile import load_spec


def write_starter(tmp_path: Path, *options: str) -> PaddingJobSpec:
    path = tmp_path / "my.yaml"
    assert main(["init", str(path), "--force", *options]) == 0
    spec = load_spec(path)
    assert isinstance(spec, PaddingJobSpec)
    return spec


def test_without_a_cuda_gpu_init_writes_the_cpu_starter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(starter, "cuda_gpu_present", lambda: False)
    spec = write_starter(tmp_path)
    assert (spec.device, spec.dtype, spec.attention, spec.data.num_samples) == ("cpu", "fp32", "sdpa", 128)
    assert spec.measurement.repeats == 2  # the first verdict has an interval
    assert "sized for a CPU, as this machine has no CUDA GPU (--gpu:" in capsys.readouterr().err
    assert write_starter(tmp_path, "--gpu").model.preset == "gpt2-seed"  # e.g. to submit to the service


def test_with_a_cuda_gpu_init_writes_the_gpu_starter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(starter, "cuda_gpu_present", lambda: True)
    spec = write_starter(tmp_path)
    assert (spec.model.preset, spec.device, spec.dtype, spec.attention) == ("gpt2-seed", "auto", "bf16", "auto")
    assert "sized for this machine's GPU" in capsys.readouterr().err
    assert write_starter(tmp_path, "--cpu").device == "cpu"


def test_the_cpu_starters_special_ids_lie_inside_its_vocabulary(tmp_path: Path) -> None:
    """GPT-2's config class defaults bos/eos to 50256, outside a 2,048 vocabulary: transformers warns."""
    from padbench.worker.engine.model.build import model_config

    config = model_config(write_starter(tmp_path, "--cpu").model)
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        value = getattr(config, name)
        assert value is None or 0 <= value < config.vocab_size, (name, value)


@pytest.mark.parametrize(("gpus", "nodes", "visible", "present"), [
    (["0000:01:00.0"], [], None, True),
    ([], ["nvidia0"], None, True),
    (["0000:01:00.0"], ["nvidia0"], "", False),  # hidden on purpose
    (["0000:01:00.0"], ["nvidia0"], "-1", False),
    ([], ["nvidiactl"], None, False),  # the control node alone is not a GPU
    ([], [], None, False),
])
def test_a_cuda_gpu_is_what_the_driver_lists(gpus: list[str], nodes: list[str], visible: str | None,
                                            present: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    driver, dev = tmp_path / "gpus", tmp_path / "dev"
    for folder, names in ((driver, gpus), (dev, nodes)):
        folder.mkdir()
        for name in names:
            (folder / name).touch()
    monkeypatch.setattr(machine, "DRIVER_GPUS", driver)
    monkeypatch.setattr(machine, "DEVICE_NODES", dev)
    monkeypatch.setattr(machine.shutil, "which", lambda name: None)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert machine.cuda_gpu_present() is present
