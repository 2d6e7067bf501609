"""The dashboard in a real headless Chromium (Playwright), against a real server and a real CPU worker:
jobs submitted through the API appear in the list and update live until they finish, a job's page shows
its results table and a rendered chart, and the compare view opens with both jobs side by side. Every
request the browser makes goes to the padbench server itself.

Chromium is the distribution's (`apt-get install chromium`; Playwright's own browser download is not
needed): PADBENCH_CHROMIUM names another binary. The test skips, saying why, only when no Chromium or no
Playwright can be found. Screenshots go to a temporary folder, or to PADBENCH_SCREENSHOTS when set
(`PADBENCH_SCREENSHOTS=docs/images` refreshes the ones the README shows).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from padbench.kinds.padding.verdict import verdict_lines
from tests.acceptance.conftest import LiveServer, running_worker
from tests.acceptance.specs import QUICK
from tests.acceptance.stand_in import complete_by_hand, finish_by_hand, store_by_hand

pytestmark = pytest.mark.slow
CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
# Four layouts, so the chart and table look like a real run's; still seconds on a CPU.
DASHBOARD_SPEC: dict[str, Any] = QUICK | {"name": "dashboard-cpu",
                                          "strategies": ["static", "dynamic", {"name": "binned", "n_bins": 4},
                                                         "packed"]}
# A few seconds of kernels on a CPU: enough for the sweep's log-axis charts.
ATTENTION_SPEC: dict[str, Any] = {"kind": "attention", "name": "dashboard-attention", "batch": 1, "heads": 2,
                                  "head_dim": 16, "seq_lens": [64, 128, 256, 512], "causal": True, "dtype": "fp32",
                                  "kernels": ["naive", "sdpa-math", "sdpa-flash"], "device": "cpu", "warmup": 1,
                                  "repeats": 3}
TIMEOUT_MS = 120_000
PAGE_WIDTH = 1400


def chromium_path() -> str:
    named = os.environ.get("PADBENCH_CHROMIUM")
    found = named or next((path for name in CHROMIUM_CANDIDATES if (path := shutil.which(name))), None)
    if not found or not Path(found).exists():
        pytest.skip("no Chromium: apt-get install -y chromium (or set PADBENCH_CHROMIUM to a Chromium binary)")
    return found


@pytest.fixture
def browser_page(live_server: LiveServer) -> Iterator[Any]:
    playwright_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (the dev extra)")
    executable = chromium_path()
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": PAGE_WIDTH, "height": 1000})
        page.set_default_timeout(TIMEOUT_MS)
        try:
            yield page
        finally:
            browser.close()


def sign_in(page: Any, server: LiveServer, path: str) -> None:
    """Open `path` and give the viewer's token, which the pages keep for the tab."""
    page.goto(server.url + path)
    page.fill("#token-input", server.tokens.viewer)
    page.click("#token-entry button")


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("PADBENCH_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_jobs_run_and_their_pages_render_in_a_browser(live_server: LiveServer, browser_page: Any,
                                                      screenshots: Path) -> None:
    page = browser_page
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    problems: list[str] = []  # script errors and console errors (a CSP violation is reported there)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    sign_in(page, live_server, "/")
    with live_server.client() as client:
        first, second = (client.submit(DASHBOARD_SPEC).id for _ in range(2))
        sweep = client.submit(ATTENTION_SPEC).id
    page.wait_for_selector(f'tr[data-job-id="{first}"]')  # the list picks up new jobs on its own
    with running_worker(live_server, "browser-cpu"):
        for job_id in (first, second, sweep):
            page.wait_for_selector(f'tr[data-job-id="{job_id}"][data-status="succeeded"]')
    # A locator, not a script: the pages' Content-Security-Policy forbids the eval a polled script needs.
    page.locator(f'tr[data-job-id="{first}"]', has_text="tokens/s").wait_for()
    page.screenshot(path=screenshots / "dashboard-jobs.png", full_page=True)

    page.click(f'tr[data-job-id="{first}"] a')
    page.wait_for_selector("table.results tbody tr")
    assert page.locator("table.results tbody tr:not(.details)").count() == 4
    assert page.locator("table.results tr.winner").count() == 1
    page.wait_for_function("Chart.getChart(document.querySelector('#charts canvas')) !== undefined")
    drawn = page.evaluate("Chart.getChart(document.querySelector('#charts canvas')).data.datasets[0].data.length")
    assert drawn == 4
    assert "sdpa" in page.inner_text("#spec") and page.inner_text("#environment")
    page.screenshot(path=screenshots / "dashboard-job.png", full_page=True)

    page.goto(f"{live_server.url}/jobs/{sweep}")  # an attention sweep: time and memory against length, log axes
    page.wait_for_selector("table.results tbody tr")
    assert page.locator("table.results tbody tr").count() == 4
    page.wait_for_function("Chart.getChart(document.querySelector('#charts canvas')) !== undefined")
    axes = page.evaluate("Chart.getChart(document.querySelector('#charts canvas')).options.scales.x.type")
    assert axes == "logarithmic"
    assert page.evaluate("Chart.getChart(document.querySelector('#charts canvas')).data.datasets.length") == 3
    page.screenshot(path=screenshots / "dashboard-attention.png", full_page=True)

    page.goto(live_server.url + "/")
    for job_id in (first, second):
        page.check(f'tr[data-job-id="{job_id}"] input[type=checkbox]')
    page.click("#compare-selected")
    page.wait_for_url(f"**/compare?ids={min(first, second)},{max(first, second)}")
    page.wait_for_selector("#comparison tbody tr")
    assert page.locator("#comparison tbody tr").count() == 4
    assert "×" in page.inner_text("#comparison")
    page.wait_for_function("Chart.getChart(document.querySelector('#compare-chart')) !== undefined")
    page.screenshot(path=screenshots / "dashboard-compare.png", full_page=True)

    assert requested and all(url.startswith(live_server.url) for url in requested), requested
    assert problems == []


