"""Notebook 6 (the full grid and the held-out panel, paper App. B, C): Table 3 (the outcome decomposition),
Table 4 (every evaluated arm), Figure 3 (gain against steps; deal rate against deal-only U~) and the
held-out panel, with the paper's reported values beside ours.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from negolib.core.formatting import DASH, fmt_ci
from negolib.params import Params
from negolib.study.analysis.contrasts import extension_fires
from negolib.study.paired import estimate_lookup
from negolib.study.paper import PaperReported
from negolib.study.report.booktable import BookTable, fmt_paper
from negolib.study.report.cells import (
    ROLE_LABELS,
    arm_label,
    contrast_cell,
    contrast_data,
    estimate_cell,
    frame,
    marked_lookup,
    paper_ref,
)
from negolib.study.report.figures import PAPER_SIZES, pyplot
from negolib.study.runs import arm_steps

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def table4(est: pd.DataFrame, arms: Sequence[str], params: Params | None, paper: PaperReported) -> BookTable:
    """Table 4: every evaluated arm, S [CI], S held-out [CI], deal rate, turns, bad-parse (all turns)."""
    look = estimate_lookup(est)
    rows = []
    for arm in arms:
        if not any(k[0] == arm for k in look):
            continue
        p = paper.arm(paper_ref(params, arm))
        rows.append({
            "arm": arm, "seller": arm_label(params, arm), "episodes": _n(est, arm),
            "S (all domains)": estimate_cell(look, arm, "score"),
            "S (held-out)": estimate_cell(look, arm, "score_held_out"),
            "deal rate": estimate_cell(look, arm, "deal_rate", ci=False),
            "turns": estimate_cell(look, arm, "mean_turns", 1, ci=False),
            "bad-parse (all turns)": estimate_cell(look, arm, "bad_parse_rate", 4, ci=False),
            "paper: arm": paper.arm_label(paper_ref(params, arm)),
            "paper: S": fmt_paper(p.get("score")), "paper: S (held-out)": fmt_paper(p.get("score_held_out")),
            "paper: deal rate": fmt_paper(p.get("deal_rate")), "paper: turns": fmt_paper(p.get("mean_turns"), 1),
            "paper: bad-parse": fmt_paper(p.get("bad_parse_rate"), 4)})
    return BookTable("table4", "Table 4: every evaluated arm", frame(rows, "arm"),
                     "S is U~ on a deal and -0.3 on a no-deal, with 95% seed-cluster bootstrap intervals; "
                     "held-out is the car domain; turns out of 24; bad-parse over all turns.", est)


def _n(est: pd.DataFrame, arm: str) -> Any:
    sub = est[(est["arm"] == arm) & (est["metric"] == "score")] if not est.empty else est
    return int(sub["n_episodes"].iloc[0]) if len(sub) else DASH


def table3(est: pd.DataFrame, arms: Sequence[str], params: Params | None, paper: PaperReported) -> BookTable:
    """Table 3: outcome decomposition (S [CI], deal rate, deal-only U~, joint welfare)."""
    look = estimate_lookup(est)
    rows = []
    for arm in arms:
        if (arm, "score") not in look:
            continue
        p = paper.arm(paper_ref(params, arm))
        rows.append({"arm": arm, "seller": arm_label(params, arm), "S (all domains)": estimate_cell(look, arm, "score"),
                     "deal rate": estimate_cell(look, arm, "deal_rate", ci=False),
                     "deal-only U~": estimate_cell(look, arm, "deal_utility", ci=False),
                     "joint welfare": estimate_cell(look, arm, "welfare", ci=False),
                     "paper: arm": paper.arm_label(paper_ref(params, arm)), "paper: S": fmt_paper(p.get("score")),
                     "paper: deal rate": fmt_paper(p.get("deal_rate")),
                     "paper: deal-only U~": fmt_paper(p.get("deal_utility")),
                     "paper: joint welfare": fmt_paper(p.get("welfare"))})
    return BookTable("table3", "Table 3: outcome decomposition behind Figure 2a", frame(rows, "arm"),
                     "Deal-only U~ conditions on agreement; joint welfare is the sum of both parties' U~ on deals. "
                     "An arm that closes fewer but better deals can score higher on deal-only U~ and lower on S.",
                     est)


def heldout_table(contrasts: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """App. C: paired gains over the same-size base on the held-out domain, beside the paper's."""
    look = marked_lookup(contrasts)
    rows = []
    for g in params.design.sizes:
        for role in ("shared", "lr3", "lr10"):
            arm = getattr(g, role)
            if not arm:
                continue
            key = {"shared": "shared_minus_base", "lr3": "lr3_minus_base"}.get(role)
            pv = paper.get("held_out", key, g.paper) if key and g.paper else None
            rows.append({"size": g.label, "recipe": ROLE_LABELS[role], "arm": arm,
                         "held-out gain over base": contrast_cell(look, arm, g.base),
                         "paper: held-out gain": fmt_paper(pv, signed=True)})
    return BookTable("heldout", "Held-out panel (App. C): gains over base on the car domain", frame(rows),
                     f"paper: at n=128 a 95% interval has a half-width of about ±"
                     f"{paper.get('held_out', 'half_width_n128', default=0.03)}.", contrast_data(contrasts))


