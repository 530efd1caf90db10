"""Bilateral price bargaining: metrics (deal rate, surplus share, IR violations, efficiency by tier) and payoffs
on hand-built outcomes."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from negolib.games import get_game
from negolib.games.base import Payoffs
from negolib.games.bilateral.env import Episode
from negolib.games.bilateral.metrics import (
    OUTCOME_COLUMNS,
    TIER_COLUMNS,
    outcomes_frame,
    surplus_share,
    tier_metrics,
)
from negolib.games.bilateral.scenarios import BilateralScenario


def played(tier: str, seed: int, cost: float, value: float, price: float | None) -> dict:
    """A real record: the seller offers ``price`` and the buyer accepts, or (None) the seller walks away."""
    ep = Episode(BilateralScenario(tier, seed, cost, value))
    if price is None:
        ep.step('{"name": "walk_away", "arguments": {}}')
    else:
        ep.step(json.dumps({"name": "make_offer", "arguments": {"price": price}}))
        ep.step('{"name": "accept_offer", "arguments": {}}')
    return ep.record()


def error_row(tier: str, seed: int, cost: float, value: float) -> dict:
    rec = Episode(BilateralScenario(tier, seed, cost, value)).record()
    rec["status"], rec["error"] = "error", "agent failed"
    return rec


RECORDS = [
    played("10", 1, 5.0, 15.0, 10.0),       # A: share 0.5
    played("10", 2, 5.0, 15.0, 4.0),        # B: below cost (seller IR violation), share -0.1
    played("10", 3, 12.0, 8.0, None),       # C: empty zone, no deal: efficient
    played("10", 4, 5.0, 15.0, None),       # D: zone, no deal: inefficient
    played("1k", 1, 500.0, 1500.0, 1600.0),  # E: above value (buyer IR violation), share 1.1
    played("1k", 2, 1200.0, 800.0, 1000.0),  # F: empty zone, deal: both IR violated, share undefined
    error_row("1k", 3, 500.0, 1500.0),      # G: error row
]


def test_surplus_share_formula():
    assert surplus_share(10, 5, 15) == 0.5 and surplus_share(4, 5, 15) == pytest.approx(-0.1)
    assert math.isnan(surplus_share(10, 12, 8)) and math.isnan(surplus_share(10, 10, 10))


def test_outcomes_frame_rows():
    df = outcomes_frame(RECORDS)
    assert list(df.columns) == list(OUTCOME_COLUMNS) and len(df) == 7
    a, b, c, d, e, f, g = (df.iloc[i] for i in range(7))
    assert a["surplus_share"] == 0.5 and a["efficient"] and not a["ir_violation"]
    assert b["surplus_share"] == pytest.approx(-0.1) and b["seller_ir_violation"] and not b["buyer_ir_violation"]
    assert c["efficient"] and not c["deal"] and not c["has_zone"] and c["walked_away"]
    assert not d["efficient"] and d["realised_gains"] == 0 and d["available_gains"] == 10
    assert e["surplus_share"] == pytest.approx(1.1) and e["buyer_ir_violation"] and not e["seller_ir_violation"]
    assert math.isnan(f["surplus_share"]) and f["seller_ir_violation"] and f["buyer_ir_violation"]
    assert not f["efficient"] and f["realised_gains"] == -400
    assert not g["valid"] and pd.isna(g["deal"]) and math.isnan(g["price"])
    # numbers only: no formatted strings outside the identifier columns
    for col in set(OUTCOME_COLUMNS) - {"scenario_key", "tier"}:
        assert pd.api.types.is_numeric_dtype(df[col]) or pd.api.types.is_bool_dtype(df[col]), col


def test_tier_metrics_on_hand_built_outcomes():
    m = tier_metrics(RECORDS, overall=True).set_index("tier")
    assert list(m.reset_index().columns) == list(TIER_COLUMNS) and list(m.index) == ["10", "1k", "all"]
    t10, t1k, tall = m.loc["10"], m.loc["1k"], m.loc["all"]
    assert (t10["n"], t10["n_errors"], t10["deal_rate"]) == (4, 0, 0.5)
    assert t10["surplus_share"] == pytest.approx(0.2) and t10["n_surplus"] == 2
    assert (t10["ir_violations"], t10["ir_violation_rate"]) == (1, 0.5)
    assert t10["efficiency"] == 0.75 and t10["deal_rate_with_zone"] == pytest.approx(2 / 3)
    assert t10["no_deal_rate_without_zone"] == 1.0 and t10["gains_realised"] == pytest.approx(2 / 3)
    assert (t1k["n"], t1k["n_errors"], t1k["deal_rate"]) == (2, 1, 1.0)
    assert t1k["surplus_share"] == pytest.approx(1.1) and t1k["n_surplus"] == 1  # F has no zone: no share
    assert (t1k["ir_violations"], t1k["ir_violation_rate"], t1k["efficiency"]) == (2, 1.0, 0.5)
    assert t1k["no_deal_rate_without_zone"] == 0.0  # F traded without a zone
    assert t1k["gains_realised"] == pytest.approx(0.6) and t1k["scale"] == 1000.0
    assert (tall["n"], tall["n_errors"], tall["ir_violations"]) == (6, 1, 3) and math.isnan(tall["scale"])
    assert tall["deal_rate"] == pytest.approx(4 / 6)
    for col in set(TIER_COLUMNS) - {"tier"}:
        assert pd.api.types.is_numeric_dtype(m[col]), col


def test_tiers_come_cheapest_first_and_a_frame_is_accepted():
    recs = [played(t, 1, 5.0, 15.0, 10.0) for t in ("100k", "10", "1k")]
    assert list(tier_metrics(recs)["tier"]) == ["10", "1k", "100k"]
    assert tier_metrics(outcomes_frame(recs)).equals(tier_metrics(recs))


def test_payoffs_read_records_as_surplus_shares():
    game = get_game("bilateral")
    a, b, c, d, e, f, g = (game.payoffs(r) for r in RECORDS)
    assert a == Payoffs(0.5, 0.5, True)
    assert b == Payoffs(0.0, 1.0, True)  # share -0.1 clipped
    assert c == Payoffs(0.0, 0.0, False) and d == Payoffs(0.0, 0.0, False)
    assert e == Payoffs(1.0, 0.0, True)  # share 1.1 clipped
    assert f == Payoffs(0.0, 0.0, True)  # a deal without a zone: no gains to share
    assert g == Payoffs(0.0, 0.0, False, valid=False)
    assert game.payoffs({"status": "error", "outcome": None}).valid is False
