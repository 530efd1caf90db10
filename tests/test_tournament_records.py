"""The tournament's matches file is read like the transcripts: every line of every game checked (types, ranges, the
game's invariants), a problem named by ``FILE:LINE`` (one line from the CLI, no traceback), a conflicting duplicate
refused (an identical one tolerated), and a resume under other game settings refused."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from negolib.games import get_game
from negolib.games.base import Game
from negolib.games.bilateral import BilateralGame
from negolib.games.bilateral.env import BilateralConfig
from negolib.games.multi_buyer import MultiBuyerGame
from negolib.tournament import MATCHES_FILE, TournamentError, read_matches, run_tournament

Edit = Callable[[dict[str, Any]], Any]


def _agents(game: Game) -> list[str]:
    return list(game.scripted_strategies())[:2]


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The matches file of a small tournament of every registered game (two scripted agents, one seed)."""
    out = {}
    for name in ("multi_issue", "bilateral", "multi_buyer", "multi_product"):
        game = get_game(name)
        folder = tmp_path_factory.mktemp(name)
        run_tournament(game, _agents(game), 1, folder, progress=False)
        out[name] = (folder / MATCHES_FILE).read_bytes()
    return out


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _write(folder: Path, lines: list[bytes]) -> Path:
    path = folder / MATCHES_FILE
    path.write_bytes(b"".join(lines))
    return path


def _edit(line: bytes, edit: Edit) -> bytes:
    obj = json.loads(line)
    new = edit(obj)
    return json.dumps(obj if new is None else new).encode() + b"\n"


def _first(lines: list[bytes], pred: Callable[[dict[str, Any]], bool]) -> int:
    """The 0-based index of the first line whose decoded object satisfies ``pred``."""
    return next(i for i, raw in enumerate(lines) if pred(json.loads(raw)))


def _resume(name: str, folder: Path) -> None:
    game = get_game(name)
    run_tournament(game, _agents(game), 1, folder, progress=False)


def _refused(name: str, folder: Path, line: int, pattern: str) -> str:
    """Resume the tournament and read the file directly: both raise TournamentError naming the file and line."""
    path = folder / MATCHES_FILE
    with pytest.raises(TournamentError, match=rf"{MATCHES_FILE}:{line}: .*{pattern}") as exc:
        _resume(name, folder)
    with pytest.raises(TournamentError, match=rf"{MATCHES_FILE}:{line}: .*{pattern}"):
        read_matches(path, get_game(name))
    assert "\n" not in str(exc.value)
    return str(exc.value)


def _deal(obj: dict[str, Any]) -> bool:
    return obj["record"].get("status") == "deal"


def _set(path: str, value: Any) -> Edit:
    """An edit setting the dotted ``path`` of a line's object to ``value``."""
    *parents, last = path.split(".")

    def edit(obj: Any) -> None:
        for p in parents:
            obj = obj[int(p)] if isinstance(obj, list) else obj[p]
        obj[int(last) if isinstance(obj, list) else last] = value

    return edit


# -- the envelope, in every game ------------------------------------------------------------------------------

ENVELOPE: list[tuple[str, Edit, str]] = [
    ("line_is_a_list", lambda obj: [obj], "not a tournament record"),
    ("record_is_a_list", _set("record", [1, 2]), "'record' must be a JSON object"),
    ("record_is_a_string", _set("record", "deal"), "'record' must be a JSON object"),
    ("outcome_is_a_list", _set("record.outcome", [1, 2]), "outcome"),
    ("agent_seed_a_float", _set("agent_seed", 0.5), "'agent_seed' must be an integer"),
    ("agent_seed_a_string", _set("agent_seed", "0"), "'agent_seed' must be an integer"),
    ("n_seeds_a_bool", _set("n_seeds", True), "'n_seeds' must be an integer"),
    ("seller_a_number", _set("seller", 3), "'seller' must be a non-empty string"),
    ("scenario_seed_a_string", lambda obj: _set("record.seed", str(obj["record"]["seed"]))(obj), "seed"),
    ("scenario_seed_a_float", lambda obj: _set("record.seed", obj["record"]["seed"] + 0.5)(obj), "seed"),
    ("status_unknown", _set("record.status", "won"), "status"),
    ("keys_disagree", lambda obj: _set("record.scenario_key", obj["scenario_key"] + "0")(obj), "scenario_key"),
]