def extension_trigger_table(trigger: pd.DataFrame, paper: PaperReported) -> BookTable:
    """App. C's prespecified extension (double the held-out panel if the held-out gain's interval straddles zero
    for the largest trained model), its trigger evaluated on ours
    (:func:`negolib.study.analysis.contrasts.held_out_extension_trigger`): per trained role at the largest size, the
    held-out gain and whether it straddles zero, with the paper's gains and reading beside."""
    rows = []
    for r in trigger.to_dict("records"):
        key = {"shared": "shared_minus_base", "lr3": "lr3_minus_base"}[r["role"]]
        pv = paper.get("held_out", key, r["paper_size"]) if r["paper_size"] else None
        straddle = ("yes" if r["straddles_zero"] else "no") if r["available"] else DASH
        rows.append({"size": r["size"], "recipe": ROLE_LABELS[r["role"]] + (" (prespecified)" if r["prespecified"]
                                                                         else ""),
                     "arm": r["arm"] if isinstance(r["arm"], str) else DASH,
                     "held-out gain over base": fmt_ci(r["estimate"], r["ci_low"], r["ci_high"], signed=True,
                                                       missing="not evaluated in this profile"),
                     "straddles zero": straddle, "paper: held-out gain": fmt_paper(pv, signed=True),
                     "paper: straddles zero": ("yes" if pv[1] <= 0 <= pv[2] else "no") if pv else DASH})
    fires = extension_fires(trigger)
    pre = trigger[trigger["available"] & trigger["prespecified"]] if len(trigger) else trigger
    verdict = "cannot be evaluated (no trained arm of the largest size has a held-out gain)" if fires is None else \
        "fires: the extension (double the held-out panel) is due" if fires else "does not fire"
    if fires is not None and not len(pre):
        verdict += " (read on the 3× LR arm: the largest size has no evaluated shared-recipe arm)"
    return BookTable("extension_trigger", "Held-out-panel extension: the prespecified trigger (App. C, K)",
                     frame(rows), f"ours: the trigger {verdict}. paper: the trigger fired twice (31B shared LR and "
                     "31B 3× LR) and the extension was not run (cost; App. K deviation log).", trigger)


