"""Notebook 5 (results, paper §5): the primary family, Table 1 (paired gains by size and learning rate),
Figure 2 (arm-level S and the primary contrasts), Table 2 (openings and the distributive /
integrative decomposition; with every interval it is Table 9), the openings and the reference-seller
contrasts, each with the paper's reported values beside ours (columns and panels labelled ``paper``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from negolib.core.formatting import DASH, decisive_digits, fmt_ci, fmt_num, fmt_p, fmt_pct
from negolib.params import Params, SizeGroup
from negolib.study.paired import estimate_lookup
from negolib.study.paper import PaperReported
from negolib.study.report.booktable import BookTable, fmt_paper, simple_table
from negolib.study.report.cells import (
    FEW,
    ROLE_LABELS,
    contrast_cell,
    contrast_data,
    decomposition_data,
    estimate_cell,
    few_clusters_note,
    frame,
    marked_lookup,
    paper_ref,
    skipped_notes,
)
from negolib.study.report.figures import PAPER_SIZES, ROLE_STYLE, pyplot

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FAMILY_COLUMNS = ["arm_a", "arm_b", "estimate", "ci_low", "ci_high", "p_value", "p_holm", "mark", "p_signflip",
                  "p_signflip_min", "few_clusters", "se", "mde", "n_clusters", "n_episodes", "n_resamples"]
"""The numbers behind the primary-family table (its ``_data.csv``)."""

FAMILY_NOTES = (
    "p (bootstrap) inverts the 95% percentile interval and is never shown below 1/(B+1) for B resamples "
    "(≤ marks a p at that floor: no resample reached zero, and the resampling cannot resolve a smaller p); "
    "Holm runs on these floored values.",
    "p (sign-flip) is the exact two-sided randomisation test over the seed clusters (the arms' labels swapped in "
    "every subset of clusters; a seeded Monte Carlo of 1/(B+1) resolution above 20 clusters). Its smallest "
    "attainable p is 2/2^C at C clusters: 1/16 = 0.0625 at 5, so at 5 clusters no test at the 0.05 level can "
    "reject, whatever the gain (a one-sided test's floor would be 1/32).",
)


def _smallest_p(r: Mapping[str, Any]) -> str:
    rule = f"2/2^{int(r['n_clusters'])}" if r.get("signflip_exact", True) else "1/(B+1)"
    return f"{fmt_p(r['p_signflip_min'])} ({rule})" if np.isfinite(r["p_signflip_min"]) else DASH


def primary_family_table(contrasts: pd.DataFrame, paper: PaperReported) -> BookTable:
    """The prespecified primary family (trained minus reference arm, Holm-corrected): each contrast's interval at
    the precision that decides its bounds, its bootstrap p (floored at 1/(B+1)), Holm p, the exact sign-flip p and
    the smallest p that test can give, its clusters (``†``: too few for the interval to be trusted, explained in
    a note) and minimum detectable effect; the paper's p-values beside."""
    prim = contrasts[contrasts["primary"]] if not contrasts.empty else pd.DataFrame()
    st = paper.get("statistics")
    paper_p = {"p at 2.3B / at 4.5B-31B": f"{st['primary_p_e2b']} / <= {st['primary_p_max_significant']:g}"}
    if not len(prim):
        return simple_table("primary_family", "Primary family: trained − reference arm (Holm)", pd.DataFrame(),
                            paper_values=paper_p)
    data = contrast_data(prim)
    rows = []
    for r in data.to_dict("records"):
        few = bool(r.get("few_clusters", False))
        rows.append({"arm_a": r["arm_a"], "arm_b": r["arm_b"],
                     "S(a) − S(b) [95% CI]": fmt_ci(r["estimate"], r["ci_low"], r["ci_high"], signed=True,
                                                    mark=r["mark"]),
                     "mark": r["mark"], "p (bootstrap)": fmt_p(r["p_value"], floor=1 / (r["n_resamples"] + 1)),
                     "p (Holm)": fmt_p(r["p_holm"]), "p (sign-flip)": fmt_p(r.get("p_signflip")),
                     "smallest attainable p (sign-flip)": _smallest_p(r),
                     "clusters": f"{int(r['n_clusters'])}{' ' + FEW if few else ''}", "episodes": int(r["n_episodes"]),
                     "se": fmt_num(r["se"], 4), "mde": fmt_num(r["mde"], 4)})
    t = simple_table("primary_family", "Primary family: trained − reference arm (Holm)",
                     frame(rows).set_index(["arm_a", "arm_b"]), paper_values=paper_p)
    t.data = data[[c for c in FAMILY_COLUMNS if c in data.columns]]
    t.notes = [*FAMILY_NOTES, *[n for n in (few_clusters_note(prim),) if n]]
    return t


