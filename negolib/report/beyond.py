"""Notebook 9 (beyond the paper, App. A): the scripted baselines against the language-model arms, the deals'
Pareto and Nash efficiency (with one scenario's frontier drawn), the buyer opening, fixed openings, and
the runs with several training seeds or trained on the evaluation scaffold. The paper ran none of these:
its column says so (``paper: value``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from negolib.analysis.arms import Results
from negolib.analysis.beyond import fixed_opening_pairs, variant_base
from negolib.domains import get_domain
from negolib.efficiency import ScenarioOracle
from negolib.formatting import DASH, fmt_pct
from negolib.params import Params
from negolib.report.booktable import BookTable
from negolib.report.cells import arm_label, contrast_cell, estimate_cell, frame, marked_lookup
from negolib.report.figures import pyplot
from negolib.scenarios import make_scenario
from negolib.stats import estimate_lookup
from negolib.utility import both_utilities

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def scripted_baselines_table(res: Results, contrasts: pd.DataFrame) -> BookTable:
    """Rows: scripted sellers (S on the scenarios they played); columns: each language-model arm's
    paired difference in S against that seller on the scenarios both played
    (:func:`negolib.analysis.beyond.scripted_baseline_contrasts`)."""
    p = res.params
    lm = [a for a in res.arms if p.is_lm(a)]
    scripted = [a for a in res.arms if not p.is_lm(a)]
    look, est = marked_lookup(contrasts), estimate_lookup(res.est)
    rows = []
    for s in scripted:
        row = {"scripted seller": s, "label": p.arms[s].label, "S": estimate_cell(est, s, "score")}
        row.update({f"{m} − it": contrast_cell(look, m, s) for m in lm})
        rows.append(row)
    df = frame(rows, "scripted seller")
    df["paper: value"] = "not run (App. A)"
    return BookTable("scripted_baselines", "Scripted baseline sellers against the language-model arms", df,
                     "ΔS columns: the language-model arm minus the scripted seller, paired on shared scenarios "
                     "(positive: the LM arm scores more). The paper ran no scripted seller.")


def turn_order_table(contrasts: pd.DataFrame, variants: Sequence[str], suffix: str = ".buyer_opens") -> BookTable:
    """S with the buyer opening minus S with the seller opening, per seller (paired by scenario;
    :func:`negolib.analysis.beyond.turn_order_contrasts`)."""
    look = marked_lookup(contrasts)
    rows = [{"seller": variant_base(v, suffix),
             "S (buyer opens) − S (seller opens)": contrast_cell(look, v, variant_base(v, suffix)),
             "episodes": look.get((v, variant_base(v, suffix), "score"), {}).get("n_episodes", DASH)}
            for v in variants]
    df = frame(rows, "seller")
    df["paper: value"] = "untested: the seller always opens (App. A)"
    return BookTable("buyer_opens", "Turn order: the buyer opens", df, "Paired by scenario and buyer.")


def fixed_openings_table(contrasts: pd.DataFrame, params: Params, arms: Sequence[str],
                         opens: Mapping[str, float] | None = None) -> BookTable:
    """Each fixed-opening arm against its inner seller opening freely (ΔS, paired;
    :func:`negolib.analysis.beyond.fixed_opening_contrasts`) and the share of episodes opening with terms
    (fixed / free)."""
    look = marked_lookup(contrasts)
    o = opens or {}
    rows = [{"arm": a, "opening": params.arms[a].opening, "free seller": b,
             "ΔS (fixed − free)": contrast_cell(look, a, b),
             "opens with terms (fixed / free)": f"{fmt_pct(o.get(a))} / {fmt_pct(o.get(b))}"}
            for a, b in fixed_opening_pairs(params, arms)]
    df = frame(rows, "arm")
    df["paper: value"] = "not run (App. A)"
    return BookTable("fixed_openings", "Fixed openings against the free-opening seller", df,
                     "Does the opening cause the score? The same seller, its first turn fixed.")


def seeds_scaffold_table(arms: pd.DataFrame, est: pd.DataFrame) -> BookTable:
    """Trained arms of runs with several seeds or trained on the evaluation scaffold
    (:func:`negolib.analysis.beyond.seeds_scaffold_arms`), with S [CI]."""
    look = estimate_lookup(est)
    rows = [{"arm": r["arm"], "run": r["run"], "train seed": r["train_seed"], "training scaffold": r["scaffold"],
             "S": estimate_cell(look, r["arm"], "score")} for r in arms.to_dict("records")]
    df = frame(rows, "arm")
    df["paper: value"] = "one training seed per arm, training scaffold only (App. A)"
    return BookTable("seeds_scaffold", "Training seeds and evaluation-scaffold training", df)


def efficiency_table(eff: pd.DataFrame, params: Params | None = None) -> BookTable:
    """Beyond the paper: Pareto and Nash efficiency per arm (the paper computed none, App. K)."""
    df = eff.copy()
    if not df.empty:
        df = df.set_index("arm")
        df.insert(0, "seller", [arm_label(params, a) for a in df.index])
        df = df.round(4)
    df["paper: value"] = "not computed (App. K)"
    return BookTable("efficiency", "Deal efficiency: Pareto frontier, Nash and Kalai points (beyond the paper)", df,
                     "Means over deals. Distances are Euclidean in (seller U~, buyer U~); welfare ratio = joint "
                     "welfare / the scenario's maximum.", eff)


def pareto_figure(records: Sequence[Mapping[str, Any]], domain: str, seed: int, title: str = "") -> Figure:
    """One scenario's exact Pareto frontier (seller Ũ, buyer Ũ), Nash and Kalai points, and the deals
    each arm reached on it (beyond the paper)."""
    plt = pyplot()
    sc = make_scenario(get_domain(domain), seed)
    orc = ScenarioOracle.of(sc)
    fr = orc.frontier
    fig, ax = plt.subplots(figsize=(6, 5.2))
    ax.scatter(fr.points[:, 0], fr.points[:, 1], s=8, color="#444", label="Pareto frontier")
    for a, e in zip(*fr.segments()):
        ax.plot([a[0], e[0]], [a[1], e[1]], "-", color="#444", lw=1.2)
    b = orc.bargaining
    ax.scatter(*b.nash, marker="*", s=160, color="#d62728", zorder=4, label="Nash point")
    ax.scatter(*b.kalai, marker="P", s=110, color="#2ca02c", zorder=4, label="Kalai point")
    ax.scatter(*b.disagreement, marker="x", s=60, color="k", label="reservation point")
    for arm in sorted({r["arm"] for r in records}):
        pts = [both_utilities(sc, r["outcome"]["final_ledger"]) for r in records
               if r["arm"] == arm and r["domain"] == domain and int(r["seed"]) == seed
               and (r.get("outcome") or {}).get("deal")]
        if pts:
            p = np.array(pts)
            ax.scatter(p[:, 0], p[:, 1], s=40, alpha=0.8, label=f"{arm} deals")
    ax.set_xlabel("seller Ũ")
    ax.set_ylabel("buyer Ũ")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.set_title(title or f"{domain}, seed {seed}", fontsize=10)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig


__all__ = ["efficiency_table", "fixed_openings_table", "pareto_figure", "scripted_baselines_table",
           "seeds_scaffold_table", "turn_order_table"]
