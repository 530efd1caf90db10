"""The smaller diagnostics the paper quotes in its text, each on a hand-built episode table (or log) whose answer is
known: late closes, the buyer's integrative change and the seller's gap, the shares of the gain, the self-play
split, KL at the read step, per-domain deal rates, walk-aways and off-schema terms on the closing ledger."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from paper_frames import assert_tidy, paper_setup

from negolib.games.multi_issue.domains import load_domains
from negolib.games.multi_issue.metrics import synthetic_episodes
from negolib.study.analysis.quoted_diagnostics import (
    deal_rate_by_domain,
    gain_shares,
    integrative_split,
    kl_at_read,
    late_close_change,
    off_schema_ledger_share,
    self_play_split,
    walkaways,
)
from negolib.study.analysis.resamplers import Analysis


def two_arms(n_seeds: int = 6, domains=("car",), buyers=("b",)) -> pd.DataFrame:
    """Arms ``arm`` and ``base`` on every scenario, every episode a deal (override per test)."""
    df = synthetic_episodes(["arm", "base"], n_seeds=n_seeds, domains=list(domains), buyers=buyers, seed=1)
    df["deal"] = True
    df["status"] = "deal"
    df["score"] = df["seller_utility"] = df["seller_utility"].fillna(0.5)
    df["buyer_utility"] = df["buyer_utility"].fillna(0.5)
    return df.reset_index(drop=True)


def test_late_close_change_on_both_closed_scenarios():
    df = two_arms()
    seed = df["seed"] - df["seed"].min()
    base, arm = df["arm"] == "base", df["arm"] == "arm"
    df.loc[base, "turns"] = np.where(seed[base] < 3, 10, 18)      # base: late on seeds 3-5 (3 of 6 deals)
    df.loc[arm, "turns"] = 18                                      # arm: every deal late
    df.loc[arm & (seed == 0), ["deal", "turns"]] = [False, 24]     # ... and no deal on seed 0
    out = late_close_change(Analysis(df, n_resamples=200), [("arm", "base")])
    r = out.iloc[0]
    assert r["base_share"] == pytest.approx(0.5) and r["arm_share"] == pytest.approx(1.0)
    assert r["estimate"] == pytest.approx(1.0 - 3 / 5)             # both closed: seeds 1-5, base late on 3 of 5
    assert r["n_episodes"] == 5                                    # paired scenarios
    assert_tidy(out, identifiers=("arm_a", "arm_b"))


def _terms(mask: np.ndarray, dist: float, integ: float) -> list[float]:
    """Per-term contributions that sum to ``dist`` on the distributive issues and ``integ`` on the others."""
    v = np.zeros(mask.size)
    v[np.flatnonzero(mask)[0]] = dist
    v[np.flatnonzero(~mask)[0]] = integ
    return v.tolist()


def test_integrative_split_buyer_change_and_the_sellers_gap():
    mask = np.array([i.distributive for i in load_domains()["car"].issues])
    df = two_arms()
    arm = df["arm"] == "arm"
    df["seller_terms"] = [_terms(mask, 0.36, 0.12) if a else _terms(mask, 0.30, 0.10) for a in arm]
    df["buyer_terms"] = [_terms(mask, 0.25, 0.29) if a else _terms(mask, 0.30, 0.30) for a in arm]
    out = integrative_split(Analysis(df, n_resamples=200), [("arm", "base")])
    got = dict(zip(out["metric"], out["estimate"]))
    assert got == pytest.approx({"seller_distributive": 0.06, "seller_integrative": 0.02, "buyer_distributive": -0.05,
                                 "buyer_integrative": -0.01, "seller_integrative_minus_distributive": -0.04})
    gap = out[out["metric"] == "seller_integrative_minus_distributive"].iloc[0]
    assert (gap["ci_low"], gap["ci_high"]) == pytest.approx((-0.04, -0.04)) and gap["significant"]
    assert_tidy(out, identifiers=("arm_a", "arm_b", "metric"))
    assert integrative_split(Analysis(df.drop(columns=["seller_terms"]), n_resamples=50), [("arm", "base")]).empty


def test_gain_shares_from_the_decomposition():
    decomp = pd.DataFrame({"arm_a": ["x"] * 4 + ["y"] * 2, "arm_b": ["b"] * 6,
                           "metric": ["seller_distributive", "seller_integrative", "buyer_utility", "seller_utility",
                                      "seller_utility", "buyer_utility"],
                           "estimate": [0.049, 0.016, -0.057, 0.065, 0.0, 0.01]})
    out = gain_shares(decomp).set_index("arm_a")
    assert out.loc["x", "distributive_share"] == pytest.approx(0.049 / 0.065)
    assert out.loc["x", "integrative_share"] == pytest.approx(0.016 / 0.065)
    assert out.loc["x", "buyer_loss_share"] == pytest.approx(0.057 / 0.065)
    assert np.isnan(out.loc["y", "buyer_loss_share"])                      # no gain: no share
    assert gain_shares(pd.DataFrame()).empty


def test_self_play_split_marks_the_buyer_running_the_sellers_model():
    p, _, _, _ = paper_setup()
    df = synthetic_episodes(["sonnet5", "terra"], n_seeds=5, buyers=("buyer_terra", "buyer_sonnet5"), seed=2)
    want = {("sonnet5", "buyer_sonnet5"): 0.518, ("sonnet5", "buyer_terra"): 0.513,
            ("terra", "buyer_terra"): 0.503, ("terra", "buyer_sonnet5"): 0.504}
    df["score"] = [want[(a, b)] for a, b in zip(df["arm"], df["buyer"])]
    out = self_play_split(Analysis(df, n_resamples=100), p)
    assert len(out) == 4
    for r in out.to_dict("records"):
        assert r["estimate"] == pytest.approx(want[(r["arm"], r["buyer"])])
        assert r["self_play"] == (r["buyer"] == f"buyer_{r['arm']}")
    assert_tidy(out, identifiers=("arm", "buyer"))


def test_kl_at_the_read_step():
    p, _, _, _ = paper_setup()
    run = p.arms["e2b_lr3_56"].run
    seed = p.training.runs[run].seeds[0]
    log = pd.DataFrame({"step": np.arange(1, 65), "kl": np.arange(1, 65) / 1000})
    out = kl_at_read({(run, seed): log}, p, ["e2b_lr3_56", "e2b_base", "g12b_lr3_56"]).set_index("arm")
    assert list(out.index) == ["e2b_lr3_56", "g12b_lr3_56"]                # the base is not trained
    assert out.loc["e2b_lr3_56", "kl"] == pytest.approx(0.056)
    assert (out.loc["e2b_lr3_56", "kl_first"], out.loc["e2b_lr3_56", "kl_last"]) == pytest.approx((0.001, 0.064))
    assert np.isnan(out.loc["g12b_lr3_56", "kl"])                          # no log for that run


def test_deal_rate_by_domain():
    df = two_arms(n_seeds=4, domains=("car", "job_offer"))
    seed = df["seed"] - df["seed"].min()
    df.loc[(df["arm"] == "arm") & (df["domain"] == "job_offer") & (seed < 2), "deal"] = False
    out = deal_rate_by_domain(Analysis(df, n_resamples=100), [("arm", "base")]).set_index("domain")
    assert out.loc["job_offer", "estimate"] == pytest.approx(-0.5) and out.loc["car", "estimate"] == 0
    assert out.loc["job_offer", "arm_rate"] == 0.5 and out.loc["job_offer", "base_rate"] == 1.0


def test_walkaways_and_episodes_at_the_cap():
    df = two_arms(n_seeds=3)
    df["turns"] = 10
    base = df.index[df["arm"] == "base"]
    df.loc[base[0], ["deal", "turns"]] = [False, 24]    # a no-deal at the cap
    df.loc[base[1], ["deal", "turns"]] = [False, 9]     # a walk-away
    df.loc[base[2], "turns"] = 24                        # a deal on the last turn
    out = walkaways(df, 24).set_index("arm")
    assert out.loc["base"].to_dict() == {"n_episodes": 3, "n_no_deal": 2, "walkaways": 1, "at_cap": 2}
    assert out.loc["arm"].to_dict() == {"n_episodes": 3, "n_no_deal": 0, "walkaways": 0, "at_cap": 0}


def test_share_of_deals_with_an_off_schema_term_on_the_ledger():
    df = two_arms(n_seeds=4)
    schema = load_domains()["car"].issues[0].name
    off = [True, False, True, False]
    ledgers = [{schema: 1, "delivery_day": 3} if o else {schema: 1} for o in off]
    df["final_ledger"] = [json.dumps(ledgers[i % 4]) for i in range(len(df))]
    df.loc[df.index[(df["arm"] == "arm")][:1], "deal"] = False   # a no-deal does not count
    out = off_schema_ledger_share(df).set_index("arm")
    n_arm = int(((df["arm"] == "arm") & df["deal"]).sum())
    assert out.loc["arm", "n_deals"] == n_arm and out.loc["base", "n_deals"] == 4
    assert out.loc["base", "off_schema_deal_share"] == pytest.approx(0.5)
    assert 0 < out.loc["arm", "off_schema_deal_share"] <= 1
