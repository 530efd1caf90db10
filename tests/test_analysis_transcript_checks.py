"""Known answers for the per-arm transcript counts of App. A, E and K (negolib.study.analysis.transcript_checks)."""

from __future__ import annotations

import math

import pandas as pd

from negolib.study.analysis.transcript_checks import nodeal_counters, prose_guard, turn_totals


def _turn(role: str, prose: str, action: str | None = "COUNTER") -> dict:
    return {"role": role, "prose": prose, "action": {"action": action, "terms": []} if action else None}


def _rec(arm: str, status: str, turns: list[dict]) -> dict:
    return {"arm": arm, "status": status, "turns": turns, "outcome": {"deal": status == "deal"}}


RECORDS = [
    _rec("a", "deal", [_turn("seller", "Hello."), _turn("buyer", ""), _turn("seller", "  \n", "ACCEPT")]),
    _rec("a", "no_deal", [_turn("seller", "No."), _turn("buyer", "x"), _turn("seller", "Still no.", "ACCEPT"),
                          _turn("buyer", "y"), _turn("seller", "Firm.", None)]),
    _rec("b", "deal", [_turn("seller", "Fine."), _turn("buyer", "", "ACCEPT")]),
    _rec("b", "no_deal", [_turn("seller", "A."), _turn("seller", "B."), _turn("seller", "C."), _turn("seller", "D.")]),
]


def test_prose_guard_counts_blank_seller_prose_only():
    g = prose_guard(RECORDS).set_index("arm")
    assert g.loc["a", "n_seller_turns"] == 5 and g.loc["a", "n_empty_prose"] == 1  # the whitespace-only turn
    assert math.isclose(g.loc["a", "prose_share"], 0.8) and not g.loc["a", "passed"]
    assert g.loc["b", "n_empty_prose"] == 0 and g.loc["b", "passed"]  # the buyer's blank prose is not the seller's


def test_nodeal_counters_share_of_seller_turns_in_no_deal_episodes():
    n = nodeal_counters(RECORDS).set_index("arm")
    assert n.loc["a", "n_nodeal_episodes"] == 1 and n.loc["a", "n_nodeal_seller_turns"] == 3
    assert n.loc["a", "n_nodeal_counters"] == 1 and math.isclose(n.loc["a", "counter_share"], 1 / 3)
    assert n.loc["b", "counter_share"] == 1.0  # deals are left out


def test_turn_totals_sum_the_episode_table_and_take_placeholders_from_the_style_table():
    df = pd.DataFrame({"arm": ["a", "a", "b"], "turns": [3, 5, 2], "seller_turns": [2, 3, 1],
                       "seller_bad_parses": [0, 1, 0]})
    style = pd.DataFrame({"arm": ["a"], "n_placeholders": [7]})
    t = turn_totals(df, style).set_index("arm")
    assert t.loc["a", "n_episodes"] == 2 and t.loc["a", "n_turns"] == 8 and t.loc["a", "n_seller_turns"] == 5
    assert t.loc["a", "n_seller_bad_parses"] == 1 and t.loc["a", "n_placeholders"] == 7
    assert math.isnan(t.loc["b", "n_placeholders"])
    assert turn_totals(pd.DataFrame()).empty
