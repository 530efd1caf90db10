"""Per-arm metrics on a tiny hand-made episode table (values checked by hand)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from negolib.games.multi_issue.metrics import (
    METRICS,
    Metric,
    add_utility_split,
    arm_table,
    buyer_split,
    episode_columns,
    get_metric,
    metric_value,
    synthetic_episodes,
)

NAN = float("nan")


def tiny() -> pd.DataFrame:
    """Arm X: four episodes (3 deals) on two seeds; arm Y: two episodes."""
    rows = [
        # arm, buyer, domain, seed, held_out, deal, su, bu, turns, st, sbad, bad, awt, inv, off, named
        ("X", "A", "d1", 1, False, True, 0.8, 0.4, 4, 2, 0, 1, False, 1, 0, 10),
        ("X", "B", "d1", 1, False, True, 0.6, 0.6, 6, 3, 1, 1, True, 0, 1, 10),
        ("X", "A", "car", 2, True, False, NAN, NAN, 24, 12, 2, 3, False, 2, 2, 20),
        ("X", "B", "car", 2, True, True, 0.5, 0.3, 10, 5, 0, 0, True, 0, 0, 0),
        ("Y", "A", "d1", 1, False, False, NAN, NAN, 24, 12, 0, 0, False, 0, 0, 4),
        ("Y", "B", "d1", 1, False, True, 0.9, 0.1, 2, 1, 1, 2, True, 1, 3, 4),
    ]
    cols = ["arm", "buyer", "domain", "seed", "held_out", "deal", "seller_utility", "buyer_utility", "turns",
            "seller_turns", "seller_bad_parses", "bad_parses", "accept_with_terms", "n_invalid_terms",
            "n_off_schema_terms", "n_named_terms"]
    df = pd.DataFrame(rows, columns=cols)
    df["score"] = np.where(df["deal"], df["seller_utility"], -0.3)
    df["welfare"] = df["seller_utility"] + df["buyer_utility"]
    df["seller_invalid_accepts"] = [0, 1, 1, 0, 0, 0]
    # who closed each deal (X's last deal: the buyer's accept, with terms), and the terms the seller named in
    # its own counters (accepts' terms excluded) with how many of them were off the schema
    df["closed_by"] = ["seller", "seller", None, "buyer", None, "seller"]
    df["n_seller_named_terms"] = [6, 5, 12, 0, 2, 3]
    df["n_seller_off_schema_terms"] = [1, 0, 2, 0, 0, 1]
    return df


def x(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["arm"] == "X"]


@pytest.mark.parametrize(("name", "expected"), [
    ("score", (0.8 + 0.6 - 0.3 + 0.5) / 4),
    ("score_held_out", (-0.3 + 0.5) / 2),
    ("deal_rate", 3 / 4),
    ("deal_utility", (0.8 + 0.6 + 0.5) / 3),
    ("buyer_utility", (0.4 + 0.6 + 0.3) / 3),
    ("welfare", (1.2 + 1.2 + 0.8) / 3),
    ("mean_turns", (4 + 6 + 24 + 10) / 4),
    ("bad_parse_rate", 5 / 44),
    ("seller_bad_parse_rate", 3 / 22),
    ("invalid_term_rate", 3 / 40),
    ("off_schema_rate", 3 / 23),  # the seller's named terms only (paper App. A), not 3 / 40 over both parties
    ("accept_with_terms", 1 / 2),  # the seller's closing accepts only (paper App. A), not 2 / 3 of all deals
])
def test_each_metric_on_hand_table(name: str, expected: float) -> None:
    assert metric_value(x(tiny()), METRICS[name]) == pytest.approx(expected, abs=1e-12)


def test_buyer_split_is_difference_of_restricted_means() -> None:
    m = buyer_split("A", "B")
    assert metric_value(x(tiny()), m) == pytest.approx((0.8 - 0.3) / 2 - (0.6 + 0.5) / 2)
    assert metric_value(x(tiny()), buyer_split("B", "A")) == pytest.approx(-metric_value(x(tiny()), m))
    assert [s for s, _ in m.terms] == [1.0, -1.0]


def test_episode_columns_zero_restricted_and_no_deal_rows() -> None:
    num, den = episode_columns(x(tiny()), METRICS["deal_utility"])
    np.testing.assert_allclose(num, [0.8, 0.6, 0.0, 0.5])
    np.testing.assert_allclose(den, [1, 1, 0, 1])
    num, den = episode_columns(x(tiny()), METRICS["score_held_out"])
    np.testing.assert_allclose(num, [0, 0, -0.3, 0.5])
    np.testing.assert_allclose(den, [0, 0, 1, 1])


def test_nan_numerator_is_an_error() -> None:
    bad = Metric("raw_utility", "seller U~ without deal mask", "seller_utility")
    with pytest.raises(ValueError, match="NaN"):
        episode_columns(x(tiny()), bad)


def test_missing_column_and_unknown_metric_are_clear_errors() -> None:
    with pytest.raises(KeyError, match="seller_distributive"):
        episode_columns(x(tiny()), METRICS["seller_distributive"])
    with pytest.raises(KeyError, match="unknown metric"):
        get_metric("nope")


def test_composite_needs_terms() -> None:
    with pytest.raises(ValueError, match="composite"):
        episode_columns(tiny(), buyer_split("A", "B"))


def test_undefined_ratio_is_nan() -> None:
    y = tiny()[tiny()["arm"] == "Y"]
    assert math.isnan(metric_value(y, METRICS["score_held_out"]))


def test_arm_table_rows_columns_and_values() -> None:
    t = arm_table(tiny())
    assert list(t.index) == ["X", "Y"]
    assert "buyer_split" in t.columns
    assert t.loc["Y", "score"] == pytest.approx((-0.3 + 0.9) / 2)
    assert t.loc["Y", "deal_utility"] == pytest.approx(0.9)
    assert t.loc["X", "buyer_split"] == pytest.approx(-0.3)
    assert t.loc["X", "n_episodes"] == 4
    assert math.isnan(t.loc["Y", "score_held_out"])
    assert t.loc["X", "invalid_accept_rate"] == pytest.approx(2 / 22) and t.loc["Y", "invalid_accept_rate"] == 0
    assert t.loc["X", "invalid_accept_rate"] == pytest.approx(2 / 22) and t.loc["Y", "invalid_accept_rate"] == 0
    t2 = arm_table(tiny(), metrics=["score"], buyers=("B", "A"))
    assert list(t2.columns) == ["score", "n_episodes"]


def test_utility_split_sums_to_utility() -> None:
    from negolib.games.multi_issue.domains import load_domains

    doms = load_domains()
    name = sorted(doms)[0]
    n = len(doms[name].issues)
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.full(n, 0.3), size=3)
    terms = [list(wi * rng.random(n)) for wi in w]
    df = pd.DataFrame({"domain": [name] * 3, "seller_terms": terms, "buyer_terms": terms})
    out = add_utility_split(df, doms)
    np.testing.assert_allclose(out["seller_distributive"] + out["seller_integrative"],
                               [sum(t) for t in terms])
    mask = np.array([i.distributive for i in doms[name].issues])
    assert out["seller_distributive"][0] == pytest.approx(np.asarray(terms[0])[mask].sum())


def test_synthetic_table_has_the_episode_columns() -> None:
    df = synthetic_episodes(["a", "b"], n_seeds=4, seed=1)
    assert len(df) == 2 * 4 * 9 * 2
    assert not df.duplicated(["arm", "domain", "seed", "buyer"]).any()
    t = arm_table(df)
    assert t.notna().all().all()
    assert ((df["score"] == -0.3) == ~df["deal"]).all()


def test_paper_definitions_from_played_records() -> None:
    """The episode table counts the seller's counter terms (not the buyer's, not an accept's) and who closed,
    from transcript records: the accept-with-terms and off-schema shares are the paper's (App. A)."""
    from negolib.core.transcripts import episodes_frame
    from negolib.games.multi_issue.env import EnvConfig, Episode
    from negolib.games.multi_issue.scenarios import scenario_set

    def act(kind, **terms):
        import json
        return "ok\n" + json.dumps({"action": kind, "terms": [{"name": k, "value": v} for k, v in terms.items()]})

    sc = scenario_set([1], ["car"])[0]
    price = next(i.name for i in sc.domain.issues if i.name == "price")
    recs = []
    # seller counters (1 schema + 1 off-schema term), buyer counters with an off-schema term, seller accepts
    # with terms (an off-schema one among them): seller-closed, with terms
    ep = Episode(sc, EnvConfig(), "a")
    ep.step(act("COUNTER", **{price: 50, "delivery_day": 3}))
    ep.step(act("COUNTER", **{price: 40, "warranty_years": 2}))
    ep.step(act("ACCEPT", **{price: 45, "extra_mats": True}))
    recs.append(ep.record(arm="X", seller="X", buyer="b"))
    # seller counters, buyer accepts with terms: buyer-closed (not one of the seller's closing accepts)
    ep = Episode(sc, EnvConfig(), "b")
    ep.step(act("COUNTER", **{price: 50}))
    ep.step(act("ACCEPT", **{price: 49}))
    recs.append(ep.record(arm="X", seller="X", buyer="b"))
    df = episodes_frame(recs)
    assert list(df["closed_by"]) == ["seller", "buyer"] and list(df["accept_with_terms"]) == [True, True]
    assert list(df["n_seller_named_terms"]) == [2, 1] and list(df["n_seller_off_schema_terms"]) == [1, 0]
    assert metric_value(df, METRICS["accept_with_terms"]) == pytest.approx(1.0)
    assert metric_value(df, METRICS["off_schema_rate"]) == pytest.approx(1 / 3)
