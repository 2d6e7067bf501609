"""The verdict ranked by cost over real HTTP and through the CLI: `GET /v1/jobs/{id}/verdict?rank_by=cost` (and
`/table`), `padbench results ID --rank-by cost`; a result its worker gave no price is ranked by speed, saying so.
Results are crafted documents completed through the worker's lease API."""

from __future__ import annotations

import pytest

from padbench.report.ranking import NO_PRICE
from tests.integration.conftest import LiveServer
from tests.integration.test_cli_client import cli_of
from tests.integration.test_regressions import finish
from tests.unit.test_cost_per_token import with_price


@pytest.fixture
def cli(live_server: LiveServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    return cli_of(live_server, monkeypatch, capsys)


def test_the_verdict_ranks_by_cost_where_a_price_is_known_and_by_speed_saying_so_where_not(
        live_server: LiveServer, cli) -> None:
    with live_server.client("submitter") as alice, live_server.client("worker") as box:
        priced, unpriced = finish(alice, box, with_price(3.6)), finish(alice, box, with_price(None))
        by_cost = alice.get(f"/v1/jobs/{priced}/verdict", params={"rank_by": "cost"}).json()
        by_speed = alice.get(f"/v1/jobs/{priced}/verdict").json()
        table = alice.get(f"/v1/jobs/{priced}/table", params={"rank_by": "cost"}).json()
        fallback = alice.get(f"/v1/jobs/{unpriced}/verdict", params={"rank_by": "cost"}).json()
        refused = alice.get(f"/v1/jobs/{priced}/verdict", params={"rank_by": "price"})
    assert by_cost["lines"][0].startswith("verdict by cost: cheapest dynamic / sdpa at batch 8: $0.5 per million")
    assert by_speed["lines"][0].startswith("verdict: winner dynamic") and by_cost["winner"] == by_speed["winner"]
    assert table["verdict"] == by_cost["lines"]
    assert fallback["lines"][0].startswith("verdict: winner dynamic") and fallback["lines"][-1] == f"  {NO_PRICE}"
    assert refused.status_code == 422 and "rank_by" in refused.text

    code, out, _ = cli("results", str(priced), "--rank-by", "cost")
    assert code == 0 and "verdict by cost: cheapest dynamic" in out and "verdict: winner" not in out
    code, out, _ = cli("results", str(unpriced), "--rank-by", "cost")
    assert code == 0 and NO_PRICE in out
    code, _, err = cli("results", str(priced), "--rank-by", "cost", "--format", "json")
    assert code == 2 and "--rank-by orders the table's verdict" in err
