"""Bilateral price bargaining: scenarios (tiers, seeds, empty zones) and the episode's rules."""

from __future__ import annotations

import json

import pytest

from negolib.games.bilateral.env import INVALID_ACCEPT_ERROR, BilateralConfig, Episode
from negolib.games.bilateral.protocol import StructuredTurn, ToolCall
from negolib.games.bilateral.scenarios import (
    COST_RANGE,
    EVAL_SEED_START,
    TIERS,
    TRAIN_SEED_BLOCK,
    VALUE_RANGE,
    BilateralScenario,
    eval_seeds,
    evaluation_set,
    make_scenario,
    parse_key,
    train_seeds,
    validation_seeds,
)


def offer(price, prose: str = "Here is my offer.") -> str:
    return prose + " " + json.dumps({"name": "make_offer", "arguments": {"price": price}})


ACCEPT = 'Deal. {"name": "accept_offer", "arguments": {}}'
WALK = 'Goodbye. {"name": "walk_away", "arguments": {}}'
SC = BilateralScenario("1k", 7, cost=800.0, value=1200.0)

# -- scenarios --------------------------------------------------------------------------------------


def test_scenarios_are_deterministic_per_tier_and_seed():
    for tier in TIERS:
        assert make_scenario(tier, 5_000_003) == make_scenario(tier, 5_000_003)
    draws = {(make_scenario("1k", s).cost, make_scenario("1k", s).value) for s in range(50)}
    assert len(draws) == 50  # seeds differ
    assert make_scenario("10", 3) != make_scenario("100", 3)


def test_draws_scale_with_the_tier_and_stay_in_range():
    for tier, scale in TIERS.items():
        for sc in [make_scenario(tier, s) for s in range(200)]:
            assert COST_RANGE[0] * scale - 0.01 <= sc.cost <= COST_RANGE[1] * scale + 0.01
            assert VALUE_RANGE[0] * scale - 0.01 <= sc.value <= VALUE_RANGE[1] * scale + 0.01
            assert round(sc.cost, 2) == sc.cost and round(sc.value, 2) == sc.value
    # tiers are paired: one seed is the same relative draw in every tier (up to rounding to the cent)
    a, b = make_scenario("1k", 11), make_scenario("100k", 11)
    assert a.cost / 1e3 == pytest.approx(b.cost / 1e5, abs=1e-5) and a.value / 1e3 == pytest.approx(b.value / 1e5,
                                                                                                     abs=1e-5)


def test_empty_and_non_empty_zones_both_occur():
    scs = evaluation_set(100)
    assert len(scs) == 100 * len(TIERS)
    empty = [s for s in scs if not s.has_zone]
    assert empty and all(s.value <= s.cost and s.zone <= 0 for s in empty)
    assert 0.1 < len(empty) / len(scs) < 0.4  # about a fifth by design
    assert any(s.has_zone and s.zone > 0 for s in scs)


def test_seed_blocks_and_keys():
    assert eval_seeds(3) == [EVAL_SEED_START, EVAL_SEED_START + 1, EVAL_SEED_START + 2]
    assert max(TRAIN_SEED_BLOCK) * 1000 < EVAL_SEED_START
    assert not set(train_seeds(100)) & set(validation_seeds(100)) and not set(validation_seeds(900)) & set(
        eval_seeds(1000))
    sc = make_scenario("10k", 5_000_001)
    assert sc.key == "10k|5000001" and parse_key(sc.key) == ("10k", 5_000_001)
    assert sc.reservation("seller") == sc.cost and sc.reservation("buyer") == sc.value
    for bad in (lambda: make_scenario("1M", 1), lambda: make_scenario("1k", -1), lambda: eval_seeds(0),
                lambda: train_seeds(10, offset=4090), lambda: parse_key("1k-3"), lambda: sc.reservation("broker")):
        with pytest.raises(ValueError):
            bad()


# -- the episode's rules ------------------------------------------------------------------------------


def test_turns_alternate_from_the_first_mover_and_views_are_private():
    ep = Episode(SC)
    assert ep.to_move == "seller"
    v = ep.view()
    assert (v.role, v.reservation, v.tier, v.scale, v.turn, v.deadline) == ("seller", 800.0, "1k", 1000.0, 1, 10)
    assert v.own_offer is None and v.their_offer is None and v.own_turns_left == 5 and v.turns_left == 10
    ep.step(offer(1500))
    v = ep.view()
    assert (v.role, v.reservation, v.their_offer, v.own_offer) == ("buyer", 1200.0, 1500.0, None)
    assert v.history[0].offer == 1500.0 and v.history[0].message == "Here is my offer."
    assert "800" not in json.dumps([h.__dict__ for h in v.history])  # the seller's cost never reaches the buyer
    buyer_first = Episode(SC, BilateralConfig(deadline_turns=7, first_mover="buyer"))
    assert buyer_first.to_move == "buyer" and buyer_first.config.turns_of("buyer") == 4
    assert buyer_first.config.turns_of("seller") == 3


