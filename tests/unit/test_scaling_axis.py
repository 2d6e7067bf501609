"""A scaling axis in the contract: which lists are one, what it asks of a worker, which counts `[all]` means."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from padbench.contract.parallel import ALL_GPUS, GpuRequest, scaling_counts
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.server.requirements import job_requirements, stored_gpus


def test_a_scaling_axis_asks_for_its_largest_count_as_one_process() -> None:
    spec = PaddingJobSpec(gpus=[1, 2, 4])
    request = GpuRequest.of(spec)
    assert request.gpus == 4 and request.launches_own_ranks and request.ranks(8) == 1
    assert stored_gpus(spec) == 4 and request.fits(4) and not request.fits(2)
    assert "device:cuda" in job_requirements(spec)  # a count above one spans GPUs
    every = PaddingJobSpec(gpus=["all"])
    assert stored_gpus(every) == ALL_GPUS and GpuRequest.of(every).ranks(8) == 1
    on_cpu = PaddingJobSpec(gpus=[1, 2], device="cpu")
    assert GpuRequest.of(on_cpu).fits(0) and "device:cuda" not in job_requirements(on_cpu)


def test_all_doubles_up_to_the_workers_gpus() -> None:
    assert scaling_counts(["all"], 8) == [1, 2, 4, 8]
    assert scaling_counts(["all"], 6) == [1, 2, 4, 6]
    assert scaling_counts(["all"], 1) == [1]
    assert scaling_counts([2, 4], 8) == [2, 4]


@pytest.mark.parametrize(("gpus", "device", "reason"), [
    ([2, 1], "auto", "smallest first"), ([2], "auto", "at least two"), ([1, 1], "auto", "at least two"),
    ([1, "all"], "auto", "stands alone"), (["all"], "cpu", "list the process counts"),
    ([1, 2, 3, 4, 5, 6, 7, 8, 9], "auto", "at most 8")])
def test_a_list_that_is_no_scaling_axis_is_refused(gpus: list[int | str], device: str, reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        PaddingJobSpec.model_validate({"gpus": gpus, "device": device})
