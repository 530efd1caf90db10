"""SFT data of the multi-buyer market: the tournament's best scripted sales replayed into the seller's chats, and
the shared SFT (negolib.games.sft) trains on them."""

from __future__ import annotations

import copy
import json

import pytest

from negolib.games.multi_buyer.game import MultiBuyerGame
from negolib.games.multi_buyer.protocol import parse_seller_turn
from negolib.games.multi_buyer.training import replay, sft_dataset
from negolib.games.sft import GameSFTExample, select_best
from negolib.tournament import read_matches, run_tournament


@pytest.fixture(scope="module")
def tournament(tmp_path_factory):
    return run_tournament(MultiBuyerGame(), None, 2, tmp_path_factory.mktemp("mb_tour"), progress=False)


def test_replay_rebuilds_every_record_and_refuses_a_forged_one(tournament):
    matches = read_matches(tournament.path)
    assert len(matches) == 4 * 4 * 6 * 2  # every ordered pair of the 4 scripted names (a seller name in the buyer
    # role reads as the pool) x 6 markets x 2 seeds
    for m in matches:
        ep = replay(m.record)
        assert ep.outcome is not None and ep.outcome.deals == m.record["outcome"]["deals"]
        assert len(ep.turns) == len(m.record["turns"])
    forged = copy.deepcopy(next(m.record for m in matches if m.record["outcome"]["deals"]))
    forged["outcome"]["deals"][0]["price"] += 1.0
    with pytest.raises(ValueError, match="does not replay to its sales"):
        replay(forged)
    forged = copy.deepcopy(matches[0].record)
    forged["cost"] += 0.01
    with pytest.raises(ValueError, match="does not rebuild its scenario"):
        replay(forged)


def test_sft_dataset_takes_each_scenarios_best_sale_as_the_sellers_text_chat(tournament):
    matches = [{"seller": m.seller, "buyer": m.buyer, "scenario_key": m.scenario_key, "record": m.record}
               for m in read_matches(tournament.path)]
    game = MultiBuyerGame()
    ds = sft_dataset(tournament.path)
    assert ds and all(isinstance(e, GameSFTExample) for e in ds)
    assert [e.scenario_key for e in ds] == sorted({e.scenario_key for e in ds})  # one per scenario, key order
    for e in ds:  # the best payoff among the scenario's sales
        same = [m for m in matches if m["scenario_key"] == e.scenario_key and m["record"]["outcome"]["deals"]]
        assert e.payoff == pytest.approx(max(game.payoffs(m["record"]).seller for m in same))
        msgs = list(e.messages)
        assert msgs[0]["role"] == "system" and "message_buyer" in msgs[0]["content"]  # tools in the prompt
        assert [m["role"] for m in msgs[1:]] == ["user", "assistant"] * ((len(msgs) - 1) // 2)
        record = next(m["record"] for m in same if m["seller"] == e.seller)
        seller_turns = [t for t in record["turns"] if t["role"] == "seller"]
        said = [m["content"] for m in msgs if m["role"] == "assistant"]
        assert len(said) == len(seller_turns)
        for text, t in zip(said, seller_turns):  # each assistant turn parses to the call the seller made
            assert parse_seller_turn(text, len(record["budgets"])).action.to_dict() == t["action"]
    assert ds == sft_dataset(matches)  # the file or its records
    assert [e.seller for e in sft_dataset(matches, sellers=["greedy"])] == ["greedy"] * len(
        select_best(matches, lambda r: game.payoffs(r).seller, game="multi_buyer",
                    deal_ok=lambda r: bool(r["outcome"]["deals"]), sellers=["greedy"]))
    assert all(e.payoff >= 0.9 for e in sft_dataset(matches, min_share=0.9))
    assert len(sft_dataset(matches, max_examples=2)) == 2


def test_a_sale_above_the_buyers_budget_is_never_a_demonstration(tournament):
    matches = [{"seller": m.seller, "buyer": m.buyer, "scenario_key": m.scenario_key, "record": m.record}
               for m in read_matches(tournament.path)]
    key = sft_dataset(matches)[0].scenario_key
    for m in matches:
        if m["scenario_key"] == key:
            for d in m["record"]["outcome"]["deals"]:
                d["overshoot"] = True  # as a model buyer's overshoot is counted
    assert key not in {e.scenario_key for e in sft_dataset(matches)}


def test_the_shared_sft_trains_on_market_chats(tournament, tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    from game_helpers import save_tiny_base

    from negolib.games.sft import SFTConfig, run_sft

    class _Factory:  # save_tiny_base takes a tmp_path_factory
        def mktemp(self, name):
            p = tmp_path / name
            p.mkdir()
            return p

    base = save_tiny_base(_Factory())
    data = sft_dataset(tournament.path, max_examples=2)
    with pytest.raises(ValueError, match="no assistant token within max_length=64"):
        run_sft(base, data, tmp_path / "short", SFTConfig(max_length=64))  # truncation keeps only the prompt
    res = run_sft(base, data, tmp_path / "sft", SFTConfig(epochs=3, batch_size=1, learning_rate=3e-3,
                                                          warmup_ratio=0.0, max_length=16384))
    assert res.examples == 2 and res.steps == 6 and res.loss_after < res.loss_before
    assert (res.model_dir / "config.json").exists() and torch is not None
    summary = json.loads((tmp_path / "sft" / "sft_summary.json").read_text())
    assert summary["assistant_tokens"] > 0 and summary["examples"] == 2


def test_max_seller_turns_keeps_only_sales_a_cut_market_can_make(tournament):
    """A seller trained on markets cut to k seller turns learns only from sales made within k turns: the best
    unrestricted sale of a scenario may probe every buyer first, which a k-turn seller cannot."""
    matches = [{"seller": m.seller, "buyer": m.buyer, "scenario_key": m.scenario_key, "record": m.record}
               for m in read_matches(tournament.path)]
    turns = {(m["seller"], m["buyer"], m["scenario_key"]): int(m["record"]["outcome"]["seller_turns"])
             for m in matches}
    full = sft_dataset(matches)
    assert max(turns[(e.seller, e.buyer, e.scenario_key)] for e in full) > 3  # some best sales take > 3 turns
    cut = sft_dataset(matches, max_seller_turns=3)
    assert cut and all(turns[(e.seller, e.buyer, e.scenario_key)] <= 3 for e in cut)
    for e in cut:  # still each scenario's best sale among those within 3 turns
        ok = [m for m in matches if m["scenario_key"] == e.scenario_key and m["record"]["outcome"]["deals"]
              and turns[(m["seller"], m["buyer"], m["scenario_key"])] <= 3]
        assert e.payoff == pytest.approx(max(MultiBuyerGame().payoffs(m["record"]).seller for m in ok))
    assert sft_dataset(matches, max_seller_turns=10_000) == full
    with pytest.raises(ValueError, match="max_seller_turns"):
        sft_dataset(matches, max_seller_turns=0)