def table1(contrasts: pd.DataFrame, est: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """Table 1: per size, 3×LR S and the paired differences (shared − base, 3× − base, 3× − shared)."""
    look, elook = marked_lookup(contrasts), estimate_lookup(est)
    rows = []
    for g in params.design.sizes:
        p = paper.get("table1", g.paper, default={}) or {}

        def pc(key: str, p: Mapping = p) -> str:
            return fmt_paper(p.get(key), signed=True, mark=p.get(f"{key}_mark", "")) if key in p else DASH

        rows.append({
            "size": g.label, "arms": _roles(g),
            "3×LR S": estimate_cell(elook, g.lr3, "score", ci=False),
            "shared − base": contrast_cell(look, g.shared, g.base), "3×LR − base": contrast_cell(look, g.lr3, g.base),
            "3×LR − shared (early ckpt)": contrast_cell(look, g.lr3, g.shared_early),
            "3×LR − shared (final)": contrast_cell(look, g.lr3, g.shared),
            "paper: size": paper.get("sizes", g.paper, "label", default=DASH) if g.paper else DASH,
            "paper: 3×LR S": fmt_paper(p.get("lr3_score")), "paper: shared − base": pc("shared_minus_base"),
            "paper: 3×LR − base": pc("lr3_minus_base"),
            "paper: 3×LR − shared (early)": pc("lr3_minus_shared_early"),
            "paper: 3×LR − shared (@104)": pc("lr3_minus_shared") + (" †" if p.get("dagger") else "")})
    shown = {(a, b) for g in params.design.sizes for a, b in ((g.shared, g.base), (g.lr3, g.base),
                                                                 (g.lr3, g.shared_early), (g.lr3, g.shared)) if a and b}
    on_show = contrasts[[(a, b) in shown and m == "score" for a, b, m in
                         zip(contrasts["arm_a"], contrasts["arm_b"], contrasts["metric"])]] if len(contrasts) else None
    note = few_clusters_note(on_show)
    return BookTable("table1", "Table 1: paired gains by size and learning rate", frame(rows, "size"),
                     "Pointwise 95% seed-cluster bootstrap intervals on within-scenario paired differences. "
                     "* survives Holm correction over the profile's prespecified primary family; e marks an "
                     "exploratory, unadjusted interval excluding zero.", contrast_data(contrasts),
                     notes=[note.replace(f"{FEW} f", "F", 1)] if note else [])


def _roles(g: SizeGroup) -> str:
    parts = [f"{ROLE_LABELS[r]}={getattr(g, r)}" for r in ROLE_LABELS if getattr(g, r)]
    return "; ".join(parts)


RECIPES = (("shared", "Shared LR"), ("lr3", "3× LR"), ("lr10", "10× LR"))


def table2(decomp: pd.DataFrame, opens: Mapping[str, float] | None, params: Params, paper: PaperReported,
           with_ci: bool = False) -> BookTable:
    """Table 2 (``with_ci=False``) or Table 9: opening and decomposition descriptors per recipe and size.

    ``decomp``: :func:`negolib.study.analysis.decomposition.decomposition` rows; ``opens``: arm -> share of
    episodes whose seller names >= 1 domain term at turn 1 (from :mod:`negolib.study.diagnostics`), or None.
    """
    look = marked_lookup(decomp)
    rows = []
    for role, rlabel in RECIPES:
        for g in params.design.sizes:
            arm = getattr(g, role)
            if not arm:
                continue
            p = paper.get("table2", role, g.paper, default={}) or {}

            def cell(metric: str, a: str = arm, b: str = g.base) -> str:
                r = look.get((a, b, metric))
                if r is None:
                    return DASH
                lo, hi = (r["ci_low"], r["ci_high"]) if with_ci else (None, None)
                return fmt_ci(r["estimate"], lo, hi, 3, signed=True, mark=r.get("mark", ""))

            def pcell(key: str, p: Mapping = p, role: str = role, size: str = g.paper) -> str:
                v = p.get(key)
                if v is None:
                    return DASH
                mark = paper.mark("table2", role, size, key)  # as printed, not re-derived from rounded bounds
                return fmt_ci(v[0], v[1] if with_ci else None, v[2] if with_ci else None, 3, signed=True, mark=mark)

            ob, oa = (opens or {}).get(g.base), (opens or {}).get(arm)
            n = look.get((arm, g.base, "welfare"), {}).get("n_episodes")
            rows.append({"recipe": rlabel, "size": g.label, "arm": arm,
                         "opens with terms (base → arm)": f"{fmt_pct(ob)} → {fmt_pct(oa)}",
                         "both closed (n)": n if n is not None else DASH,
                         "Δ seller U~ distributive": cell("seller_distributive"),
                         "Δ seller U~ integrative": cell("seller_integrative"),
                         "Δ buyer U~": cell("buyer_utility"), "Δ joint welfare": cell("welfare"),
                         "paper: size": paper.get("sizes", g.paper, "label", default=DASH) if g.paper else DASH,
                         "paper: opens (base → arm)": (f"{fmt_pct(p['opens_base'])} → {fmt_pct(p['opens_arm'])}"
                                                       if p else DASH),
                         "paper: Δ distributive": pcell("d_seller_distributive"),
                         "paper: Δ integrative": pcell("d_seller_integrative"),
                         "paper: Δ buyer U~": pcell("d_buyer_utility"), "paper: Δ welfare": pcell("d_welfare")})
    name, title = ("table9", "Table 9: Table 2 with every paired interval") if with_ci else \
        ("table2", "Table 2: what the trained sellers do differently (post hoc)")
    df = frame(rows)
    if not df.empty:
        df = df.set_index(["recipe", "size"])
    return BookTable(name, title, df,
                     "Δ columns: paired differences from the same-size base over scenarios both arms closed "
                     "(exploratory; e marks a 95% seed-cluster interval excluding zero). U~ splits exactly by "
                     "term into distributive (continuous) and integrative (categorical, binary) parts.",
                     decomposition_data(decomp), notes=skipped_notes(decomp))


def openings_book_table(openings: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """Section 5: per arm, the share opening with terms, terms named, the opening's score if accepted,
    and the deals those openings led to (:func:`negolib.study.diagnostics.openings_table`); paper beside."""
    if openings.empty:
        return BookTable("openings", "Openings (§5)", openings)
    rows = []
    for r in openings.to_dict("records"):
        p = paper.get("openings", paper_ref(params, r["arm"]) or "", default={}) or {}
        rows.append({"arm": r["arm"], "episodes": r["n_episodes"], "opens with terms": fmt_pct(r["opens_with_terms"]),
                     "terms named": fmt_num(r["mean_terms_named"], 1), "share of terms": fmt_pct(r["mean_terms_share"]),
                     "opening score": fmt_num(r["opening_score"]), "deal − opening": fmt_num(r["deal_minus_opening"],
                                                                                           signed=True),
                     "paper: opens with terms": fmt_pct(p.get("opens_with_terms")),
                     "paper: terms named": fmt_num(p.get("mean_terms_named"), 1),
                     "paper: opening score": fmt_num(p.get("opening_score")),
                     "paper: deal − opening": fmt_num(p.get("deal_minus_opening"), signed=True)})
    return BookTable("openings", "Openings: naming terms at turn 1 (§5, post hoc)", frame(rows, "arm"),
                     "Among openings that name terms: how many, the seller's U~ if the opening were accepted as "
                     "it stands, and the deals those episodes reached minus that score.", openings)


def frontier_table(contrasts: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """Section 5: trained sellers against the frontier (or other reference) sellers (exploratory)."""
    look = marked_lookup(contrasts)
    ptext = paper.get("contrasts", default={}) or {}
    rows = []
    for g in params.design.sizes:
        for role in ("lr3", "shared", "base"):
            arm = getattr(g, role)
            for f in params.design.frontier:
                if not arm or (arm, f, "score") not in look:
                    continue
                ref, fref = paper_ref(params, arm), paper_ref(params, f)
                pv = ptext.get(f"{ref}_minus_{fref}".replace("_56_minus", "_minus")) if ref and fref else None
                rows.append({"seller": arm, "reference": f, "difference in S": contrast_cell(look, arm, f),
                             "paper: difference": fmt_paper(pv, signed=True)})
    return BookTable("frontier", "Reference-seller contrasts (exploratory, unadjusted)", frame(rows), "",
                     contrast_data(contrasts))


def _role_of(params: Params, arm: str) -> str:
    """The recipe role (a :data:`ROLE_STYLE` key) ``arm`` plays in its size group; ``shared`` when none."""
    for g in params.design.sizes:
        for role in ("lr3", "lr10", "shared", "base"):
            if getattr(g, role) == arm:
                return role
    return "shared"


def _ours_fig2(params: Params, est: pd.DataFrame, contrasts: pd.DataFrame) -> tuple[list, list, list]:
    """(arm points, primary contrasts, reference lines) of our panels: points ``(x, role, S, lo, hi)``; primary
    contrasts ``(label, role, estimate, lo, hi, mark, few_clusters)`` in ``statistics.primary`` order."""
    el, cl = estimate_lookup(est), marked_lookup(contrasts)
    pts, prim, refs = [], [], []
    for i, g in enumerate(params.design.sizes):
        for role in ("base", "shared", "lr3", "lr10"):
            arm = getattr(g, role)
            r = el.get((arm, "score")) if arm else None
            if r is not None:
                pts.append((i, role, r["estimate"], r.get("ci_low"), r.get("ci_high")))
    for a, b in params.statistics.primary:
        c = cl.get((a, b, "score"))
        if c is not None:
            prim.append((f"{a}\n− {b}", _role_of(params, a), c["estimate"], c["ci_low"], c["ci_high"],
                         c.get("mark") or "n.s.", bool(c.get("few_clusters", False))))
    sized = {a for g in params.design.sizes for a in (g.base, g.shared, g.shared_early, g.lr3, g.lr10) if a}
    for arm in params.arms:
        r = el.get((arm, "score"))
        if arm not in sized and r is not None:
            refs.append((arm, r["estimate"], arm in params.design.frontier))
    return pts, prim, refs


def _paper_fig2(paper: PaperReported) -> tuple[list, list, list]:
    """The paper's panels, as :func:`_ours_fig2`'s; its primary family is the shared-LR gain over base at each size."""
    pts, prim, refs = [], [], []
    recipe_arm = {"base": "{}_base", "shared": "{}_shared_104", "lr3": "{}_lr3_56", "lr10": "{}_lr10_56"}
    prefix = {"E2B": "e2b", "E4B": "e4b", "12B": "g12b", "31B": "g31b"}
    for i, size in enumerate(PAPER_SIZES):
        for role, pat in recipe_arm.items():
            s = paper.arm(pat.format(prefix[size])).get("score")
            if isinstance(s, list):
                pts.append((i, role, s[0], s[1], s[2]))
            elif s is not None:
                pts.append((i, role, s, None, None))
        t1 = paper.get("table1", size, default={}) or {}
        v = t1.get("shared_minus_base")
        if v:
            label = paper.get("sizes", size, "label", default=size)
            prim.append((label, "shared", v[0], v[1], v[2], t1.get("shared_minus_base_mark") or "n.s.", False))
    for ref in ("sonnet5", "terra"):
        s = paper.arm(ref).get("score")
        if s:
            refs.append((paper.arm_label(ref), s[0], True))
    return pts, prim, refs


def _draw_points(ax: Any, pts: list, jitter: float = 0.12) -> None:
    roles = list(ROLE_STYLE)
    for role in roles:
        sub = [p for p in pts if p[1] == role]
        if not sub:
            continue
        label, color, marker = ROLE_STYLE[role]
        off = (roles.index(role) - 1.5) * jitter
        x = np.array([p[0] for p in sub]) + off
        y = np.array([p[2] for p in sub])
        lo = np.array([p[3] if p[3] is not None else p[2] for p in sub])
        hi = np.array([p[4] if p[4] is not None else p[2] for p in sub])
        ax.errorbar(x, y, yerr=[y - lo, hi - y], fmt=marker, color=color, label=label, capsize=3, ms=6,
                    linestyle="-" if len(sub) > 1 else "none", lw=0.8)


def _draw_primary(bx: Any, prim: list) -> None:
    """One errorbar per primary contrast at x = 0, 1, ..., annotated with its estimate (at the precision its
    bounds need), its mark (``*`` or ``n.s.``) and ``†`` for too few clusters."""
    for i, (_, role, e, lo, hi, mark, few) in enumerate(prim):
        _, color, marker = ROLE_STYLE.get(role, ROLE_STYLE["shared"])
        bx.errorbar([i], [e], yerr=[[e - lo], [hi - e]], fmt=marker, color=color, capsize=4, ms=7)
        d = decisive_digits(lo, hi)
        text = f"{e:+.{d}f}{mark if mark == '*' else ' ' + mark}{' ' + FEW if few else ''}"
        bx.annotate(f"{text}\n[{lo:+.{d}f}, {hi:+.{d}f}]", (i + 0.08, e), fontsize=7)


def figure2(params: Params, est: pd.DataFrame, contrasts: pd.DataFrame, paper: PaperReported) -> Figure:
    """Figure 2. Top: arm-level S [95% CI] by size and recipe, reference sellers as horizontal lines
    (frontier: solid; other arms, e.g. scripted baselines: dotted). Bottom: the primary contrasts
    (``statistics.primary``: what training added over the policy it is compared with, e.g. GRPO − its format
    warm-up) with 95% paired intervals (* Holm-significant; n.s.; † too few clusters), beside the paper's primary
    family (shared LR − base at each size)."""
    plt = pyplot()
    ratios = [max(1, len(params.design.sizes), len(params.statistics.primary)) + 1.5, 5]
    fig, axes = plt.subplots(2, 2, figsize=(15, 8.5), gridspec_kw={"width_ratios": ratios})
    panels = [("ours", [g.label for g in params.design.sizes], _ours_fig2(params, est, contrasts)),
              ("paper (reported)", [paper.get("sizes", s, "label", default=s) for s in PAPER_SIZES],
               _paper_fig2(paper))]
    for col, (who, labels, (pts, prim, refs)) in enumerate(panels):
        ax, bx = axes[0, col], axes[1, col]
        labels = labels or []
        _draw_points(ax, pts)
        palette = iter(["#2ca02c", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"])
        for name, s, frontier in refs:
            ax.axhline(s, ls="-" if frontier else ":", lw=1.2, color=next(palette, "#999"), label=f"{name} ({s:.3f})")
        ax.set_xticks(range(len(labels)), labels, rotation=0, fontsize=8)
        ax.set_xlim(-0.6, max(len(labels), 1) - 0.4)
        ax.set_ylabel("S (arm-level mean)")
        ax.set_title(f"(a) attained score S: {who}", fontsize=10)
        if who.startswith("paper"):
            ax.axvline(1.5, ls=":", color="k", lw=1)
            ax.legend(fontsize=7, loc="upper left")
        elif ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        _draw_primary(bx, prim)
        bx.axhline(0, color="k", lw=0.8)
        bx.set_xticks(range(len(prim)), [p[0] for p in prim], fontsize=8)
        bx.set_xlim(-0.6, max(len(prim), 1) - 0.4)
        bx.set_ylabel("paired difference (S)")
        what = "shared LR − base" if who.startswith("paper") else "statistics.primary"
        bx.set_title(f"(b) primary contrasts ({what}), 95% paired intervals: {who}", fontsize=10)
        if who.startswith("paper"):
            bx.axvline(1.5, ls=":", color="k", lw=1)
        if not pts:
            ax.text(0.5, 0.5, "no arms of this design evaluated", transform=ax.transAxes, ha="center")
        if not prim:
            bx.text(0.5, 0.5, "no primary contrast evaluated", transform=bx.transAxes, ha="center")
    fig.tight_layout()
    return fig


__all__ = ["FAMILY_COLUMNS", "RECIPES", "figure2", "frontier_table", "openings_book_table", "primary_family_table",
           "table1", "table2"]