@pytest.mark.parametrize("name", ["multi_issue", "bilateral", "multi_buyer", "multi_product"])
@pytest.mark.parametrize("case,edit,pattern", ENVELOPE, ids=[c[0] for c in ENVELOPE])
def test_a_hostile_line_is_refused_naming_file_and_line(played, tmp_path, name, case, edit, pattern):
    lines = _lines(played[name])
    i = _first(lines, _deal)
    lines[i] = _edit(lines[i], edit)
    _write(tmp_path, lines)
    _refused(name, tmp_path, i + 1, pattern)


@pytest.mark.parametrize("name", ["multi_issue", "bilateral", "multi_buyer", "multi_product"])
def test_bad_utf8_and_non_finite_numbers_are_named_by_line(played, tmp_path, name):
    lines = _lines(played[name])
    lines[2] = lines[2].replace(b'"seller"', b'"sel\xffler"', 1)
    _write(tmp_path, lines)
    _refused(name, tmp_path, 3, "UTF-8")
    lines = _lines(played[name])
    lines[1] = lines[1].replace(b'"agent_seed":0', b'"agent_seed":NaN', 1)
    _write(tmp_path, lines)
    _refused(name, tmp_path, 2, "unreadable")


# -- each game's own invariants -------------------------------------------------------------------------------

def _bilateral_deal(obj: dict[str, Any]) -> bool:
    return _deal(obj) and obj["record"]["outcome"]["closed_by"] is not None


def _sell_again(record: dict[str, Any]) -> None:
    """Sell the first sale's product a second time, to a buyer who has not bought."""
    sales = record["outcome"]["sales"]
    free = next(b for b in range(len(record["valuations"])) if b not in {s["buyer"] for s in sales})
    over = sales[0]["price"] > record["valuations"][free][sales[0]["product"]]
    sales.append({**sales[0], "buyer": free, "overshoot": over})


GAME_CASES: list[tuple[str, Callable[[dict[str, Any]], bool], Edit, str]] = [
    ("bilateral", _bilateral_deal, _set("record.outcome.price", "12.5"), "outcome.price.*must be a finite number"),
    ("bilateral", _bilateral_deal, _set("record.outcome.price", 1e300), "outcome.price.*must be a finite number"),
    ("bilateral", _bilateral_deal, lambda o: _set("record.outcome.price", o["record"]["outcome"]["price"] + 1)(o),
     "accepted the standing offer"),
    ("bilateral", _deal, _set("record.outcome.deal", False), "outcome.deal"),
    ("bilateral", _deal, lambda o: _set("record.cost", o["record"]["cost"] / 2)(o), "cost.*but scenario"),
    ("bilateral", _deal, _set("record.config.deadline_turns", 99), "config.*but scenario"),
    ("bilateral", _deal, _set("record.outcome.turns", 99), "outcome.turns"),
    ("multi_buyer", _deal, _set("record.outcome.deals.0.price", 1e300), "price"),
    ("multi_buyer", _deal, _set("record.outcome.deals.0.buyer", 17), "deals\\[0\\].buyer"),
    ("multi_buyer", _deal, lambda o: o["record"]["outcome"]["deals"].append(o["record"]["outcome"]["deals"][0]),
     "deals"),
    ("multi_buyer", _deal, lambda o: _set("record.budgets.0", o["record"]["budgets"][0] + 1)(o), "budgets"),
    ("multi_buyer", _deal, _set("record.outcome.deals.0.overshoot", True), "overshoot"),
    ("multi_product", _deal, _set("record.outcome.sales.0.price", float("1e300")), "price"),
    ("multi_product", _deal, _set("record.outcome.sales.0.price", "cheap"), "price"),
    ("multi_product", _deal, lambda o: _sell_again(o["record"]), "already sold"),
    ("multi_product", _deal, _set("record.best_welfare", 1.0), "best_welfare"),
    ("multi_issue", _deal, _set("record.outcome.buyer_utility", 0.5), "buyer_utility.*final ledger"),
    ("multi_issue", _deal, _set("record.outcome.seller_utility", 1e300), "seller_utility"),
    ("multi_issue", _deal, _set("record.config.max_rounds", 40), "config"),
    ("multi_issue", _deal, _set("record.scenario_key", "acquisition|5000001"), "scenario_key"),
]


@pytest.mark.parametrize("name,pick,edit,pattern", GAME_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(GAME_CASES)])
def test_a_record_breaking_its_games_rules_is_refused(played, tmp_path, name, pick, edit, pattern):
    lines = _lines(played[name])
    i = _first(lines, pick)
    lines[i] = _edit(lines[i], edit)
    if json.loads(lines[i])["record"]["scenario_key"] != json.loads(lines[i])["scenario_key"]:
        lines[i] = _edit(lines[i], lambda o: _set("scenario_key", o["record"]["scenario_key"])(o))
    _write(tmp_path, lines)
    _refused(name, tmp_path, i + 1, pattern)


