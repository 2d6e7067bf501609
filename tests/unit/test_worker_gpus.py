"""`padbench worker --gpus`: which GPUs a worker owns, how each is named to its jobs, and what is refused."""

from __future__ import annotations

import pytest

from padbench.contract.api import Capabilities, GpuInfo
from padbench.worker.cli.work import default_name, load_settings
from padbench.worker.supervisor.capabilities import CapabilityError, checked_gpus, visible_gpu_ids
from tests.unit.test_worker_token_file import worker_args


def test_gpus_from_the_option_or_the_variables_the_option_winning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PADBENCH_GPUS", raising=False)
    monkeypatch.setenv("PADBENCH_GPU", "3")
    assert load_settings(worker_args()).gpu_list == ("3",)  # the one-GPU setting still works
    assert load_settings(worker_args(gpus="0, 1,2")).gpu_list == ("0", "1", "2")
    monkeypatch.setenv("PADBENCH_GPUS", "GPU-5d2c,GPU-77aa")
    monkeypatch.delenv("PADBENCH_GPU")
    assert load_settings(worker_args()).gpu_list == ("GPU-5d2c", "GPU-77aa")
    assert load_settings(worker_args(gpu="1")).gpu_list == ("1",)


REFUSED = [("0,,1", "has an empty entry"), ("0,0", "names a GPU twice"), ("0;1", "'0;1'")]


@pytest.mark.parametrize(("given", "reason"), REFUSED)
def test_a_bad_gpu_list_is_refused_at_start_up(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                               given: str, reason: str) -> None:
    monkeypatch.delenv("PADBENCH_GPU", raising=False)
    assert load_settings(worker_args(gpus=given)) is None
    error = capsys.readouterr().err
    assert error.startswith("padbench worker: invalid settings: gpus") and reason in error


def test_each_gpu_is_named_as_cuda_visible_devices_names_it() -> None:
    assert visible_gpu_ids(None, 2) == ["0", "1"]
    assert visible_gpu_ids("2,3", 2) == ["2", "3"]
    assert visible_gpu_ids("GPU-aa,7", 1) == ["GPU-aa"]  # CUDA stops at the first one it cannot find
    assert default_name(("0", "1")).endswith("-gpu0,1") and default_name(None).count("-gpu") == 0


def test_gpus_given_but_not_all_found_stop_the_worker() -> None:
    found = Capabilities(device="cuda", gpus=[GpuInfo(index="0", name="NVIDIA H100", memory_bytes=1)])
    assert checked_gpus(found, ("0",)) is found
    with pytest.raises(CapabilityError, match="--gpus 0,1: CUDA found only 0 of them"):
        checked_gpus(found, ("0", "1"))
    cpu = Capabilities(device="cpu")
    assert checked_gpus(cpu, ("0",)) is cpu  # no CUDA at all: a CPU worker, as with --gpu before


def test_a_gpu_listed_twice_is_refused() -> None:
    twice = [GpuInfo(index="0", name="a", memory_bytes=0)] * 2
    with pytest.raises(ValueError, match="each GPU is listed once"):
        Capabilities(device="cuda", gpus=twice)
