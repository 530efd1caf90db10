"""Notebook 8 (serving, cost and the protocol record, paper App. G, K): Table 7 (score beside the serving
footprint), the cost per episode, the Monte Carlo error of the interval endpoints and Table 9 (Table 2
with every paired interval), with the paper's reported values beside ours.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from negolib.core.formatting import DASH, fmt_num
from negolib.params import Params
from negolib.study.paired import estimate_lookup
from negolib.study.paper import PaperReported
from negolib.study.report.booktable import BookTable, fmt_paper, simple_table
from negolib.study.report.cells import arm_label, estimate_cell, fmt_count, frame, paper_ref
from negolib.study.report.results import table2


def table7(est: pd.DataFrame, serving: Mapping[str, Mapping[str, Any]], params: Params,
           paper: PaperReported) -> BookTable:
    """Table 7: score beside what it took to serve (ours: parameters, memory, device)."""
    look = estimate_lookup(est)
    prow = {r["arm"]: r for r in (paper.get("table7", default=[]) or [])}
    rows = []
    for arm in params.arms:
        if (arm, "score") not in look:
            continue
        s = serving.get(arm, {})
        p = prow.get(paper_ref(params, arm) or "", {})
        rows.append({"arm": arm, "seller": arm_label(params, arm), "parameters": fmt_count(s.get("params")),
                     "weights (GB)": fmt_num(s.get("gb"), 2), "device": s.get("device", DASH),
                     "S": estimate_cell(look, arm, "score", ci=False),
                     "paper: seller": p.get("label", DASH), "paper: effective / total": p.get("params") or DASH,
                     "paper: accelerators (48 GB)": p.get("accelerators") or DASH,
                     "paper: GB served": p.get("gb_served") or DASH, "paper: S": fmt_paper(p.get("score"))})
    return BookTable("table7", "Table 7: score beside serving footprint", frame(rows, "arm"),
                     "We do not benchmark throughput or latency; scripted arms need no accelerator.")


def cost_display(costs: pd.DataFrame) -> pd.DataFrame:
    """:func:`negolib.study.analysis.cost.cost_by_arm` for display, indexed by arm: tokens per episode to one
    decimal, USD per episode to four (a dash when nobody is billed; the unpriced models when a price is
    missing)."""
    rows = []
    for r in costs.to_dict("records"):
        usd = DASH if r["billed"] != "API" else (f"no price for {', '.join(r['unpriced_models'])}"
                                                 if r["unpriced_models"] else f"{r['usd_per_episode']:.4f}")
        rows.append({"arm": r["arm"], "billed": r["billed"], "episodes": r["episodes"],
                     "input tokens / episode": round(r["input_tokens_per_episode"], 1),
                     "output tokens / episode": round(r["output_tokens_per_episode"], 1), "USD / episode": usd})
    return pd.DataFrame(rows).set_index("arm") if rows else pd.DataFrame()


def cost_table(costs: pd.DataFrame, paper: PaperReported) -> BookTable:
    """Cost per episode by arm (tokens from transcripts; USD where a price is configured): the frame of
    :func:`negolib.study.analysis.cost.cost_by_arm` for display, the paper's USD per frontier-seller episode beside."""
    shown = cost_display(costs)
    df = shown.copy()
    ref = paper.get("cost", "usd_per_frontier_episode")
    df["paper: USD / frontier-seller episode"] = fmt_num(ref, 3) if ref is not None else DASH
    c = paper.get("cost", default={}) or {}
    return BookTable("cost", "Cost per episode (App. G)", df,
                     "Tokens are summed from the transcripts (both parties); USD only where params.prices lists "
                     f"the model. paper: ${c.get('usd_per_frontier_episode')} per frontier-seller episode, the mean "
                     f"over {c.get('frontier_cells')} cells ({c.get('input_tokens_m')}M input and "
                     f"{c.get('output_tokens_m')}M output tokens), both sides billed at list prices.", shown)


REFINED_CAPTION = ("'refined (ours)': with statistics.refine on (beyond the paper), every contrast whose endpoint lay "
                   "within three Monte Carlo SEs of 0 was re-run at statistics.refine_resamples with the same seed. "
                   "The paper re-ran only the two contrasts App. K names (the re-run table).")
MC_COLUMNS = ["arm_a", "arm_b", "metric", "estimate", "ci_low", "ci_high", "se_low", "se_high", "n_resamples",
              "refined"]


def mc_error_table(contrasts: pd.DataFrame, paper: PaperReported) -> BookTable:
    """The Monte Carlo standard error of each contrast's interval endpoints and whether it was re-run at
    more resamples (``refined (ours)``: ``statistics.refine``, beyond the paper); the paper's endpoint error at
    10^4 and 10^5 resamples beside."""
    mc = contrasts[MC_COLUMNS].round(5).set_index(["arm_a", "arm_b", "metric"]) if len(contrasts) else contrasts
    mc = mc.rename(columns={"refined": "refined (ours)"})
    st = paper.get("statistics")
    return simple_table("mc_error", "Monte Carlo error of interval endpoints", mc, REFINED_CAPTION, paper_values={
        "endpoint error at 1e4 / 1e5": f"±{st['mc_endpoint_error']} / ±{st['refined_endpoint_error']}"})


def table9(decomp: pd.DataFrame, opens: Mapping[str, float] | None, params: Params, paper: PaperReported) -> BookTable:
    """Table 9: Table 2 (:func:`negolib.study.report.results.table2`) with every paired interval."""
    return table2(decomp, opens, params, paper, with_ci=True)


__all__ = ["MC_COLUMNS", "REFINED_CAPTION", "cost_display", "cost_table", "mc_error_table", "table7", "table9"]
