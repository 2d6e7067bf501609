"""What `padbench plot` draws, read from the matplotlib Axes rather than from pixels: tick labels that tell
the ticks apart, 95% intervals as whiskers on the bars of rows measured with repeats, and generate jobs' bars
and context curves."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import to_rgba
from matplotlib.container import ErrorbarContainer
from matplotlib.ticker import EngFormatter

from padbench.client.plot import draw, save_plot
from padbench.contract.results import Spread
from padbench.kinds.padding.contract import PaddingResult
from padbench.report.plotting import rate_formatter
from tests.generate_result import context_result, generate_result, row, rows_at
from tests.unit.test_report_padding import sample_result


def with_intervals(result: PaddingResult) -> PaddingResult:
    """The static row measured with repeats (a 95% interval of 150k–170k); the rest with a single repeat."""
    spread = Spread(repeats=3, min_tokens_per_s=150_000, max_tokens_per_s=170_000, mean_tokens_per_s=160_000,
                    ci95_low_tokens_per_s=150_000, ci95_high_tokens_per_s=170_000, cv=0.02, cv_threshold=0.05,
                    noisy=False)
    rows = [row.model_copy(update={"spread": spread}) if row.strategy == "static" else row for row in result.strategies]
    return result.model_copy(update={"strategies": rows})


@pytest.fixture(autouse=True)
def closed_figures() -> Iterator[None]:
    yield
    plt.close("all")


def test_tick_labels_keep_one_and_a_half_thousand_apart_from_two() -> None:
    formatter = rate_formatter()
    assert [formatter(value) for value in (0, 500, 1000, 1500, 2000)] == ["0", "500", "1k", "1.5k", "2k"]
    assert [formatter(value) for value in (250_000, 1_250_000, 2e6)] == ["250k", "1.25M", "2M"]


def test_the_throughput_axis_uses_the_si_formatter() -> None:
    figure = draw([(1, sample_result())])
    assert isinstance(figure.axes[0].yaxis.get_major_formatter(), EngFormatter)


def test_bars_with_an_interval_carry_whiskers_spanning_it() -> None:
    figure = draw([(1, with_intervals(sample_result()))])
    containers = [item for item in figure.axes[0].containers if isinstance(item, ErrorbarContainer)]
    assert len(containers) == 1
    _, _, (whiskers,) = containers[0].lines
    (segment,) = whiskers.get_segments()  # only the static row has an interval
    assert [segment[0][1], segment[1][1]] == pytest.approx([150_000, 170_000])


def test_rows_without_repeats_get_no_whiskers() -> None:
    figure = draw([(1, sample_result())])
    assert not any(isinstance(item, ErrorbarContainer) for item in figure.axes[0].containers)


def test_a_generate_job_draws_bars_with_whiskers_and_grey_references(tmp_path: Path) -> None:
    result = generate_result([*rows_at(), row("sorted", None, kernel="flash", error="boom")])
    figure = draw([(4, result)])
    (bars,) = figure.axes
    labels = [tick.get_text() for tick in bars.get_xticklabels()]
    assert labels[0] == "static\nsdpa-kvcache" and "ref: transformers-generate\ntransformers-sdpa" in labels
    assert not any("flash" in label for label in labels)  # the failed row is left out, not drawn as zero
    patches = bars.patches
    assert [patch.get_facecolor() == to_rgba("0.7") for patch in patches] == [False, False, False, True, True]
    (whiskers,) = [item for item in bars.containers if isinstance(item, ErrorbarContainer)]
    assert len(whiskers.lines[2][0].get_segments()) == 5
    output = tmp_path / "generate.png"
    save_plot([(4, result)], output)
    assert output.read_bytes().startswith(b"\x89PNG")


def test_a_context_table_adds_decode_rate_against_context_length() -> None:
    figure = draw([(4, context_result()), (5, context_result())])
    bars, curves = figure.axes
    assert len(bars.get_xticklabels()) == 10 and "context 2,048" in bars.get_xticklabels()[-1].get_text()
    lines = {line.get_label(): list(line.get_xdata()) for line in curves.get_lines()}
    assert lines["job 4 · static · sdpa-kvcache"] == [512, 2048] and len(lines) == 10
    assert isinstance(curves.yaxis.get_major_formatter(), EngFormatter)