def page_width(page: Any) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def test_an_all_noisy_job_reads_within_noise_as_the_cli_says_and_pages_fit(live_server: LiveServer,
                                                                          browser_page: Any, screenshots: Path) -> None:
    page = browser_page
    long_name = "-".join(["a-job-name-longer-than-any-column"] * 5)
    noisy, failed, result = finish_by_hand(live_server, QUICK | {"name": long_name}, QUICK)
    sign_in(page, live_server, f"/jobs/{noisy}")
    page.wait_for_selector("#verdict", state="visible")
    printed = verdict_lines(result)  # what `padbench results` prints under the table
    assert page.inner_text("#verdict") == printed[0] and "within noise" in printed[0]
    assert page.locator("#verdict-details li").all_inner_texts() == [line.strip() for line in printed[1:]]
    assert "Fastest" not in page.inner_text("main")
    assert page.locator("table.results tbody tr:not(.details)").count() == 2
    assert page.locator("table.results tr.details:visible").count() == 0
    page.click("table.results button.expand >> nth=0")
    assert "CV: " in page.inner_text("table.results tr.details:visible")
    assert page_width(page) <= PAGE_WIDTH
    page.screenshot(path=screenshots / "dashboard-noisy-job.png", full_page=True)

    page.goto(live_server.url + "/")  # the token stays for this tab
    page.wait_for_selector(f'tr[data-job-id="{failed}"]')
    page.locator(f'tr[data-job-id="{noisy}"]', has_text="within noise").wait_for()
    cells = {job_id: page.locator(f'tr[data-job-id="{job_id}"] td').all_inner_texts() for job_id in (noisy, failed)}
    assert cells[noisy][9] == "within noise: dynamic / sdpa, static / sdpa"
    assert cells[failed][7] == "cpu"  # the device of the worker that ran it, not the worker's name
    assert page_width(page) <= PAGE_WIDTH


def test_without_a_token_no_data_is_shown(live_server: LiveServer, browser_page: Any) -> None:
    with live_server.client() as client:
        job_id = client.submit(DASHBOARD_SPEC).id
    browser_page.goto(f"{live_server.url}/jobs/{job_id}")
    assert browser_page.is_visible("#token-form") and not browser_page.is_visible("#content")
    assert "dashboard-cpu" not in browser_page.content()


