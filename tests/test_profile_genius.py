"""A profile's evaluation names imported Genius scenarios (``evaluation.genius``): checked at load, frozen into the
protocol, played through the evaluation's own path, and read back by the efficiency analysis (a tournament's
records too: the frontier is the imported scenario's, not one drawn from (domain, seed))."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from negolib.agents.factory import build_agent
from negolib.core.errors import ValidationError
from negolib.core.transcripts import TranscriptStore
from negolib.games.matches import read_matches
from negolib.games.multi_issue import MultiIssueGame
from negolib.games.multi_issue.imported import load_imported, save_scenario_file
from negolib.games.multi_issue.utility import both_utilities
from negolib.params import load_params, parse_params
from negolib.profile_genius import imported_scenarios
from negolib.study.analysis.design import scenario_set_counts
from negolib.study.efficiency import efficiency_frame, pareto_frontier, per_arm_efficiency
from negolib.study.evaluation import (
    build_specs,
    evaluate_arms,
    freeze,
    load_protocol,
    protocol_from_dict,
    protocol_from_params,
    protocol_hash,
    protocol_to_dict,
)
from negolib.study.report.beyond import pareto_figure
from negolib.tournament import run_tournament

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "genius"


def _profile(genius: object, domains: list[str] | None = None) -> dict:
    return {
        "profile": "genius_demo",
        "evaluation": {"buyers": ["buyer_linear"], "seeds_per_domain": 2,
                       "domains": domains if domains is not None else ["car", "laptop"], "genius": genius},
        "arms": {"boulware": {"backend": "scripted", "strategy": "boulware"},
                 "conceder": {"backend": "scripted", "strategy": "conceder"}},
        "buyers": {"buyer_linear": {"backend": "scripted", "strategy": "linear"}},
    }


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "profiles" / "genius.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def laptop_profile(tmp_path: Path) -> Path:
    """A profile beside a copy of the laptop fixture, named by a path relative to the profile."""
    shutil.copytree(FIXTURES / "laptop", tmp_path / "profiles" / "scenarios" / "laptop")
    return _write(tmp_path, _profile({"laptop": "scenarios/laptop"}))


def test_profile_naming_a_genius_folder_loads(laptop_profile: Path) -> None:
    p = load_params(laptop_profile)
    src = p.evaluation.genius["laptop"]
    assert Path(src.path) == (laptop_profile.parent / "scenarios" / "laptop").resolve()
    sc = imported_scenarios(p.evaluation.genius)["laptop"]
    assert sc.domain.name == "laptop" and sc.domain.imported
    assert sc.seller == load_imported(FIXTURES / "laptop").seller


def test_profile_naming_a_converted_file_with_options_loads(tmp_path: Path) -> None:
    save_scenario_file(load_imported(FIXTURES / "discounted", seller="party_b.xml"), tmp_path / "trip.yaml")
    path = _write(tmp_path, _profile({"trip": {"path": str(tmp_path / "trip.yaml"), "discount": False}},
                                     ["trip"]))
    sc = imported_scenarios(load_params(path).evaluation.genius)["trip"]
    assert sc.seller.discount == sc.buyer.discount == 1.0
    folder = _write(tmp_path, _profile({"trip": {"path": str(FIXTURES / "discounted"),
                                                 "seller_profile": "party_b.xml"}}, ["trip"]))
    assert imported_scenarios(load_params(folder).evaluation.genius)["trip"].seller.discount == pytest.approx(0.9)


@pytest.mark.parametrize("genius, field, words", [
    ({"laptop": "scenarios/nowhere"}, "evaluation.genius.laptop", "does not exist"),
    ({"laptop": {"path": "scenarios/nowhere"}}, "evaluation.genius.laptop.path", "does not exist"),
    ({"laptop": {"path": "x", "seller": "a.xml"}}, "evaluation.genius.laptop", "unknown keys"),
    ({"laptop": {"path": str(FIXTURES / "laptop"), "discount": "no"}}, "evaluation.genius.laptop.discount",
     "true or false"),
    ({"car": str(FIXTURES / "laptop")}, "evaluation.genius.car", "shipped domain"),
])
def test_bad_genius_entries_are_refused_at_load(tmp_path: Path, genius: dict, field: str, words: str) -> None:
    path = _write(tmp_path, _profile(genius, ["car"]))
    with pytest.raises(ValidationError) as err:
        load_params(path)
    assert err.value.field == field and str(path.resolve()) in str(err.value) and words in str(err.value)


def test_broken_scenario_is_refused_naming_profile_field_and_file(tmp_path: Path) -> None:
    broken = tmp_path / "profiles" / "broken"
    shutil.copytree(FIXTURES / "laptop", broken)
    seller = broken / "laptop-seller.xml"
    seller.write_text(seller.read_text().replace('<weight index="2" value="0.3"/>',
                                                 '<weight index="2" value="heavy"/>'))
    path = _write(tmp_path, _profile({"laptop": "broken"}))
    with pytest.raises(ValidationError) as err:
        load_params(path)
    msg = str(err.value)
    assert err.value.field == "evaluation.genius.laptop" and str(path.resolve()) in msg
    assert "laptop-seller.xml" in msg and "weight[2].value" in msg


def test_a_domain_must_be_shipped_or_imported(tmp_path: Path) -> None:
    path = _write(tmp_path, _profile({"laptop": str(FIXTURES / "laptop")}, ["car", "numeric"]))
    with pytest.raises(ValidationError) as err:
        load_params(path)
    assert err.value.field == "evaluation.domains" and "numeric" in str(err.value)


def test_omitted_domains_play_the_shipped_and_the_imported(laptop_profile: Path) -> None:
    data = yaml.safe_load(laptop_profile.read_text())
    data["evaluation"]["domains"] = None
    p = parse_params(data, str(laptop_profile))
    protocol = protocol_from_params(p)
    assert protocol.domains[-1] == "laptop" and len(protocol.domains) == 10
    assert protocol.held_out_domain == "car"
    counts = scenario_set_counts(p).set_index("quantity")
    assert counts.loc["domains", "scripted"] == 10 and counts.loc["held_out_episodes_per_arm", "scripted"] == 2


def test_protocol_embeds_the_scenario_and_round_trips(laptop_profile: Path, tmp_path: Path) -> None:
    protocol = protocol_from_params(load_params(laptop_profile))
    assert set(protocol.genius) == {"laptop"}
    back = protocol_from_dict(protocol_to_dict(protocol))
    assert back.genius == protocol.genius and protocol_hash(back) == protocol_hash(protocol)
    h = freeze(protocol, tmp_path / "protocol.yaml")
    assert protocol_hash(load_protocol(tmp_path / "protocol.yaml")) == h
    # the hash follows the preferences, not the path: another weight is another protocol
    data = protocol_to_dict(protocol)
    data["genius"]["laptop"]["parties"]["seller"]["weights"] = {
        k: (1.0 if i == 0 else 0.0) for i, k in enumerate(data["genius"]["laptop"]["parties"]["seller"]["weights"])}
    assert protocol_hash(protocol_from_dict(data)) != h
    # a protocol without imported scenarios writes no key (hashes frozen before the field are kept)
    shipped = protocol_from_params(load_params(ROOT / "params" / "smoke.yaml"))
    assert "genius" not in protocol_to_dict(shipped)


def test_protocol_refuses_a_broken_embedded_scenario(laptop_profile: Path) -> None:
    data = protocol_to_dict(protocol_from_params(load_params(laptop_profile)))
    data["genius"]["laptop"]["parties"]["buyer"]["weights"]["brand"] = 7
    with pytest.raises(ValidationError) as err:
        protocol_from_dict(data, "protocol.yaml")
    assert "genius.laptop.parties.buyer.weights" in err.value.field


@pytest.fixture
def played(laptop_profile: Path, tmp_path: Path) -> tuple:
    """The profile's evaluation, played through evaluate_arms: scripted arms on car and the imported laptop."""
    p = load_params(laptop_profile)
    protocol = protocol_from_params(p)
    agents = {n: build_agent(n, p.agent(n)) for n in [*protocol.arm_names, *protocol.buyers]}
    store = TranscriptStore(tmp_path / "eval.jsonl")
    res = evaluate_arms(protocol, agents, store, progress=False)
    return p, protocol, res, store