def extension_panel_table(original: pd.DataFrame, doubled: pd.DataFrame, params: Params) -> BookTable:
    """App. C's extension run: each held-out gain over the same-size base on the main panel beside the same gain on
    the doubled panel (the union of the main and the extension's seeds; clusters = seeds), with the seed clusters of
    each. Both from :func:`negolib.study.analysis.contrasts.held_out_contrasts`; exploratory (no Holm family)."""
    looks = [{(r["arm_a"], r["arm_b"]): r for r in f[f["metric"] == "score"].to_dict("records")} if len(f) else {}
             for f in (original, doubled)]
    rows, data = [], []
    for g in params.design.sizes:
        for role in ("shared", "lr3", "lr10"):
            arm = getattr(g, role)
            if not arm or not any((arm, g.base) in look for look in looks):
                continue
            row: dict[str, Any] = {"size": g.label, "recipe": ROLE_LABELS[role], "arm": arm}
            for label, look in zip(("main panel", "doubled panel"), looks):
                r = look.get((arm, g.base))
                row[f"{label}: gain over base"] = fmt_ci(r["estimate"], r["ci_low"], r["ci_high"], signed=True) \
                    if r else DASH
                row[f"{label}: seeds"] = int(r["n_clusters"]) if r else DASH
                if r:
                    data.append({"panel": label, **{k: r[k] for k in ("arm_a", "arm_b", "metric", "estimate",
                                                                      "ci_low", "ci_high", "n_clusters")}})
            rows.append(row)
    return BookTable("extension_panel", "Held-out-panel extension (App. C, K): the held-out gains on the doubled panel",
                     frame(rows), "the main panel's held-out gains beside the same gains on the union of the main and "
                     "the extension's seeds (as many again, the next block of evaluation seeds); clusters = seeds. "
                     "Exploratory, unadjusted. paper: prespecified, not run.", pd.DataFrame(data))


def shared_recipe_arms(params: Params, group: Any) -> list[str]:
    """The shared-recipe arms of a size group, the points of Figure 3a: ``shared_early``, ``shared`` and the
    extra reads of the same training run (e.g. 31B at 40 steps). 3x/10x-LR arms (and reads of their runs)
    are another recipe and are left off the curve."""
    core = [a for a in (group.shared_early, group.shared) if a]
    runs = {params.arms[a].run for a in core if a in params.arms and params.arms[a].run}
    extra = [a for a in group.extra if a in params.arms and params.arms[a].run in runs and a not in core]
    return [*core, *extra]


def figure3_points(params: Params, group: Any, contrasts: pd.DataFrame,
                   training_steps: Mapping[str, int] | None = None) -> list[tuple[int, float, float, float]]:
    """(steps, gain, ci_low, ci_high) of Figure 3a for one size group, sorted by steps: the base at (0, 0)
    and each evaluated shared-recipe arm (:func:`shared_recipe_arms`) against the same-size base."""
    cl = marked_lookup(contrasts)
    pts = [(0, 0.0, 0.0, 0.0)]
    for arm in shared_recipe_arms(params, group):
        c = cl.get((arm, group.base, "score"))
        steps = (training_steps or {}).get(arm)
        steps = steps if steps is not None else arm_steps(params, arm)
        if c is not None and steps is not None:
            pts.append((steps, c["estimate"], c["ci_low"], c["ci_high"]))
    return sorted(pts) if len(pts) > 1 else []


