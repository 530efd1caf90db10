"""Imported Genius scenarios in play: the scenario file, the CLI, prompts, discount at closing, a tournament."""

from __future__ import annotations

from pathlib import Path

import pytest

from negolib.cli import main
from negolib.core.errors import ValidationError
from negolib.games.multi_issue import MultiIssueGame
from negolib.games.multi_issue.env import Episode
from negolib.games.multi_issue.genius import read_genius_folder
from negolib.games.multi_issue.imported import load_imported, load_scenario_file
from negolib.games.multi_issue.prompts import render_messages
from negolib.games.multi_issue.utility import both_utilities
from negolib.tournament import run_tournament

FIXTURES = Path(__file__).parent / "fixtures" / "genius"


@pytest.mark.parametrize("case", ["laptop", "numeric", "discounted"])
def test_scenario_file_round_trip(tmp_path: Path, case: str) -> None:
    out = tmp_path / f"{case}.yaml"
    assert main(["genius", "import", str(FIXTURES / case), "--out", str(out)]) == 0
    assert load_scenario_file(out) == read_genius_folder(FIXTURES / case)


def test_export_cli(tmp_path: Path) -> None:
    assert main(["genius", "export", "--domain", "car", "--seed", "3", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["car_3-buyer.xml", "car_3-domain.xml", "car_3-seller.xml"]


def test_malformed_xml_names_file_and_field(tmp_path: Path) -> None:
    for f in (FIXTURES / "laptop").iterdir():
        (tmp_path / f.name).write_text(f.read_text().replace('<weight index="2" value="0.3"/>',
                                                             '<weight index="2" value="heavy"/>'))
    with pytest.raises(ValidationError) as err:
        read_genius_folder(tmp_path)
    assert "laptop-seller.xml" in str(err.value) and "weight[2].value" in str(err.value)


def test_unnamed_terms_score_worst_and_discount_applies() -> None:
    sc = load_imported(FIXTURES / "discounted", seller="party_b.xml")
    assert both_utilities(sc, {})[0] == pytest.approx(sum(w * min(e) for w, e in zip(sc.seller.weights,
                                                                                   sc.seller.evaluations)))
    ep = Episode(sc)
    ep.step('{"action": "COUNTER", "terms": [{"name": "destination", "value": "Beach"}, '
            '{"name": "nights", "value": 5}, {"name": "catering", "value": "breakfast"}]}')
    ep.step('{"action": "ACCEPT"}')
    u = both_utilities(sc, ep.ledger)
    t = 2 / ep.config.max_turns
    assert ep.outcome.seller_utility == pytest.approx(u[0] * 0.9 ** t)
    assert ep.outcome.buyer_utility == pytest.approx(u[1] * 0.8 ** t)
    undiscounted = load_imported(FIXTURES / "discounted", discount=False, seller="party_b.xml")
    assert undiscounted.seller.discount == undiscounted.buyer.discount == 1.0


def test_prompt_renders_levels_with_values() -> None:
    sc = load_imported(FIXTURES / "laptop")
    ep = Episode(sc)
    text = "\n".join(m["content"] for m in render_messages(ep.view("seller"), "evaluation"))
    assert "Macintosh 100%" in text and "Dell 40%" in text


def test_tournament_plays_imported_scenario(tmp_path: Path) -> None:
    game = MultiIssueGame(scenarios=[load_imported(FIXTURES / "numeric")])
    res = run_tournament(game, ["boulware", "conceder", "hardheaded"], 1, tmp_path, progress=False)
    assert res.n_errors == 0 and len(res.frame) == 9
    # resuming reads the records back through the game's checks (the imported scenario's utilities)
    again = run_tournament(MultiIssueGame(scenarios=[load_imported(FIXTURES / "numeric")]),
                           ["boulware", "conceder", "hardheaded"], 1, tmp_path, progress=False)
    assert again.played == 0 and len(again.frame) == 9
