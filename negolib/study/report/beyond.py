"""Notebook 9 (beyond the paper, App. A): the list of App. A's limitations with what addresses each, the scripted
baselines against the language-model arms, the deals' Pareto and Nash efficiency (with one scenario's frontier
drawn), the buyer opening, fixed openings, the runs with several training seeds (their run-to-run spread beside
the scenario-sampling intervals) or trained on the evaluation scaffold, accept-terms applied in evaluation, a third
evaluation buyer, the self-play split, a learning-rate sweep and matched FLOPs. The paper ran none of these: its
column says so or gives the value it reported nearby (``paper: ...``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from negolib.core.formatting import DASH, fmt_ci, fmt_num, fmt_pct
from negolib.games.multi_issue.scenarios import Scenario, lookup_scenario
from negolib.games.multi_issue.utility import both_utilities
from negolib.params import Params
from negolib.study.analysis.arms import Results
from negolib.study.analysis.beyond import fixed_opening_pairs, own_opening_pairs, variant_base
from negolib.study.efficiency import ScenarioOracle
from negolib.study.paired import estimate_lookup
from negolib.study.report.booktable import BookTable, fmt_paper
from negolib.study.report.cells import arm_label, contrast_cell, estimate_cell, frame, marked_lookup
from negolib.study.report.figures import pyplot

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def scripted_baselines_table(res: Results, contrasts: pd.DataFrame) -> BookTable:
    """Rows: scripted sellers (S on the scenarios they played); columns: each language-model arm's
    paired difference in S against that seller on the scenarios both played
    (:func:`negolib.study.analysis.beyond.scripted_baseline_contrasts`)."""
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
    :func:`negolib.study.analysis.beyond.turn_order_contrasts`)."""
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
    :func:`negolib.study.analysis.beyond.fixed_opening_contrasts`); for an ``own:<arm>`` opening held by another seller,
    that arm minus the fixed-opening arm (the part of its score the opening does not carry); and the share of
    episodes opening with terms (fixed / free)."""
    look = marked_lookup(contrasts)
    o = opens or {}
    source = {a: s for s, a in own_opening_pairs(params, arms)}
    rows = [{"arm": a, "opening": params.arms[a].opening, "free seller": b,
             "ΔS (fixed − free)": contrast_cell(look, a, b),
             "ΔS (opening's arm − fixed)": contrast_cell(look, source[a], a) if a in source else DASH,
             "opens with terms (fixed / free)": f"{fmt_pct(o.get(a))} / {fmt_pct(o.get(b))}"}
            for a, b in fixed_opening_pairs(params, arms)]
    df = frame(rows, "arm")
    df["paper: value"] = "not run (App. A)"
    return BookTable("fixed_openings", "Fixed openings against the free-opening seller", df,
                     "Does the opening cause the score? The same seller, its first turn fixed.")


def seeds_scaffold_table(arms: pd.DataFrame, est: pd.DataFrame) -> BookTable:
    """Trained arms of runs with several seeds or trained on the evaluation scaffold
    (:func:`negolib.study.analysis.beyond.seeds_scaffold_arms`), with S [CI]."""
    look = estimate_lookup(est)
    rows = [{"arm": r["arm"], "run": r["run"], "train seed": r["train_seed"], "training scaffold": r["scaffold"],
             "S": estimate_cell(look, r["arm"], "score")} for r in arms.to_dict("records")]
    df = frame(rows, "arm")
    df["paper: value"] = "one training seed per arm, training scaffold only (App. A)"
    return BookTable("seeds_scaffold", "Training seeds and evaluation-scaffold training", df)


def limitations_table(lims: pd.DataFrame) -> BookTable:
    """Every App. A limitation with what addresses it and what this profile has for it
    (:func:`negolib.study.analysis.limitations.limitations_frame`)."""
    rows = [{"limitation (App. A)": r["limitation"], "addressed by": r["addressed_by"],
             "this profile": r["here"] or "not in this profile", "paper: what it ran": r["paper"]}
            for r in lims.to_dict("records")]
    df = frame(rows, "limitation (App. A)")
    return BookTable("limitations", "The paper's limitations (App. A) and the arm or analysis that addresses each", df,
                     "'paper.yaml only': the GPU profile holds the arm, this one does not (too costly here); 'no run "
                     "can address it here': it needs another model family, trained buyers or another algorithm.",
                     lims)


def seed_spread_table(spread: pd.DataFrame) -> BookTable:
    """Run-to-run spread of S across training seeds beside the scenario-sampling interval
    (:func:`negolib.study.analysis.limitations.seed_spread`)."""
    rows = [{"run": r["run"], "read step": int(r["step"]), "arms": r["arms"],
             "training seeds": int(r["n_seeds"]), "mean S": fmt_num(r["mean"]),
             "run-to-run SD": fmt_num(r["sd_seeds"]), "range": f"{fmt_num(r['min'])} to {fmt_num(r['max'])}",
             "scenario-sampling half-width (mean)": fmt_num(r["mean_half_width"]),
             "SD / half-width": fmt_num(r["spread_ratio"], 2)} for r in spread.to_dict("records")]
    df = frame(rows)  # a run may have several read steps
    df["paper: value"] = "one training run per arm: intervals quantify scenario sampling only (App. A)"
    return BookTable("seed_spread", "Training seeds: run-to-run spread beside the scenario-sampling intervals", df,
                     "Per run and read step with arms from several training seeds: the seeds' S, their standard "
                     "deviation (ddof 1) and the mean half-width of each seed's 95% seed-cluster interval.", spread)


def accept_terms_table(contrasts: pd.DataFrame, variants: Sequence[str], paper: Any = None,
                       suffix: str = ".accept_terms") -> BookTable:
    """S with accept-terms applied in evaluation (as in training) minus S as evaluated, per seller (paired by
    scenario and buyer); the paper's share of seller accepts with terms beside."""
    look = marked_lookup(contrasts)
    share = (paper.get("appendix_a", "accept_with_terms_share", default={}) if paper is not None else {}) or {}
    rows = [{"seller": variant_base(v, suffix),
             "S (accept-terms applied) − S (ignored)": contrast_cell(look, v, variant_base(v, suffix)),
             "episodes": look.get((v, variant_base(v, suffix), "score"), {}).get("n_episodes", DASH)}
            for v in variants]
    df = frame(rows, "seller")
    note = ", ".join(f"{k}: {fmt_pct(v[0], 0)}-{fmt_pct(v[1], 0)}" if isinstance(v, (list, tuple))
                     else f"{k}: {fmt_pct(v, 0)}" for k, v in share.items())
    df["paper: value"] = "not run; accepts with terms among the seller's closing accepts: " + (note or DASH)
    return BookTable("accept_terms", "Accept-terms applied in evaluation (the training/evaluation mismatch)", df,
                     "Training applied terms attached to an accept; evaluation ignores them (App. A). Paired by "
                     "scenario and buyer.")


