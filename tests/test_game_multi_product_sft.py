"""SFT data of the multi-product market: the tournament's best clean scripted sales (never an oracle's) replayed into
the seller's four-part chats."""

from __future__ import annotations

import copy

import pytest

from negolib.games.multi_product.game import MultiProductGame
from negolib.games.multi_product.protocol import parse_message
from negolib.games.multi_product.training import UPPER_BOUNDS, replay, seller_payoff, sft_dataset
from negolib.games.sft import GameSFTExample
from negolib.tournament import read_matches, run_tournament


@pytest.fixture(scope="module")
def matches(tmp_path_factory):
    out = tmp_path_factory.mktemp("mp_tour")
    game = MultiProductGame()
    for seller in ("greedy", "oracle", "random"):
        res = run_tournament(game, [seller], 2, out, progress=False)
    return [{"seller": m.seller, "buyer": m.buyer, "scenario_key": m.scenario_key, "record": m.record}
            for m in read_matches(res.path)]


def test_replay_rebuilds_every_record_and_refuses_a_forged_one(matches):
    for m in matches:
        ep = replay(m["record"])
        assert ep.outcome is not None and ep.outcome.sales == m["record"]["outcome"]["sales"]
    sold = next(m["record"] for m in matches if m["record"]["outcome"]["sales"])
    forged = copy.deepcopy(sold)
    forged["outcome"]["sales"][0]["price"] += 1.0
    with pytest.raises(ValueError, match="does not replay to its sales"):
        replay(forged)
    forged = copy.deepcopy(sold)
    forged["valuations"][0][0] += 0.01
    with pytest.raises(ValueError, match="does not rebuild its scenario"):
        replay(forged)


def test_the_best_clean_sale_of_a_seller_that_cannot_read_valuations(matches):
    assert set(UPPER_BOUNDS) == {"oracle", "oracle_surplus"}
    ds = sft_dataset(matches)
    assert ds and all(isinstance(e, GameSFTExample) for e in ds)
    assert {e.seller for e in ds} <= {"greedy", "random"}  # the oracle scores higher but is never a demonstration
    for e in ds:
        rivals = [m for m in matches if m["scenario_key"] == e.scenario_key and m["seller"] != "oracle"
                  and m["record"]["outcome"]["sales"]]
        assert e.payoff == pytest.approx(max(seller_payoff(m["record"]) for m in rivals))
        record = next(m["record"] for m in rivals if m["seller"] == e.seller)
        said = [m["content"] for m in e.messages if m["role"] == "assistant"]
        sent = [t for t in record["turns"] if t["role"] == "seller"]
        assert len(said) == len(sent)
        for text, t in zip(said, sent):  # each assistant message parses to the offer the seller made
            offer = parse_message(text, *_sizes(record)).offer
            assert offer is not None and offer.price == t["offer"]["price"]
    assert {e.seller for e in sft_dataset(matches, sellers=["oracle"])} == {"oracle"}  # only when asked by name


def _sizes(record):
    return int(record["config"]["n_buyers"]), int(record["config"]["n_products"])
