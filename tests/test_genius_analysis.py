"""The book's analyses of evaluation records (notebooks 05-09's library calls) on a profile that names imported
Genius scenarios: each resolves a record's scenario through the imported scenarios it is handed (``scenarios=``),
computes the imported domain's rows from that scenario, leaves out what it cannot compute with the reason stated,
and refuses with one clear error when the imported scenarios were not passed."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml

from negolib.agents.factory import build_agent
from negolib.book.widgets import EpisodeExplorer
from negolib.core.errors import ValidationError
from negolib.core.transcripts import TranscriptStore, episodes_frame
from negolib.params import load_params
from negolib.profile_genius import imported_scenarios
from negolib.study.analysis.contrasts import held_out_contrasts
from negolib.study.analysis.decomposition import decomposition
from negolib.study.analysis.quoted import _domains
from negolib.study.analysis.quoted_diagnostics import (
    deal_rate_by_domain,
    gain_shares,
    integrative_split,
    off_schema_ledger_share,
    walkaways,
)
from negolib.study.analysis.resamplers import Analysis
from negolib.study.diagnostics import (
    concession_frame,
    decomposition_columns,
    hand_read_sample,
    openings_frame,
    openings_table,
    style_table,
)
from negolib.study.efficiency import efficiency_frame
from negolib.study.evaluation import evaluate_arms, protocol_from_params
from negolib.study.paper import load_paper_reported
from negolib.study.report.quoted import integrative_table
from negolib.study.report.results import table2

FIXTURES = Path(__file__).parent / "fixtures" / "genius"
PAIRS = [("boulware", "conceder")]

# The laptop fixture's seller profile (laptop-seller.xml), by hand: weights, and evaluations per level (Genius
# divides a discrete issue's evaluations by its largest). Harddisk is the one issue the parties rank in exactly
# opposite orders (the buyer: 1, 2, 3), so the importer labels it distributive, the other two integrative. The importer
# names the monitor issue External_Monitor.
SELLER_WEIGHTS = {"Laptop": 0.5, "Harddisk": 0.3, "External_Monitor": 0.2}
SELLER_EVALS = {"Laptop": {"Dell": 12, "Macintosh": 30, "HP": 20},
                "Harddisk": {"60 Gb": 3, "80 Gb": 2, "120 Gb": 1},
                "External_Monitor": {"19'' LCD": 0.5, "20'' LCD": 0.25, "23'' LCD": 0.75}}


def _by_hand(ledger: dict, issues: tuple[str, ...] = tuple(SELLER_WEIGHTS)) -> float:
    """The seller's U~ over ``issues`` of a ledger (an unnamed term scores the party's worst evaluation)."""
    total = 0.0
    for name in issues:
        ev = SELLER_EVALS[name]
        e = ev[ledger[name]] if name in ledger else min(ev.values())
        total += SELLER_WEIGHTS[name] * e / max(ev.values())
    return total


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """A profile in a temporary folder naming two imported scenarios (laptop, and trip: discounted) beside two
    shipped domains, played by two scripted sellers through the evaluation's own path."""
    tmp = tmp_path_factory.mktemp("genius_analysis")
    shutil.copytree(FIXTURES / "laptop", tmp / "profiles" / "scenarios" / "laptop")
    profile = {
        "profile": "genius_analysis",
        "evaluation": {"buyers": ["buyer_linear"], "seeds_per_domain": 2,
                       "domains": ["car", "job_offer", "laptop", "trip"],
                       "genius": {"laptop": "scenarios/laptop",
                                  "trip": {"path": str(FIXTURES / "discounted"), "seller_profile": "party_b.xml"}}},
        "arms": {"boulware": {"backend": "scripted", "strategy": "boulware"},
                 "conceder": {"backend": "scripted", "strategy": "conceder"}},
        "buyers": {"buyer_linear": {"backend": "scripted", "strategy": "linear"}},
    }
    path = tmp / "profiles" / "genius.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    p = load_params(path)
    protocol = protocol_from_params(p)
    agents = {n: build_agent(n, p.agent(n)) for n in [*protocol.arm_names, *protocol.buyers]}
    res = evaluate_arms(protocol, agents, TranscriptStore(tmp / "eval.jsonl"), progress=False)
    assert not res.errors and len(res.records) == 2 * 4 * 2
    imported = imported_scenarios(p.evaluation.genius)
    assert imported["trip"].seller.discount < 1 and imported["laptop"].seller.discount == 1
    return SimpleNamespace(params=p, records=res.records, imported=imported,
                           an=Analysis.from_params(episodes_frame(res.records), p))


