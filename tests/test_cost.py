"""Cost accounting: usage per party from transcripts, USD per episode, the dry run [App. G]."""

from __future__ import annotations

import math

import pytest

from negolib.games.multi_issue.env import EnvConfig
from negolib.games.multi_issue.rollout import make_specs, run_episodes
from negolib.games.multi_issue.scenarios import scenario_set
from negolib.games.multi_issue.scripted import make_scripted
from negolib.study.cost import (
    PAPER_FRONTIER_EPISODE_USD,
    PAPER_FRONTIER_TOKENS,
    Price,
    call_usage_frame,
    cost_frame,
    cost_summary,
    dry_run,
    episode_cost,
    party_usage,
    price_table,
)

PRICES = price_table({"frontier-a": {"input": 3.0, "output": 15.0}, "frontier-b": [1.25, 10.0]})


def _records(n_seeds=2, rounds=3):
    specs = make_specs("api_arm", "seller", ["buyer"], scenario_set(range(5_000_000, 5_000_000 + n_seeds),
                                                                  ["car"]), EnvConfig(max_rounds=rounds))
    agents = {"seller": make_scripted("hardliner", "seller"), "buyer": make_scripted("hardliner", "buyer")}
    recs = run_episodes(specs, agents, progress=False).records
    for rec in recs:  # bill every turn as if an API had served it
        for t in rec["turns"]:
            t["input_tokens"], t["output_tokens"] = (1000, 100) if t["role"] == "seller" else (800, 50)
    return specs, recs


def test_paper_reference_constants():
    assert PAPER_FRONTIER_EPISODE_USD == 0.069
    assert PAPER_FRONTIER_TOKENS["input"] == 37.1e6 and PAPER_FRONTIER_TOKENS["episodes"] == 2304


def test_price_table_validates_with_a_clear_message():
    assert PRICES["frontier-b"] == Price(1.25, 10.0)
    with pytest.raises(ValueError, match=r"prices.m: needs exactly the keys"):
        price_table({"m": {"input": 1.0}})
    with pytest.raises(ValueError, match=r"prices.m: .*>= 0"):
        price_table({"m": [-1.0, 2.0]})


def test_party_usage_and_episode_cost():
    _, recs = _records(n_seeds=1, rounds=3)
    rec = recs[0]
    use = party_usage(rec)
    assert use["seller"].calls == 3 and use["buyer"].calls == 3  # no deal between hardliners: 6 turns
    assert (use["seller"].input_tokens, use["seller"].output_tokens) == (3000, 300)
    assert (use["buyer"].input_tokens, use["buyer"].output_tokens) == (2400, 150)
    usd = episode_cost(rec, PRICES, "frontier-a", "frontier-b")
    assert usd["seller"] == pytest.approx((3000 * 3.0 + 300 * 15.0) / 1e6)
    assert usd["buyer"] == pytest.approx((2400 * 1.25 + 150 * 10.0) / 1e6)
    assert usd["total"] == pytest.approx(usd["seller"] + usd["buyer"])
    assert episode_cost(rec, PRICES, None, None)["total"] == 0.0  # scripted sides are free
    with pytest.raises(KeyError, match="no price for model 'unknown'"):
        episode_cost(rec, PRICES, "unknown", None)


def test_cost_frame_and_summary():
    _, recs = _records(n_seeds=2, rounds=3)
    df = cost_frame(recs, PRICES, {"seller": "frontier-a"})  # the scripted buyer is unbilled
    assert len(df) == 2 and (df["buyer_usd"] == 0).all() and df["buyer_model"].isna().all()
    assert df["usd"].sum() == pytest.approx(2 * (3000 * 3.0 + 300 * 15.0) / 1e6)
    summ = cost_summary(df)
    assert summ.loc[0, "episodes"] == 2 and summ.loc[0, "paper_frontier_usd_per_episode"] == 0.069
    assert summ.loc[0, "usd_per_episode"] == pytest.approx(df["usd"].mean())
    calls = call_usage_frame(recs)
    assert len(calls) == 12 and calls["input_tokens"].sum() == 2 * (3000 + 2400)


def test_dry_run_counts_calls_tokens_and_usd(capsys):
    specs, recs = _records(n_seeds=2, rounds=3)
    models = {"seller": "frontier-a", "buyer": "frontier-b"}
    est = dry_run(specs, models, PRICES, turns_per_episode=5, tokens_per_turn=(1000, 100))
    printed = capsys.readouterr().out
    assert "dry run: 2 episodes" in printed and "API calls" in printed and "$" in printed
    # 5 turns: the seller (first mover) plays 3, the buyer 2, per episode
    assert est.calls == 10 and est.input_tokens == 10_000 and est.output_tokens == 1_000
    expect = 2 * (Price(3.0, 15.0).usd(3000, 300) + Price(1.25, 10.0).usd(2000, 200))
    assert est.usd == pytest.approx(expect)
    assert est.max_calls == 2 * 6 and est.max_usd >= est.usd
    per = est.per_model.set_index("model")
    assert per.loc["frontier-a", "calls"] == 6 and per.loc["frontier-b", "calls"] == 4
    # a resumed run skips what is complete; a scripted side is never billed
    est2 = dry_run(specs, {"seller": "frontier-a"}, PRICES, turns_per_episode=5, tokens_per_turn=(1000, 100),
                   done={specs[0].key}, echo=False)
    assert est2.episodes == 1 and est2.skipped == 1 and est2.calls == 3
    # fractional mean turns split evenly; the cap bounds the expectation
    est3 = dry_run(specs, models, PRICES, turns_per_episode=9.6, echo=False)
    assert est3.calls == pytest.approx(2 * 6)  # capped at 6 turns (3 rounds)
    est4 = dry_run(specs, models, PRICES, turns_per_episode=4.5, tokens_per_turn=(1000, 100), echo=False)
    assert est4.calls == pytest.approx(9.0) and math.isfinite(est4.usd)
    with pytest.raises(KeyError, match="no price"):
        dry_run(specs, {"seller": "nope"}, PRICES, echo=False)
