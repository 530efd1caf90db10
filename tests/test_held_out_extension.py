"""App. C's held-out-panel extension: its protocol (the next block of evaluation seeds, the held-out domain only),
when it runs (the profile asks for it and the trigger fired), resumability, and the doubled panel's clusters."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
import yaml

from negolib.book.context import open_book
from negolib.core.errors import ValidationError
from negolib.core.transcripts import TranscriptStore
from negolib.games.multi_issue.scenarios import TRAIN_SEED_BLOCK, VALIDATION_SEED_BLOCK
from negolib.games.multi_issue.scripted import make_scripted
from negolib.params import load_params
from negolib.study.analysis.contrasts import extension_fires, held_out_contrasts, run_pairs
from negolib.study.analysis.resamplers import Analysis
from negolib.study.evaluation import (
    ArmSpec,
    PilotLog,
    Protocol,
    ProtocolError,
    SeedBlock,
    evaluate_arms,
    evaluation_frame,
    freeze,
    held_out_extension_protocol,
    load_protocol,
    pilot_gate,
    protocol_from_params,
    protocol_hash,
    run_held_out_extension,
)
from negolib.study.report.appendix_b_c import extension_panel_table

ROOT = Path(__file__).resolve().parent.parent
SCRIPTED = {"backend": "scripted"}
SMOKE = ROOT / "params" / "smoke.yaml"


def tiny_protocol(**kw) -> Protocol:
    """Two scripted sellers named as the smoke profile's base and shared-recipe arms (so its design reads them),
    the LM-like one on a declared 1-seed subset of the held-out domain; two buyers; 2 seeds x 2 domains."""
    base = dict(
        name="tiny",
        arms=(ArmSpec("tiny_base", {**SCRIPTED, "strategy": "fixed_offer"}),
              ArmSpec("tiny_grpo", {**SCRIPTED, "strategy": "boulware"}),
              ArmSpec("tiny_warmup", {**SCRIPTED, "strategy": "conceder"}, n_seeds=1, domains=("car",)),
              ArmSpec("acq_only", {**SCRIPTED, "strategy": "conceder"}, domains=("acquisition",))),
        buyers={"hh": {**SCRIPTED, "strategy": "hardheaded"}, "con": {**SCRIPTED, "strategy": "conceder"}},
        domains=("acquisition", "car"), held_out_domain="car", seeds=SeedBlock(n=2),
        primary=(("tiny_grpo", "tiny_base"),), n_resamples=200,
    )
    base.update(kw)
    return Protocol(**base)


def agents() -> dict:
    return {"tiny_base": make_scripted("fixed_offer"), "tiny_grpo": make_scripted("boulware"),
            "tiny_warmup": make_scripted("conceder"), "acq_only": make_scripted("conceder"),
            "hh": make_scripted("hardheaded"), "con": make_scripted("conceder")}


def _frame(path: Path, protocol_file: Path) -> pd.DataFrame:
    return evaluation_frame(TranscriptStore(path).records(), protocol_hash(load_protocol(protocol_file)))


# -- the extension protocol ------------------------------------------------------------------------

def test_extension_protocol_is_the_held_out_domain_on_the_next_seed_block():
    main = tiny_protocol()
    ext = held_out_extension_protocol(main)
    assert ext.seeds == SeedBlock(main.seeds.start + main.seeds.n, main.seeds.n)
    assert ext.domains == ("car",) and ext.held_out_domain == "car"
    assert ext.arm_names == ["tiny_base", "tiny_grpo", "tiny_warmup"]  # acq_only never played the held-out domain
    assert ext.arm("tiny_warmup").n_seeds == 1 and ext.arm("tiny_warmup").domains is None  # as many again
    assert ext.primary == () and list(ext.buyers) == list(main.buyers)
    assert protocol_hash(ext) != protocol_hash(main) and ext.name == "tiny.held_out_extension"
    with pytest.raises(ProtocolError, match="no held-out domain"):
        held_out_extension_protocol(tiny_protocol(held_out_domain=None))


@pytest.mark.parametrize("profile", ["smoke", "default", "paper"])
def test_extension_seeds_never_overlap_the_main_panel_or_training(profile):
    params = load_params(ROOT / "params" / f"{profile}.yaml")
    main = protocol_from_params(params)
    ext = held_out_extension_protocol(main)
    ev = params.evaluation
    assert ext.seeds.n == ev.seeds_per_domain and ext.seeds.start == main.seeds.start + ev.seeds_per_domain
    main_seeds = set(main.seeds.seeds)
    ext_seeds = set(ext.seeds.seeds)
    assert not ext_seeds & main_seeds
    assert not ext_seeds & (set(TRAIN_SEED_BLOCK) | set(VALIDATION_SEED_BLOCK))
    for arm in ext.arms:  # LM arms: as many again as their declared subset, from the new block
        assert arm.n_seeds == (ev.lm_seeds_per_domain if params.is_lm(arm.name) else None)
        played = set(ext.seeds.seeds[:arm.n_seeds])
        assert len(played) == (arm.n_seeds or ev.seeds_per_domain) and not played & main_seeds


# -- when it runs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("enabled, fires", [(False, True), (True, False), (True, None), (False, None)])
def test_the_extension_runs_only_when_asked_for_and_the_trigger_fires(tmp_path, enabled, fires):
    out = run_held_out_extension(tiny_protocol(), agents(), tmp_path / "ext.jsonl", tmp_path / "ext.yaml",
                                 enabled=enabled, fires=fires, progress=False)
    assert out is None
    assert not (tmp_path / "ext.jsonl").exists() and not (tmp_path / "ext.yaml").exists()


def test_the_extension_runs_resumably_into_its_own_files(tmp_path):
    main = tiny_protocol()
    store, pfile = tmp_path / "ext.jsonl", tmp_path / "ext.yaml"
    first = run_held_out_extension(main, agents(), store, pfile, enabled=True, fires=True, progress=False,
                                   arms=["tiny_base", "tiny_grpo", "acq_only"], date="2026-01-01")
    assert first is not None and len(first.records) == 2 * 2 * 2  # 2 arms x 2 seeds x car x 2 buyers
    assert load_protocol(pfile) == held_out_extension_protocol(main)
    df = _frame(store, pfile)
    assert set(df["domain"]) == {"car"} and set(df["seed"]) == set(held_out_extension_protocol(main).seeds.seeds)
    again = run_held_out_extension(main, agents(), store, pfile, enabled=True, fires=True, progress=False)
    assert len(again.records) == 2 and again.skipped == 8  # only the subset arm's new episodes (1 seed x 2 buyers)
    third = run_held_out_extension(main, agents(), store, pfile, enabled=True, fires=True, progress=False)
    assert third.records == [] and third.skipped == 10
    assert len(TranscriptStore(store).records()) == 10
    other = dataclasses.replace(main, max_rounds=6)  # another main protocol: another extension, refused here
    with pytest.raises(ProtocolError, match="already frozen"):
        run_held_out_extension(other, agents(), store, pfile, enabled=True, fires=True, progress=False)


def test_a_resumed_pilot_gate_reports_the_cells_already_played(tmp_path):
    """Notebook 04 re-executed on its outputs (the extension then resumes): the pilot gate plays nothing new and
    still reports every cell, and logs it (no NaN mean turns in the log)."""
    store, log = TranscriptStore(tmp_path / "pilot.jsonl"), tmp_path / "pilot_log.jsonl"
    first = pilot_gate(tiny_protocol(), agents(), 1, store=store, log=log)
    again = pilot_gate(tiny_protocol(), agents(), 1, store=store, log=log)
    cols = ["arm", "buyer", "n_episodes", "n_turns", "passed"]
    assert again.cells[cols].equals(first.cells[cols]) and (again.cells["n_episodes"] == 1).all()
    assert len(again.records) == len(first.records) == 8
    assert len(PilotLog(log).frame()) == 16


# -- the doubled panel -------------------------------------------------------------------------------

def test_the_union_of_both_panels_doubles_the_held_out_clusters(tmp_path):
    main = tiny_protocol()
    freeze(main, tmp_path / "main.yaml")
    evaluate_arms(main, agents(), tmp_path / "main.jsonl", progress=False)
    run_held_out_extension(main, agents(), tmp_path / "ext.jsonl", tmp_path / "ext.yaml", enabled=True,
                           fires=True, progress=False)
    main_df, ext_df = _frame(tmp_path / "main.jsonl", tmp_path / "main.yaml"), _frame(tmp_path / "ext.jsonl",
                                                                                        tmp_path / "ext.yaml")
    union = pd.concat([main_df, ext_df], ignore_index=True)
    pairs = [("tiny_grpo", "tiny_base"), ("tiny_warmup", "tiny_base")]
    one = run_pairs(Analysis(main_df, 200), pairs, domains=["car"]).set_index("arm_a")["n_clusters"]
    two = run_pairs(Analysis(union, 200), pairs, domains=["car"]).set_index("arm_a")["n_clusters"]
    assert one.to_dict() == {"tiny_grpo": 2, "tiny_warmup": 1}
    assert two.to_dict() == {"tiny_grpo": 4, "tiny_warmup": 2}
    # the book's path: the held-out contrasts of the profile's design, main panel beside doubled panel
    params = load_params(SMOKE)
    original, doubled = held_out_contrasts(main_df, params), held_out_contrasts(union, params)
    table = extension_panel_table(original, doubled, params)
    row = table.frame.set_index("arm").loc["tiny_grpo"]
    assert row["main panel: seeds"] == 2 and row["doubled panel: seeds"] == 4
    assert set(table.data["panel"]) == {"main panel", "doubled panel"}


def test_the_book_reads_the_trigger_and_the_extension_episodes(tmp_path):
    book = open_book(SMOKE, tmp_path)
    assert book.held_out_extension_episodes().empty
    assert extension_fires(book.held_out_extension_trigger()) is None  # nothing evaluated: the trigger cannot read
    main = tiny_protocol()
    freeze(main, book.paths.protocol)
    evaluate_arms(main, agents(), book.paths.transcripts, progress=False)
    trigger = book.held_out_extension_trigger()
    assert bool(trigger.set_index("role").loc["shared", "available"])
    assert isinstance(extension_fires(trigger), bool)
    run_held_out_extension(main, agents(), book.paths.held_out_extension_transcripts,
                           book.paths.held_out_extension_protocol, enabled=True, fires=True, progress=False)
    ext = book.held_out_extension_episodes()
    assert set(ext["domain"]) == {"car"} and len(ext) == 10
    assert not set(ext["seed"]) & set(book.episodes()["seed"])
    assert book.paths.held_out_extension_transcripts != book.paths.transcripts


# -- the profile field ---------------------------------------------------------------------------------

def _smoke_with(tmp_path: Path, **evaluation) -> Path:
    data = yaml.safe_load(SMOKE.read_text())
    data["evaluation"].update(evaluation)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_the_profile_field_is_validated(tmp_path):
    assert load_params(ROOT / "params" / "paper.yaml").evaluation.held_out_extension is True
    assert load_params(ROOT / "params" / "default.yaml").evaluation.held_out_extension is False
    assert load_params(_smoke_with(tmp_path, held_out_extension=True)).evaluation.held_out_extension is True
    with pytest.raises(ValidationError) as e:
        load_params(_smoke_with(tmp_path, held_out_extension="yes"))
    assert e.value.field == "evaluation.held_out_extension"
    with pytest.raises(ValidationError) as e:
        load_params(_smoke_with(tmp_path, held_out_extension=True, domains=["acquisition"], lm_domains=None))
    assert e.value.field == "evaluation.held_out_extension" and "no held-out panel" in str(e.value)
