"""Episode rules: turn order, caps, ledger, closing, accept-with-terms, bad parses, reward (Eq. 1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import accept, counter

from negolib.games.multi_issue.env import EnvConfig, Episode, reward
from negolib.games.multi_issue.utility import both_utilities, contributions


def play(ep: Episode, *texts: str) -> Episode:
    for t in texts:
        ep.step(t)
    return ep


def test_seller_opens_and_parties_alternate(car_scenario):
    ep = Episode(car_scenario)
    roles = []
    for _ in range(4):
        roles.append(ep.to_move)
        ep.step(counter(("price", 40)))
    assert roles == ["seller", "buyer", "seller", "buyer"]


def test_buyer_opens_is_a_parameter(car_scenario):
    ep = Episode(car_scenario, EnvConfig(first_mover="buyer"))
    assert ep.to_move == "buyer"
    ep.step(counter(("price", 30)))
    assert ep.to_move == "seller" and ep.turns[0].role == "buyer"
    with pytest.raises(ValueError):
        EnvConfig(first_mover="auctioneer")  # type: ignore[arg-type]


def test_ledger_is_persistent_and_overwritten(car_scenario):
    ep = play(Episode(car_scenario), counter(("price", 45), ("model", "Sedan")), counter(("price", 38)))
    assert ep.ledger == {"price": 38.0, "model": "Sedan"}
    assert ep.turns[0].ledger == {"price": 45.0, "model": "Sedan"}  # snapshots do not change


def test_cap_is_no_deal_after_24_turns(car_scenario):
    ep = Episode(car_scenario)
    for _ in range(24):
        assert not ep.done
        ep.step(counter(("price", 40)))
    assert ep.done and not ep.outcome.deal and ep.outcome.turns == 24 and ep.outcome.rounds == 12
    assert ep.outcome.score == -0.3 and math.isnan(ep.outcome.seller_utility)
    with pytest.raises(RuntimeError):
        ep.step(counter(("price", 40)))


def test_accept_closes_on_current_ledger(car_scenario):
    ep = play(Episode(car_scenario), counter(("price", 44), ("service", "annual")), accept())
    o = ep.outcome
    assert o.deal and o.closed_by == "buyer" and o.final_ledger == {"price": 44.0, "service": "annual"}
    su, bu = both_utilities(car_scenario, o.final_ledger)
    assert o.seller_utility == pytest.approx(su) and o.buyer_utility == pytest.approx(bu)
    assert o.score == pytest.approx(su) and sum(o.seller_terms) == pytest.approx(su)


def test_accept_on_turn_one_is_invalid_not_a_deal_at_one_half(car_scenario):
    """Fair ACCEPT (ours): nothing was put forward yet, so an opening ACCEPT closes nothing."""
    ep = play(Episode(car_scenario), accept())
    assert not ep.done and ep.ledger == {} and ep.to_move == "buyer"
    t = ep.turns[0]
    assert t.invalid_accept and t.action is None and "invalid ACCEPT" in t.parse_error
    paper = play(Episode(car_scenario, EnvConfig(accept_needs_offer=False)), accept())
    assert paper.outcome.deal and paper.outcome.seller_utility == 0.5  # the paper's rule, for ablations


def test_accept_after_a_counterpart_bad_parse_is_invalid(car_scenario):
    """The seller names its best terms, the buyer's reply fails to parse: the seller cannot accept its
    own ledger (today's exploit: S = 1.0). The ACCEPT counts as the seller's bad parse."""
    best = counter(("price", 50), ("service", "none"))
    ep = play(Episode(car_scenario), best, "I am thinking about it.", accept())
    assert not ep.done and ep.ledger == {"price": 50.0, "service": "none"}
    assert ep.turns[2].invalid_accept and ep.turns[2].role == "seller"
    history = ep.view("buyer").history
    assert history[-1].prose == "Deal." and not history[-1].offered
    # the buyer counters, now the seller may accept the buyer's offer
    play(ep, counter(("price", 41)), accept())
    o = ep.outcome
    assert o.deal and o.closed_by == "seller" and o.final_ledger["price"] == 41.0
    assert o.seller_invalid_accepts == 1 and o.invalid_accepts == 1
    assert o.seller_bad_parses == 1 and o.seller_turns == 3


def test_invalid_accept_keeps_ledger_even_when_training_applies_accept_terms(car_scenario):
    ep = play(Episode(car_scenario, EnvConfig.training()), "no json here", accept(("price", 20)))
    assert not ep.done and ep.ledger == {} and ep.turns[1].invalid_accept
    assert ep.turns[1].invalid_terms == [] and ep.turns[1].off_schema_terms == []


def test_accept_after_an_invalid_accept_is_invalid_too(car_scenario):
    ep = play(Episode(car_scenario), counter(("price", 44)), "??", accept(), accept())
    assert not ep.done and [t.invalid_accept for t in ep.turns] == [False, False, True, True]
    ep.step(counter(("price", 45)))
    ep.step(accept())
    assert ep.outcome.deal and ep.outcome.closed_by == "buyer" and ep.outcome.invalid_accepts == 2
    assert ep.outcome.seller_invalid_accepts == 1


def test_accept_with_terms_ignored_in_evaluation_applied_in_training(car_scenario):
    texts = (counter(("price", 44)), accept(("price", 30), ("accessories", True)))
    ev = play(Episode(car_scenario, EnvConfig()), *texts)
    tr = play(Episode(car_scenario, EnvConfig.training()), *texts)
    assert ev.outcome.final_ledger == {"price": 44.0} and ev.outcome.accept_with_terms
    assert tr.outcome.final_ledger == {"price": 30.0, "accessories": True} and tr.outcome.accept_with_terms
    assert EnvConfig.training().accept_applies_terms and not EnvConfig().accept_applies_terms


def test_off_schema_and_invalid_terms(car_scenario):
    ep = play(Episode(car_scenario), counter(("delivery_day", 3), ("model", "Truck"), ("price", 40)), accept())
    t = ep.turns[0]
    assert t.off_schema_terms == ["delivery_day"] and t.invalid_terms == ["model"]
    assert ep.outcome.final_ledger == {"delivery_day": 3, "price": 40.0}
    # the off-schema name is unscored: its schema term counts as unnamed
    k = car_scenario.domain.index("delivery")
    assert ep.outcome.seller_terms[k] == pytest.approx(car_scenario.seller.weights[k] / 2)


def test_bad_parse_delivers_prose_and_keeps_ledger(car_scenario):
    ep = play(Episode(car_scenario), counter(("price", 45)), "I refuse to use JSON today.")
    t = ep.turns[1]
    assert t.action is None and t.parse_error and t.prose == "I refuse to use JSON today."
    assert t.ledger == {"price": 45.0}
    v = ep.view("seller")
    assert v.history[-1].prose == "I refuse to use JSON today." and v.history[-1].raw is None


def test_bad_parse_on_the_last_turn(car_scenario):
    ep = Episode(car_scenario)
    for _ in range(23):
        ep.step(counter(("price", 40)))
    ep.step("{oops")
    o = ep.outcome
    assert not o.deal and o.turns == 24 and o.bad_parses == 1 and o.seller_bad_parses == 0


def test_view_hides_counterpart_raw_text_and_preferences(car_scenario):
    ep = play(Episode(car_scenario), counter(("price", 45), prose="Opening."))
    v = ep.view()
    assert v.role == "buyer" and v.prefs == car_scenario.buyer and v.turn == 2
    assert v.history[0].raw is None and v.history[0].prose == "Opening."
    assert ep.view("seller").history[0].raw.startswith("Opening.")


def test_reward_eq1_components():
    cfg = EnvConfig()
    assert cfg.soft_budget == 9
    assert reward(0.6, 0, 5, 5, cfg) == pytest.approx(0.6)
    assert reward(0.6, 1, 4, 5, cfg) == pytest.approx(0.6 - 0.05 * 0.25)
    assert reward(0.6, 0, 12, 12, cfg) == pytest.approx(0.6 - 0.05)
    assert reward(-0.3, 12, 12, 12, cfg) == pytest.approx(-0.3 - 0.05 - 0.05)
    assert reward(0.6, 0, 11, 11, cfg) == pytest.approx(0.6 - 0.05 * 2 / 3)


def test_episode_reward_uses_seller_bad_parse_fraction_and_rounds(car_scenario):
    ep = Episode(car_scenario)
    for i in range(21):  # 21 turns = 11 rounds; seller turns 1,3,...,21 = 11
        ep.step("no json" if i in (0, 2) else counter(("price", 40)))
    ep.step(accept())
    o = ep.outcome
    assert o.rounds == 11 and o.seller_turns == 11 and o.seller_bad_parses == 2
    assert o.reward == pytest.approx(o.seller_utility - 0.05 * 2 / 11 - 0.05 * 2 / 3)


def test_no_deal_penalty_is_below_every_deal(car_scenario):
    cfg = EnvConfig()
    assert -cfg.no_deal_penalty < 0 <= min(contributions(car_scenario.domain, car_scenario.seller, {}))


def test_record_is_json_ready(car_scenario):
    import json

    ep = play(Episode(car_scenario), counter(("price", 45)), accept())
    rec = ep.record(arm="a", seller="s", buyer="b")
    back = json.loads(json.dumps(rec, allow_nan=False))
    assert back["status"] == "deal" and back["outcome"]["final_ledger"] == {"price": 45.0}
    assert len(back["turns"]) == 2 and back["seed"] == 5_000_053 and back["held_out"] is True
    nd = Episode(car_scenario, EnvConfig(max_rounds=1))
    play(nd, counter(("price", 45)), counter(("price", 30)))
    assert json.loads(json.dumps(nd.record(arm="a", seller="s", buyer="b")))["outcome"]["seller_utility"] is None
    assert np.isclose(rec["outcome"]["seller_utility"], sum(rec["outcome"]["seller_terms"]))


def test_scripted_agents_never_make_an_invalid_accept():
    """Every scripted strategy, as seller and buyer, against a counterpart whose turns sometimes fail to
    parse: no scripted turn is ever an invalid ACCEPT, and every closing ACCEPT answers a COUNTER."""
    from negolib.games.multi_issue.domains import get_domain
    from negolib.games.multi_issue.scenarios import make_scenario
    from negolib.games.multi_issue.scripted import STRATEGIES, make_scripted

    for strategy in STRATEGIES:
        for seed in range(5_000_000, 5_000_004):
            scenario = make_scenario(get_domain("car"), seed)
            for scripted_role in ("seller", "buyer"):
                agent, other_agent = make_scripted(strategy, seed=1), make_scripted("conceder", seed=2)
                ep = Episode(scenario, EnvConfig(max_rounds=6))
                while not ep.done:
                    view = ep.view()
                    if view.role == scripted_role:
                        ep.step(agent.act(view).text)
                    elif view.turn % 4 in (2, 3):  # every other counterpart turn fails to parse
                        ep.step("Let me think about that.")
                    else:
                        ep.step(other_agent.act(view).text)
                mine = [t for t in ep.turns if t.role == scripted_role]
                assert not any(t.invalid_accept for t in mine), (strategy, seed, scripted_role)
                if ep.outcome.deal:
                    last, before = ep.turns[-1], ep.turns[-2]
                    assert last.action["action"] == "ACCEPT" and before.action["action"] == "COUNTER"


def test_a_huge_number_in_a_turn_is_an_invalid_term_not_a_crash(car_scenario):
    """Issue 13 §3: a 310+-digit integer is an invalid term (no OverflowError in step); a number past
    Python's int-string limit (4,301+ digits) is a bad parse; off-schema ones do not break the prompt."""
    import json

    from negolib.games.multi_issue.prompts import render_messages

    for sign in ("", "-"):
        ep = Episode(car_scenario)
        ep.step(counter(("price", 40)))
        rec = ep.step(counter(("price", int(sign + "9" * 400)), ("warranty_months", 6)))
        assert rec.action is not None and rec.invalid_terms == ["price"]
        assert ep.ledger["price"] == 40.0 and ep.ledger["warranty_months"] == 6.0
        rec = ep.step('Here. {"action": "COUNTER", "terms": [{"name": "price", "value": %s}]}' % ("9" * 5000))
        assert rec.action is None and "too many digits" in rec.parse_error and ep.ledger["price"] == 40.0
        rec = ep.step(counter(("price_extra", int("9" * 4000))))
        assert rec.off_schema_terms == ["price_extra"]
        for scaffold in ("training", "evaluation"):
            assert render_messages(ep.view(), scaffold)
        json.dumps(ep.record(arm="a", seller="s", buyer="b"), allow_nan=False)
