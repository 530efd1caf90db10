"""Notebook 9's App. A limitations as arms and analyses: known answers on synthetic frames, the profiles' arms, and
the accept-terms and extra-buyer variants played for real (scripted parties, seconds)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from paper_frames import assert_tidy

from negolib.games.multi_issue.metrics import synthetic_episodes
from negolib.params import load_params
from negolib.study.analysis.beyond import turn_order_contrasts
from negolib.study.analysis.limitations import (
    LIMITATIONS,
    NO_RUN,
    PAPER_ONLY,
    buyer_panel,
    limitations_frame,
    lr_sweep,
    lr_sweep_arms,
    matched_flops,
    matched_flops_reads,
    relative_flops,
    same_agent,
    seed_spread,
    self_play_split,
    trained_base_pairs,
)
from negolib.study.analysis.resamplers import Analysis
from negolib.study.report.beyond import (
    accept_terms_table,
    buyer_panel_table,
    limitations_table,
    lr_sweep_table,
    matched_flops_table,
    seed_spread_table,
    self_play_split_table,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def profiles():
    return {n: load_params(ROOT / "params" / f"{n}.yaml") for n in ("smoke", "default", "paper")}


def test_every_limitation_is_listed_with_where_it_runs(profiles, tmp_path):
    paper = profiles["paper"]
    full = limitations_frame(paper)
    assert_tidy(full, identifiers=("key", "limitation", "addressed_by", "here", "paper"))
    assert len(full) == len(LIMITATIONS) and full["key"].is_unique
    no_run = set(full.loc[~full["addressable"], "key"])
    assert no_run == {"one_family", "size_architecture", "co_adaptation", "rl_algorithm", "sampling"}
    # App. A's three paragraphs the book once left out: each listed with its arm, analysis or the reason none runs
    assert {"held_out_n128", "off_schema", "sampling"} <= set(full["key"])
    assert full.set_index("key").loc["held_out_n128", "here"] == "held-out extension (evaluation.held_out_extension)"
    assert "provider-side" in full.set_index("key").loc["sampling", "addressed_by"]
    assert (full.loc[~full["addressable"], "here"] == NO_RUN).all()
    # paper.yaml holds an arm or analysis for every limitation a run can address
    assert (full.loc[full["addressable"], "here"] != "").all(), full
    assert PAPER_ONLY not in set(full["here"])
    default = limitations_frame(profiles["default"], None, paper).set_index("key")["here"]
    for key in ("turn_order", "fixed_opening", "seeds", "scaffold", "lr_sweep", "matched_flops",
                "scripted_vs_frontier", "held_out_n128"):
        assert default[key] == PAPER_ONLY, key  # language-model or GPU items: the GPU profile's
    assert default["third_buyer"] == "buyer_tit_for_tat (buyer)"
    assert default["self_play"] == "linear, hardheaded"  # scripted sellers that are also evaluation buyers
    smoke = limitations_frame(profiles["smoke"], ["tiny_grpo"], paper).set_index("key")["here"]
    assert smoke["turn_order"] == "tiny_grpo" and smoke["fixed_opening"] == \
        "tiny_grpo_open_none (not played yet), tiny_base_open_own (not played yet)"
    assert "tiny_grpo_s1" in smoke["seeds"] and smoke["scaffold"] == "tiny_evalscaffold (not played yet)"
    assert "tiny_warmup" not in smoke["seeds"]  # read from seed 0 only
    table = limitations_table(limitations_frame(profiles["default"], None, paper))
    assert list(table.frame.columns) == ["addressed by", "this profile", "paper: what it ran"]
    assert table.save(tmp_path)
    assert "0.518" in table.frame.loc["Self-play in the reference arms", "paper: what it ran"]


def test_seed_spread_known_answer(profiles, tmp_path):
    p = profiles["smoke"]
    est = pd.DataFrame([
        {"arm": "tiny_grpo", "metric": "score", "estimate": 0.4, "ci_low": 0.35, "ci_high": 0.45},
        {"arm": "tiny_grpo_s1", "metric": "score", "estimate": 0.5, "ci_low": 0.40, "ci_high": 0.60},
        {"arm": "tiny_grpo_s2", "metric": "score", "estimate": 0.6, "ci_low": 0.45, "ci_high": 0.75},
        {"arm": "tiny_warmup", "metric": "score", "estimate": 0.1, "ci_low": 0.0, "ci_high": 0.2},
        {"arm": "boulware", "metric": "score", "estimate": 0.9, "ci_low": 0.8, "ci_high": 1.0},
    ])
    sp = seed_spread(est, p, ["tiny_grpo", "tiny_grpo_s1", "tiny_grpo_s2", "tiny_warmup", "boulware"])
    assert len(sp) == 1  # the warm-up is read from one seed; scripted arms have none
    r = sp.iloc[0]
    assert r["run"] == "tiny_grpo" and r["n_seeds"] == 3 and r["step"] == 2  # the run's last step
    assert r["mean"] == pytest.approx(0.5) and r["sd_seeds"] == pytest.approx(0.1)
    assert (r["min"], r["max"]) == pytest.approx((0.4, 0.6))
    assert r["mean_half_width"] == pytest.approx(0.1) and r["spread_ratio"] == pytest.approx(1.0)
    assert_tidy(sp, identifiers=("run", "arms"))
    t = seed_spread_table(sp)
    assert t.frame.iloc[0]["run-to-run SD"] == "0.100" and "one training run per arm" in t.frame.iloc[0]["paper: value"]
    assert seed_spread(est, p, ["tiny_grpo", "tiny_warmup"]).empty
    assert t.save(tmp_path)


def _scored(arms, buyers, scores, n_seeds=6):
    """Synthetic episodes with S set per (arm, buyer): every episode of the cell scores that value."""
    df = synthetic_episodes(arms, n_seeds=n_seeds, seed=3, buyers=tuple(buyers))
    df["score"] = [scores[(a, b)] for a, b in zip(df["arm"], df["buyer"])]
    return df


def test_self_play_split_known_answer(profiles, tmp_path):
    p = profiles["default"]
    assert same_agent(p.arms["hardheaded"], p.buyers["buyer_hardheaded"])
    assert not same_agent(p.arms["boulware"], p.buyers["train_boulware"].__class__("scripted", strategy="linear"))
    buyers = ["buyer_linear", "buyer_hardheaded"]
    scores = {("hardheaded", "buyer_hardheaded"): 0.8, ("hardheaded", "buyer_linear"): 0.2,
              ("boulware", "buyer_hardheaded"): 0.5, ("boulware", "buyer_linear"): 0.5}
    an = Analysis(_scored(["hardheaded", "boulware"], buyers, scores), n_resamples=200, seed=0)
    sp = self_play_split(an, p, ["hardheaded", "boulware"])
    assert list(sp["arm"]) == ["hardheaded", "hardheaded"]  # boulware never meets itself
    got = sp.set_index("self_play")
    assert got.loc[True, "buyer"] == "buyer_hardheaded" and got.loc[True, "estimate"] == pytest.approx(0.8)
    assert got.loc[False, "buyer"] == "buyer_linear" and got.loc[False, "estimate"] == pytest.approx(0.2)
    assert_tidy(sp, identifiers=("arm", "buyer"))
    paper = load_params(ROOT / "params" / "paper.yaml")
    assert same_agent(paper.arms["sonnet5"], paper.buyers["buyer_sonnet5"])
    from negolib.study.paper import load_paper_reported

    rep = load_paper_reported(paper.paper_reported_path)
    sp2 = pd.DataFrame([{"arm": "sonnet5", "buyer": "buyer_sonnet5", "self_play": True, "estimate": 0.5,
                         "ci_low": 0.4, "ci_high": 0.6, "n_episodes": 576}])
    assert self_play_split_table(sp2, paper, rep).frame["paper: S"].tolist() == ["0.518"]
    saved = self_play_split_table(sp, p).save(tmp_path)  # a seller on two rows renders (HTML, markdown, CSV)
    assert saved and all(f.exists() for f in saved)


def test_buyer_panel_folds_the_extra_buyer_onto_its_seller(profiles, tmp_path):
    base = _scored(["boulware"], ["buyer_linear", "buyer_hardheaded"],
                   {("boulware", "buyer_linear"): 0.3, ("boulware", "buyer_hardheaded"): 0.6})
    extra = _scored(["boulware.extra_buyers"], ["buyer_tit_for_tat"],
                    {("boulware.extra_buyers", "buyer_tit_for_tat"): 0.9})
    an = Analysis(pd.concat([base, extra], ignore_index=True), n_resamples=200, seed=0)
    panel = buyer_panel(an, ["boulware"])
    got = panel.set_index("buyer")
    assert set(got.index) == {"buyer_linear", "buyer_hardheaded", "buyer_tit_for_tat"}
    assert got.loc["buyer_tit_for_tat", "variant"] and not got.loc["buyer_linear", "variant"]
    assert got["estimate"].to_dict() == pytest.approx({"buyer_linear": 0.3, "buyer_hardheaded": 0.6,
                                                       "buyer_tit_for_tat": 0.9})
    assert_tidy(panel, identifiers=("arm", "buyer"))
    t = buyer_panel_table(panel, profiles["default"])
    assert "S vs buyer_tit_for_tat (extra)" in t.frame.columns and "paper: value" in t.frame.columns
    assert t.save(tmp_path)


def test_lr_sweep_known_answer(profiles, tmp_path):
    p = profiles["paper"]
    arms = lr_sweep_arms(p)
    assert set(arms) == {"e2b_shared_64", "e2b_lr2_56", "e2b_lr3_56", "e2b_lr5_56", "e2b_lr7_56", "e2b_lr10_56"}
    contrasts = pd.DataFrame([{"arm_a": a, "arm_b": "e2b_base", "metric": "score", "estimate": 0.01 * i,
                               "ci_low": 0.01 * i - 0.02, "ci_high": 0.01 * i + 0.02} for i, a in enumerate(arms)])
    sw = lr_sweep(contrasts, p)
    assert list(sw["lr_multiplier"]) == pytest.approx([1, 2, 3, 5, 7, 10])  # finer than {1x, 3x, 10x}
    assert list(sw["step"]) == [64, 56, 56, 56, 56, 56]
    assert sw["peak_lr"].iloc[0] == pytest.approx(1e-6)
    g = sw.set_index("arm")["gain"]
    assert g["e2b_lr3_56"] == pytest.approx(0.01 * arms.index("e2b_lr3_56"))
    t = lr_sweep_table(sw, p, load_paper_reported_of(p))
    assert t.frame.loc["e2b_lr3_56", "paper: S"] == "0.460 [0.433, 0.486]"
    assert t.save(tmp_path)
    assert lr_sweep_arms(profiles["default"]) == ["smollm2_warmup", "smollm2_grpo"]


def load_paper_reported_of(p):
    from negolib.study.paper import load_paper_reported

    return load_paper_reported(p.paper_reported_path)


def test_matched_flops_known_answer(profiles, tmp_path):
    p = profiles["paper"]
    rel = relative_flops(p)
    assert list(rel.values()) == pytest.approx([1.0, 4.5 / 2.3, 11.95 / 2.3, 30.7 / 2.3])
    # 2.3B at 104 combined steps; each size's shared run read at the nearest saved checkpoint to the same FLOPs
    assert matched_flops_reads(p) == {"e2b_shared_104": 104, "e4b_shared_52": 52, "g12b_shared_20": 20,
                                      "g31b_shared_8": 8}
    assert relative_flops(p, {"Gemma 4 E2B (2.3B)": 1.0, "Gemma 4 E4B (4.5B)": 2.0})["Gemma 4 E4B (4.5B)"] == 2.0
    pairs = trained_base_pairs(p)
    assert ("g31b_shared_8", "g31b_base") in pairs and ("g12b_shared_104", "g12b_base") in pairs
    assert all(b.endswith("_base") and a.split("_")[0] == b.split("_")[0] for a, b in pairs)
    contrasts = pd.DataFrame([{"arm_a": a, "arm_b": b, "metric": "score", "estimate": 0.05, "ci_low": 0.0,
                               "ci_high": 0.1} for a, b in pairs])
    mf = matched_flops(contrasts, p).set_index("arm")
    assert mf.loc["g31b_shared_8", "train_flops"] == pytest.approx(8 * 30.7 / 2.3)
    assert mf.loc["e2b_shared_104", "train_flops"] == pytest.approx(104)
    assert set(mf.index[mf["matched"]]) == {"e2b_shared_104", "e4b_shared_52", "g12b_shared_20", "g31b_shared_8"}
    assert (mf["gain"] == 0.05).all()
    assert_tidy(mf.reset_index(), identifiers=("size", "arm"))
    t = matched_flops_table(mf.reset_index(), p, load_paper_reported_of(p))
    assert t.frame.loc["g31b_shared_104", "paper: S"] == "0.620 [0.597, 0.643]"
    assert t.save(tmp_path)
    assert matched_flops_reads(profiles["default"]) == {}  # no shared-recipe arm to set the budget
    assert matched_flops_reads(profiles["smoke"]) == {"tiny_grpo": 2}  # one size: its own read (the run's last)


def test_accept_terms_and_extra_buyer_variants_play(tmp_path, profiles):
    """The variants run through the book (logged deviations, the beyond store): scripted parties never attach terms
    to an accept, so applying them changes nothing (ΔS exactly 0); the extra buyer is met by the variant only."""
    from negolib.book.context import open_book
    from negolib.study.evaluation import freeze, protocol_from_params

    B = open_book(ROOT / "params" / "smoke.yaml", tmp_path)
    freeze(protocol_from_params(B.params, arms=["boulware"]), B.paths.protocol)
    acc = B.evaluate_variant(["boulware"], "seller", ".accept_terms", accept_applies_terms=True)
    ext = B.evaluate_variant(["boulware"], "seller", ".extra_buyers", buyers=["buyer_tit_for_tat"])
    assert acc == ["boulware.accept_terms"] and ext == ["boulware.extra_buyers"]
    from negolib.study.evaluation import evaluate_arms, load_protocol
    from negolib.study.runs import build_agents

    protocol = load_protocol(B.paths.protocol)
    evaluate_arms(protocol, build_agents(B.params, ["boulware", *protocol.buyers]), B.paths.transcripts,
                  progress=False)
    beyond = B.episodes(beyond=True)
    assert set(beyond.loc[beyond["arm"] == "boulware.extra_buyers", "buyer"]) == {"buyer_tit_for_tat"}
    an = Analysis(pd.concat([B.episodes(), beyond], ignore_index=True), n_resamples=200, seed=0)
    c = turn_order_contrasts(an, acc, ".accept_terms")
    assert float(c.loc[c["metric"] == "score", "estimate"].iloc[0]) == 0.0
    t = accept_terms_table(c, acc, load_paper_reported_of(profiles["paper"]))
    assert t.frame.index.tolist() == ["boulware"] and "56%" in t.frame.iloc[0]["paper: value"]
    assert t.save(tmp_path / "tables")
    panel = buyer_panel(an, ["boulware"])
    assert set(panel["buyer"]) == {"buyer_linear", "buyer_hardheaded", "buyer_tit_for_tat"}
    assert np.isfinite(panel["estimate"]).all()


def test_paper_profile_holds_the_limitation_arms(profiles):
    """paper.yaml: trained sellers with buyer-opens and fixed openings (none, best, the arm's own), three training
    seeds of two runs, evaluation-scaffold runs, scripted sellers against the frontier buyers, a third buyer of
    another family, accept-terms variants; the paper's 21-arm grid untouched."""
    p = profiles["paper"]
    trained_or_base = {a for a in p.arms if p.arms[a].backend in ("trained", "vllm")}
    assert {"e2b_lr3_56", "g12b_lr3_56", "g31b_lr3_56"} <= set(p.beyond.buyer_opens) & trained_or_base
    openings = {p.arms[a].opening for a in p.beyond.fixed_openings if p.arms[p.arms[a].inner].backend == "trained"}
    assert {"none", "best", "0.741"} <= openings  # 0.741: the value of the 12B 3x-LR arm's openings (Table 2)
    assert p.arms["g12b_base_open_own"].opening == "own:g12b_lr3_56"  # its openings, scenario by scenario
    assert "g12b_base_open_own" in p.beyond.fixed_openings
    assert [r for r, run in p.training.runs.items() if len(run.seeds) >= 3] == ["e2b_lr3", "g12b_lr3"]
    assert {r for r, run in p.training.runs.items() if run.scaffold == "evaluation"} == \
        {"e2b_lr3_evalscaffold", "g12b_lr3_evalscaffold"}
    assert set(p.scripted_arms()) >= {"fixed_offer", "boulware", "linear", "tit_for_tat", "hardheaded"}
    assert all(p.is_lm(b) for b in p.evaluation.buyers)  # scripted sellers meet the frontier buyers
    (third,) = p.beyond.extra_buyers
    assert p.buyers[third].model.startswith("Qwen/") and p.beyond.extra_buyer_arms
    assert "e2b_lr10_56" in p.beyond.accept_terms
    assert len([a for a in p.arms if p.arms[a].paper_ref]) == 21