def test_evaluation_plays_the_imported_scenario_end_to_end(played: tuple) -> None:
    p, protocol, res, store = played
    assert not res.errors and len(res.records) == 2 * 2 * 2  # arms x domains x seeds (one buyer)
    laptop = [r for r in res.records if r["domain"] == "laptop"]
    assert len(laptop) == 4 and {r["seed"] for r in laptop} == set(protocol.seeds.seeds)
    sc = imported_scenarios(p.evaluation.genius)["laptop"]
    for r in laptop:
        assert r["held_out"] is False and r["protocol_hash"] == protocol_hash(protocol)
        if r["status"] == "deal":
            ledger = r["outcome"]["final_ledger"]
            assert set(ledger) <= set(sc.domain.issue_names)
            assert r["outcome"]["seller_utility"] == pytest.approx(both_utilities(sc, ledger)[0])
    assert any(r["status"] == "deal" for r in laptop)
    # the fixed preferences: every replicate of a deterministic pair plays the same episode
    by_arm = {}
    for r in laptop:
        by_arm.setdefault(r["arm"], set()).add(str(r["outcome"]))
    assert all(len(v) == 1 for v in by_arm.values())
    specs = build_specs(protocol)
    assert {s.scenario.domain.name for s in specs} == {"car", "laptop"}
    assert len(store.to_dataframe()) == len(specs)
    # resuming reads the imported records back under the same settings and plays nothing
    agents = {n: build_agent(n, p.agent(n)) for n in [*protocol.arm_names, *protocol.buyers]}
    again = evaluate_arms(protocol_from_params(p), agents, store.path, progress=False)
    assert again.skipped == len(specs) and not again.records


