"""Notebook 8's report: Table 7, the cost per episode, the Monte Carlo error and Table 9, ours beside the
paper's."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from paper_frames import paper_setup

from negolib.core.formatting import DASH
from negolib.params import load_params
from negolib.study.analysis.contrasts import design_contrasts
from negolib.study.analysis.cost import cost_by_arm
from negolib.study.report.appendix_g_k import cost_display, cost_table, mc_error_table, table7

ROOT = Path(__file__).resolve().parent.parent


def test_table7_beside_the_papers_serving():
    p, paper, _, est = paper_setup()
    t = table7(est, {"g12b_lr3_56": {"params": 1.2e10, "gb": 24.0, "device": "GPU"}}, p, paper).frame
    row = t.loc["g12b_lr3_56"]
    assert row["parameters"] == "12.00B" and row["weights (GB)"] == "24.00" and row["paper: S"] == "0.601"
    assert row["paper: accelerators (48 GB)"] == 1 and t.loc["e2b_base", "paper: seller"] == DASH


def test_cost_table_words_the_numbers_and_quotes_the_paper():
    p = load_params(ROOT / "params" / "smoke.yaml")
    _, paper, _, _ = paper_setup()
    frame = pd.DataFrame([{"arm": a, "seller": a, "buyer": "buyer_linear", "seller_input_tokens": 1000,
                           "buyer_input_tokens": 234, "seller_output_tokens": 100, "buyer_output_tokens": 0,
                           "usd": 0.0123} for a in ("boulware", "tiny_base", "api_a", "api_b")])
    costs = cost_by_arm(frame, p, {"api_a": "model-a", "api_b": "model-b"}, ["model-b"])
    shown = cost_display(costs)
    assert list(shown.columns) == ["billed", "episodes", "input tokens / episode", "output tokens / episode",
                                   "USD / episode"]
    assert list(shown["USD / episode"]) == [DASH, DASH, "0.0123", "no price for model-b"]
    assert shown.loc["boulware", "input tokens / episode"] == 1234.0
    t = cost_table(costs, paper)
    assert set(t.frame["paper: USD / frontier-seller episode"]) == {"0.069"}
    assert t.data.equals(shown) and "$0.069 per frontier-seller episode" in t.caption
    empty = cost_table(cost_by_arm(pd.DataFrame(), p, {}), paper)
    assert empty.frame.empty and list(empty.frame.columns) == ["paper: USD / frontier-seller episode"]


def test_mc_error_beside_the_papers_endpoint_error():
    p, paper, an, _ = paper_setup()
    t = mc_error_table(design_contrasts(an, p), paper).frame
    assert list(t.index.names) == ["arm_a", "arm_b", "metric"] and "se_low" in t
    assert set(t["paper: endpoint error at 1e4 / 1e5"]) == {"±0.001 / ±0.0001"}
