"""`probe.mode`: Lightning's power and binsearch searches, attempt by attempt, on simulated devices."""

from __future__ import annotations

from padbench.worker.jobs.probing.modes import SEARCHES, search_binsearch, search_power
from tests.unit.test_padding_probe_search import GIB, MIB, FakeDevice, padded_like


def device_fitting(limit: int) -> FakeDevice:
    """Rows of 1 MiB over a 20 MiB model, the capacity set so that exactly `limit` rows fit."""
    return FakeDevice(padded_like(20 * MIB, MIB, 0), 20 * MIB + limit * MIB, 20 * MIB)


def test_power_doubles_until_out_of_memory_and_keeps_the_last_fit() -> None:
    device = device_fitting(300)
    result = search_power(device, curve="affine", ceiling=4096)
    assert device.calls == result.probed == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert (result.largest_fit, result.smallest_oom, result.predicted_limit) == (256, 512, None)


def test_binsearch_doubles_then_bisects_to_neighbours() -> None:
    device = device_fitting(300)
    result = search_binsearch(device, curve="affine", ceiling=4096)
    assert device.calls[:10] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert device.calls[10:] == [384, 320, 288, 304, 296, 300, 302, 301]
    assert (result.largest_fit, result.smallest_oom) == (300, 301)


def test_both_stop_at_the_ceiling_and_at_size_one() -> None:
    roomy = FakeDevice(padded_like(20 * MIB, MIB, 0), 100 * GIB, 20 * MIB)
    assert search_power(roomy, curve="affine", ceiling=100).probed == [1, 2, 4, 8, 16, 32, 64, 100]
    result = search_binsearch(roomy, curve="affine", ceiling=100)
    assert (result.largest_fit, result.smallest_oom) == (100, None)
    tight = FakeDevice(lambda size: 10 * GIB * size, 5 * GIB, GIB)
    for search in (search_power, search_binsearch):
        result = search(tight, curve="affine", ceiling=100)
        assert (result.largest_fit, result.smallest_oom, result.probed) == (0, 1, [1])


def test_the_default_mode_is_padbenchs_predicting_search() -> None:
    predicted = SEARCHES["predict"](device_fitting(300), curve="affine", ceiling=4096)
    assert predicted.largest_fit <= 300 < (predicted.smallest_oom or 0) and len(predicted.probed) < 10