def figure3(params: Params, est: pd.DataFrame, contrasts: pd.DataFrame, paper: PaperReported,
            training_steps: Mapping[str, int] | None = None) -> Figure:
    """Figure 3. (a) paired gain over base against combined steps per size, shared-recipe arms only
    (:func:`figure3_points`; ours | paper's reported gains at 104 steps with the continuation gains as
    labels); (b) deal rate against deal-only U~ for
    every arm of ours, arrows base → trained, beside the paper's arms."""
    plt = pyplot()
    el = estimate_lookup(est)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), gridspec_kw={"width_ratios": [1, 1, 1.3]})
    ax = axes[0]
    for g in params.design.sizes:
        pts = figure3_points(params, g, contrasts, training_steps)
        if pts:
            x, y = [p[0] for p in pts], np.array([p[1] for p in pts])
            ax.errorbar(x, y, yerr=[y - np.array([p[2] for p in pts]), np.array([p[3] for p in pts]) - y], fmt="o-",
                        capsize=3, label=g.label)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("combined optimizer steps")
    ax.set_ylabel("paired gain over base (S)")
    ax.set_title("(a) gain vs steps, shared recipe: ours", fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no shared-recipe arm evaluated", transform=ax.transAxes, ha="center")
    bx = axes[1]
    cont = paper.get("figure3", "continuation_gain", default={}) or {}
    for size in PAPER_SIZES:
        v = paper.get("table1", size, "shared_minus_base")
        if v:
            bx.errorbar([104], [v[0]], yerr=[[v[0] - v[1]], [v[2] - v[0]]], fmt="o", capsize=3,
                        label=f"{paper.get('sizes', size, 'label', default=size)} (104 steps)")
            if size in cont:
                bx.annotate(f"{cont[size]:+.3f} from the last 40/48 steps", (104, v[0]), xytext=(-14, 0),
                            textcoords="offset points", ha="right", va="center", fontsize=7)
    bx.axhline(0, color="k", lw=0.8)
    bx.set_xlim(0, 115)
    bx.set_xlabel("combined optimizer steps")
    bx.set_title("(a) paper (reported): shared-LR gain at 104 steps", fontsize=10)
    bx.legend(fontsize=7, loc="upper left")
    cx = axes[2]
    rows = []
    for arm in params.arms:
        d, u = el.get((arm, "deal_rate")), el.get((arm, "deal_utility"))
        if d and u:
            rows.append((arm, d["estimate"], u["estimate"]))
    for arm, d, u in rows:
        cx.scatter(d, u, s=40, color="#1f4e9c", zorder=3)
        cx.annotate(arm, (d, u), fontsize=7, xytext=(3, 3), textcoords="offset points")
    for g in params.design.sizes:
        for arm in (g.shared, g.lr3, g.lr10):
            a, b = (el.get((g.base, "deal_rate")), el.get((g.base, "deal_utility"))), \
                (el.get((arm, "deal_rate")), el.get((arm, "deal_utility"))) if arm else (None, None)
            if not (arm and all(a) and all(b)):
                continue
            start, end = (a[0]["estimate"], a[1]["estimate"]), (b[0]["estimate"], b[1]["estimate"])
            # a seller that never closes has no deal-only utility (nan): no arrow from it
            if np.all(np.isfinite([*start, *end])) and start != end:
                cx.annotate("", end, start, arrowprops={"arrowstyle": "->", "color": "#1f4e9c"})
    prow = [(k, v.get("deal_rate"), v.get("deal_utility")) for k, v in (paper.get("arms", default={}) or {}).items()
            if v.get("deal_rate") is not None and v.get("deal_utility") is not None]
    for _k, d, u in prow:
        cx.scatter(d, u, s=30, marker="x", color="#b5412b", zorder=2)
    if prow:
        cx.scatter([], [], marker="x", color="#b5412b", label="paper arms (reported)")
        cx.scatter([], [], color="#1f4e9c", label="ours")
        dr, du = paper.get("figure3", "e2b_deal_rate"), paper.get("figure3", "e2b_deal_utility")
        if dr and du:
            cx.annotate("", (dr[1], du[1]), (dr[0], du[0]), arrowprops={"arrowstyle": "->", "color": "#b5412b"})
            cx.annotate("paper 2.3B base → 104", (dr[1], du[1]), fontsize=7, color="#b5412b",
                        xytext=(-40, 8), textcoords="offset points")
        cx.legend(fontsize=8, loc="lower left")
    cx.set_xlabel("deal rate")
    cx.set_ylabel("deal-only seller Ũ")
    cx.set_title("(b) deal rate vs utility per closed deal", fontsize=10)
    fig.tight_layout()
    return fig


__all__ = ["extension_panel_table", "extension_trigger_table", "figure3", "figure3_points", "heldout_table",
           "shared_recipe_arms", "table3", "table4"]
