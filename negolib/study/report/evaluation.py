"""Notebook 4 (the evaluation, paper §4 and App. K): the pilot gate per arm x buyer cell, with the paper's
failing cell beside ours, and the prompt cap per arm (the paper's 16k serving context beside our count of
turns where an arm's cap bound).
"""

from __future__ import annotations

import pandas as pd

from negolib.core.formatting import fmt_pct
from negolib.study.paper import PaperReported
from negolib.study.report.booktable import BookTable, simple_table
from negolib.study.report.cells import frame

PAPER_PILOT_CELL = ("e2b_lr10_sonnet5", "10x LR x Sonnet 5 cell")
"""The paper's pilot-gate cell it reports (key in ``paper_reported.yaml``, label)."""


def pilot_gate_table(cells: pd.DataFrame, paper: PaperReported) -> BookTable:
    """The pilot gate per (arm, buyer) cell (:meth:`negolib.study.evaluation.PilotResult.to_frame`, indexed by arm
    and buyer); beside it, the paper's cell that failed and ran regardless (App. K)."""
    key, label = PAPER_PILOT_CELL
    p = paper.get("pilot_gate", key, default={}) or {}
    verdict = "passed" if p.get("passed") else "failed"
    paper_cell = {label: f"{p.get('bad_parses')} bad parses in {p.get('turns')} turns: {verdict}, ran regardless"}
    return simple_table("pilot_gate", "Pilot gate: per arm x buyer cell", cells, paper_values=paper_cell)


def prompt_cap_table(serving: pd.DataFrame) -> BookTable:
    """Per arm: seller turns and episodes where the prompt cap bound (:func:`negolib.study.analysis.serving.
    serving_frame`), beside the paper's serving context (16k for every self-served arm, App. K)."""
    rows = [{"arm": r.arm, "episodes": int(r.n_episodes), "seller turns": int(r.n_seller_turns),
             "turns capped": int(r.n_prompt_capped_turns), "episodes capped": int(r.n_prompt_capped_episodes),
             "episodes capped (share)": fmt_pct(r.prompt_capped_episode_share),
             "paper: context": "16k (App. K)"} for r in serving.itertuples()]
    return BookTable("prompt_cap", "Prompt cap: seller turns where an arm's cap bound", frame(rows, "arm"),
                     "Self-served sellers are evaluated with their arm's context length (16,384 tokens, or the "
                     "model's if shorter, less one reply's max_new_tokens), not the training driver's 2,048 "
                     "(App. H); a capped turn dropped its oldest history or was cut. API sellers are never "
                     "capped.", serving)


__all__ = ["PAPER_PILOT_CELL", "pilot_gate_table", "prompt_cap_table"]
