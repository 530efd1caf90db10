"""Notebook 4's report: the pilot gate, with the paper's failing cell beside ours."""

from __future__ import annotations

import pandas as pd
from paper_frames import paper_setup

from negolib.study.report.evaluation import pilot_gate_table


def test_pilot_gate_beside_the_papers_cell():
    _, paper, _, _ = paper_setup()
    cells = pd.DataFrame([{"arm": "a", "buyer": "b", "episodes": 3, "bad_parses": 0, "passed": True}])
    t = pilot_gate_table(cells.set_index(["arm", "buyer"]), paper)
    assert t.name == "pilot_gate" and t.paper_columns == ["paper: 10x LR x Sonnet 5 cell"]
    assert t.frame["paper: 10x LR x Sonnet 5 cell"].iloc[0] == "3 bad parses in 54 turns: failed, ran regardless"