# -- one record per episode -----------------------------------------------------------------------------------

def test_a_conflicting_duplicate_is_refused_naming_both_lines(played, tmp_path):
    lines = _lines(played["bilateral"])
    objs = [json.loads(x) for x in lines]
    a, b = _agents(get_game("bilateral"))
    i = next(n for n, o in enumerate(objs) if (o["seller"], o["buyer"]) == (a, b))
    key = objs[i]["scenario_key"]
    other = next(o for o in objs if (o["seller"], o["buyer"]) == (b, a) and o["scenario_key"] == key)
    assert other["record"] != objs[i]["record"]
    forged = dict(objs[i], record=other["record"])  # a valid record of the same scenario, other content
    _write(tmp_path, [*lines, json.dumps(forged).encode() + b"\n"])
    msg = _refused("bilateral", tmp_path, len(lines) + 1, f"already recorded at line {i + 1}")
    assert "other content" in msg


def test_an_identical_duplicate_is_tolerated(played, tmp_path):
    lines = _lines(played["bilateral"])
    game = get_game("bilateral")
    for sub, extra in (("a", []), ("b", [lines[3]])):
        (tmp_path / sub).mkdir()
        _write(tmp_path / sub, [*lines, *extra])
    first = run_tournament(game, _agents(game), 1, tmp_path / "a", progress=False)
    again = run_tournament(game, _agents(game), 1, tmp_path / "b", progress=False)
    assert again.played == 0 and again.frame.equals(first.frame)


# -- the game's settings enter the resume check ---------------------------------------------------------------

def test_resuming_under_other_game_settings_is_refused(tmp_path):
    agents = _agents(get_game("bilateral"))
    run_tournament(BilateralGame(BilateralConfig(deadline_turns=10)), agents[:1], 1, tmp_path, progress=False)
    before = (tmp_path / MATCHES_FILE).read_bytes()
    with pytest.raises(TournamentError, match=r"matches\.jsonl:1: .*deadline_turns: 10 in the file, 6 in this run"):
        run_tournament(BilateralGame(BilateralConfig(deadline_turns=6)), agents, 1, tmp_path, progress=False)
    with pytest.raises(TournamentError, match=r"first_mover: 'seller' in the file, 'buyer' in this run"):
        run_tournament(BilateralGame(BilateralConfig(first_mover="buyer")), agents, 1, tmp_path, progress=False)
    assert (tmp_path / MATCHES_FILE).read_bytes() == before  # nothing was played into the file
    market = tmp_path / "market"
    sellers = _agents(get_game("multi_buyer"))
    run_tournament(MultiBuyerGame(), sellers, 1, market, progress=False)
    with pytest.raises(TournamentError, match=r"markets"):
        run_tournament(MultiBuyerGame(markets=["base"]), sellers, 1, market, progress=False)


# -- the command line: one line, file and line, no traceback --------------------------------------------------

def test_cli_names_file_and_line_of_a_bad_record_without_traceback(played, tmp_path):
    game = get_game("bilateral")
    cases = [
        ("utf8", lambda ls: ls.__setitem__(1, ls[1].replace(b'"buyer"', b'"bu\xfeyer"', 1)), 2, "UTF-8"),
        ("list", lambda ls: ls.__setitem__(4, _edit(ls[4], _set("record", [1]))), 5, "record"),
        ("price", lambda ls: ls.__setitem__(i, _edit(ls[i], _set("record.outcome.price", 1e300))), None, "price"),
    ]
    i = _first(_lines(played["bilateral"]), _bilateral_deal)
    for case, corrupt, line, pattern in cases:
        folder = tmp_path / case
        folder.mkdir()
        lines = _lines(played["bilateral"])
        corrupt(lines)
        path = _write(folder, lines)
        r = subprocess.run([sys.executable, "-m", "negolib", "tournament", "--game", "bilateral", "--agents",
                            ",".join(_agents(game)), "--seeds", "1", "--out", str(folder), "--no-progress"],
                           capture_output=True, text=True)
        assert r.returncode == 2, (case, r.stderr)
        assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, (case, r.stderr)
        assert r.stderr.startswith(f"error: {path}:{line or i + 1}: "), (case, r.stderr)
        assert pattern in r.stderr, (case, r.stderr)