RULES = {False: "the paper's (any ACCEPT closes)", True: "ours (an ACCEPT closes only on a COUNTER)"}
"""The two ACCEPT rules by ``accept_needs_offer``."""


def accept_rule_table(contrasts: pd.DataFrame, variants: Sequence[str], protocol_needs_offer: bool,
                      suffix: str = ".accept_rule") -> BookTable:
    """Each seller under the other ACCEPT rule minus under the protocol's (``protocol_needs_offer``), paired by
    scenario and buyer (:func:`negolib.study.analysis.beyond.accept_rule_contrasts`): S, the deal rate, the seller's
    bad-parse and invalid-accept rates. Our rule is beyond the paper; the paper's column says which rule it played."""
    look = marked_lookup(contrasts)
    other, this = RULES[not protocol_needs_offer], RULES[protocol_needs_offer]
    labels = {"score": "ΔS", "deal_rate": "Δ deal rate", "seller_bad_parse_rate": "Δ seller bad-parse rate",
              "invalid_accept_rate": "Δ invalid-accept rate"}
    rows = []
    for v in variants:
        base = variant_base(v, suffix)
        row: dict[str, Any] = {"seller": base}
        row.update({label: contrast_cell(look, v, base, m) for m, label in labels.items()})
        row["episodes"] = look.get((v, base, "score"), {}).get("n_episodes", DASH)
        rows.append(row)
    df = frame(rows, "seller")
    df["paper: value"] = "not run; the paper played its own rule: any ACCEPT closes the deal on the current ledger"
    return BookTable("accept_rule", f"The ACCEPT rule: {other} minus {this}", df,
                     f"Ours is beyond the paper. Each seller replayed under {other} (a logged variant) minus the "
                     f"same seller under the protocol's rule, {this}; paired by scenario and buyer. Under ours an "
                     "ACCEPT with no counterpart COUNTER to accept changes nothing and counts as a bad parse (Eq. 1's "
                     "format penalty, Tables 4-5).", contrasts)


def buyer_panel_table(panel: pd.DataFrame, params: Params | None = None) -> BookTable:
    """Each seller's S against every buyer it met, the extra buyer's (a third family) from the variant
    (:func:`negolib.study.analysis.limitations.buyer_panel`)."""
    rows: dict[str, dict[str, Any]] = {}
    for r in panel.to_dict("records"):
        row = rows.setdefault(r["arm"], {"seller": r["arm"], "label": arm_label(params, r["arm"])})
        row[f"S vs {r['buyer']}" + (" (extra)" if r["variant"] else "")] = fmt_ci(
            r["estimate"], r["ci_low"], r["ci_high"], signed=False)
    df = frame(list(rows.values()), "seller").fillna(DASH)
    df["paper: value"] = "two evaluation buyers, one per model family (App. A)"
    return BookTable("buyer_panel", "A third evaluation buyer from another family", df,
                     "S against each buyer with its seed-cluster interval; '(extra)': played as a logged beyond-paper "
                     "variant against a buyer outside the protocol's panel.", panel)


