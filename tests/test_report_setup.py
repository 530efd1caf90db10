"""Notebook 2's report: the arm matrix, the scenario set, sampling, recipes and Table 8, ours beside the
paper's design."""

from __future__ import annotations

from pathlib import Path

from paper_frames import paper_setup

from negolib.core.formatting import DASH
from negolib.params import load_params
from negolib.study.report.setup import arm_matrix, recipe_table, sampling_table, scenario_set_table, table8

ROOT = Path(__file__).resolve().parent.parent


def test_scenario_set_beside_the_papers_design():
    p = load_params(ROOT / "params" / "smoke.yaml")
    _, paper, _, _ = paper_setup()
    t = scenario_set_table(p, paper).frame
    assert t.loc["episodes per arm", "ours (scripted arms)"] == p.evaluation.seeds_per_domain * 9 * 2
    assert t.loc["episodes per arm", "paper: value"] == 1152 and t.loc["episodes in total", "paper: value"] == 24_192
    assert t.loc["seed clusters", "paper: value"] == 64 and t.loc["episodes in total", "ours (LM arms)"] == ""
    assert t.loc["max rounds (turns)", "ours (scripted arms)"] == "12 (24)"
    assert t.loc["max rounds (turns)", "paper: value"] == "12 (24)"


def test_sampling_recipe_and_table8_quote_the_paper():
    p = load_params(ROOT / "params" / "smoke.yaml")
    _, paper, _, _ = paper_setup()
    s = sampling_table(p, paper).frame
    assert set(s["paper: temperature / top-p / top-k / max new"]) == {"1.0 / 0.95 / 64 / 768"}
    r = recipe_table({"peak_lr": 1e-5, "kl_beta": 0.04}, paper, "run").frame
    assert r.loc["learning rate (peak)", "ours"] == "1e-05" and r.loc["learning rate (peak)", "paper: value"] == "1e-06"
    assert r.loc["warmup steps", "ours"] == DASH and r.loc["Adam betas", "paper: value"] == "0.9 / 0.95"
    t8 = table8([{"label": "tiny", "params": 2.0e6}, {"label": "big", "params": 1.35e8}], paper)
    assert list(t8.frame["relative FLOPs/step"]) == ["1.00", "67.50"] and t8.frame.loc["big", "parameters"] == "135.0M"
    assert t8.paper_frame is not None and len(t8.paper_frame) == 4 and not t8.paper_columns
    assert all(c.startswith("paper: ") for c in t8.paper_frame.columns)
    m = arm_matrix(p).frame
    assert m.loc["tiny_base", "paper row"] == "e2b_base" and m.loc["boulware", "sampling"] == DASH