def _laptop_deals(records: list[dict]) -> list[dict]:
    deals = [r for r in records if r["domain"] == "laptop" and r["status"] == "deal"]
    assert deals, "the scripted pair closes on the laptop scenario"
    return deals


def test_without_the_imported_scenarios_every_analysis_says_how_to_pass_them(played: SimpleNamespace) -> None:
    records, an = played.records, played.an
    calls = {
        "openings_frame": lambda: openings_table(records),  # notebooks 05, 08, 09
        "decomposition_columns": lambda: decomposition(an, PAIRS),  # 05, 08
        "decomposition_columns ": lambda: integrative_split(an, PAIRS),  # 05
        "concession_frame": lambda: style_table(records),  # 07
        "hand_read_sample": lambda: hand_read_sample(records, "boulware", seed=0),  # 07
        "ledger_off_schema": lambda: off_schema_ledger_share(an.df),  # 07
        "efficiency_frame": lambda: efficiency_frame(an.df),  # 09
    }
    for where, call in calls.items():
        with pytest.raises(ValidationError) as err:
            call()
        msg = str(err.value)
        assert msg.startswith(where.strip()) and err.value.field == "domain", msg
        assert "['laptop', 'trip']" in msg and "scenarios=imported_scenarios(params.evaluation.genius)" in msg


def test_openings_of_the_imported_domain_are_scored_in_its_scenario(played: SimpleNamespace) -> None:
    f = openings_frame(played.records, scenarios=played.imported)
    laptop = f[f["domain"] == "laptop"]
    assert len(laptop) == 4 and set(f["domain"]) == {"car", "job_offer", "laptop", "trip"}
    for rec in played.records:
        if rec["domain"] != "laptop":
            continue
        first = next(t for t in rec["turns"] if t["role"] == "seller")
        row = laptop[(laptop["arm"] == rec["arm"]) & (laptop["seed"] == rec["seed"])].iloc[0]
        assert row["opening_score"] == pytest.approx(_by_hand(first["ledger"]))
        assert row["n_opening_terms"] <= 3 and row["opening_terms_share"] == row["n_opening_terms"] / 3
    table = openings_table(played.records, scenarios=played.imported)
    assert set(table["arm"]) == {"boulware", "conceder"} and (table["n_episodes"] == 8).all()


def test_the_decomposition_splits_by_the_imported_labels_and_skips_the_discounted(played: SimpleNamespace) -> None:
    df = decomposition_columns(played.an.df, scenarios=played.imported)
    by_key = df.set_index(["arm", "domain", "seed"])
    for rec in _laptop_deals(played.records):
        row = by_key.loc[(rec["arm"], "laptop", rec["seed"])]
        ledger = rec["outcome"]["final_ledger"]
        assert row["seller_dist"] == pytest.approx(_by_hand(ledger, ("Harddisk",)))
        assert row["seller_int"] == pytest.approx(_by_hand(ledger, ("Laptop", "External_Monitor")))
        assert row["seller_u"] == pytest.approx(rec["outcome"]["seller_utility"]) == pytest.approx(_by_hand(ledger))
    trip = df[df["domain"] == "trip"]
    assert trip["seller_u"].isna().all() and trip["split_skipped"].str.contains("time discount").all()
    assert (df.loc[df["domain"] != "trip", "split_skipped"] == "").all()

    d = decomposition(played.an, PAIRS, scenarios=played.imported)  # notebooks 05 and 08: Tables 2 and 9
    assert set(d["metric"]) >= {"seller_distributive", "seller_integrative", "welfare"}
    assert (d["n_skipped"] == 4).all() and "trip: imported with a time discount" in d.attrs["skipped"]
    # the laptop deals are among the contrasted ones: the shipped-only decomposition contrasts fewer
    shipped = decomposition(Analysis.from_params(played.an.df[played.an.df["domain"].isin(["car", "job_offer"])],
                                                 played.params), PAIRS)
    assert (d["n_episodes"] > shipped["n_episodes"]).all() and (shipped["n_skipped"] == 0).all()
    assert not gain_shares(d).empty
    paper = load_paper_reported(played.params.paper_reported_path)
    assert any("trip: imported with a time discount" in n for n in table2(d, {}, played.params, paper).notes)

    split = integrative_split(played.an, PAIRS, scenarios=played.imported)  # notebook 05
    assert len(split) == 5 and (split["n_skipped"] == 4).all() and "trip" in split.attrs["skipped"]
    assert any("trip" in n for n in integrative_table(split, played.params, paper).notes)