@pytest.mark.parametrize(("path", "title_selector"), [("/docs", ".swagger-ui .info .title"), ("/redoc", "h1")])
def test_api_docs_render_from_the_servers_own_assets(live_server: LiveServer, browser_page: Any, path: str,
                                                     title_selector: str) -> None:
    requested: list[str] = []
    browser_page.on("request", lambda request: requested.append(request.url))
    browser_page.goto(live_server.url + path)
    browser_page.wait_for_function(
        f"[...document.querySelectorAll({title_selector!r})].some(e => e.textContent.includes('padbench'))")
    assert all(url.startswith((live_server.url, "blob:", "data:")) for url in requested), requested


def test_a_tunes_page_shows_every_trial_the_winner_and_the_chart_of_tokens_against_memory(
        live_server: LiveServer, browser_page: Any, screenshots: Path) -> None:
    from padbench.contract.kinds import parse_job_spec
    from padbench.kinds.tune.report import verdict_lines as tune_verdict_lines
    from tests.unit.test_tune_plan import tune
    from tests.unit.test_tune_report import finished

    job_id, result = complete_by_hand(live_server, tune().model_dump(mode="json"),
                                      lambda spec: finished(parse_job_spec(spec)))  # type: ignore[arg-type]
    page = browser_page
    sign_in(page, live_server, f"/jobs/{job_id}")
    page.wait_for_selector("table.results tbody tr")
    assert page.inner_text("#verdict") == tune_verdict_lines(result)[0]
    rows = page.locator("table.results tbody tr:not(.details)")
    assert rows.count() == len(result.trials) and page.locator("table.results tr.winner").count() == 1
    assert "settings to paste:" in page.inner_text("pre.after")
    page.wait_for_function("Chart.getChart(document.querySelector('#charts canvas')) !== undefined")
    page.screenshot(path=screenshots / "dashboard-tune.png", full_page=True)


def test_a_rows_history_shows_its_points_intervals_version_change_and_regression(
        live_server: LiveServer, browser_page: Any, screenshots: Path) -> None:
    from tests.regression_results import STEADY, padding_result, scaled

    torch = "2.14.0+<i>cu</i>"  # a version as a worker reported it: shown as text, never as markup
    base, steady, slower = store_by_hand(live_server, [
        padding_result({"static": STEADY, "dynamic": STEADY}),
        padding_result({"static": STEADY, "dynamic": STEADY}, date="2026-11-23T12:00:00+00:00"),
        padding_result({"static": STEADY, "dynamic": scaled(STEADY, 0.8)}, torch=torch,
                       date="2026-11-25T12:00:00+00:00")], baseline="main")
    page = browser_page
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    sign_in(page, live_server, f"/jobs/{slower}")
    page.wait_for_selector("#history-link a")
    assert not page.is_visible("#ranking")  # its worker gave no price: nothing to rank by cost
    page.click("#history-link a")
    page.wait_for_url(f"**/history?job={slower}")
    page.wait_for_selector("section.history table.history tbody tr")
    assert page.locator("section.history").count() == 2  # one per row of the job: static and dynamic
    dynamic = page.locator("section.history", has_text="strategy dynamic")
    assert dynamic.locator("tbody tr").count() == 3
    cells = [dynamic.locator(f'tbody tr[data-job-id="{job_id}"] td').all_inner_texts()
             for job_id in (base, steady, slower)]
    assert [row[5] for row in cells] == ["main", "—", "—"]  # the baseline's point
    assert all("–" in row[3] for row in cells)  # every point has its 95% interval
    assert [row[4] for row in cells] == ["—", "—", f"torch 2.13.0 → {torch}"]
    assert "slower beyond noise" in cells[2][6] and "REGRESSED vs main" in cells[2][7]
    assert dynamic.locator("tbody tr.slower").count() == 1 and dynamic.locator("i").count() == 0
    canvas = f'section.history[data-fingerprint="{dynamic.get_attribute("data-fingerprint")}"] canvas'
    page.wait_for_function(f"Chart.getChart(document.querySelector('{canvas}')) !== undefined")
    drawn = page.evaluate("(canvas) => { const set = Chart.getChart(document.querySelector(canvas)).data.datasets[0]; "
                          "return [set.data.length, set.intervals.filter(Boolean).length, set.changes]; }", canvas)
    assert drawn == [3, 3, [None, None, f"torch 2.13.0 → {torch}"]]
    page.screenshot(path=screenshots / "dashboard-history.png", full_page=True)

    dynamic.locator("p.hint a").click()  # by fingerprint: that row alone
    page.wait_for_url("**/history/*")
    page.wait_for_selector("section.history tbody tr")
    assert page.locator("section.history").count() == 1 and page.locator("section.history tbody tr").count() == 3
    page.goto(live_server.url + "/")  # the job list links each finished job's history too
    link = page.locator(f'tr[data-job-id="{slower}"] a.history-link')
    assert link.get_attribute("href") == f"/history?job={slower}"
    assert problems == []


