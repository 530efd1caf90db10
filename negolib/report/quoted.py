"""The contrasts the paper quotes in its text (:mod:`negolib.analysis.quoted`) as book tables, one per paper
section, each row with the paper's value beside ours; a quantity whose arms the profile does not have reads
"not run in this profile" (naming the design refs it lacks) beside the paper's value. Shared by notebooks 05-08.
"""

from __future__ import annotations

import pandas as pd

from negolib.formatting import DASH, fmt_ci, fmt_num, is_number
from negolib.paper import PaperReported
from negolib.report.booktable import BookTable, fmt_paper
from negolib.report.cells import frame

NOT_RUN = "not run in this profile"

PAPER_PATHS: dict[str, tuple[str, ...]] = {
    "gain_diff_within_eseries": ("contrasts", "gain_diff_within_eseries"),
    "gain_diff_across_boundary": ("contrasts", "gain_diff_across_boundary"),
    "gain_diff_within_conventional": ("contrasts", "gain_diff_within_conventional"),
    "lr3_g31b_minus_g12b": ("contrasts", "lr3_g31b_minus_g12b"),
    "e4b_lr3_56_minus_64": ("contrasts", "e4b_lr3_56_minus_64"),
    **{f"continuation_gain.{s}": ("figure3", "continuation_gain", s) for s in ("E2B", "E4B", "12B", "31B")},
    **{f"sonnet_minus_terra.{d}": ("held_out", "sonnet_minus_terra", d) for d in ("training_domains", "pooled",
                                                                               "held_out")},
    **{f"g31b_56_minus_g12b_104.{d}": ("held_out", "g31b_56_minus_g12b_104", d) for d in ("pooled", "held_out")},
    **{k: ("contrasts", k) for k in ("e2b_lr10_minus_base", "e2b_lr10_minus_base_vs_terra",
                                     "e2b_lr10_minus_base_vs_sonnet5", "e2b_lr10_split_minus_base_split",
                                     "e2b_lr10_minus_lr3")},
}
"""Where each quoted quantity's value sits in ``paper_reported.yaml``."""

LABELS: dict[str, str] = {
    "gain_diff_within_eseries": "gain difference within the E-series pair (4.5B − 2.3B shared-LR gain)",
    "gain_diff_across_boundary": "gain difference across the architecture boundary (12B − 4.5B)",
    "gain_diff_within_conventional": "gain difference within the conventional pair (31B − 12B)",
    "lr3_g31b_minus_g12b": "31B 3× LR − 12B 3× LR (S)",
    "e4b_lr3_56_minus_64": "4.5B 3× LR, step 56 − step 64 (one run)",
    **{f"continuation_gain.{s}": f"{lab}: continuation gain (104 steps − intermediate read)"
       for s, lab in (("E2B", "2.3B"), ("E4B", "4.5B"), ("12B", "12B"), ("31B", "31B"))},
    "sonnet_minus_terra.training_domains": "frontier[0] − frontier[1] (Sonnet 5 − Terra), training domains",
    "sonnet_minus_terra.pooled": "frontier[0] − frontier[1] (Sonnet 5 − Terra), pooled",
    "sonnet_minus_terra.held_out": "frontier[0] − frontier[1] (Sonnet 5 − Terra), held-out domain",
    "g31b_56_minus_g12b_104.pooled": "31B shared LR @56 − 12B shared LR @104, pooled",
    "g31b_56_minus_g12b_104.held_out": "31B shared LR @56 − 12B shared LR @104, held-out domain",
    "e2b_lr10_minus_base": "2.3B 10× LR − base, pooled",
    "e2b_lr10_minus_base_vs_terra": "2.3B 10× LR − base, against buyer_split[0] (paper: GPT-5.6-Terra)",
    "e2b_lr10_minus_base_vs_sonnet5": "2.3B 10× LR − base, against buyer_split[1] (paper: Claude Sonnet 5)",
    "e2b_lr10_split_minus_base_split": "2.3B 10× LR buyer split − base's buyer split",
    "e2b_lr10_minus_lr3": "2.3B 10× LR − 3× LR (S)",
}

SECTIONS = {
    "5": ("gain_differences", "Gain differences behind contribution (i) (§5, exploratory, unadjusted)"),
    "B": ("continuation_gains", "Continuation gains labelled in Figure 3 (App. B)"),
    "C": ("held_out_contrasts_text", "Frontier sellers and 31B@56 − 12B@104 by panel (App. C, exploratory)"),
    "E": ("lr10_by_buyer", "The 10× LR arm by buyer (App. E, paired by scenario, exploratory)"),
}


