"""Diagnostics on hand-made transcripts with known answers; the decomposition identity as a property."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import accept, counter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from negolib.core.transcripts import episodes_frame
from negolib.games.multi_issue.domains import load_domains
from negolib.games.multi_issue.env import EnvConfig, Episode, opening_score
from negolib.games.multi_issue.metrics import metric_value
from negolib.games.multi_issue.scenarios import make_scenario
from negolib.games.multi_issue.utility import split_utility
from negolib.stats import ClusterResampler
from negolib.study.diagnostics import (
    DIAGNOSTIC_METRICS,
    concession_frame,
    decomposition_columns,
    decomposition_table,
    episode_diagnostics,
    find_placeholders,
    guards_table,
    has_json_leak,
    is_buyer_voice,
    late_close,
    opener,
    openings_frame,
    openings_table,
    sample_transcripts,
    seller_turns_frame,
    starts_with_i_appreciate,
    style_episodes_frame,
    style_table,
)

DOMAINS = load_domains()


def play(scenario, *texts: str, arm: str = "arm", buyer: str = "b", config: EnvConfig | None = None) -> dict:
    """The record of an episode played with the given raw turn texts (it must finish)."""
    ep = Episode(scenario, config)
    for t in texts:
        ep.step(t)
    assert ep.done, "hand-made episode did not finish"
    return ep.record(arm=arm, seller=arm, buyer=buyer)


def car(seed: int = 5_000_053):
    return make_scenario(DOMAINS["car"], seed)


def short(rounds: int) -> EnvConfig:
    return EnvConfig(max_rounds=rounds)


# -- openings ------------------------------------------------------------------------------------

def test_opening_counts_usable_schema_terms_and_scores_the_ledger_after_turn_1():
    sc = car()
    opening = counter(("price", 45), ("model", "Sedan"), ("delivery_day", 3), ("interior", "Gold"))
    with_terms = play(sc, opening, accept())
    no_terms = play(sc, "Hello! Lovely to meet you, the car is in great shape.", counter(("price", 30)),
                    accept(), arm="arm")
    f = openings_frame([with_terms, no_terms])
    a, b = f.iloc[0], f.iloc[1]
    assert a["opens_with_terms"] and a["n_opening_terms"] == 2
    assert a["opening_terms_share"] == pytest.approx(0.2)
    assert a["opening_score"] == pytest.approx(opening_score(sc, {"price": 45.0, "model": "Sedan"}))
    assert a["deal_minus_opening"] == pytest.approx(0.0)  # the buyer accepted the opening as it stood
    assert not b["opens_with_terms"] and b["n_opening_terms"] == 0
    assert b["opening_score"] == pytest.approx(0.5)  # nothing named: every phi = 0
    t = openings_table(f)
    assert t.loc[0, "opens_with_terms"] == 0.5 and t.loc[0, "mean_terms_named"] == 2
    assert t.loc[0, "opening_score"] == pytest.approx(a["opening_score"])


def test_buyer_opens_uses_the_sellers_first_turn():
    sc = car()
    rec = play(sc, counter(("price", 30)), counter(("price", 46), ("color", "Black")), accept(),
               config=EnvConfig(first_mover="buyer"))
    row = openings_frame([rec]).iloc[0]
    assert row["opening_turn"] == 2 and row["n_opening_terms"] == 2
    assert row["opening_score"] == pytest.approx(opening_score(sc, {"price": 46.0, "color": "Black"}))


# -- decomposition -------------------------------------------------------------------------------

def _random_ledger(domain, rng: np.random.Generator) -> dict[str, Any]:
    led: dict[str, Any] = {}
    for issue in domain.issues:
        if rng.random() < 0.3:
            continue  # never named: counted in its class at phi = 0
        if issue.kind == "continuous":
            led[issue.name] = round(float(rng.uniform(issue.lo - 1, issue.hi + 1)), 2)  # clipped when scored
        elif issue.kind == "binary":
            led[issue.name] = bool(rng.integers(2))
        else:
            led[issue.name] = issue.levels[int(rng.integers(len(issue.levels)))]
    return led


def _deal(scenario, ledger: dict, arm: str, buyer: str = "b") -> dict:
    return play(scenario, counter(*ledger.items()), accept(), arm=arm, buyer=buyer)


def _no_deal(scenario, arm: str, buyer: str = "b") -> dict:
    return play(scenario, counter(("price", 1e9)), counter(("price", -1)), arm=arm, buyer=buyer,
                config=short(1))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(domain=st.sampled_from(sorted(DOMAINS)), seed=st.integers(5_000_000, 5_000_999),
       draw=st.integers(0, 2**32 - 1))
def test_decomposition_splits_each_deal_exactly(domain, seed, draw):
    sc = make_scenario(DOMAINS[domain], seed)
    ledger = _random_ledger(sc.domain, np.random.default_rng(draw))
    df = decomposition_columns(episodes_frame([_deal(sc, ledger, "a")]))
    row = df.iloc[0]
    assert row["seller_dist"] + row["seller_int"] == row["seller_u"]
    assert row["seller_u"] == pytest.approx(row["seller_utility"], abs=1e-12)
    assert row["buyer_u"] == pytest.approx(row["buyer_utility"], abs=1e-12)
    assert row["welfare"] == row["seller_u"] + row["buyer_u"]
    want_dist, want_int = split_utility(sc.domain, sc.seller, _scored(sc, ledger))
    assert row["seller_dist"] == pytest.approx(want_dist, abs=1e-12)
    assert row["seller_int"] == pytest.approx(want_int, abs=1e-12)


def _scored(sc, ledger: dict) -> dict:
    """The ledger as the environment writes it (continuous values as floats)."""
    return {k: (float(v) if sc.domain.issue(k).kind == "continuous" else v) for k, v in ledger.items()}


def test_decomposition_of_a_no_deal_is_undefined():
    df = decomposition_columns(episodes_frame([_no_deal(car(), "a")]))
    assert df[["seller_dist", "seller_int", "seller_u", "buyer_u", "welfare"]].isna().all(axis=None)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(draw=st.integers(0, 2**32 - 1))
def test_decomposition_deltas_sum_on_scenarios_both_arms_closed(draw):
    rng = np.random.default_rng(draw)
    records = []
    for dom in ("car", "job_offer"):
        for seed in range(5_000_000, 5_000_004):
            sc = make_scenario(DOMAINS[dom], seed)
            for arm in ("base", "rl"):
                closes = rng.random() < 0.85
                rec = _deal(sc, _random_ledger(sc.domain, rng), arm) if closes else _no_deal(sc, arm)
                records.append(rec)
    df = decomposition_columns(episodes_frame(records))
    res = ClusterResampler.from_frame(df, 300, seed=1)
    table = decomposition_table(df, "base", ["rl"], res, refine=False).set_index("metric")
    est = table["estimate"]
    assert est["seller_dist"] + est["seller_int"] == pytest.approx(est["seller_u"], abs=1e-12)
    assert est["seller_u"] + est["buyer_u"] == pytest.approx(est["welfare"], abs=1e-12)
    a, b = (df[df["arm"] == arm].set_index(["domain", "seed"]).sort_index() for arm in ("rl", "base"))
    both = a["deal"].astype(bool) & b["deal"].astype(bool)
    assert (table["n_episodes"] == int(both.sum())).all()
    if both.any():
        want = (a.loc[both, "seller_dist"] - b.loc[both, "seller_dist"]).mean()
        assert est["seller_dist"] == pytest.approx(want, abs=1e-12)
    excl = (table["ci_low"] > 0) | (table["ci_high"] < 0)
    assert list(table["mark"]) == ["e" if x else "" for x in excl]
    assert set(table["arm"]) == {"rl"} and set(table["base_arm"]) == {"base"}


# -- style detectors -----------------------------------------------------------------------------

def _talk(prose: str, *terms: tuple[str, Any]) -> str:
    return counter(*(terms or (("price", 45),)), prose=prose)


def test_openers_and_repeated_opener_rate_within_episodes():
    sc = car()
    ep1 = play(sc, _talk("Thanks for coming. The car is ready."), _talk("Hmm."),
               _talk("Thanks for coming back to me."), _talk("Hmm."),
               _talk("I appreciate the offer, truly."), _talk("Hmm."),
               _talk("thanks, for coming!"), _talk("Hmm."), config=short(4))
    ep2 = play(car(5_000_001), _talk("Thanks for coming today."), _talk("Hmm."), config=short(1))
    turns = seller_turns_frame([ep1, ep2])
    thanks = "thanks for coming"
    assert list(turns["opener"]) == [thanks, thanks, "i appreciate the", thanks, thanks]
    assert list(turns["repeated_opener"]) == [False, True, False, True, False]  # never across episodes
    table = style_table([ep1, ep2]).iloc[0]
    assert table["top_opener"] == "thanks for coming" and table["top_opener_share"] == pytest.approx(4 / 5)
    assert table["top3_share"] == 1.0
    assert table["repeated_opener_rate"] == pytest.approx(2 / 5)
    assert table["i_appreciate_rate"] == pytest.approx(1 / 5)
    assert opener("I'm glad we're here") == "i'm glad we're" and opener("  ") == ""


@pytest.mark.parametrize("text, want", [
    ("I appreciate your flexibility.", True), ('"I appreciate that," I said.', True),
    ("**I appreciate** the move.", True), ("i appreciate it", True),
    ("I really appreciate the offer.", False), ("We appreciate it.", False),
    ("Thanks, I appreciate it.", False),
])
def test_i_appreciate_is_the_literal_opening(text, want):
    assert starts_with_i_appreciate(text) is want


@pytest.mark.parametrize("text, want", [
    ("Here is my offer [", True), ("The terms are as listed: []", True),
    ('I propose "action": "COUNTER"', True),
    ('with {"name": "price"', True), ('Terms below "terms"', True), ("see the list ]", True),
    ("Sounds good }", True), ('{"price": 40} is fine', True),
    ("A fair price for both of us.", False), ("I can do 40 (in $k) with annual service.", False),
    ("specializing in [mention your specialty]", False),
    ("We agree on the terms and the action plan.", False),
])
def test_json_leak_detector(text, want):
    assert has_json_leak(text) is want


@pytest.mark.parametrize("text, n", [
    ("specializing in [mention your specialty]", 1), ("Best, [Your Name]", 1), ("from [COMPANY NAME]", 1),
    ("at <insert price> per unit", 1), ("Dear {name}, hello {{buyer_name}}", 2), ("[Insert date] works", 1),
    ("A plain sentence with a price of 40.", 0), ("the price (in $k) is 40", 0), ("[sic] as written", 0),
    ('{"action": "ACCEPT"}', 0), ("an empty {} or []", 0), ("a 2-year [optional] warranty", 0),
])
def test_placeholder_detector(text, n):
    assert len(find_placeholders(text)) == n


@pytest.mark.parametrize("text", [
    "I'm interested in buying your car.", "Hi! I’m very interested in purchasing the sedan.",
    "I'd like to purchase the wagon if the price is right.", "My budget is tight this month.",
    "We are looking to acquire the company quickly.", "I can only afford 35k.",
    "I'm willing to pay 40 for it.", "Could you lower the price a little?", "I am the buyer here.",
    "I'm in the market for a reliable car.", "Our total budget is 2M.", "We want to buy the whole stake.",
])
def test_buyer_voice_positives(text):
    assert is_buyer_voice(text)


@pytest.mark.parametrize("text", [
    "Thanks for your interest in buying the car.", "I'd like to sell you a great car.",
    "What is your budget?", "I'm interested in hearing what matters to you.",
    "If you're looking to buy, this is the one.", "I'd like to buy some time to think.",
    "I can pay for the delivery myself.", "Great to meet you; the car has a full service history.",
    "I'm happy to include the accessories.", "You can afford this easily.",
])
def test_buyer_voice_negatives(text):
    assert not is_buyer_voice(text)


def test_buyer_voice_opening_is_per_episode_on_the_first_seller_turn():
    sc = car()
    voiced = play(sc, _talk("I'm interested in buying a nice car."), accept())
    later = play(car(5_000_001), _talk("Good to meet you."), _talk("Hmm."), _talk("My budget is limited."),
                 accept())
    ep = style_episodes_frame([voiced, later]).set_index("seed")
    assert ep.loc[5_000_053, "buyer_voice_opening"] and not ep.loc[5_000_001, "buyer_voice_opening"]
    assert list(ep["n_buyer_voice_turns"]) == [1, 1]


def test_leakage_and_placeholders_counted_over_seller_turns():
    sc = car()
    leak = 'Here you go [\n' + json.dumps({"action": "COUNTER", "terms": [{"name": "price", "value": 44}]})
    rec = play(sc, leak, _talk("Hmm."), _talk("I run [mention your specialty] for {name}."), _talk("Ok."),
               config=short(2))
    turns = seller_turns_frame([rec])
    assert list(turns["json_leak"]) == [True, False] and list(turns["n_placeholders"]) == [0, 2]
    assert turns["json_fragments"].iloc[0] == "unbalanced_bracket"
    row = style_table([rec]).iloc[0]
    assert row["json_leak_rate"] == 0.5 and row["placeholder_turn_rate"] == 0.5 and row["n_placeholders"] == 2


# -- closing turns and late closes ---------------------------------------------------------------

def test_closing_turn_names_the_traded_concession():
    sc = car()
    open_ = counter(("price", 45), ("service", "none"))
    offer = counter(("price", 40), ("service", "annual"), prose="I can do 40 with an annual plan.")
    recs = [
        play(sc, open_, offer, accept(prose="Alright, $40,000 works for me."), arm="value_k"),
        play(sc, open_, offer, accept(prose="Deal, thanks."), arm="silent"),
        play(sc, open_, counter(("price", 45), ("service", "none")), accept(prose="40 it is"), arm="nothing"),
        play(sc, open_, accept(), arm="buyer_closed"),
        play(sc, open_, counter(("warranty_months", 6)), accept(prose="OK on the warranty."), arm="name"),
        play(sc, open_, counter(("interior", "Premium")), accept(prose="Premium it is."), arm="level"),
        play(sc, open_, counter(("accessories", True)), accept(prose="Fine."), arm="binary_silent"),
    ]
    f = concession_frame(recs).set_index("arm")
    assert "buyer_closed" not in f.index and len(f) == 6
    assert f.loc["value_k", "names_concession"] is True
    assert f.loc["value_k", "changed_terms"] == "price,service"
    assert f.loc["silent", "names_concession"] is False
    assert f.loc["nothing", "names_concession"] is None and f.loc["nothing", "changed_terms"] == ""
    assert f.loc["name", "names_concession"] is True and f.loc["level", "names_concession"] is True
    assert f.loc["binary_silent", "names_concession"] is False
    ep = style_episodes_frame(recs).set_index("arm")
    assert np.isnan(ep.loc["nothing", "names_concession"])
    assert np.isnan(ep.loc["buyer_closed", "names_concession"])
    assert metric_value(ep, DIAGNOSTIC_METRICS["concession_naming_rate"]) == pytest.approx(3 / 5)


def test_late_close_at_or_after_turn_16():
    sc = car()
    haggle = [counter(("price", 45 - i * 0.1)) for i in range(15)]
    at_16 = play(sc, *haggle, accept(), arm="a")
    at_15 = play(sc, *haggle[:14], accept(), arm="a", buyer="c")
    none = _no_deal(sc, "a", buyer="d")
    assert (late_close(at_16), late_close(at_15)) == (1.0, 0.0) and np.isnan(late_close(none))
    assert style_table([at_16, at_15, none]).iloc[0]["late_close_share"] == 0.5


# -- one frame for the stats layer, guards, transcripts ------------------------------------------

def test_episode_diagnostics_feeds_every_diagnostic_metric():
    sc = car()
    recs = [play(sc, _talk("I'm interested in buying."), accept(), arm=a) for a in ("x", "y")]
    recs.append(_no_deal(car(5_000_001), "x"))
    df = episode_diagnostics(recs)
    assert len(df) == 3 and df[["arm", "domain", "seed", "buyer"]].duplicated().sum() == 0
    for name, m in DIAGNOSTIC_METRICS.items():
        v = metric_value(df[df["arm"] == "x"], m)
        assert v == v or name in ("concession_naming_rate",), name
    assert metric_value(df[df["arm"] == "x"], DIAGNOSTIC_METRICS["buyer_voice_opening"]) == 0.5
    assert metric_value(df[df["arm"] == "y"], DIAGNOSTIC_METRICS["buyer_voice_opening"]) == 1.0


def _guard_frame(base: dict, arm: dict, n: int = 40) -> pd.DataFrame:
    rows = []
    for name, spec in (("base", base), ("arm", arm)):
        for i in range(n):
            deal = i < spec["deals"]
            rows.append({"arm": name, "domain": "car", "seed": 5_000_000 + i % 8, "buyer": f"b{i // 8}",
                         "deal": deal, "seller_utility": spec["u"] if deal else np.nan,
                         "turns": spec["turns"], "seller_turns": 10,
                         "seller_bad_parses": spec["bad"] * (i % 2),
                         "seller_invalid_accepts": spec.get("inv", 0) * (i % 2),
                         "score": spec["u"] if deal else -0.3})
    return pd.DataFrame(rows)


def test_guards_pass_and_fail_on_known_tables():
    base = {"deals": 38, "u": 0.5, "turns": 12, "bad": 0}
    good = _guard_frame(base, {"deals": 37, "u": 0.6, "turns": 11, "bad": 0})
    g = guards_table(good, "base", "arm").set_index("guard")
    assert list(g["passed"]) == [True, True, True, True, None]
    assert g.loc["deal rate holds while U~ rises", "delta"] == pytest.approx(-1 / 40)
    bad = _guard_frame(base, {"deals": 30, "u": 0.7, "turns": 24, "bad": 1, "inv": 1})
    res = ClusterResampler.from_frame(bad, 200, seed=0)
    b = guards_table(bad, "base", "arm", res).set_index("guard")
    assert list(b["passed"].iloc[:4]) == [False, False, False, False]
    assert b.loc["flat parse-failure rate", "delta"] == pytest.approx(0.05)
    assert b.loc["accepts only offers (ours)", "delta"] == pytest.approx(0.05)
    assert b["ci_low"].iloc[:4].notna().all() and pd.isna(b["ci_low"].iloc[4])
    assert (b["ci_low"].iloc[:4] <= b["ci_high"].iloc[:4]).all() and g["ci_low"].isna().all()  # none without
    assert g.loc["mean turns below the cap", "limit"] == 24 and b.loc["mean turns below the cap", "share_at_cap"] == 1


def test_sample_transcripts_is_seeded_and_readable():
    recs = [play(car(s), _talk(f"Offer number {s}."), accept(), arm="a") for s in range(5_000_000, 5_000_006)]
    recs.append(play(car(), _talk("Other arm."), accept(), arm="other"))
    one = sample_transcripts(recs, "a", 3, seed=7)
    two = sample_transcripts(list(reversed(recs)), "a", 3, seed=7)
    assert len(one) == 3 and list(one["seed"]) == list(two["seed"]) and set(one["arm"]) == {"a"}
    text = one["transcript"].iloc[0]
    assert text.startswith("[a vs b | car seed") and "T 1 seller:" in text and "-> COUNTER price=45" in text
    assert "T 2 buyer :" in text and "-> ACCEPT" in text and "final ledger" in text
    assert len(sample_transcripts(recs, "a", 50, seed=0)) == 6 and sample_transcripts(recs, "zzz", 2, 0).empty


def test_protocol_hash_of_stamped_records_reaches_every_table():
    h = "f" * 64
    recs = []
    for seed in range(5_000_000, 5_000_003):
        for arm in ("base", "rl"):
            rec = play(car(seed), _talk("Good to meet you."), accept(), arm=arm)
            rec["protocol_hash"] = h
            recs.append(rec)
    df = episode_diagnostics(recs)
    assert df.attrs["protocol_hash"] == h and (df["protocol_hash"] == h).all()
    res = ClusterResampler.from_frame(df, 100, seed=0)
    assert (decomposition_table(df, "base", ["rl"], res, refine=False)["protocol_hash"] == h).all()
    assert (guards_table(df, "base", "rl")["protocol_hash"] == h).all()


# -- training curves: per-step spread of a run's episodes, rolling means ---------------------------

def _train_rec(step: int, *texts: str, seed: int = 5_000_053, rank: int = 0, status: str | None = None) -> dict:
    """A training transcript record (as :meth:`negolib.training.rollout.Trajectory.record` writes one)."""
    ep = Episode(car(seed), short(1))
    for t in texts:
        ep.step(t)
    rec = ep.record(arm=f"run|step{step}|r{rank}", seller="policy", buyer="b")
    excluded = status == "error"
    if status is not None:
        rec["status"] = status
    out = rec["outcome"]
    reward = None if excluded else (out["reward"] if out and status is None else -ep.config.no_deal_penalty)
    rec["training"] = {"reward": reward, "excluded": excluded}
    rec["step"] = step
    return rec


def test_training_step_spread_per_step_quartiles_without_error_trajectories():
    from negolib.study.diagnostics import SPREAD_COLS, training_step_spread

    deals = [_train_rec(1, counter(("price", p)), accept(), rank=k) for k, p in enumerate((40, 45, 50, 55))]
    bad = _train_rec(1, "no action here", "Please offer.", rank=4)  # a bad parse: no deal
    cut = _train_rec(2, counter(("price", 45)), rank=0, status="truncated")  # a driver cut: the floor
    err = _train_rec(2, counter(("price", 50)), accept(), rank=1, status="error")  # left out
    later = _train_rec(2, counter(("price", 50)), accept(), rank=2)
    df = training_step_spread([later, err, cut, bad, *deals])
    assert list(df.columns) == SPREAD_COLS
    assert list(zip(df["step"], df["metric"])) == [(1, "reward"), (1, "score"), (1, "bad_parse_rate"),
                                                   (2, "reward"), (2, "score"), (2, "bad_parse_rate")]
    one = df[df["step"] == 1].set_index("metric")
    rewards = [r["training"]["reward"] for r in [*deals, bad]]
    assert one.loc["reward", "n"] == 5 and one.loc["reward", "mean"] == pytest.approx(np.mean(rewards))
    assert one.loc["reward", "min"] == pytest.approx(min(rewards)) and one.loc["reward", "max"] == max(rewards)
    assert one.loc["reward", "q25"] == pytest.approx(np.quantile(rewards, 0.25))
    assert one.loc["reward", "median"] == pytest.approx(np.median(rewards))
    scores = [r["outcome"]["score"] for r in [*deals, bad]]
    assert one.loc["score", "q75"] == pytest.approx(np.quantile(scores, 0.75))
    assert one.loc["bad_parse_rate", "mean"] == pytest.approx(1 / 5) and one.loc["bad_parse_rate", "max"] == 1.0
    two = df[df["step"] == 2].set_index("metric")
    penalty = EnvConfig().no_deal_penalty
    assert two.loc["reward", "n"] == 2  # the error trajectory is not in the spread
    assert two.loc["score", "min"] == pytest.approx(-penalty)  # the cut episode scores the floor
    assert two.loc["score", "max"] == pytest.approx(later["outcome"]["score"])
    assert training_step_spread([err]).empty and list(training_step_spread([]).columns) == SPREAD_COLS
    with pytest.raises(ValueError, match="no 'step'"):
        training_step_spread([play(car(), counter(("price", 45)), accept())])


def test_rolling_step_means_start_after_a_full_window():
    from negolib.study.diagnostics import rolling_step_means

    log = pd.DataFrame({"step": [3, 1, 2, 4], "reward": [0.3, 0.1, 0.2, 0.4], "kl": [0.0, 0.0, None, 0.6],
                        "loss": [1.0, 1.0, 1.0, 1.0]})
    df = rolling_step_means(log, window=2)
    assert set(df["metric"]) == {"reward", "kl"}  # only the curve metrics present in the log
    r = df[df["metric"] == "reward"]
    assert list(r["step"]) == [1, 2, 3, 4]
    assert np.isnan(r["rolling"].iloc[0]) and list(r["rolling"].iloc[1:].round(6)) == [0.15, 0.25, 0.35]
    k = df[df["metric"] == "kl"]  # a missing value is skipped, not averaged in as 0
    assert list(k["step"]) == [1, 3, 4] and list(k["rolling"].iloc[1:].round(6)) == [0.0, 0.3]
    assert rolling_step_means(log.head(2), window=3)["rolling"].isna().all()  # too few steps: no line
    assert rolling_step_means(pd.DataFrame(), window=3).empty
    with pytest.raises(ValueError):
        rolling_step_means(log, window=0)


def test_hand_read_sample_is_five_per_arm_per_domain_family():
    """The hand-read guard reads five transcripts per trained arm per domain family (App. E): five from the
    training domains and five from the held-out domain, seeded, never another arm's."""
    from negolib.study.diagnostics import HAND_READ_PER_FAMILY, domain_family, hand_read_sample

    assert HAND_READ_PER_FAMILY == 5
    train = next(n for n, d in DOMAINS.items() if not d.held_out and "price" in {i.name for i in d.issues})
    assert domain_family("car") == "held-out" and domain_family(train) == "training"
    recs = [play(make_scenario(DOMAINS[d], s), _talk(f"Offer {s}."), accept(), arm="a")
            for d in ("car", train) for s in range(5_000_000, 5_000_008)]
    recs.append(play(car(), _talk("Other arm."), accept(), arm="other"))
    sample = hand_read_sample(recs, "a", seed=3)
    assert list(sample["family"]) == ["training"] * 5 + ["held-out"] * 5
    assert set(sample.loc[sample["family"] == "held-out", "domain"]) == {"car"} and set(sample["arm"]) == {"a"}
    assert sample.equals(hand_read_sample(list(reversed(recs)), "a", seed=3))
    assert len(hand_read_sample(recs, "a", seed=3, per_family=20)) == 16 and hand_read_sample(recs, "zzz", 0).empty
