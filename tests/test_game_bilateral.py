"""Bilateral price bargaining behind the game plug-in interface: registry, CLI, batched play with contained
failures, payoffs, and the language-model prompts."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence

import pytest

from negolib.agents.base import AgentReply
from negolib.cli import main
from negolib.games import REGISTRY, get_game
from negolib.games.base import Game, UnknownAgent
from negolib.games.bilateral import BilateralGame
from negolib.games.bilateral.env import BilateralConfig, Episode
from negolib.games.bilateral.metrics import tier_metrics
from negolib.games.bilateral.prompts import system_prompt, turn_message
from negolib.games.bilateral.protocol import Action, parse_turn
from negolib.games.bilateral.scenarios import TIERS, BilateralScenario, make_scenario
from negolib.games.bilateral.scripted import make_scripted


@pytest.fixture(scope="module")
def game() -> BilateralGame:
    g = get_game("bilateral")
    assert isinstance(g, BilateralGame)
    return g


class Recorder:
    """Wraps an agent and records the size of every act_batch call."""

    def __init__(self, agent) -> None:
        self.agent, self.name, self.calls = agent, agent.name, []

    def act_batch(self, views: Sequence) -> list[AgentReply]:
        self.calls.append(len(views))
        return self.agent.act_batch(views)


class Failing:
    """Answers like ``agent`` except on the views of ``tier``, where it does ``how``."""

    def __init__(self, agent, tier: str, how: str) -> None:
        self.agent, self.tier, self.how, self.name = agent, tier, how, "failing"

    def act_batch(self, views: Sequence) -> list[AgentReply]:
        if any(v.tier == self.tier for v in views):
            if self.how == "raise":
                raise RuntimeError("boom")
            if self.how == "error":
                return [AgentReply("", error="API down") if v.tier == self.tier else self.agent.act(v)
                        for v in views]
            if self.how == "garbage":
                return [object() if v.tier == self.tier else self.agent.act(v) for v in views]  # type: ignore
        return self.agent.act_batch(views)


def test_registered_and_listed(game):
    assert REGISTRY["bilateral"] == "negolib.games.bilateral:BilateralGame"
    assert isinstance(game, Game) and game.name == "bilateral" and game.summary and game.payoff_label
    assert game.scripted_strategies() == ("boulware", "conceder", "fixed_price", "linear", "tit_for_tat")


def test_cli_lists_the_game(capsys):
    assert main(["games"]) == 0
    assert any(line.startswith("bilateral: ") for line in capsys.readouterr().out.splitlines())
    out = subprocess.run([sys.executable, "-m", "negolib", "games"], capture_output=True, text=True, check=True).stdout
    assert "bilateral: one item, one price" in out and "multi_issue: " in out


def test_agents_by_name_in_both_roles(game):
    for name in game.scripted_strategies():
        for role in ("seller", "buyer"):
            agent = game.make_agent(name, role, 3)
            assert agent.name == f"{name}@{role}" and agent.seed == 3
    with pytest.raises(UnknownAgent, match="known: boulware, conceder"):
        game.make_agent("gpt", "seller", 0)


def test_tournament_scenarios_keys_and_clusters(game):
    scs = game.tournament_scenarios(3)
    assert len(scs) == 3 * len(TIERS)
    keys = [game.scenario_key(s) for s in scs]
    assert len(set(keys)) == len(keys) and keys[0] == "10|5000000" and keys[-1] == "100k|5000002"
    assert {game.cluster(k) for k in keys} == {"5000000", "5000001", "5000002"}
    assert scs == game.tournament_scenarios(3)


def test_play_is_batched_and_records_are_in_order(game):
    scs = game.tournament_scenarios(4)
    seller = Recorder(game.make_agent("boulware", "seller", 0))
    buyer = Recorder(game.make_agent("conceder", "buyer", 0))
    records = game.play(seller, buyer, scs, seed=7)
    assert [r["scenario_key"] for r in records] == [game.scenario_key(s) for s in scs]
    assert seller.calls[0] == buyer.calls[0] == len(scs)  # the first wave asks for every episode at once
    assert len(seller.calls) <= 5 and len(buyer.calls) <= 5  # one call per wave and role, 5 turns each
    assert sum(seller.calls) == sum(r["outcome"]["seller_turns"] for r in records)
    for r in records:
        json.dumps(r)
        assert r["play_seed"] == 7 and r["seller"] == "boulware@seller" and r["status"] in ("deal", "no_deal")
        p = game.payoffs(r)
        assert p.valid and p.deal == r["outcome"]["deal"] and 0 <= p.seller <= 1 and 0 <= p.buyer <= 1
        if p.deal:
            share = (r["outcome"]["price"] - r["cost"]) / (r["value"] - r["cost"])
            assert p.seller == pytest.approx(share) and p.seller + p.buyer == pytest.approx(1.0)
    m = tier_metrics(records)
    assert list(m["tier"]) == list(TIERS) and (m["ir_violations"] == 0).all() and (m["efficiency"] == 1.0).all()


@pytest.mark.parametrize("how", ["raise", "error", "garbage"])
def test_one_failing_episode_becomes_an_error_record(game, how):
    scs = [make_scenario(t, 5_000_000) for t in ("10", "1k", "100k")]
    seller = Failing(game.make_agent("linear", "seller", 0), "1k", how)
    records = game.play(seller, game.make_agent("linear", "buyer", 0), scs, seed=0)
    assert [r["status"] == "error" for r in records] == [False, True, False]
    bad = records[1]
    assert bad["scenario_key"] == "1k|5000000" and "turn 1 (seller)" in bad["error"]
    assert game.payoffs(bad).valid is False and game.payoffs(records[0]).valid
    assert tier_metrics(records).set_index("tier").loc["1k", "n_errors"] == 1


def test_text_and_structured_replies_both_play(game):
    scs = game.tournament_scenarios(2)
    structured = game.play(make_scripted("linear", "seller", 0), make_scripted("boulware", "buyer", 0), scs, 0)
    text = game.play(make_scripted("linear", "seller", 0, surface="text"),
                     make_scripted("boulware", "buyer", 0, surface="text"), scs, 0)
    assert [r["outcome"] for r in text] == [r["outcome"] for r in structured]


def test_buyer_first_configuration(game):
    g = BilateralGame(BilateralConfig(deadline_turns=6, first_mover="buyer"))
    records = g.play(g.make_agent("linear", "seller", 0), g.make_agent("linear", "buyer", 0),
                     g.tournament_scenarios(2), 0)
    assert all(r["turns"][0]["role"] == "buyer" and len(r["turns"]) <= 6 for r in records)
    assert all(r["config"] == {"deadline_turns": 6, "first_mover": "buyer"} for r in records)


# -- prompts --------------------------------------------------------------------------------------------


SC = BilateralScenario("1k", 5, cost=812.5, value=1340.0)


def test_system_prompt_states_role_private_value_tier_deadline_and_tools():
    ep = Episode(SC)
    seller, buyer = system_prompt(ep.view("seller")), system_prompt(ep.view("buyer"))
    assert "You are the seller" in seller and "$812.50" in seller and "$1,340.00" not in seller
    assert "You are the buyer" in buyer and "$1,340.00" in buyer and "$812.50" not in buyer
    for text in (seller, buyer):
        assert "$1,000.00" in text and "at most 10 turns" in text and "5 of them yours" in text
        assert all(t in text for t in ("make_offer(price)", "accept_offer()", "walk_away()"))
        assert "<tools>" not in text
    assert "You make the first move." in seller and "The seller makes the first move." in buyer


def test_system_prompt_with_tools_embeds_the_schema_and_its_example_parses():
    text = system_prompt(Episode(SC).view("seller"), tools_in_prompt=True)
    schema = json.loads(text.split("<tools>")[1].split("</tools>")[0])
    assert [t["name"] for t in schema] == ["make_offer", "accept_offer", "walk_away"]
    start = text.index("<tool_call>\n{")
    example = text[start:text.index("</tool_call>", start) + len("</tool_call>")]
    assert parse_turn("My offer. " + example).action == Action("make_offer", 123.45)


def test_turn_message_reports_the_counterpart_offers_errors_and_deadline():
    ep = Episode(SC, BilateralConfig(deadline_turns=4))
    first = turn_message(ep.view())
    assert "Turn 1 of 4" in first and "You open" in first and "no offer of yours" in first
    ep.step('I can sell at 1500.\u202e {"name": "make_offer", "arguments": {"price": 1500}}')
    msg = turn_message(ep.view())
    assert 'The seller wrote: "I can sell at 1500."' in msg and "The seller offers $1,500.00." in msg
    assert "\u202e" not in msg and "make_offer" not in msg and "the seller's offer $1,500.00" in msg
    ep.step('{"name": "accept_offer", "arguments": {"price": 3}}')  # a bad parse of the buyer
    ep.step("Take your time.")  # prose only
    last = turn_message(ep.view())
    assert "Your last turn changed nothing: accept_offer: unexpected arguments" in last
    assert "The seller made no offer this turn." in last and "This is your last turn." in last
    assert "Standing: no offer of yours; the seller's offer $1,500.00." in last