def test_efficiency_on_the_profiles_imported_records(played: tuple) -> None:
    p, _, res, _ = played
    imported = imported_scenarios(p.evaluation.genius)
    df = efficiency_frame(res.records, scenarios=imported)
    rows = df[df["domain"] == "laptop"]
    frontier = pareto_frontier(imported["laptop"])
    assert len(rows) == 4 and np.allclose(rows["max_welfare"], frontier.max_welfare)
    for _, row in rows[rows["status"] == "deal"].iterrows():
        point = np.asarray(both_utilities(imported["laptop"], json.loads(row["final_ledger"])))
        assert row["pareto_distance"] == pytest.approx(frontier.distance(point))
    summary = per_arm_efficiency(df[df["domain"] == "laptop"].drop(columns=["pareto_distance"]), scenarios=imported)
    assert set(summary["arm"]) == {"boulware", "conceder"} and summary["n_deals"].sum() >= 1
    with pytest.raises(ValidationError, match="laptop"):  # without the scenarios the domain is unknown
        efficiency_frame(res.records)


def test_efficiency_on_an_imported_tournament(tmp_path: Path) -> None:
    sc = load_imported(FIXTURES / "numeric")
    game = MultiIssueGame(scenarios=[sc])
    res = run_tournament(game, ["boulware", "conceder", "hardheaded"], 1, tmp_path, progress=False)
    records = [{**m.record, "arm": m.seller, "buyer": m.buyer} for m in read_matches(res.path, game)]
    df = efficiency_frame(records, scenarios={sc.domain.name: sc})
    frontier = pareto_frontier(sc)
    deals = df[df["status"] == "deal"]
    assert len(df) == 9 and len(deals) >= 1 and np.allclose(df["max_welfare"], frontier.max_welfare)
    for _, row in deals.iterrows():
        point = np.asarray(both_utilities(sc, json.loads(row["final_ledger"])))
        assert row["pareto_distance"] == pytest.approx(frontier.distance(point))
        assert row["welfare_ratio"] == pytest.approx(point.sum() / frontier.max_welfare)
    summary = per_arm_efficiency(df)
    assert set(summary["arm"]) == {"boulware", "conceder", "hardheaded"}
    fig = pareto_figure(records, sc.domain.name, 0, scenarios={sc.domain.name: sc})  # notebook 09's figure
    assert fig.axes[0].collections  # the frontier and the deals are drawn


def test_docs_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    """docs/genius.md's profile snippet and script, run in a copy of the layout they assume."""
    text = (ROOT / "docs" / "genius.md").read_text().split("## In a profile's evaluation", 1)[1]
    snippet = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    script = text.split("```python\n", 1)[1].split("```", 1)[0]
    shutil.copytree(FIXTURES / "laptop", tmp_path / "tests" / "fixtures" / "genius" / "laptop")
    (tmp_path / "params").mkdir()
    (tmp_path / "params" / "laptop_demo.yaml").write_text(snippet)
    monkeypatch.chdir(tmp_path)
    exec(compile(script, "docs/genius.md", "exec"), {})
    out = capsys.readouterr().out
    assert "boulware" in out and "pareto_distance" in out
    assert (tmp_path / "outputs" / "laptop_demo" / "evaluation.jsonl").exists()
