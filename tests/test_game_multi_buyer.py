"""The multi-buyer market: scenarios, the strict turn protocol, the episode's rules (shared turn budget, private
threads, sales, overshoots), the scripted buyer pool (never above budget) and sellers, metrics on hand-built
outcomes, the Game interface with batched play and contained failures, and the tournament."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest
from game_helpers import check_seed_blocks, registered_game

from negolib.agents.base import AgentReply
from negolib.cli import main
from negolib.games import REGISTRY
from negolib.games.base import Game, Payoffs, UnknownAgent
from negolib.games.multi_buyer import MultiBuyerGame, scenarios
from negolib.games.multi_buyer.buyers import STYLES, ScriptedBuyers
from negolib.games.multi_buyer.env import INVALID_ACCEPT_ERROR, BuyerView, Episode, SellerView, ThreadEntry
from negolib.games.multi_buyer.metrics import market_metrics, outcomes_frame
from negolib.games.multi_buyer.play import play_episodes
from negolib.games.multi_buyer.protocol import (
    NO_CALL_ERROR,
    BuyerAction,
    SellerAction,
    StructuredTurn,
    ToolCall,
    parse_buyer_turn,
    parse_seller_turn,
)
from negolib.games.multi_buyer.scenarios import (
    EVAL_MARKETS,
    HELDOUT_STYLES,
    MARKETS,
    TRAIN_STYLES,
    MarketConfig,
    MultiBuyerScenario,
    eval_seeds,
    evaluation_set,
    make_scenario,
    parse_key,
)
from negolib.games.multi_buyer.sellers import SELLERS, make_seller
from negolib.games.multi_buyer.tools import anthropic_tools, buyer_tools, seller_tools
from negolib.tournament import run_tournament


def send(to: str, offer: float | None = None, prose: str = "Hello.") -> str:
    args: dict = {"to": to} if offer is None else {"to": to, "offer": offer}
    return prose + " " + json.dumps({"name": "message_buyer", "arguments": args})


ACCEPT = 'Deal. {"name": "accept_offer", "arguments": {}}'
DECLINE = 'No. {"name": "decline", "arguments": {}}'


def counter(price: float) -> str:
    return "Hmm. " + json.dumps({"name": "counter_offer", "arguments": {"price": price}})


def small(n_items: int = 1, turn_budget: int = 4) -> MultiBuyerScenario:
    cfg = MarketConfig(n_buyers=3, n_items=n_items, turn_budget=turn_budget)
    return MultiBuyerScenario("t", 1, cfg, cost=60.0, budgets=(100.0, 150.0, 120.0),
                              styles=("eager", "steady", "tough"))


@pytest.fixture(scope="module")
def game() -> MultiBuyerGame:
    return registered_game("multi_buyer", MultiBuyerGame)


@pytest.fixture(scope="module")
def drawn() -> list[MultiBuyerScenario]:
    return evaluation_set(25)  # 150 scenarios over every market


# -- scenarios ------------------------------------------------------------------------------------------


def test_scenarios_are_pure_functions_of_market_and_seed():
    for market in MARKETS:
        assert make_scenario(market, 5_000_003) == make_scenario(market, 5_000_003)
    draws = {make_scenario("base", s).budgets for s in range(50)}
    assert len(draws) == 50
    cfg = MarketConfig(n_buyers=5, budgets="narrow", styles=["tough", "quiet"])  # type: ignore[arg-type]
    assert cfg.styles == ("tough", "quiet") and hash(cfg)
    assert make_scenario(cfg, 9, "mine") == make_scenario(cfg, 9, "mine")
    assert make_scenario(cfg, 9, "mine").key == "mine|9" and make_scenario(cfg, 9).market == "custom"


def test_draws_follow_the_market_config():
    for sc in evaluation_set(40, ["base"]):
        assert sc.n_buyers == 4 and set(sc.styles) <= set(TRAIN_STYLES)
        assert all(0.9 * 100 - 0.01 <= b <= 2.0 * 100 + 0.01 for b in sc.budgets)
        assert 60 - 0.01 <= sc.cost <= 90 + 0.01 and all(round(b, 2) == b for b in sc.budgets)
    held = evaluation_set(40, ["heldout_styles"])
    assert all(set(sc.styles) <= set(HELDOUT_STYLES) for sc in held)
    assert {s for sc in held for s in sc.styles} == set(HELDOUT_STYLES)
    assert all(sc.n_buyers == 6 for sc in evaluation_set(5, ["six_buyers"]))
    bimodal = [b for sc in evaluation_set(100, ["bimodal"]) for b in sc.budgets]
    assert not any(120.01 < b < 179.99 for b in bimodal) and max(bimodal) > 180  # two modes, nothing between


def test_arms_are_paired_draw_for_draw():
    for seed in eval_seeds(10):
        a, b = make_scenario("base", seed), make_scenario("heldout_styles", seed)
        assert a.cost == b.cost and a.budgets == b.budgets  # the same market, other buyer styles
        assert set(a.styles) <= set(TRAIN_STYLES) and set(b.styles) <= set(HELDOUT_STYLES)
        assert a.cost == make_scenario("lognormal", seed).cost
        assert a.budgets != make_scenario("lognormal", seed).budgets


def test_seed_blocks_keys_and_bad_inputs():
    check_seed_blocks(scenarios, "bimodal|5000001")
    for bad in ("bimodal", "|3", "base|x"):
        with pytest.raises(ValueError):
            parse_key(bad)
    with pytest.raises(ValueError, match="seed"):
        make_scenario("base", -1)
    for kw in ({"n_buyers": 2}, {"n_buyers": 7}, {"n_items": 5}, {"turn_budget": 0}, {"budgets": "pareto"},
               {"styles": ("eager", "lazy")}, {"styles": ()}):
        with pytest.raises(ValueError):
            MarketConfig(**kw)
    assert small().best_surplus == 90.0 and small(n_items=2).best_surplus == 90.0 + 60.0 and small().top_buyer == 1


# -- tools and protocol ------------------------------------------------------------------------------------


def test_tool_schemas():
    (tool,) = seller_tools(5)
    assert tool["function"]["name"] == "message_buyer"
    params = tool["function"]["parameters"]
    assert params["properties"]["to"]["enum"] == [f"buyer_{i}" for i in range(1, 6)] and params["required"] == ["to"]
    assert [t["function"]["name"] for t in buyer_tools()] == ["accept_offer", "counter_offer", "decline"]
    assert [t["name"] for t in anthropic_tools(buyer_tools())] == ["accept_offer", "counter_offer", "decline"]
    buyer_tools()[0]["function"]["name"] = "x"  # copies: the module's schemas stay intact
    assert buyer_tools()[0]["function"]["name"] == "accept_offer"


def test_seller_turn_surfaces():
    text = parse_seller_turn(send("buyer_2", 120, "Hi there."), 4)
    assert text.action == SellerAction(1, 120.0) and text.message == "Hi there." and not text.bad
    tagged = parse_seller_turn('Hi <tool_call>{"name": "message_buyer", "arguments": {"to": "buyer_4"}}</tool_call>',
                               4)
    assert tagged.action == SellerAction(3, None) and tagged.message == "Hi"
    call = ToolCall("message_buyer", '{"to": "buyer_1", "offer": null}')
    null_offer = parse_seller_turn(StructuredTurn("Hi", [call]), 4)
    assert null_offer.action == SellerAction(0, None)
    openai = {"id": "c1", "type": "function",
              "function": {"name": "message_buyer", "arguments": '{"to": "buyer_3", "offer": 99.5}'}}
    st = parse_seller_turn(StructuredTurn("Hello", [openai]), 4)
    assert st.action == SellerAction(2, 99.5) and st.raw_calls == [
        {"name": "message_buyer", "arguments": '{"to": "buyer_3", "offer": 99.5}'}]
    assert SellerAction(2, 99.5).to_dict() == {"name": "message_buyer", "arguments": {"to": "buyer_3", "offer": 99.5}}


@pytest.mark.parametrize("turn, error", [
    ("Just chatting, no call.", NO_CALL_ERROR),
    (send("buyer_1") + " " + send("buyer_2"), "double tool call"),
    ('{"name": "make_offer", "arguments": {"price": 3}}', "unknown tool"),
    (send("buyer_5"), "unknown recipient"),
    (send("buyer_0"), "unknown recipient"),
    (send("Buyer_1"), "unknown recipient"),
    ('{"name": "message_buyer", "arguments": {"to": 1}}', "unknown recipient"),
    ('{"name": "message_buyer", "arguments": {}}', "missing arguments"),
    ('{"name": "message_buyer", "arguments": {"to": "buyer_1", "price": 5}}', "unexpected arguments"),
    (send("buyer_1", "120"), "offer must be a number"),  # type: ignore[arg-type]
    (send("buyer_1", True), "offer must be a number"),  # type: ignore[arg-type]
    (send("buyer_1", -5), "must be positive"),
    (send("buyer_1", 1e12), "absurdly large"),
    ('{"name": "message_buyer", "arguments": {"to": "buyer_1", "offer": Infinity}}', "finite"),
    ('<tool_call>{"name": "message_buyer", "arguments": {"to": </tool_call>', "malformed JSON"),
    ('{"name": "message_buyer", "arguments": {"to": "buyer_1", "to": "buyer_2"}}', "duplicate keys"),
])
def test_bad_seller_turns(turn, error):
    parsed = parse_seller_turn(turn, 4)
    assert parsed.bad and parsed.action is None and error in parsed.error


def test_hostile_turn_objects_are_bad_parses_not_crashes():
    class Hostile:
        @property
        def function(self):
            raise RuntimeError("no")

    assert parse_seller_turn(StructuredTurn("x", [Hostile()]), 3).bad
    assert parse_seller_turn(StructuredTurn("x", "not a list"), 3).error == "tool_calls must be a list of tool calls"
    assert parse_seller_turn(42, 3).bad and parse_buyer_turn(None).bad  # type: ignore[arg-type]


def test_buyer_answers():
    assert parse_buyer_turn(ACCEPT).action == BuyerAction("accept_offer")
    assert parse_buyer_turn(counter(80)).action == BuyerAction("counter_offer", 80.0)
    assert parse_buyer_turn(DECLINE).action == BuyerAction("decline")
    prose = parse_buyer_turn("Let me think about it.")
    assert prose.action is None and not prose.bad  # words only: a decline, not an error
    for bad in ('{"name": "counter_offer", "arguments": {}}', '{"name": "accept_offer", "arguments": {"price": 3}}',
                '{"name": "message_buyer", "arguments": {"to": "buyer_1"}}', ACCEPT + " " + DECLINE):
        assert parse_buyer_turn(bad).bad


# -- the episode -------------------------------------------------------------------------------------------


def test_every_seller_turn_spends_the_budget_and_the_budget_ends_the_episode():
    ep = Episode(small(turn_budget=4))
    ep.step(send("buyer_1"))
    assert ep.to_move == "buyer" and ep.view().buyer == 0
    ep.step(counter(70))
    ep.step("no call at all")  # a bad parse: spends a turn, nobody is addressed
    assert ep.to_move == "seller" and ep.view().turns_left == 2 and ep.view().last_error == NO_CALL_ERROR
    ep.step(send("buyer_9"))  # an unknown recipient: another bad parse
    ep.step(send("buyer_2", 140))
    assert not ep.done
    ep.step(DECLINE)
    assert ep.done and ep.outcome.end == "budget" and not ep.outcome.deal
    assert ep.outcome.seller_turns == 4 and ep.outcome.seller_bad_parses == 2 and ep.outcome.buyer_turns == 2
    assert ep.outcome.addressed == [0, None, None, 1]
    with pytest.raises(RuntimeError, match="over"):
        ep.step(send("buyer_1"))


def test_an_accepted_offer_is_a_sale_at_that_price_and_ends_a_one_item_market():
    ep = Episode(small())
    ep.step(send("buyer_3", 110))
    ep.step(ACCEPT)
    assert ep.done and ep.outcome.end == "sold_out" and ep.outcome.seller_turns == 1
    assert ep.outcome.deals == [{"buyer": 2, "price": 110.0, "turn": 1, "overshoot": False}]
    rec = ep.record(seller="s", buyer="b")
    json.dumps(rec)
    assert rec["status"] == "deal" and rec["turns"][1]["sale"]["price"] == 110.0


def test_accept_without_an_offer_is_invalid_and_an_overshoot_is_counted():
    ep = Episode(small())
    ep.step(send("buyer_1"))  # a probe: no offer to accept
    rec = ep.step(ACCEPT)
    assert rec["invalid_accept"] and rec["parse_error"] == INVALID_ACCEPT_ERROR and not ep.deals
    ep.step(send("buyer_1", 130))  # above buyer_1's budget of 100: a language-model buyer may still accept
    ep.step(ACCEPT)
    out = ep.outcome
    assert out.deal and out.overshoots == 1 and out.deals[0]["overshoot"] and out.buyer_invalid_accepts == 1
    assert out.buyer_bad_parses == 1


def test_several_items_and_no_second_sale_to_a_buyer():
    ep = Episode(small(n_items=2, turn_budget=6))
    ep.step(send("buyer_2", 140))
    ep.step(ACCEPT)
    assert not ep.done and ep.view().items_left == 1 and ep.view().bought == (False, True, False)
    ep.step(send("buyer_2", 100))  # buyer_2 already bought: refused, counted, a turn spent
    assert ep.to_move == "seller" and "already bought" in ep.view().last_error
    ep.step(send("buyer_3", 100))
    ep.step(ACCEPT)
    assert ep.done and ep.outcome.end == "sold_out" and ep.outcome.invalid_addresses == 1
    assert [d["buyer"] for d in ep.outcome.deals] == [1, 2] and ep.outcome.seller_turns == 3


class Spy:
    """A buyer agent that records every view it is given and counters at a fixed price."""

    name = "spy"

    def __init__(self) -> None:
        self.views: list[BuyerView] = []

    def act_batch(self, views: Sequence[BuyerView]) -> list[AgentReply]:
        self.views.extend(views)
        return [AgentReply(f"secret-of-{v.name}", extra={"tool_calls": [
            {"name": "counter_offer", "arguments": {"price": 1.0}}]}) for v in views]


class Broadcaster:
    """A seller agent that writes a buyer-specific token to each buyer in turn."""

    name = "broadcaster"

    def act_batch(self, views: Sequence[SellerView]) -> list[AgentReply]:
        out = []
        for v in views:
            k = (v.turn - 1) % v.n_buyers
            call = {"name": "message_buyer", "arguments": {"to": f"buyer_{k + 1}"}}
            out.append(AgentReply(f"token-for-buyer_{k + 1} turn {v.turn}", extra={"tool_calls": [call]}))
        return out


def test_buyers_never_see_each_others_messages():
    spy = Spy()
    scs = evaluation_set(3, ["base", "six_buyers"])
    records = play_episodes(Broadcaster(), spy, scs)
    assert all(r["status"] == "no_deal" for r in records) and spy.views
    for v in spy.views:
        for e in v.thread:
            if e.role == "seller":
                assert e.message.startswith(f"token-for-{v.name} ")
            else:
                assert e.message == f"secret-of-{v.name}"
        assert not hasattr(v, "budgets") and not hasattr(v, "threads")
        sc = next(s for s in scs if v.episode_id.startswith(s.key + "|"))
        assert v.budget == sc.budgets[v.buyer] and v.style == sc.styles[v.buyer]
    seen = {(v.episode_id, v.buyer) for v in spy.views}
    assert len(seen) == sum(sc.n_buyers for sc in scs)  # every buyer was addressed, each saw only its own thread


# -- scripted buyers ---------------------------------------------------------------------------------------


def _view(style: str, budget: float, offer: float | None, thread: tuple[ThreadEntry, ...] = (), times: int = 1):
    return BuyerView("e", "t", 0, 0, budget, style, 100.0, thread, offer, times)


def test_a_scripted_buyer_never_accepts_or_bids_above_its_budget():
    rng = np.random.default_rng(0)
    accepted = 0
    for style in STYLES.values():
        for _ in range(1500):
            budget = round(float(rng.uniform(1, 5000)), 2)
            times = int(rng.integers(1, 30))
            last = round(float(rng.uniform(0.1, 3.0) * budget), 2)  # even an absurd past bid in the thread
            thread = (ThreadEntry(1, "buyer", "", last, "counter_offer"),) if rng.random() < 0.5 else ()
            offer = None if rng.random() < 0.1 else round(float(rng.uniform(0.2, 3.0) * budget), 2)
            action = style.decide(_view(style.name, budget, offer, thread, times))
            if action.tool == "accept_offer":
                accepted += 1
                assert offer is not None and offer <= budget
            if action.tool == "counter_offer":
                assert 0 < action.price <= budget
        # an offer one cent above the budget is refused however long the buyer has been asked
        assert all(style.decide(_view(style.name, 100.0, 100.01, (), t)).tool != "accept_offer" for t in range(1, 60))
    assert accepted > 500  # the check above was exercised


def test_scripted_buyer_styles():
    for name in ("eager", "steady", "tough"):
        s = STYLES[name]
        bids = [s.next_bid(_view(name, 200.0, None, (), t)) for t in range(1, 12)]
        assert bids[0] == pytest.approx(200 * s.open) and bids == sorted(bids) and max(bids) <= 200 * s.cap + 1e-9
        assert s.decide(_view(name, 200.0, bids[2], (), 4)).tool == "accept_offer"  # its own bid stands
    assert STYLES["quiet"].decide(_view("quiet", 200.0, 199.0)).tool == "decline"
    assert STYLES["quiet"].decide(_view("quiet", 200.0, None)).tool == "decline"  # never names a price
    split = STYLES["splitter"].decide(_view("splitter", 200.0, 180.0, (ThreadEntry(1, "buyer", "", 100.0,
                                                                                     "counter_offer"),), 2))
    assert split == BuyerAction("counter_offer", 140.0)
    assert set(TRAIN_STYLES).isdisjoint(HELDOUT_STYLES)
    with pytest.raises(ValueError):
        ScriptedBuyers(style="lazy")


# -- scripted sellers ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def played(drawn) -> dict[tuple[str, str], list[dict]]:
    out = {}
    for seller in SELLERS:
        for buyer in ("pool", "quiet"):
            out[(seller, buyer)] = play_episodes(make_seller(seller, 0), ScriptedBuyers(style=None if buyer == "pool"
                                                                                         else buyer), drawn)
    return out


def test_scripted_play_never_overshoots_nor_sells_below_cost(played, drawn):
    by_key = {sc.key: sc for sc in drawn}
    for records in played.values():
        for r in records:
            assert r["status"] in ("deal", "no_deal"), r.get("error")
            sc = by_key[r["scenario_key"]]
            for t in r["turns"]:
                if t["role"] == "seller":
                    assert t["parse_error"] is None
                    offer = t["action"]["arguments"].get("offer")
                    assert offer is None or offer >= sc.cost
            for d in r["outcome"]["deals"]:
                assert sc.cost <= d["price"] <= sc.budgets[d["buyer"]] and not d["overshoot"]
            assert r["outcome"]["overshoots"] == 0 and r["outcome"]["seller_turns"] <= sc.config.turn_budget
        assert market_metrics(records, overall=True).iloc[-1]["overshoots"] == 0


def test_scripted_sellers_shapes(played):
    m = {k: market_metrics(v, overall=True).set_index("market").loc["all"] for k, v in played.items()}
    for seller in SELLERS:
        assert m[(seller, "pool")]["deal_rate"] > 0.75
    # probing everyone first explores the whole pool; greedy sells to the first acceptable bid
    probe = outcomes_frame(played[("probe_all", "pool")])
    assert (probe.loc[probe["deal"].astype(bool), "explored_share"] == 1.0).all()
    assert m[("greedy", "pool")]["exploration"] < m[("probe_all", "pool")]["exploration"]
    assert m[("probe_all", "pool")]["normalised_surplus"] > m[("greedy", "pool")]["normalised_surplus"] + 0.2
    assert m[("probe_all", "pool")]["top_buyer_share"] > m[("greedy", "pool")]["top_buyer_share"]
    # the posted price never moves
    for r in played[("fixed_price", "pool")]:
        offers = {t["action"]["arguments"]["offer"] for t in r["turns"] if t["role"] == "seller"}
        assert len(offers) == 1 and offers == {math.ceil(r["cost"] * 1.6 * 100 - 1e-6) / 100}


def test_scripted_agents_are_deterministic_and_surfaces_agree(drawn):
    a = play_episodes(make_seller("auctioneer", 3), ScriptedBuyers(seed=3), drawn[:40])
    b = play_episodes(make_seller("auctioneer", 3), ScriptedBuyers(seed=3), drawn[:40])
    assert a == b
    text = play_episodes(make_seller("auctioneer", 3, surface="text"), ScriptedBuyers(seed=3, surface="text"),
                         drawn[:40])
    assert [r["outcome"] for r in text] == [r["outcome"] for r in a]
    assert all(t["raw_tool_calls"] is None for r in text for t in r["turns"])
    assert all(t["raw_tool_calls"] is not None for r in a for t in r["turns"])


# -- metrics on hand-built outcomes ---------------------------------------------------------------------


def test_metrics_on_a_hand_played_episode():
    ep = Episode(small(turn_budget=6))
    for turn in (send("buyer_1"), counter(70), send("buyer_3"), counter(80), send("buyer_1", 75), DECLINE,
                 send("buyer_3", 90), ACCEPT):
        ep.step(turn)
    row = outcomes_frame([ep.record()]).iloc[0]
    assert row["valid"] and row["deal"] and row["n_deals"] == 1 and row["price"] == 90.0
    assert row["best_surplus"] == 90.0 and row["seller_surplus"] == 30.0
    assert row["normalised_surplus"] == pytest.approx(30 / 90) and row["buyer_surplus"] == 30.0
    assert row["welfare_ratio"] == pytest.approx(60 / 90)
    assert not row["top_buyer_deal"]  # buyer_2 (budget 150) was never asked
    assert row["exploration"] == 2 and row["explored_share"] == pytest.approx(2 / 3)
    assert row["turns_used"] == 4 and row["overshoots"] == 0 and row["seller_bad_parses"] == 0
    game = MultiBuyerGame()
    assert game.payoffs(ep.record()) == Payoffs(pytest.approx(30 / 90), pytest.approx(30 / 90), True)


def test_metrics_count_overshoots_errors_and_aggregate_by_market():
    over = Episode(small())
    over.step(send("buyer_2", 160))  # buyer_2's budget is 150
    over.step(ACCEPT)
    none = Episode(small(turn_budget=1))
    none.step(send("buyer_1", 500))
    none.step(DECLINE)
    err = Episode(small()).record()
    err["status"], err["error"] = "error", "boom"
    df = outcomes_frame([over.record(), none.record(), err])
    assert list(df["valid"]) == [True, True, False] and pd.isna(df.loc[2, "deal"])
    assert df.loc[0, "overshoots"] == 1 and df.loc[0, "top_buyer_deal"]
    assert df.loc[0, "normalised_surplus"] == pytest.approx(100 / 90)  # unclipped in the frame
    assert df.loc[1, "normalised_surplus"] == 0.0 and pd.isna(df.loc[1, "top_buyer_deal"])
    m = market_metrics(df, overall=True)
    assert list(m["market"]) == ["t", "all"]
    row = m.iloc[0]
    assert row["n"] == 2 and row["n_errors"] == 1 and row["deal_rate"] == 0.5 and row["overshoots"] == 1
    assert row["overshoot_rate"] == 1.0 and row["top_buyer_share"] == 1.0 and row["turns_used"] == 1.0
    game = MultiBuyerGame()
    assert game.payoffs(over.record()) == Payoffs(1.0, 0.0, True)  # clipped: above-budget price
    assert game.payoffs(none.record()) == Payoffs(0.0, 0.0, False)
    assert game.payoffs(err) == Payoffs(0.0, 0.0, False, valid=False)


# -- the Game interface ---------------------------------------------------------------------------------


def test_registered_with_agents_by_name_in_both_roles(game):
    assert REGISTRY["multi_buyer"] == "negolib.games.multi_buyer:MultiBuyerGame"
    assert isinstance(game, Game) and game.summary and game.payoff_label == "normalised surplus"
    assert game.scripted_strategies() == ("auctioneer", "fixed_price", "greedy", "probe_all")
    for name in game.scripted_strategies():
        seller = game.make_agent(name, "seller", 3)
        assert seller.name == f"{name}@seller" and seller.seed == 3
        pool = game.make_agent(name, "buyer", 3)  # a seller name in the buyer role: the buyer pool
        assert isinstance(pool, ScriptedBuyers) and pool.style is None and pool.name == "pool@buyer"
    assert game.make_agent("pool", "buyer", 0).style is None
    assert game.make_agent("quiet", "buyer", 0).style == "quiet"
    assert game.make_agent("probe_all+splitter", "buyer", 0).style == "splitter"
    assert game.make_agent("probe_all+splitter", "seller", 0).name == "probe_all@seller"
    for name, role in (("pool", "seller"), ("quiet", "seller"), ("gpt", "buyer"), ("greedy+lazy", "buyer")):
        with pytest.raises(UnknownAgent, match="known: auctioneer, fixed_price"):
            game.make_agent(name, role, 0)
    with pytest.raises(UnknownAgent, match=r"SELLER\+hf:<path> \(a language-model buyer\), SELLER\+openai:<model>"):
        game.make_agent("greedy+lazy", "buyer", 0)  # the error names the language-model buyer form too
    with pytest.raises(ValueError, match="role"):
        game.make_agent("greedy", "broker", 0)


def test_tournament_scenarios_keys_and_clusters(game):
    scs = game.tournament_scenarios(2)
    keys = [game.scenario_key(s) for s in scs]
    assert len(scs) == 2 * len(EVAL_MARKETS) and len(set(keys)) == len(keys) and keys[0] == "base|5000000"
    assert {game.cluster(k) for k in keys} == {"5000000", "5000001"} and scs == game.tournament_scenarios(2)


class Recorder:
    def __init__(self, agent) -> None:
        self.agent, self.name, self.calls = agent, agent.name, []

    def act_batch(self, views):
        self.calls.append(len(views))
        return self.agent.act_batch(views)


def test_play_is_batched_and_records_are_in_order(game):
    scs = game.tournament_scenarios(3)
    seller = Recorder(game.make_agent("probe_all", "seller", 0))
    buyer = Recorder(game.make_agent("pool", "buyer", 0))
    records = game.play(seller, buyer, scs, seed=7)
    assert [r["scenario_key"] for r in records] == [game.scenario_key(s) for s in scs]
    assert seller.calls[0] == buyer.calls[0] == len(scs)  # one call per wave and role
    assert len(seller.calls) == max(r["outcome"]["seller_turns"] for r in records)
    assert sum(seller.calls) == sum(r["outcome"]["seller_turns"] for r in records)
    for r in records:
        json.dumps(r)
        assert r["play_seed"] == 7 and r["seller"] == "probe_all@seller" and r["buyer"] == "pool@buyer"
        p = game.payoffs(r)
        assert p.valid and p.deal == r["outcome"]["deal"] and 0 <= p.seller <= 1 and 0 <= p.buyer <= 1
        welfare = outcomes_frame([r]).iloc[0]["welfare_ratio"]
        assert p.seller + p.buyer == pytest.approx(welfare)


class Failing:
    def __init__(self, agent, market: str, how: str) -> None:
        self.agent, self.market, self.how, self.name = agent, market, how, "failing"

    def act_batch(self, views):
        if any(v.market == self.market for v in views):
            if self.how == "raise":
                raise RuntimeError("boom")
            bad = {"error": AgentReply("", error="API down"), "garbage": object(),
                   "text": AgentReply(None)}[self.how]  # type: ignore[arg-type]
            return [bad if v.market == self.market else self.agent.act_batch([v])[0] for v in views]
        return self.agent.act_batch(views)


@pytest.mark.parametrize("role", ["seller", "buyer"])
@pytest.mark.parametrize("how", ["raise", "error", "garbage", "text"])
def test_one_failing_episode_becomes_an_error_record(game, how, role):
    scs = [make_scenario(m, 5_000_000) for m in ("base", "bimodal", "six_buyers")]
    agents = {"seller": game.make_agent("greedy", "seller", 0), "buyer": game.make_agent("pool", "buyer", 0)}
    agents[role] = Failing(agents[role], "bimodal", how)
    records = game.play(agents["seller"], agents["buyer"], scs, seed=0)
    assert [r["status"] == "error" for r in records] == [False, True, False]
    where = "turn 1 (seller)" if role == "seller" else "turn 1 (buyer_"
    assert records[1]["scenario_key"] == "bimodal|5000000" and where in records[1]["error"]
    assert game.payoffs(records[1]).valid is False and game.payoffs(records[0]).valid
    assert records[0]["status"] != "error" and records[2]["status"] != "error"
    assert market_metrics(records).set_index("market").loc["bimodal", "n_errors"] == 1


def test_tournament_runs_on_the_game(game, tmp_path, capsys):
    res = run_tournament(game, ["greedy", "probe_all", "auctioneer+quiet"], 1, tmp_path, progress=False)
    assert res.played == 9 and res.n_errors == 0 and len(res.frame) == 9 * len(EVAL_MARKETS)
    f = res.frame.assign(seller=res.frame["seller"].astype(str))
    means = f.groupby("seller")["seller_payoff"].mean()
    assert means["probe_all"] > means["greedy"]  # the seller who explores extracts more
    assert main(["tournament", "--game", "multi_buyer", "--agents", "greedy,fixed_price", "--seeds", "1",
                 "--out", str(tmp_path / "cli"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "multi_buyer: 4 matches played" in out and "normalised surplus" in out
    assert (tmp_path / "cli" / "ratings.csv").stat().st_size > 0


def test_an_episode_plays_the_same_alone_or_in_any_batch(drawn):
    for name in SELLERS:
        batch = play_episodes(make_seller(name, 1), ScriptedBuyers(seed=1), drawn[::7])
        alone = [play_episodes(make_seller(name, 1), ScriptedBuyers(seed=1), [sc])[0] for sc in reversed(drawn[::7])]
        assert batch == alone[::-1]