def test_accept_closes_at_the_counterparts_standing_offer():
    ep = Episode(SC)
    ep.step(offer(1500))
    ep.step(offer(900))
    ep.step(offer(1100))  # the seller's standing offer is now 1100
    rec = ep.step(ACCEPT)
    assert ep.done and rec.action == {"name": "accept_offer", "arguments": {}}
    out = ep.outcome
    assert (out.deal, out.price, out.closed_by, out.end, out.turns) == (True, 1100.0, "buyer", "accept", 4)
    with pytest.raises(RuntimeError):
        ep.step(offer(1))


def test_standing_offers_survive_prose_only_and_bad_turns():
    ep = Episode(SC)
    ep.step(offer(1000))
    ep.step("Hmm, let me think.")  # prose only: no action, not a bad parse
    ep.step('{"name": "make_offer", "arguments": {"price": "cheap"}}')  # bad parse: no-op
    assert ep.standing == {"seller": 1000.0, "buyer": None}
    ep.step(ACCEPT)
    out = ep.outcome
    assert out.price == 1000.0 and out.closed_by == "buyer"
    assert (out.buyer_prose_only, out.buyer_bad_parses, out.seller_bad_parses) == (1, 0, 1)


def test_accept_with_no_standing_offer_is_an_invalid_no_op():
    ep = Episode(SC)
    rec = ep.step(ACCEPT)  # the seller opens with an accept: nothing to accept
    assert not ep.done and rec.invalid_accept and rec.action is None and rec.parse_error == INVALID_ACCEPT_ERROR
    ep.step("Just talking.")  # the buyer makes no offer
    rec = ep.step(ACCEPT)  # still nothing of the buyer's to accept
    assert rec.invalid_accept and not ep.done
    # the accepting party sees why; the counterpart sees only the message
    assert ep.view("seller").history[0].parse_error == INVALID_ACCEPT_ERROR
    assert ep.view("buyer").history[0].parse_error is None and not ep.view("buyer").history[0].invalid_accept
    ep.step(offer(1000))
    ep.step(ACCEPT)
    out = ep.outcome
    assert (out.deal, out.price, out.closed_by) == (True, 1000.0, "seller")
    assert (out.seller_invalid_accepts, out.seller_bad_parses, out.buyer_invalid_accepts) == (2, 2, 0)


def test_own_standing_offer_cannot_be_accepted_by_oneself():
    ep = Episode(SC)
    ep.step(offer(1000))
    ep.step(offer(900))
    rec = ep.step(ACCEPT)  # the seller accepts: closes at the buyer's 900, not its own 1000
    assert rec.action is not None and ep.outcome.price == 900.0 and ep.outcome.closed_by == "seller"


def test_walk_away_ends_without_a_deal():
    ep = Episode(SC)
    ep.step(offer(1000))
    ep.step(WALK)
    out = ep.outcome
    assert ep.done and not out.deal and out.price is None and out.walked_away_by == "buyer" and out.end == "walk_away"


def test_deadline_ends_without_a_deal():
    ep = Episode(SC, BilateralConfig(deadline_turns=4))
    for price in (1500, 700, 1400):
        ep.step(offer(price))
        assert not ep.done
    assert ep.view().own_turns_left == 1
    ep.step(offer(800))
    out = ep.outcome
    assert ep.done and not out.deal and out.end == "deadline" and out.turns == 4
    assert (out.seller_offer, out.buyer_offer) == (1400.0, 800.0)  # crossing offers do not trade on their own


def test_double_call_turn_counts_as_a_bad_parse_and_changes_nothing():
    ep = Episode(SC)
    ep.step(offer(1000))
    rec = ep.step(offer(900) + " " + ACCEPT)  # an offer plus an accept in one turn
    assert rec.action is None and "double tool call" in rec.parse_error and not ep.done
    assert ep.standing == {"seller": 1000.0, "buyer": None}


def test_structured_turns_step_and_record_the_raw_calls():
    ep = Episode(SC)
    ep.step(StructuredTurn("Opening.", [{"type": "function", "function": {"name": "make_offer",
                                                                          "arguments": '{"price": 1300}'}}]))
    ep.step(StructuredTurn("Deal.", [ToolCall("accept_offer", {})]))
    rec = ep.record(seller="s", buyer="b")
    json.dumps(rec)  # JSON-ready
    assert rec["status"] == "deal" and rec["outcome"]["price"] == 1300.0 and rec["scenario_key"] == "1k|7"
    assert rec["turns"][0]["raw_tool_calls"] == [{"name": "make_offer", "arguments": '{"price": 1300}'}]
    assert rec["turns"][0]["raw"] == "Opening." and rec["turns"][1]["seller_offer"] == 1300.0
    assert (rec["cost"], rec["value"], rec["seller"]) == (800.0, 1200.0, "s")


def test_config_is_validated():
    for bad in ({"deadline_turns": 0}, {"deadline_turns": 2.5}, {"first_mover": "broker"}):
        with pytest.raises(ValueError):
            BilateralConfig(**bad)