def self_play_split_table(sp: pd.DataFrame, params: Params, paper: Any = None) -> BookTable:
    """Each seller that meets itself as a buyer: S against itself and against the others (App. A), the paper's
    frontier sellers' values beside (``appendix_a.self_play``)."""
    sel = (paper.get("appendix_a", "self_play", default={}) if paper is not None else {}) or {}
    rows = []
    for r in sp.to_dict("records"):
        ref = params.arms[r["arm"]].paper_ref if r["arm"] in params.arms else None
        pv = sel.get(f"{ref}_vs_{'self' if r['self_play'] else 'other'}") if ref else None
        rows.append({"seller": r["arm"], "buyer(s)": r["buyer"], "self-play": "yes" if r["self_play"] else "no",
                     "S": fmt_ci(r["estimate"], r["ci_low"], r["ci_high"], signed=False),
                     "episodes": r["n_episodes"], "paper: S": fmt_num(pv) if pv is not None else DASH})
    return BookTable("self_play_split", "Self-play split of the reference sellers", frame(rows),
                     "A buyer is the seller's own agent when backend, model, strategy and parameters match; 'no': S "
                     "with the self-play half dropped.", sp)


def lr_sweep_table(sweep: pd.DataFrame, params: Params, paper: Any = None) -> BookTable:
    """The smallest size's trained arms by peak learning rate, gain over base (paired), the paper's S beside
    (:func:`negolib.study.analysis.limitations.lr_sweep`)."""
    rows = []
    for r in sweep.to_dict("records"):
        ref = params.arms[r["arm"]].paper_ref
        pv = paper.arm(ref).get("score") if paper is not None and ref else None
        rows.append({"arm": r["arm"], "peak LR": f"{r['peak_lr']:.1e}", "× shared rate": fmt_num(r["lr_multiplier"], 1),
                     "steps": r["step"], "gain over base": fmt_ci(r["gain"], r["ci_low"], r["ci_high"], signed=True),
                     "paper: S": fmt_paper(pv)})
    return BookTable("lr_sweep", "Learning-rate sweep at the smallest size", frame(rows, "arm"),
                     "The paper ran 1×, 3× and 10× the shared rate (App. A: 'two learning rates, not a sweep').", sweep)


def matched_flops_table(mf: pd.DataFrame, params: Params, paper: Any = None) -> BookTable:
    """Every trained arm's training FLOPs at its read (in first-size steps) and gain over base; the reads at the
    smallest size's budget marked (:func:`negolib.study.analysis.limitations.matched_flops`)."""
    rows = []
    for r in mf.to_dict("records"):
        ref = params.arms[r["arm"]].paper_ref
        pv = paper.arm(ref).get("score") if paper is not None and ref else None
        rows.append({"size": r["size"], "arm": r["arm"], "steps": r["steps"],
                     "FLOPs/step (× first size)": fmt_num(r["rel_flops_per_step"], 2),
                     "training FLOPs (first-size steps)": fmt_num(r["train_flops"], 1),
                     "matched FLOPs": "yes" if r["matched"] else "",
                     "gain over base": fmt_ci(r["gain"], r["ci_low"], r["ci_high"], signed=True),
                     "paper: S": fmt_paper(pv)})
    return BookTable("matched_flops", "Matched FLOPs across sizes (App. I accounting)", frame(rows, "arm"),
                     "FLOPs/step ∝ effective parameters at matched tokens per step (App. I); 'yes': the read nearest "
                     "the first size's shared-recipe budget. The paper compares sizes at matched steps.", mf)


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


def pareto_figure(records: Sequence[Mapping[str, Any]], domain: str, seed: int, title: str = "",
                  scenarios: Mapping[str, Scenario] | None = None) -> Figure:
    """One scenario's exact Pareto frontier (seller Ũ, buyer Ũ), Nash and Kalai points, and the deals
    each arm reached on it (beyond the paper); ``scenarios``: imported ones by domain name (fixed preferences)."""
    plt = pyplot()
    sc = lookup_scenario(domain, seed, scenarios)
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


__all__ = ["RULES", "accept_rule_table", "accept_terms_table", "buyer_panel_table", "efficiency_table",
           "fixed_openings_table", "limitations_table", "lr_sweep_table", "matched_flops_table", "pareto_figure",
           "scripted_baselines_table", "seed_spread_table", "seeds_scaffold_table", "self_play_split_table",
           "turn_order_table"]
