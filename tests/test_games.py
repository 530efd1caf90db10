"""The game registry and the paper's game behind the plug-in interface."""

from __future__ import annotations

import pytest

from negolib.cli import main
from negolib.games import REGISTRY, get_game, list_games
from negolib.games.base import Game, Payoffs


def test_every_registered_game_implements_the_interface():
    for name in REGISTRY:
        game = get_game(name)
        assert isinstance(game, Game) and game.name == name and game.summary
        assert game.scripted_strategies()


def test_unknown_game_names_the_registered_ones():
    with pytest.raises(KeyError, match="multi_issue"):
        get_game("chess")


def test_cli_lists_the_games(capsys):
    assert main(["games"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == [n for n, _ in list_games()]


def test_multi_issue_game_plays_the_paper_environment():
    game = get_game("multi_issue")
    scenarios = game.tournament_scenarios(1)
    assert len(scenarios) == 9 and len({game.scenario_key(s) for s in scenarios}) == 9
    assert {game.cluster(game.scenario_key(s)) for s in scenarios} == {"5000000"}
    seller, buyer = game.make_agent("boulware", "seller", 0), game.make_agent("conceder", "buyer", 0)
    records = game.play(seller, buyer, scenarios[:3], seed=0)
    assert [r["scenario_key"] for r in records] == [game.scenario_key(s) for s in scenarios[:3]]
    for r in records:
        p = game.payoffs(r)
        assert p.valid and p.deal == r["outcome"]["deal"]
        if p.deal:
            assert p.seller == r["outcome"]["seller_utility"] and 0 <= p.buyer <= 1
    assert game.payoffs({"status": "error", "outcome": None}) == Payoffs(0.0, 0.0, False, valid=False)
    with pytest.raises(ValueError, match="known: boulware"):
        game.make_agent("nobody", "seller", 0)


def test_multi_issue_self_play_keeps_the_roles_apart():
    game = get_game("multi_issue")
    sc = game.tournament_scenarios(1)[:2]
    records = game.play(game.make_agent("linear", "seller", 0), game.make_agent("linear", "buyer", 0), sc, seed=0)
    assert all(r["status"] != "error" for r in records)
