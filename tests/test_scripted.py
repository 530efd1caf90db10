"""Scripted agents: protocol-compliant, seeded, deterministic, never below reservation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from negolib.games.multi_issue.env import Episode
from negolib.games.multi_issue.protocol import parse_action
from negolib.games.multi_issue.rollout import make_specs, run_episodes
from negolib.games.multi_issue.scenarios import eval_seeds, scenario_set
from negolib.games.multi_issue.scripted import (
    STRATEGIES,
    FixedOfferAgent,
    HardHeadedAgent,
    TimeDependentAgent,
    concession_bid,
    make_scripted,
)
from negolib.games.multi_issue.utility import best_contract, normalized_utility

SCENARIOS = scenario_set(eval_seeds(6))


def _worst_for_seller(scenario, **override):
    """A buyer COUNTER naming every term at the seller's worst level (overridable)."""
    terms = []
    for k, i in enumerate(scenario.domain.issues):
        if i.kind == "continuous":
            v = i.lo if scenario.seller.signs[k] > 0 else i.hi
        else:
            v = next(lv for lv in i.levels if lv != scenario.seller.preferred[k])
        terms.append({"name": i.name, "value": override.get(i.name, v)})
    return "No. " + json.dumps({"action": "COUNTER", "terms": terms})


def _agents(seed=0):
    return {n: make_scripted(n, seed=seed) for n in STRATEGIES}


@pytest.mark.parametrize("target", [1.0, 0.9, 0.63, 0.41, 0.2, 0.0])
def test_concession_bid_reaches_target_exactly_or_just_above(car_scenario, target):
    d, p = car_scenario.domain, car_scenario.seller
    bid = concession_bid(d, p, target)
    u = normalized_utility(d, p, bid)
    assert set(bid) == set(d.issue_names)
    assert u >= target - 1e-9
    # continuous concessions are fractional, so the bid overshoots only when no continuous slack remains
    assert u - target < max(p.weights) + 1e-9


def test_concession_bid_at_one_is_best_contract(car_scenario):
    d, p = car_scenario.domain, car_scenario.seller
    assert concession_bid(d, p, 1.0) == best_contract(d, p)


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_every_turn_parses_and_agents_are_deterministic(strategy):
    agents = _agents()
    specs = make_specs(strategy, strategy, ["conceder", "hardheaded"], SCENARIOS[:20])
    a = run_episodes(specs, agents, progress=False).records
    b = run_episodes(specs, _agents(), progress=False).records
    assert a == b
    for rec in a:
        assert all(t["parse_error"] is None for t in rec["turns"])
        assert all(not t["invalid_terms"] and not t["off_schema_terms"] for t in rec["turns"])


def test_seed_changes_prose_not_strategy():
    spec = make_specs("x", "boulware", ["conceder"], SCENARIOS[:1])
    a = run_episodes(spec, _agents(0), progress=False).records[0]
    b = run_episodes(spec, _agents(1), progress=False).records[0]
    assert a["outcome"] == b["outcome"]
    assert [t["prose"] for t in a["turns"]] != [t["prose"] for t in b["turns"]]


def test_no_agent_accepts_below_its_reservation():
    agents = _agents()
    for seller in STRATEGIES:
        recs = run_episodes(make_specs(seller, seller, ["conceder", "tit_for_tat"], SCENARIOS),
                            agents, progress=False).records
        for rec in recs:
            o = rec["outcome"]
            if not o["deal"]:
                continue
            sc = next(s for s in SCENARIOS if s.key == (rec["domain"], rec["seed"]))
            closer = o["closed_by"]
            u = o["seller_utility"] if closer == "seller" else o["buyer_utility"]
            assert u >= sc.prefs(closer).reservation - 1e-9


def test_fixed_offer_names_the_same_contract_every_turn(car_scenario):
    agent = FixedOfferAgent(offer_utility=0.8)
    ep = Episode(car_scenario)
    bids = []
    for _ in range(3):
        text = agent.act(ep.view()).text
        bids.append(parse_action(text).action.terms)
        ep.step(text)
        ep.step(_worst_for_seller(car_scenario))
    assert bids[0] == bids[1] == bids[2]
    assert normalized_utility(car_scenario.domain, car_scenario.seller, dict(
        (t.name, t.value) for t in bids[0])) >= 0.8
    with pytest.raises(ValueError):
        FixedOfferAgent(offer_utility=1.5)


def test_time_dependent_families_order_their_concession():
    boul, lin, conc = (TimeDependentAgent("x", e=e) for e in (0.2, 1.0, 2.0))
    hard = TimeDependentAgent("h", e=0.0)
    for t in (0.25, 0.5, 0.75):
        assert boul.concession(t) < lin.concession(t) < conc.concession(t)
        assert hard.concession(t) == 0
    assert lin.concession(0.0) == 0 and lin.concession(1.0) == 1


