"""Bilateral price bargaining: the scripted strategies (both roles, reservation never crossed, deals on wide
zones, the families' shapes, determinism)."""

from __future__ import annotations

import itertools
import json

import pytest

from negolib.games.bilateral.env import BilateralConfig, Episode
from negolib.games.bilateral.play import play_episodes, reply_turn
from negolib.games.bilateral.scenarios import TIERS, BilateralScenario, evaluation_set
from negolib.games.bilateral.scripted import (
    STRATEGIES,
    FixedPriceAgent,
    TimeDependentAgent,
    TitForTatAgent,
    make_scripted,
)

NAMES = sorted(STRATEGIES)
PAIRS = list(itertools.product(NAMES, NAMES))


@pytest.fixture(scope="module")
def drawn():
    return evaluation_set(12)  # 60 scenarios, empty zones among them


def offers(record: dict, role: str) -> list[float]:
    return [t["action"]["arguments"]["price"] for t in record["turns"]
            if t["role"] == role and t["action"] and t["action"]["name"] == "make_offer"]


def test_the_five_families_exist():
    assert NAMES == ["boulware", "conceder", "fixed_price", "linear", "tit_for_tat"]


@pytest.mark.parametrize("seller, buyer", PAIRS)
def test_never_past_the_reservation(seller, buyer, drawn):
    records = play_episodes(make_scripted(seller, "seller", 1), make_scripted(buyer, "buyer", 2), drawn)
    for rec in records:
        assert rec["status"] in ("deal", "no_deal")
        assert all(p >= rec["cost"] for p in offers(rec, "seller")), (seller, rec["scenario_key"])
        assert all(p <= rec["value"] for p in offers(rec, "buyer")), (buyer, rec["scenario_key"])
        out = rec["outcome"]
        assert out["seller_bad_parses"] == out["buyer_bad_parses"] == 0 and out["walked_away_by"] is None
        if out["deal"]:
            assert rec["cost"] <= out["price"] <= rec["value"]
        else:
            assert out["end"] == "deadline"
    assert not any(r["outcome"]["deal"] for r in records if r["value"] <= r["cost"])


@pytest.mark.parametrize("seller, buyer", PAIRS)
def test_deals_close_when_the_zone_is_wide(seller, buyer):
    wide = [BilateralScenario(t, 1, cost=0.6 * s, value=1.9 * s) for t, s in TIERS.items()]
    for first in ("seller", "buyer"):
        records = play_episodes(make_scripted(seller, "seller", 0), make_scripted(buyer, "buyer", 0), wide,
                                BilateralConfig(first_mover=first))
        assert all(r["outcome"]["deal"] for r in records), (seller, buyer, first)


def test_concession_pairs_trade_exactly_when_the_zone_is_non_empty(drawn):
    for name in ("boulware", "linear", "conceder"):
        records = play_episodes(make_scripted(name, "seller", 0), make_scripted("linear", "buyer", 0), drawn)
        assert [r["outcome"]["deal"] for r in records] == [r["value"] > r["cost"] for r in records]


def test_time_dependent_families_concede_in_order():
    sc = BilateralScenario("1k", 1, cost=800.0, value=1000.0)  # narrow: nobody accepts before the end
    prices = {}
    for name in ("boulware", "linear", "conceder"):
        rec = play_episodes(make_scripted(name, "seller", 0), FixedPriceAgent("hard", margin=1.0), [sc])[0]
        prices[name] = offers(rec, "seller")
        assert prices[name][0] == 1600.0 and prices[name][-1] == 800.0  # aspiration 2x cost down to the cost
        assert prices[name] == sorted(prices[name], reverse=True)  # monotone concession
    for k in range(1, 4):
        assert prices["boulware"][k] > prices["linear"][k] > prices["conceder"][k]
    assert prices["linear"][2] == pytest.approx(1200.0)  # half way at half time


def test_fixed_price_names_one_price_and_accepts_only_that_good():
    sc = BilateralScenario("100", 1, cost=80.0, value=130.0)
    rec = play_episodes(FixedPriceAgent(margin=0.25), make_scripted("linear", "buyer", 0), [sc])[0]
    assert set(offers(rec, "seller")) == {100.0}
    assert rec["outcome"]["deal"] and rec["outcome"]["price"] == 100.0  # the linear buyer comes up to it
    buyer = play_episodes(make_scripted("boulware", "seller", 0), FixedPriceAgent(margin=0.25), [sc])[0]
    assert set(offers(buyer, "buyer")) == {104.0}  # 130 / 1.25


def test_tit_for_tat_mirrors_the_counterparts_concession():
    sc = BilateralScenario("1k", 1, cost=500.0, value=2000.0)
    ep = Episode(sc, BilateralConfig(first_mover="buyer"))
    tft = TitForTatAgent(min_concession=0.01)

    def buyer_offers(price):
        ep.step(json.dumps({"name": "make_offer", "arguments": {"price": price}}))

    buyer_offers(300)
    first = tft.decide(ep.view())
    assert first.price == 1000.0  # opens at its aspiration, 2x cost
    ep.step(reply_turn(tft.reply(ep.view())))
    buyer_offers(420)  # the buyer conceded 120
    assert tft.decide(ep.view()).price == pytest.approx(880.0)
    ep.step(reply_turn(tft.reply(ep.view())))
    buyer_offers(421)  # a 1-dollar concession: the 1% floor of the 500 range (5) applies
    assert tft.decide(ep.view()).price == pytest.approx(875.0)