def _text(v: object) -> str | None:
    return v if isinstance(v, str) and v else None


def _arms(r: dict) -> str:
    first = f"{r['arm_a']} − {r['arm_b']}" + (f" vs {r['buyer']}" if _text(r["buyer"]) else "")
    if _text(r["arm_c"]) is None:
        return first
    second = f"{r['arm_c']} − {r['arm_d']}" + (f" vs {r['buyer_c']}" if _text(r["buyer_c"]) else "")
    return f"({first}) − ({second})"


def ours_cell(r: dict, digits: int = 3) -> str:
    """``+0.022e [-0.002, +0.046]`` (``e``: the interval excludes zero), or "not run in this profile (no ...)"."""
    if not r["available"]:
        return f"{NOT_RUN} (no {r['missing']})" if _text(r.get("missing")) else NOT_RUN
    return fmt_ci(r["estimate"], r["ci_low"], r["ci_high"], digits, signed=True, mark="e" if r["significant"] else "")


def quoted_table(quoted: pd.DataFrame, section: str, paper: PaperReported) -> BookTable:
    """The quoted quantities of one section (``5``, ``B``, ``C`` or ``E``; ``K`` is :func:`rerun_table`): what each
    is, our arms, ours with its interval and seed clusters, and the paper's value beside."""
    name, title = SECTIONS[section]
    sub = quoted[(quoted["section"] == section)] if len(quoted) else quoted
    rows = []
    for r in sub.to_dict("records"):
        rows.append({"quantity": LABELS.get(r["key"], r["key"]), "ours: arms": _arms(r) if r["available"] else DASH,
                     "ours": ours_cell(r), "seed clusters": r["n_clusters"] if r["available"] else DASH,
                     "paper": fmt_paper(paper.get(*PAPER_PATHS[r["key"]]), signed=True)})
    return BookTable(name, title, frame(rows, "quantity"),
                     "Paired within-scenario differences of S with 95% seed-cluster percentile intervals; a gain "
                     "difference is the difference of two paired contrasts on the same resamples. Every row is "
                     "exploratory and unadjusted (e: the interval excludes zero).", sub)


def rerun_table(quoted: pd.DataFrame, paper: PaperReported) -> BookTable:
    """App. K: the two contrasts the paper re-runs at 10^5 resamples (their lower bounds sat within the 10^4 Monte
    Carlo band), ours at the profile's resamples and at its ``refine_resamples``, each lower bound with its Monte
    Carlo SE; the paper's interval and its lower bound at 10^5 beside."""
    sub = quoted[quoted["section"] == "K"] if len(quoted) else quoted
    rows = []
    for key in dict.fromkeys(sub["key"]) if len(sub) else []:
        rs = sub[sub["key"] == key].sort_values("n_resamples").to_dict("records")
        row = {"quantity": LABELS.get(key, key), "ours: arms": _arms(rs[0]) if rs[0]["available"] else DASH}
        for r, tag in zip(rs, ("profile's resamples", "re-run")):
            b = f"{int(r['n_resamples']):,}"
            row[f"ours ({tag})"] = f"{ours_cell(r)} at B = {b}"
            row[f"ours: lower bound ± MC SE ({tag})"] = (f"{fmt_num(r['ci_low'], 4, True)} ± {fmt_num(r['se_low'], 4)}"
                                                          if r["available"] and is_number(r["ci_low"]) else DASH)
        row["paper (10^4)"] = fmt_paper(paper.get(*PAPER_PATHS[key]), signed=True)
        lb = paper.get("statistics", "refined_lower_bounds", key)
        row["paper: lower bound at 10^5"] = fmt_num(lb, 4, True) if lb is not None else DASH
        rows.append(row)
    st = paper.get("statistics", default={}) or {}
    return BookTable("resample_reruns", "App. K: the two contrasts re-run at 10^5 resamples", frame(rows, "quantity"),
                     f"paper: endpoint Monte Carlo error ±{st.get('mc_endpoint_error')} at 10^4 and "
                     f"±{st.get('refined_endpoint_error')} at 10^5 resamples (same seed).", sub)


__all__ = ["LABELS", "NOT_RUN", "PAPER_PATHS", "SECTIONS", "ours_cell", "quoted_table", "rerun_table"]