def test_boulware_gets_more_than_conceder_against_the_same_buyers():
    agents = _agents()
    out = {}
    for seller in ("boulware", "conceder"):
        recs = run_episodes(make_specs(seller, seller, ["hardheaded", "linear"], SCENARIOS), agents,
                            progress=False).records
        out[seller] = np.mean([r["outcome"]["seller_utility"] for r in recs if r["outcome"]["deal"]])
    assert out["boulware"] > out["conceder"]


def test_hardheaded_opponent_model_learns_preferred_levels(car_scenario):
    agent = HardHeadedAgent()
    ep = Episode(car_scenario)
    ep.step(agent.act(ep.view()).text)
    buyer_pref = dict(zip(car_scenario.domain.issue_names, car_scenario.buyer.preferred))
    text = _worst_for_seller(car_scenario, model=buyer_pref["model"])
    ep.step(text)
    ep.step(agent.act(ep.view()).text)
    ep.step(text)
    _, preferred = agent.opponent_model(ep.view())
    assert preferred[car_scenario.domain.index("model")] == buyer_pref["model"]


def test_unknown_strategy_is_a_clear_error():
    with pytest.raises(ValueError, match="choose from"):
        make_scripted("genius")


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_a_bad_parse_turn_makes_no_offer_to_accept(strategy):
    """After a seller turn that does not parse, the ledger still holds the buyer's own offer: the
    buyer must counter again, not accept its own terms (a model that never parses gets no deal)."""
    for scenario in SCENARIOS[:6]:
        buyer = make_scripted(strategy, seed=0)
        ep = Episode(scenario)
        while not ep.done:
            if ep.to_move == "seller":
                ep.step("I think we are close, don't you?")  # no JSON: the seller never makes an offer
            else:
                reply = buyer.act(ep.view()).text
                assert parse_action(reply).action.kind == "COUNTER"
                ep.step(reply)
        assert ep.done and not ep.outcome.deal
        assert ep.view("buyer").history[0].offered is False


# -- declared strategy parameters (issue 13 §4): one validator for the loader and the constructors --

def test_every_strategy_declares_its_parameters():
    import inspect

    from negolib.games.multi_issue.scripted import PARAM_SPECS, STRATEGY_CLASSES

    assert set(STRATEGY_CLASSES) == set(STRATEGIES)
    for strategy, cls in STRATEGY_CLASSES.items():
        assert isinstance(make_scripted(strategy), cls)
    for cls, spec in PARAM_SPECS.items():  # the spec names exactly what the constructor takes
        taken = set(inspect.signature(cls.__init__).parameters) - {"self", "name", "seed"}
        assert set(spec) == taken, cls


@pytest.mark.parametrize("strategy, params, words", [
    ("boulware", {"tau": 1.0}, "tau is not a parameter"),
    ("fixed_offer", {"e": 0.5}, "e is not a parameter"),
    ("tit_for_tat", {"min_concession": -0.1}, "min_concession must be a number in [0, 1]"),
    ("tit_for_tat", {"min_concession": "0.1"}, "min_concession must be a number"),
    ("linear", {"e": float("inf")}, "e must be a number >= 0"),
    ("conceder", {"k": 1.5}, "k must be a number in [0, 1]"),
    ("linear", {"p_min": 0.7, "p_max": 0.6}, "p_min must be <= p_max"),
    ("hardheaded", {"window": 2}, "window must be a number in [0, 1]"),
    ("hardheaded", {"k": 0.1}, "k is not a parameter"),
    ("fixed_offer", {"offer_utility": True}, "offer_utility must be a number"),
    ("boulware", {"max_terms": 2.5}, "max_terms must be an integer >= 1"),
])
def test_make_scripted_rejects_params_the_strategy_does_not_take(strategy, params, words):
    from negolib.games.multi_issue.scripted import strategy_param_problems

    assert strategy_param_problems(strategy, params)
    with pytest.raises(ValueError) as e:
        make_scripted(strategy, **params)
    assert words in str(e.value) and not isinstance(e.value, TypeError)


def test_constructors_use_the_declared_ranges():
    from negolib.games.multi_issue.scripted import TitForTatAgent

    with pytest.raises(ValueError, match=r"TitForTatAgent: min_concession must be a number in \[0, 1\]"):
        TitForTatAgent("t", min_concession=-1.0)
    with pytest.raises(ValueError, match="HardHeadedAgent: window"):
        HardHeadedAgent("h", window=-0.5)
    with pytest.raises(ValueError, match="p_min must be <= p_max"):
        TimeDependentAgent("t", p_min=0.9, p_max=0.2)
    agent = make_scripted("hardheaded", e=0.3, p_min=0.2, window=0.1, max_terms=2)
    assert (agent.e, agent.p_min, agent.window, agent.max_terms) == (0.3, 0.2, 0.1, 2)
