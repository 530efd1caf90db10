"""Notebook 4 (the evaluation, paper §4 and App. K): the pilot gate per arm x buyer cell, with the paper's
failing cell beside ours.
"""

from __future__ import annotations

import pandas as pd

from negolib.paper import PaperReported
from negolib.report.booktable import BookTable, simple_table

PAPER_PILOT_CELL = ("e2b_lr10_sonnet5", "10x LR x Sonnet 5 cell")
"""The paper's pilot-gate cell it reports (key in ``paper_reported.yaml``, label)."""


def pilot_gate_table(cells: pd.DataFrame, paper: PaperReported) -> BookTable:
    """The pilot gate per (arm, buyer) cell (:meth:`negolib.evaluation.PilotResult.to_frame`, indexed by arm
    and buyer); beside it, the paper's cell that failed and ran regardless (App. K)."""
    key, label = PAPER_PILOT_CELL
    p = paper.get("pilot_gate", key, default={}) or {}
    verdict = "passed" if p.get("passed") else "failed"
    paper_cell = {label: f"{p.get('bad_parses')} bad parses in {p.get('turns')} turns: {verdict}, ran regardless"}
    return simple_table("pilot_gate", "Pilot gate: per arm x buyer cell", cells, paper_values=paper_cell)


__all__ = ["PAPER_PILOT_CELL", "pilot_gate_table"]