def test_a_priced_jobs_verdict_ranks_by_cost_on_its_page(live_server: LiveServer, browser_page: Any) -> None:
    from padbench.report.ranking import ranked_verdict
    from tests.unit.test_cost_per_token import with_price

    result = with_price(3.6)
    [job_id] = store_by_hand(live_server, [result])
    page = browser_page
    sign_in(page, live_server, f"/jobs/{job_id}")
    page.wait_for_selector("#ranking", state="visible")
    assert page.inner_text("#verdict").startswith("verdict: winner dynamic")
    page.select_option("#rank-by", "cost")
    page.locator("#verdict", has_text="verdict by cost").wait_for()
    by_cost = ranked_verdict(result, "cost")
    assert by_cost is not None and page.inner_text("#verdict") == by_cost.lines[0]
    assert page.locator("table.results tr.winner").count() == 1
    assert "priced at $3.6" in page.inner_text("#verdict-details")


def test_a_scaling_axis_page_plots_tokens_per_gpu_and_efficiency_against_gpu_count(
        live_server: LiveServer, browser_page: Any) -> None:
    from padbench.kinds.padding.contract import PaddingJobSpec
    from padbench.worker.jobs.padding.scaling import CountRun, merged
    from tests.unit.test_scaling_axis import padding_result

    spec = QUICK | {"name": "scaling-cpu", "gpus": [1, 4]}
    result = merged(PaddingJobSpec.model_validate(spec), [
        CountRun(1, padding_result(1, {"static": 100.0, "packed": 200.0})),
        CountRun(4, padding_result(4, {"static": 360.0, "packed": 400.0}))], planned_counts=2)
    job_id, _ = complete_by_hand(live_server, spec, lambda _: result)
    page = browser_page
    sign_in(page, live_server, f"/jobs/{job_id}")
    page.wait_for_selector("table.results tbody tr")
    assert "scaling eff." in page.inner_text("table.results thead")
    titled = ("(title) => [...document.querySelectorAll('#charts div.chart')]"
              ".find((chart) => chart.querySelector('h3').textContent === title)?.querySelector('canvas')")
    per_gpu, efficiency = ("tokens/s per GPU against GPU count",
                           "scaling efficiency against GPU count (1 = tokens/s per GPU of the smallest count)")
    for title in (per_gpu, efficiency):
        page.wait_for_function(f"(title) => {{ const canvas = ({titled})(title); "
                               "return canvas != null && Chart.getChart(canvas) !== undefined; }", arg=title)
    drawn = page.evaluate(f"(title) => Chart.getChart(({titled})(title)).data.datasets"
                          ".map((set) => [set.label, set.data.map((point) => [point.x, point.y])])", efficiency)
    assert sorted(drawn) == [["packed · sdpa @ 4", [[1, 1], [4, 0.5]]], ["static · sdpa @ 4", [[1, 1], [4, 0.9]]]]
