"""The multi-product market: scenarios, the exact assignment oracle against brute force, the four-part protocol (a
hostile message for each part), the episode's constraints (no product sold twice, no sale below cost, no offer to a
buyer who bought), private threads, scripted buyers and sellers, metrics on hand-built outcomes, the Game interface
with batched play and contained failures, and the tournament."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest
from game_helpers import check_seed_blocks, registered_game

from negolib.agents.base import AgentReply
from negolib.cli import main
from negolib.games import REGISTRY
from negolib.games.base import Game, Payoffs, UnknownAgent
from negolib.games.multi_product import MultiProductGame, scenarios
from negolib.games.multi_product.buyers import RULES, ScriptedBuyers
from negolib.games.multi_product.env import BuyerView, Episode, SellerView, ThreadEntry
from negolib.games.multi_product.metrics import market_metrics, outcomes_frame
from negolib.games.multi_product.oracle import best_assignment, brute_force_assignment, greedy_assignment
from negolib.games.multi_product.play import play_episodes
from negolib.games.multi_product.protocol import (
    MAX_MESSAGE_CHARS,
    Offer,
    format_message,
    parse_answer,
    parse_message,
)
from negolib.games.multi_product.scenarios import (
    COST_SHARE,
    EVAL_MARKETS,
    LIST_RANGE,
    MARKETS,
    MarketConfig,
    MultiProductScenario,
    eval_seeds,
    evaluation_set,
    make_scenario,
    parse_key,
)
from negolib.games.multi_product.sellers import SELLERS, make_seller
from negolib.tournament import run_tournament


def msg(to: str = "buyer_1", product: str = "product_1", price: str = "100", message: str = "Hello.") -> str:
    return f"TO: {to}\nPRODUCT: {product}\nPRICE: {price}\nMESSAGE: {message}"


# buyer x product: value - cost = [[70, 50], [60, 20], [20, 45]]; best welfare 115 (b1-p1, b3-p2), best revenue 205
HAND = MultiProductScenario("t", 1, MarketConfig(n_products=2, n_buyers=3, turn_budget=5), list_prices=(100.0, 80.0),
                            costs=(50.0, 40.0), valuations=((120.0, 90.0), (110.0, 60.0), (70.0, 85.0)))


@pytest.fixture(scope="module")
def game() -> MultiProductGame:
    return registered_game("multi_product", MultiProductGame)


@pytest.fixture(scope="module")
def drawn() -> list[MultiProductScenario]:
    return evaluation_set(20)  # 120 scenarios over every market


# -- scenarios ------------------------------------------------------------------------------------------


def test_scenarios_are_pure_functions_of_market_and_seed():
    for market in MARKETS:
        assert make_scenario(market, 5_000_002) == make_scenario(market, 5_000_002)
    assert len({make_scenario("base", s).valuations for s in range(50)}) == 50
    cfg = MarketConfig(n_products=4, n_buyers=2, rho=0.3)
    assert make_scenario(cfg, 4, "mine") == make_scenario(cfg, 4, "mine") and make_scenario(cfg, 4).key == "custom|4"


def test_draws_follow_the_market_config():
    for sc in evaluation_set(30, ["base"]):
        assert (sc.n_products, sc.n_buyers, sc.config.turn_budget) == (3, 4, 10)
        for lp, c in zip(sc.list_prices, sc.costs):
            assert LIST_RANGE[0] * 100 - 0.01 <= lp <= LIST_RANGE[1] * 100 + 0.01
            assert COST_SHARE[0] * lp - 0.02 <= c <= COST_SHARE[1] * lp + 0.02
    assert {(s.n_products, s.n_buyers) for s in evaluation_set(3, ["small", "large"])} == {(2, 3), (5, 6)}
    for seed in eval_seeds(20):  # price-range arms: the same market at a tenth and ten times the prices
        base, cheap, premium = (make_scenario(m, seed) for m in ("base", "cheap", "premium"))
        assert np.allclose(np.array(cheap.valuations) * 10, base.valuations, atol=0.06)
        assert np.allclose(np.array(premium.valuations) / 10, base.valuations, atol=0.006)


def _within_buyer_correlation(market: str) -> float:
    logs = np.log([[sc.valuations[m][k] / sc.list_prices[k] for k in range(sc.n_products)]
                   for sc in evaluation_set(400, [market]) for m in range(sc.n_buyers)])
    return float(np.corrcoef(logs[:, 0], logs[:, 1])[0, 1])


def test_correlated_valuations_are_correlated_within_a_buyer():
    assert MARKETS["correlated"].valuations == "correlated" and MARKETS["base"].valuations == "independent"
    assert abs(_within_buyer_correlation("base")) < 0.1
    assert 0.7 < _within_buyer_correlation("correlated") < 0.9


def test_seed_blocks_keys_and_bad_inputs():
    check_seed_blocks(scenarios, "large|5000003")
    with pytest.raises(ValueError):
        parse_key("large")
    for kw in ({"n_products": 0}, {"n_buyers": 51}, {"turn_budget": 0}, {"rho": 1.5}, {"scale": -1.0}):
        with pytest.raises(ValueError):
            MarketConfig(**kw)


# -- the assignment oracle ------------------------------------------------------------------------------


def test_oracle_matches_brute_force_on_small_markets():
    rng = np.random.default_rng(1)
    for _ in range(600):
        m, k = (int(x) for x in rng.integers(1, 5, 2))
        w = np.round(rng.normal(0.5, 1.0, (m, k)), 2)
        if rng.random() < 0.3:
            w = rng.integers(-1, 3, (m, k)).astype(float)  # ties and zeros
        cap = None if rng.random() < 0.3 else int(rng.integers(0, min(m, k) + 2))
        exact, brute = best_assignment(w, cap), brute_force_assignment(w, cap)
        assert exact.value == pytest.approx(brute.value, abs=1e-9)
        assert exact.value == pytest.approx(sum(w[i, j] for i, j in exact.pairs))
        assert len({i for i, _ in exact.pairs}) == len({j for _, j in exact.pairs}) == len(exact.pairs)
        assert cap is None or len(exact.pairs) <= cap
        assert all(w[i, j] > 0 for i, j in exact.pairs)
        greedy = greedy_assignment(w, cap)
        assert exact.value / 2 - 1e-9 <= greedy.value <= exact.value + 1e-9


def test_oracle_on_hand_examples():
    w = np.array([[3.0, 2.0], [2.0, 0.0]])
    assert best_assignment(w).pairs == ((0, 1), (1, 0)) and best_assignment(w).value == 4.0
    assert greedy_assignment(w).value == 3.0  # the heaviest pair first is not optimal
    assert best_assignment(w, 1).pairs == ((0, 0),) and best_assignment(w, 0).pairs == ()
    assert best_assignment(-np.ones((3, 2))).pairs == ()  # no pair worth making
    assert best_assignment(np.array([[1.0, 5.0, 2.0]])).pairs == ((0, 1),)
    assert HAND.best_welfare.pairs == ((0, 0), (2, 1)) and HAND.best_welfare.value == pytest.approx(115.0)
    assert HAND.best_revenue.value == pytest.approx(205.0)
    with pytest.raises(ValueError):
        best_assignment(np.array([1.0, 2.0]))
    with pytest.raises(ValueError):
        best_assignment(np.array([[np.nan]]))


def test_scenario_optimum_respects_the_turn_budget():
    cfg = MarketConfig(n_products=3, n_buyers=3, turn_budget=2)
    for seed in range(30):
        sc = make_scenario(cfg, seed)
        w = np.asarray(sc.valuations) - np.asarray(sc.costs)[None, :]
        assert len(sc.best_welfare.pairs) <= 2
        assert sc.best_welfare.value == pytest.approx(brute_force_assignment(w, 2).value)
        rev = np.where(np.asarray(sc.valuations) >= np.asarray(sc.costs)[None, :], sc.valuations, 0.0)
        assert sc.best_revenue.value == pytest.approx(brute_force_assignment(rev, 2).value)


# -- the four-part protocol -----------------------------------------------------------------------------


def test_a_valid_message_and_tolerated_layout():
    p = parse_message(msg("buyer_3", "product_2", "$99.5", "Hi there.\nA second line."), 4, 3)
    assert p.offer == Offer(2, 1, 99.5) and p.message == "Hi there. A second line." and not p.bad  # one line
    fenced = "```\n" + msg().replace("\nPRODUCT", "\n\nPRODUCT") + "\n```"
    assert parse_message(fenced, 4, 3).offer == Offer(0, 0, 100.0)
    text = format_message(Offer(1, 2, 12.5), "Take it.")
    assert text == "TO: buyer_2\nPRODUCT: product_3\nPRICE: 12.50\nMESSAGE: Take it."
    assert parse_message(text, 4, 3).offer == Offer(1, 2, 12.5)


@pytest.mark.parametrize("text, part", [
    # TO
    (msg(to="buyer_9"), "TO"), (msg(to="buyer_0"), "TO"), (msg(to="all"), "TO"), (msg(to="buyer_1, buyer_2"), "TO"),
    (msg(to=""), "TO"), (msg().replace("TO:", "RECIPIENT:"), "TO"),
    # PRODUCT
    (msg(product="product_4"), "PRODUCT"), (msg(product="product_0"), "PRODUCT"),
    (msg(product="the red one"), "PRODUCT"), (msg(product="product_1 or product_2"), "PRODUCT"),
    # PRICE
    (msg(price="-5"), "PRICE"), (msg(price="0"), "PRICE"), (msg(price="12.345"), "PRICE"),
    (msg(price="1,000"), "PRICE"), (msg(price="1e3"), "PRICE"), (msg(price="NaN"), "PRICE"),
    (msg(price="10 USD"), "PRICE"), (msg(price="10 or 20"), "PRICE"), (msg(price="cheap"), "PRICE"),
    (msg(price="999999999999"), "PRICE"),
    # MESSAGE
    (msg(message=""), "MESSAGE"), (msg(message="Hi.\nPRICE: 5"), "MESSAGE"),
    (msg(message="Hi.\nto: buyer_2"), "MESSAGE"), (msg(message="x" * (MAX_MESSAGE_CHARS + 1)), "MESSAGE"),
    ("TO: buyer_1\nPRODUCT: product_1\nPRICE: 10", "MESSAGE"),
    # the layout
    ("Sure!\n" + msg(), "TO"), ("PRODUCT: product_1\nTO: buyer_1\nPRICE: 10\nMESSAGE: hi", "TO"),
    (msg().replace("PRICE: 100\n", ""), "PRICE"), ("", "TO"),
])
def test_a_hostile_message_for_each_part_is_a_bad_parse_naming_it(text, part):
    p = parse_message(text, 3, 3)
    assert p.bad and p.offer is None and p.part == part and p.error.startswith(part + ":")


def test_non_text_is_a_bad_parse_not_a_crash():
    for thing in (None, 42, ["TO: buyer_1"], b"TO: buyer_1"):
        p = parse_message(thing, 3, 3)
        assert p.bad and p.part == "format"


def test_buyer_answers():
    assert parse_answer("ACCEPT\nThanks.") == (True, "Thanks.", None)
    assert parse_answer("DECLINE") == (False, "", None)
    for bad in ("accept", "Yes please", "ACCEPT DECLINE", None, "I ACCEPT"):
        ans = parse_answer(bad)
        assert not ans.accept and ans.error is not None


# -- the episode and its constraints ---------------------------------------------------------------------


def test_the_hand_played_market_enforces_every_constraint_and_is_measured():
    ep = Episode(HAND)
    ep.step(msg("buyer_2", "product_1", "100"))
    assert ep.to_move == "buyer" and ep.view().offer == Offer(1, 0, 100.0)
    ep.step("ACCEPT")
    for text, kind in ((msg("buyer_2", "product_2", "50"), "buyer_bought"),
                       (msg("buyer_1", "product_1", "100"), "sold_product"),
                       (msg("buyer_3", "product_2", "30"), "below_cost")):
        rec = ep.step(text)
        assert rec["violation"] == kind and ep.to_move == "seller" and ep.view().last_error
    ep.step(msg("buyer_3", "product_2", "80"))
    ep.step("ACCEPT\nGood.")
    out = ep.outcome
    assert ep.done and out.end == "sold_out" and out.seller_turns == 5 and out.valid_messages == 2
    assert out.violations == {"sold_product": 1, "buyer_bought": 1, "below_cost": 1}
    assert [(s["buyer"], s["product"], s["price"]) for s in out.sales] == [(1, 0, 100.0), (2, 1, 80.0)]
    rec = ep.record()
    json.dumps(rec)
    row = outcomes_frame([rec]).iloc[0]
    assert row["constraint_adherence"] == pytest.approx(2 / 5) and row["offers_below_cost"] == 1
    assert row["offers_sold_product"] == 1 and row["offers_to_buyer_who_bought"] == 1
    assert row["sold_twice"] == 0 and row["sales_below_cost"] == 0
    assert row["revenue"] == 180.0 and row["revenue_ratio"] == pytest.approx(180 / 205)
    assert row["seller_surplus"] == 90.0 and row["normalised_surplus"] == pytest.approx(90 / 115)
    assert row["welfare"] == 105.0 and row["allocation_quality"] == pytest.approx(105 / 115)
    assert row["buyer_surplus"] == 15.0
    assert MultiProductGame().payoffs(rec) == Payoffs(pytest.approx(90 / 115), pytest.approx(15 / 115), True)


def test_every_message_spends_the_budget_and_bad_parses_reach_nobody():
    ep = Episode(HAND)
    for text in ("hello?", msg(price="cheap"), msg(to="buyer_7"), msg(message="")):
        ep.step(text)
        assert ep.to_move == "seller"
    assert ep.view().turns_left == 1 and all(t == () for t in ep.threads)
    ep.step(msg("buyer_1", "product_1", "200"))
    ep.step("DECLINE")
    assert ep.done and ep.outcome.end == "budget" and ep.outcome.bad_parses == 4 and not ep.outcome.sales
    assert ep.outcome.bad_parts == {"TO": 2, "PRICE": 1, "MESSAGE": 1}
    with pytest.raises(RuntimeError, match="over"):
        ep.step(msg())


class Yes:
    """A buyer agent that accepts everything (as an unconstrained language model might)."""

    name = "yes"

    def act_batch(self, views):
        return [AgentReply("ACCEPT") for _ in views]


class Hammer:
    """A seller agent that sells product_1 to buyer_1 on its first turn, then tries to break every constraint in
    turn: product_1 again (to buyer_2), product_2 below cost (to buyer_2), product_2 to buyer_1 (who bought)."""

    name = "hammer"

    def act_batch(self, views: Sequence[SellerView]) -> list[AgentReply]:
        out = []
        for v in views:
            fair = f"{v.costs[1] * 3:.2f}"
            to, product, price = (("buyer_1", "product_1", f"{v.costs[0] * 3:.2f}") if v.turn == 1 else
                                  [("buyer_2", "product_1", fair), ("buyer_2", "product_2", "1.00"),
                                   ("buyer_1", "product_2", fair)][v.turn % 3])
            out.append(AgentReply(msg(to, product, price)))
        return out


def test_no_product_sold_twice_no_sale_below_cost_no_offer_to_a_buyer_who_bought(drawn):
    records = play_episodes(Hammer(), Yes(), drawn)
    for r in records:
        sales = r["outcome"]["sales"]
        assert [s["product"] for s in sales] == [0]  # sold once, never again
        assert all(s["price"] >= r["costs"][s["product"]] for s in sales)
        bought = {s["buyer"] for s in sales}
        for t in r["turns"]:
            if t["role"] == "buyer":
                assert t["offer"]["to"] not in {f"buyer_{b + 1}" for b in bought} or t["sale"]
        v = r["outcome"]["violations"]
        assert sum(v.values()) == r["outcome"]["seller_turns"] - 1 and min(v.values()) >= 1
        assert len(r["turns"]) == r["outcome"]["seller_turns"] + 1  # no refused message reached a buyer
    m = market_metrics(records, overall=True).iloc[-1]
    assert m["sold_twice"] == 0 and m["sales_below_cost"] == 0
    # the accept-everything buyer pays above its value whenever three times the cost exceeds it: counted
    assert m["overshoots"] == sum(r["outcome"]["sales"][0]["price"] > r["valuations"][0][0] for r in records) > 0
    assert m["offers_below_cost"] > 0 and m["offers_sold_product"] > 0 and m["offers_to_buyer_who_bought"] > 0
    assert m["constraint_adherence"] < 0.2


def test_offers_to_a_buyer_who_bought_are_refused_and_counted():
    ep = Episode(HAND)
    ep.step(msg("buyer_1", "product_1", "100"))
    ep.step("ACCEPT")
    rec = ep.step(msg("buyer_1", "product_2", "85"))
    assert rec["violation"] == "buyer_bought" and ep.to_move == "seller"
    assert ep.outcome is None and "already bought" in ep.view().last_error


def test_standing_offers_and_overshoots():
    ep = Episode(HAND)
    ep.step(msg("buyer_1", "product_2", "60"))
    ep.step("DECLINE")
    ep.step(msg("buyer_1", "product_1", "119"))
    view = ep.view()
    assert isinstance(view, BuyerView) and view.standing == {1: 60.0}  # the declined offer stands
    assert ep.view().valuations == (120.0, 90.0)
    ep.step("DECLINE")
    ep.step(msg("buyer_3", "product_2", "95"))  # above buyer_3's value of 85: an unscripted buyer may accept
    ep.step("ACCEPT")
    assert ep.standing[0] == {0: 119.0}  # product_2 sold: its standing offer to buyer_1 is gone
    assert ep.sales[0]["overshoot"] and ep.outcome is None
    ep.step(msg("buyer_1", "product_1", "110"))
    ep.step("ACCEPT")
    assert ep.done and ep.outcome.end == "sold_out" and ep.outcome.overshoots == 1 and ep.standing[0] == {}


class Spy:
    name = "spy"

    def __init__(self) -> None:
        self.views: list[BuyerView] = []

    def act_batch(self, views):
        self.views.extend(views)
        return [AgentReply(f"DECLINE\nsecret-of-buyer_{v.buyer + 1}") for v in views]


class Broadcaster:
    name = "broadcaster"

    def act_batch(self, views):
        return [AgentReply(msg(f"buyer_{(v.turn - 1) % v.n_buyers + 1}", "product_1", f"{v.costs[0] * 2:.2f}",
                               f"token-for-buyer_{(v.turn - 1) % v.n_buyers + 1}")) for v in views]


def test_buyers_never_see_each_others_messages():
    spy = Spy()
    scs = evaluation_set(3, ["base", "large"])
    play_episodes(Broadcaster(), spy, scs)
    assert spy.views
    for v in spy.views:
        me = f"buyer_{v.buyer + 1}"
        for e in v.thread:
            assert e.message == (f"token-for-{me}" if e.role == "seller" else f"secret-of-{me}")
        sc = next(s for s in scs if v.episode_id.startswith(s.key + "|"))
        assert v.valuations == sc.valuations[v.buyer] and not hasattr(v, "costs") and not hasattr(v, "threads")
    assert len({(v.episode_id, v.buyer) for v in spy.views}) == sum(sc.n_buyers for sc in scs)


# -- scripted buyers and sellers ----------------------------------------------------------------------------


def _bview(vals: tuple[float, ...], offer: Offer, standing: dict[int, float]) -> BuyerView:
    return BuyerView("e", "t", 0, offer.buyer, vals, vals, (), offer, standing)


def test_scripted_buyer_rules():
    pool, picky = RULES["pool"], RULES["picky"]
    assert pool.accepts(_bview((100.0, 80.0), Offer(0, 0, 100.0), {}))  # zero surplus: accepts
    assert not pool.accepts(_bview((100.0, 80.0), Offer(0, 0, 100.01), {}))
    assert not pool.accepts(_bview((100.0, 80.0), Offer(0, 0, 90.0), {1: 60.0}))  # 10 < 20 standing
    assert pool.accepts(_bview((100.0, 80.0), Offer(0, 0, 80.0), {1: 60.0}))  # ties accept
    assert pool.accepts(_bview((100.0, 80.0), Offer(0, 0, 90.0), {0: 95.0}))  # its own older offer is no rival
    assert not picky.accepts(_bview((100.0, 80.0), Offer(0, 0, 91.0), {}))
    assert picky.accepts(_bview((100.0, 80.0), Offer(0, 0, 90.0), {}))
    rng = np.random.default_rng(2)
    for rule in RULES.values():
        for _ in range(3000):
            vals = tuple(float(x) for x in np.round(rng.uniform(1, 500, 3), 2))
            offer = Offer(0, int(rng.integers(3)), round(float(rng.uniform(0.5, 2) * vals[0]), 2))
            if rule.accepts(_bview(vals, offer, {})):
                assert offer.price <= vals[offer.product]
    with pytest.raises(ValueError):
        ScriptedBuyers(rule="generous")


@pytest.fixture(scope="module")
def played(drawn) -> dict[tuple[str, str], list[dict]]:
    return {(s, b): play_episodes(make_seller(s, 0), ScriptedBuyers(f"{b}@buyer", b), drawn)
            for s in SELLERS for b in RULES}


def test_scripted_sellers_never_break_a_constraint(played):
    for (seller, buyer), records in played.items():
        m = market_metrics(records, overall=True).set_index("market").loc["all"]
        assert m["n_errors"] == 0 and m["constraint_adherence"] == 1.0, (seller, buyer)
        assert m["bad_parses"] == m["offers_sold_product"] == m["offers_to_buyer_who_bought"] == 0
        assert m["offers_below_cost"] == m["sold_twice"] == m["sales_below_cost"] == m["overshoots"] == 0


def test_the_oracle_is_an_upper_bound_and_the_baselines_fall_below_it(played):
    m = {k: market_metrics(v, overall=True).set_index("market").loc["all"] for k, v in played.items()}
    oracle = outcomes_frame(played[("oracle", "pool")])
    assert np.allclose(oracle["revenue_ratio"], 1.0) and oracle["deal"].all()
    assert np.allclose(outcomes_frame(played[("oracle_surplus", "pool")])["normalised_surplus"], 1.0)
    assert np.allclose(outcomes_frame(played[("oracle_surplus", "pool")])["allocation_quality"], 1.0)
    assert (oracle["messages"] == oracle["n_sales"]).all()  # one message per sale
    for name in ("greedy", "random"):
        assert m[(name, "pool")]["normalised_surplus"] < m[("oracle_surplus", "pool")]["normalised_surplus"] - 0.2
        assert m[(name, "pool")]["deal_rate"] > 0.8
    assert m[("greedy", "pool")]["normalised_surplus"] > m[("random", "pool")]["normalised_surplus"]
    assert make_seller("oracle").settings()["upper_bound"] is True
    assert "UPPER BOUND" in (type(make_seller("oracle")).__doc__ or "")
    for (name, _), records in played.items():  # nobody beats the optimum
        frame = outcomes_frame(records)
        assert (frame["normalised_surplus"] <= 1.0 + 1e-9).all() and (frame["revenue_ratio"] <= 1.0 + 1e-9).all()
        assert (frame["allocation_quality"] <= 1.0 + 1e-9).all(), name


def test_scripted_sellers_are_deterministic(drawn):
    for name in SELLERS:
        a = play_episodes(make_seller(name, 5), ScriptedBuyers(), drawn[:30])
        b = play_episodes(make_seller(name, 5), ScriptedBuyers(), drawn[:30])
        assert a == b
    other = play_episodes(make_seller("random", 6), ScriptedBuyers(), drawn[:30])
    assert [r["turns"] for r in other] != [r["turns"] for r in a]


# -- metrics --------------------------------------------------------------------------------------------


def test_metrics_on_error_rows_and_by_market():
    done = Episode(HAND)
    done.step(msg("buyer_1", "product_1", "120"))
    done.step("ACCEPT")
    done.step(msg("buyer_3", "product_2", "85"))
    done.step("ACCEPT")
    err = Episode(HAND).record()
    err["status"], err["error"] = "error", "boom"
    df = outcomes_frame([done.record(), err])
    assert list(df["valid"]) == [True, False] and pd.isna(df.loc[1, "revenue_ratio"])
    assert df.loc[0, "normalised_surplus"] == pytest.approx(1.0) and df.loc[0, "revenue_ratio"] == pytest.approx(1.0)
    m = market_metrics(df, overall=True)
    assert list(m["market"]) == ["t", "all"] and m.iloc[0]["n"] == 1 and m.iloc[0]["n_errors"] == 1
    assert m.iloc[0]["constraint_adherence"] == 1.0 and m.iloc[0]["sales_per_episode"] == 2.0
    game = MultiProductGame()
    assert game.payoffs(done.record()) == Payoffs(pytest.approx(1.0), pytest.approx(0.0), True)
    assert game.payoffs(err) == Payoffs(0.0, 0.0, False, valid=False)
    assert game.payoffs(Episode(HAND).record()) == Payoffs(0.0, 0.0, False, valid=False)  # never finished


# -- the Game interface ---------------------------------------------------------------------------------


def test_registered_with_agents_by_name_in_both_roles(game):
    assert REGISTRY["multi_product"] == "negolib.games.multi_product:MultiProductGame"
    assert isinstance(game, Game) and game.summary and game.payoff_label == "normalised surplus"
    assert game.scripted_strategies() == ("greedy", "oracle", "oracle_surplus", "random")
    for name in game.scripted_strategies():
        assert game.make_agent(name, "seller", 2).name == f"{name}@seller"
        assert game.make_agent(name, "buyer", 2).rule.name == "pool"  # a seller name in the buyer role: the pool
    assert game.make_agent("picky", "buyer", 0).rule.name == "picky"
    assert game.make_agent("greedy+picky", "buyer", 0).rule.name == "picky"
    for name, role in (("pool", "seller"), ("gpt", "buyer"), ("greedy+lazy", "buyer")):
        with pytest.raises(UnknownAgent, match="known: greedy, oracle"):
            game.make_agent(name, role, 0)
    scs = game.tournament_scenarios(2)
    keys = [game.scenario_key(s) for s in scs]
    assert len(scs) == 2 * len(EVAL_MARKETS) and len(set(keys)) == len(keys)
    assert {game.cluster(k) for k in keys} == {"5000000", "5000001"}


class Recorder:
    def __init__(self, agent) -> None:
        self.agent, self.name, self.calls = agent, agent.name, []

    def act_batch(self, views):
        self.calls.append(len(views))
        return self.agent.act_batch(views)


def test_play_is_batched_and_records_are_in_order(game):
    scs = game.tournament_scenarios(3)
    seller, buyer = Recorder(game.make_agent("greedy", "seller", 0)), Recorder(game.make_agent("pool", "buyer", 0))
    records = game.play(seller, buyer, scs, seed=4)
    assert [r["scenario_key"] for r in records] == [game.scenario_key(s) for s in scs]
    assert seller.calls[0] == buyer.calls[0] == len(scs)
    assert len(seller.calls) == max(r["outcome"]["seller_turns"] for r in records)
    for r in records:
        json.dumps(r)
        p = game.payoffs(r)
        assert r["play_seed"] == 4 and p.valid and 0 <= p.seller <= 1 and 0 <= p.buyer <= 1
        assert p.seller + p.buyer == pytest.approx(outcomes_frame([r]).iloc[0]["allocation_quality"] if p.deal else 0)


class Failing:
    def __init__(self, agent, market: str, how: str) -> None:
        self.agent, self.market, self.how, self.name = agent, market, how, "failing"

    def act_batch(self, views):
        if any(v.market == self.market for v in views):
            if self.how == "raise":
                raise RuntimeError("boom")
            bad = {"error": AgentReply("", error="API down"), "garbage": "not a reply"}[self.how]
            return [bad if v.market == self.market else self.agent.act_batch([v])[0] for v in views]
        return self.agent.act_batch(views)


@pytest.mark.parametrize("role", ["seller", "buyer"])
@pytest.mark.parametrize("how", ["raise", "error", "garbage"])
def test_one_failing_episode_becomes_an_error_record(game, how, role):
    scs = [make_scenario(m, 5_000_000) for m in ("base", "correlated", "large")]
    agents = {"seller": game.make_agent("greedy", "seller", 0), "buyer": game.make_agent("pool", "buyer", 0)}
    agents[role] = Failing(agents[role], "correlated", how)
    records = game.play(agents["seller"], agents["buyer"], scs, seed=0)
    assert [r["status"] == "error" for r in records] == [False, True, False]
    where = "turn 1 (seller)" if role == "seller" else "turn 1 (buyer_"
    assert where in records[1]["error"] and game.payoffs(records[1]).valid is False


def test_tournament_runs_on_the_game(game, tmp_path, capsys):
    res = run_tournament(game, ["greedy", "random", "oracle_surplus+picky"], 1, tmp_path, progress=False)
    assert res.played == 9 and res.n_errors == 0 and len(res.frame) == 9 * len(EVAL_MARKETS)
    f = res.frame.assign(seller=res.frame["seller"].astype(str))
    means = f.groupby("seller")["seller_payoff"].mean()
    assert means["oracle_surplus+picky"] > means["greedy"] > means["random"]
    assert main(["tournament", "--game", "multi_product", "--agents", "greedy,random", "--seeds", "1",
                 "--out", str(tmp_path / "cli"), "--no-progress"]) == 0
    assert "multi_product: 4 matches played" in capsys.readouterr().out
    assert (tmp_path / "cli" / "cross_table.csv").stat().st_size > 0


def test_thread_entries_record_what_was_offered():
    ep = Episode(HAND)
    ep.step(msg("buyer_2", "product_2", "55", "Try this."))
    ep.step("DECLINE\nToo much.")
    assert ep.threads[1] == (ThreadEntry(1, "seller", "Try this.", 1, 55.0, False),
                             ThreadEntry(1, "buyer", "Too much.", 1, 55.0, False))


def test_an_episode_plays_the_same_alone_or_in_any_batch(drawn):
    for name in SELLERS:
        batch = play_episodes(make_seller(name, 1), ScriptedBuyers(), drawn[::7])
        alone = [play_episodes(make_seller(name, 1), ScriptedBuyers(), [sc])[0] for sc in reversed(drawn[::7])]
        assert batch == alone[::-1]