def test_style_hand_read_and_off_schema_read_the_imported_schema(played: SimpleNamespace) -> None:
    records, imported = played.records, played.imported
    style = style_table(records, scenarios=imported)  # notebook 07
    assert set(style["arm"]) == {"boulware", "conceder"} and (style["n_episodes"] == 8).all()
    conc = concession_frame(records, scenarios=imported)
    assert set(conc.loc[conc["domain"] == "laptop", "changed_terms"].str.split(",").sum()) <= set(SELLER_WEIGHTS) | {""}
    sample = hand_read_sample(records, "boulware", seed=0, scenarios=imported)  # notebook 07
    assert set(sample.loc[sample["domain"].isin(["laptop", "trip"]), "family"]) == {"imported"}
    assert list(dict.fromkeys(sample["family"])) == ["training", "held-out", "imported"]
    off = off_schema_ledger_share(played.an.df, scenarios=imported).set_index("arm")  # notebook 07
    assert (off["n_deals"] == played.an.df[played.an.df["deal"]].groupby("arm").size()).all()
    assert not walkaways(played.an.df, 24).empty


def test_domain_sets_never_count_an_imported_scenario_as_training_or_held_out(played: SimpleNamespace) -> None:
    genius = played.params.evaluation.genius  # quoted_contrasts passes the profile's
    assert _domains(played.an, "training", genius) == ("job_offer",) and _domains(played.an, "held_out", genius) == (
        "car",)
    assert _domains(played.an, "training") == ("job_offer", "laptop", "trip")  # what it would count without
    assert isinstance(held_out_contrasts(played.an.df, played.params), pd.DataFrame)  # notebook 06 (car only)
    rates = deal_rate_by_domain(played.an, [("conceder", "boulware")])  # notebook 06
    assert {"laptop", "trip"} <= set(rates["domain"])
    laptop = rates[rates["domain"] == "laptop"].iloc[0]
    want = np.mean([r["status"] == "deal" for r in played.records if (r["domain"], r["arm"]) == ("laptop", "conceder")])
    assert laptop["arm_rate"] == pytest.approx(want)


def test_efficiency_and_the_explorer_use_the_imported_scenario(played: SimpleNamespace) -> None:
    eff = efficiency_frame(played.an.df, scenarios=played.imported)  # notebook 09
    assert len(eff[eff["domain"] == "laptop"]) == 4
    rec = _laptop_deals(played.records)[0]
    explorer = EpisodeExplorer(SimpleNamespace(params=played.params))  # the profile's imported scenarios
    turn, table = explorer.turn(rec, len(rec["turns"]))
    assert list(table.index) == list(SELLER_WEIGHTS)
    assert table["seller contribution"].sum() == pytest.approx(_by_hand(turn["ledger"]), abs=2e-3)
    with pytest.raises(ValidationError, match="laptop"):
        EpisodeExplorer(SimpleNamespace(params=played.params), scenarios={}).turn(rec, 1)