def test_buyer_role_mirrors_the_seller_role():
    sc = BilateralScenario("10k", 3, cost=8_000.0, value=16_000.0)
    rec = play_episodes(FixedPriceAgent(margin=10.0), make_scripted("linear", "buyer", 0), [sc])[0]
    bids = offers(rec, "buyer")
    assert bids[0] == 8_000.0 and bids[-1] == 16_000.0 and bids == sorted(bids)  # value/2 up to the value
    assert not rec["outcome"]["deal"]  # the seller asks 88k, above the buyer's value


def test_scripted_agents_are_deterministic_and_surfaces_agree(drawn):
    a = play_episodes(make_scripted("linear", "seller", 5), make_scripted("tit_for_tat", "buyer", 6), drawn)
    b = play_episodes(make_scripted("linear", "seller", 5), make_scripted("tit_for_tat", "buyer", 6), drawn)
    assert a == b
    text = play_episodes(make_scripted("linear", "seller", 5, surface="text"),
                         make_scripted("tit_for_tat", "buyer", 6, surface="text"), drawn)
    assert [r["outcome"] for r in text] == [r["outcome"] for r in a]
    assert "<tool_call>" in text[0]["turns"][0]["raw"] and text[0]["turns"][0]["raw_tool_calls"] is None
    assert a[0]["turns"][0]["raw_tool_calls"][0]["name"] == "make_offer"
    assert all("<tool_call>" not in t["message"] and "{" not in t["message"] for r in text for t in r["turns"])
    other_seed = play_episodes(make_scripted("linear", "seller", 99), make_scripted("tit_for_tat", "buyer", 6), drawn)
    assert [r["outcome"] for r in other_seed] == [r["outcome"] for r in a]  # the seed varies the prose only
    assert [t["message"] for r in other_seed for t in r["turns"]] != [t["message"] for r in a for t in r["turns"]]


def test_make_scripted_checks_its_arguments():
    agent = make_scripted("boulware", "buyer", 3)
    assert isinstance(agent, TimeDependentAgent) and agent.name == "boulware@buyer" and agent.e == 0.2
    assert agent.settings()["strategy"] == "TimeDependentAgent"
    with pytest.raises(KeyError):
        make_scripted("hardliner", "seller")
    for bad in (lambda: make_scripted("linear", "broker"), lambda: make_scripted("linear", "seller", surface="xml"),
                lambda: make_scripted("fixed_price", "seller", margin=-1),
                lambda: make_scripted("linear", "seller", e=0), lambda: make_scripted("tit_for_tat", "seller",
                                                                                       min_concession=2)):
        with pytest.raises(ValueError):
            bad()


def test_mirroring_a_large_concession_stops_at_the_reservation():
    def step_offer(ep, price):
        ep.step(json.dumps({"name": "make_offer", "arguments": {"price": price}}))

    seller = TitForTatAgent(min_concession=0.01)
    ep = Episode(BilateralScenario("1k", 1, cost=500.0, value=2000.0), BilateralConfig(first_mover="buyer"))
    for buyer_price in (1.0, 499.0):
        step_offer(ep, buyer_price)
        ep.step(reply_turn(seller.reply(ep.view())))
    step_offer(ep, 499.99)  # conceded 0.99: the 5-dollar floor takes the seller's 502 to 497, under its cost
    assert seller.price(ep.view()) == pytest.approx(497.0)
    assert seller.decide(ep.view()).price == 500.0  # clamped at the cost, and 499.99 is not accepted

    buyer = TitForTatAgent(min_concession=0.01)
    ep = Episode(BilateralScenario("1k", 1, cost=100.0, value=1000.0))
    step_offer(ep, 5000.0)
    ep.step(reply_turn(buyer.reply(ep.view())))  # opens at 500
    step_offer(ep, 1001.0)  # the seller conceded 3999: mirrored, the buyer would bid 4499
    assert buyer.price(ep.view()) == pytest.approx(4499.0)
    assert buyer.decide(ep.view()).price == 1000.0  # clamped at the value; 1001 is above it, so no accept


@pytest.mark.parametrize("name", NAMES)
def test_last_turn_accepts_only_within_the_reservation(name):
    cfg = BilateralConfig(deadline_turns=2, first_mover="buyer")  # one turn each: the seller's is its last
    # 600 is under the fixed price (625 = 1.25 x cost) but above the cost: the others accept it at the end
    for standing, accepted in ((499.99, False), (600.0, name != "fixed_price"), (650.0, True)):
        ep = Episode(BilateralScenario("1k", 1, cost=500.0, value=700.0), cfg)
        ep.step(json.dumps({"name": "make_offer", "arguments": {"price": standing}}))
        assert ep.view().own_turns_left == 1
        action = make_scripted(name, "seller", 0).decide(ep.view())
        assert (action.tool == "accept_offer") == accepted, (name, standing)
        if not accepted:
            assert action.price >= 500.0
