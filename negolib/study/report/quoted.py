"""The contrasts the paper quotes in its text (:mod:`negolib.study.analysis.quoted`) as book tables, one per paper
section, each row with the paper's value beside ours; a quantity whose arms the profile does not have reads
"not run in this profile" (naming the design refs it lacks) beside the paper's value. Shared by notebooks 05-08.
"""

from __future__ import annotations

import pandas as pd

from negolib.core.formatting import DASH, fmt_ci, fmt_num, fmt_pct, is_number
from negolib.params import Params
from negolib.study.paper import PaperReported
from negolib.study.report.booktable import BookTable, fmt_paper
from negolib.study.report.cells import frame, paper_ref, skipped_notes

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
    **{f"g31b_104_minus_g12b_104.{d}": ("held_out", "g31b_104_minus_g12b_104", d) for d in ("pooled", "held_out")},
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
    "g31b_104_minus_g12b_104.pooled": "31B shared LR @104 − 12B shared LR @104, pooled",
    "g31b_104_minus_g12b_104.held_out": "31B shared LR @104 − 12B shared LR @104, held-out domain",
    "e2b_lr10_minus_base": "2.3B 10× LR − base, pooled",
    "e2b_lr10_minus_base_vs_terra": "2.3B 10× LR − base, against buyer_split[0] (paper: GPT-5.6-Terra)",
    "e2b_lr10_minus_base_vs_sonnet5": "2.3B 10× LR − base, against buyer_split[1] (paper: Claude Sonnet 5)",
    "e2b_lr10_split_minus_base_split": "2.3B 10× LR buyer split − base's buyer split",
    "e2b_lr10_minus_lr3": "2.3B 10× LR − 3× LR (S)",
}

SECTIONS = {
    "5": ("gain_differences", "Gain differences behind contribution (i) (§5, exploratory, unadjusted)"),
    "B": ("continuation_gains", "Continuation gains labelled in Figure 3 (App. B)"),
    "C": ("held_out_contrasts_text",
          "Frontier sellers, 31B@56 − 12B@104 and 31B@104 − 12B@104 by panel (App. C, exploratory)"),
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
            row[f"ours ({tag})"] = f"{ours_cell(r)} at B = {b}" if r["available"] else ours_cell(r)
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


# -- the smaller diagnostics (negolib.study.analysis.quoted_diagnostics) ---------------------------------------------

def _paper_arm(params: Params, paper: PaperReported, arm: str) -> tuple[str | None, str | None, dict]:
    """(the paper's size key, its recipe, its numbers) of the paper arm ``arm`` is shown beside."""
    ref = paper_ref(params, arm)
    p = paper.arm(ref)
    return p.get("size"), p.get("recipe"), p


def _ci(r: dict, scale: float = 1.0, digits: int = 3) -> str:
    return fmt_ci(r["estimate"] * scale, r["ci_low"] * scale, r["ci_high"] * scale, digits, signed=True,
                  mark="e" if r.get("significant") else "")


def _pct_range(v: object) -> str:
    if isinstance(v, (list, tuple)) and len(v) == 2:
        return f"{fmt_pct(v[0])}–{fmt_pct(v[1])}"
    return fmt_pct(v) if is_number(v) else DASH


def late_close_table(late: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """§5: per (trained arm, base), the share of deals closed at or after the converge turn (16) and its paired
    change in points on the scenarios both arms closed; the paper's ranges beside."""
    st = paper.get("style", default={}) or {}
    rng, lr10 = st.get("late_close_change_range_points"), st.get("late_close_change_lr10_points")
    rows = []
    for r in late.to_dict("records"):
        _, recipe, _ = _paper_arm(params, paper, r["arm_a"])
        pv = (f"{lr10:+.1f}" if recipe == "lr10" else f"{rng[0]:+.1f} to {rng[1]:+.1f}") if rng else DASH
        rows.append({"arm": r["arm_a"], "base": r["arm_b"], "base: late closes": fmt_pct(r["base_share"]),
                     "arm: late closes": fmt_pct(r["arm_share"]),
                     "change, both closed (points)": _ci(r, 100, 1), "pairs": r["n_episodes"],
                     "paper: base late closes": _pct_range(st.get("late_close_base_range")),
                     "paper: change (points)": pv if recipe else DASH})
    return BookTable("late_closes", "Late closes: deals closed at or after turn 16 (§5, post hoc)", frame(rows),
                     "From turn 16 each party's prompt says to converge. The change is paired on the scenarios both "
                     "arms closed; paper: the range over its trained arms (the 10× LR arm on its own).", late)


INTEGRATIVE_PAPER = {("g31b_shared_104", "buyer_integrative"): ("contrasts", "g31b_shared_integrative_buyer"),
                     ("g31b_shared_104", "seller_integrative"): ("contrasts", "g31b_shared_integrative_seller"),
                     ("e4b_shared_104", "seller_integrative_minus_distributive"):
                         ("contrasts", "e4b_shared_integrative_minus_distributive")}
"""(paper arm, metric) -> where the paper's value of an integrative-split row sits in ``paper_reported.yaml``."""

SPLIT_LABELS = {"seller_distributive": "Δ seller, distributive", "seller_integrative": "Δ seller, integrative",
                "seller_integrative_minus_distributive": "seller: integrative − distributive",
                "buyer_distributive": "Δ buyer, distributive", "buyer_integrative": "Δ buyer, integrative"}


def integrative_table(split: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """§5: per (trained arm, base), on the scenarios both arms closed, the seller's and the buyer's change on the
    distributive and on the integrative terms and the seller's integrative − distributive gap; the paper's values
    where it quotes one (31B shared: the buyer's and the seller's integrative change; 4.5B shared: the gap)."""
    rows = []
    for (a, b), g in split.groupby(["arm_a", "arm_b"], sort=False) if len(split) else []:
        look = {r["metric"]: r for r in g.to_dict("records")}
        row: dict = {"arm": a, "base": b}
        for m, lab in SPLIT_LABELS.items():
            row[lab] = _ci(look[m]) if m in look else DASH
        ref = paper_ref(params, a)
        for m in ("buyer_integrative", "seller_integrative", "seller_integrative_minus_distributive"):
            path = INTEGRATIVE_PAPER.get((ref or "", m))
            row[f"paper: {SPLIT_LABELS[m]}"] = fmt_paper(paper.get(*path), signed=True) if path else DASH
        rows.append(row)
    return BookTable("integrative_split", "Integrative terms: the buyer's change and the seller's gap (§5, post hoc)",
                     frame(rows), "Paired deal-only changes from the same-size base on the scenarios both arms "
                     "closed, split by term type for both parties; the gap is the seller's integrative minus its "
                     "distributive change on the same resamples. Exploratory (e: interval excludes zero).", split,
                     notes=skipped_notes(split))


def gain_shares_table(shares: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """§5: the distributive, integrative and buyer-loss shares of each trained arm's deal-only gain over base, beside
    the paper's (distributive 75-81% at 12B and 31B; buyer's loss 88%/93% shared, 55%/48% 3× LR)."""
    st = paper.get("style", default={}) or {}
    rows = []
    for r in shares.to_dict("records"):
        size, recipe, _ = _paper_arm(params, paper, r["arm_a"])
        big = size in ("12B", "31B") and recipe in ("shared", "lr3")
        loss = (st.get(f"buyer_loss_share_{recipe}") or {}).get(size) if recipe else None
        rows.append({"arm": r["arm_a"], "base": r["arm_b"], "seller's gain (deal-only)": fmt_num(r["seller_gain"], 3,
                                                                                                 True),
                     "distributive share": fmt_pct(r["distributive_share"]),
                     "integrative share": fmt_pct(r["integrative_share"]),
                     "buyer's loss / seller's gain": fmt_pct(r["buyer_loss_share"]),
                     "paper: distributive share": _pct_range(st.get("distributive_share_of_gain_12b_31b"))
                     if big else DASH,
                     "paper: buyer's loss / seller's gain": fmt_pct(loss) if loss is not None else DASH})
    return BookTable("gain_shares", "Where the seller's gain comes from (§5, post hoc)", frame(rows),
                     "Ratios of the point estimates of Table 2's paired changes on the scenarios both arms closed "
                     "(no interval); a negative buyer's loss is a buyer gain. paper: 12B and 31B only.", shares)


def self_play_table(sp: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """App. A: each reference seller's S against a buyer running its own model and against the other buyers."""
    sel = paper.get("appendix_a", "self_play", default={}) or {}
    rows = []
    for r in sp.to_dict("records"):
        ref = paper_ref(params, r["arm"])
        pv = sel.get(f"{ref}_vs_{'self' if r['self_play'] else 'other'}") if ref else None
        rows.append({"seller": r["arm"], "buyer": r["buyer"], "self-play": "yes" if r["self_play"] else "no",
                     "S": fmt_ci(r["estimate"], r["ci_low"], r["ci_high"], signed=False), "episodes": r["n_episodes"],
                     "paper: S": fmt_paper(pv)})
    return BookTable("self_play", "Self-play in the reference arms (App. A)", frame(rows),
                     "A buyer plays the seller's own model when backend and model match.", sp)


def kl_read_table(kl: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """App. D: the logged k3 KL to the initial policy at the step each trained arm was read, beside the run's first
    and last value; the paper's step-56 KL (3× and 10× LR arms, 31B at 56) and end-of-continuation KL beside."""
    tr = paper.get("training", default={}) or {}
    rows = []
    for r in kl.to_dict("records"):
        size, recipe, p = _paper_arm(params, paper, r["arm"])
        ref = paper_ref(params, r["arm"])
        pv = (tr.get("kl_step56") or {}).get(ref or "")
        if pv is None and recipe == "shared" and p.get("steps") == 104:
            pv = (tr.get("kl_end_of_continuation") or {}).get(size)
        rows.append({"arm": r["arm"], "run": r["run"], "read step": r["step"] if pd.notna(r["step"]) else DASH,
                     "KL at read": fmt_num(r["kl"], 4), "KL first → last": f"{fmt_num(r['kl_first'], 4)} → "
                                                                           f"{fmt_num(r['kl_last'], 4)}",
                     "paper: KL at read": fmt_num(pv, 4) if pv is not None else DASH})
    return BookTable("kl_at_read", "KL to the initial policy at the read step (App. D)", frame(rows),
                     "The logged k3 estimate (the 0.04 coefficient not folded in), at the checkpoint step the arm was "
                     "evaluated from (its run's step, not the combined steps).", kl)


DEAL_DROP_DOMAINS = ("acquisition", "job_offer", "partnership_dissolution")


def deal_rate_domain_table(rates: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """App. B: per domain, the deal rates of a trained arm and its base and the paired change; the paper's 2.3B
    shared-recipe deal rates by domain beside (0.74-0.80 in three domains, media_rights 0.90, the others above
    0.93)."""
    drop = paper.get("training", "e2b_deal_rate_drop_domains", default={}) or {}
    three = drop.get("acquisition_job_offer_partnership_dissolution")
    rows = []
    for r in rates.to_dict("records"):
        size, recipe, _ = _paper_arm(params, paper, r["arm_a"])
        pv = DASH
        if (size, recipe) == ("E2B", "shared"):
            pv = (f"{three[0]:.2f}–{three[1]:.2f}" if r["domain"] in DEAL_DROP_DOMAINS and three else
                  fmt_num(drop.get(r["domain"]), 2) if r["domain"] in drop else "> 0.93 (5 of the other 6)")
        rows.append({"arm": r["arm_a"], "base": r["arm_b"], "domain": r["domain"], "base deal rate":
                     fmt_num(r["base_rate"], 3), "arm deal rate": fmt_num(r["arm_rate"], 3), "change": _ci(r),
                     "paper: arm deal rate": pv})
    return BookTable("deal_rate_by_domain", "Deal rate by domain (App. B)", frame(rows),
                     "Paired by scenario on the seeds both arms played. paper: its 2.3B shared-recipe arm at 104 "
                     "steps (the deal-rate decline of Figure 3b).", rates)


def walkaway_table(walk: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """App. E: per arm, no-deals, walk-aways (no-deals before the cap) and episodes at the turn cap; the paper's
    where it quotes them (the 31B 3× LR arm: zero of each)."""
    rows = []
    for r in walk.to_dict("records"):
        ref = paper_ref(params, r["arm"])
        st = paper.get("style", ref, default={}) if ref else {}
        w = (st or {}).get("walkaways")
        rows.append({"arm": r["arm"], "episodes": r["n_episodes"], "no-deals": r["n_no_deal"],
                     "walk-aways": r["walkaways"], "at the turn cap": r["at_cap"],
                     "paper: walk-aways": w if w is not None else DASH})
    return BookTable("walkaways", "Walk-aways and episodes at the turn cap (App. E)", frame(rows, "arm"),
                     "In this protocol a no-deal is reached only at the turn cap, so a walk-away (a no-deal before "
                     "it) would be an episode cut short.", walk)


def off_schema_ledger_table(off: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """App. A: per arm, the share of deals that close with at least one off-schema term on the ledger; the paper's
    (55% for the 10× LR arm, 44%/43% for the 12B/31B 3× LR arms, 27-32% for the other 12B and 31B arms, 27-44%
    for every other arm) beside."""
    d = paper.get("appendix_a", "deals_with_off_schema", default={}) or {}
    rows = []
    for r in off.to_dict("records"):
        size, _, _ = _paper_arm(params, paper, r["arm"])
        ref = paper_ref(params, r["arm"])
        pv = DASH
        if ref in d:
            pv = fmt_pct(d[ref], 0)
        elif size in ("12B", "31B"):
            pv = _pct_range(d.get("other_12b_31b"))
        elif size:
            pv = _pct_range(d.get("others"))
        rows.append({"arm": r["arm"], "deals": r["n_deals"], "with an off-schema term": r["n_off_schema_deals"],
                     "share": fmt_pct(r["off_schema_deal_share"]), "paper: share": pv})
    return BookTable("off_schema_ledger", "Deals closing with an off-schema term on the ledger (App. A)",
                     frame(rows, "arm"), "An off-schema name enters the ledger but is never scored.", off)


__all__ = ["DEAL_DROP_DOMAINS", "INTEGRATIVE_PAPER", "LABELS", "NOT_RUN", "PAPER_PATHS", "SECTIONS", "SPLIT_LABELS",
           "deal_rate_domain_table", "gain_shares_table", "integrative_table", "kl_read_table", "late_close_table",
           "off_schema_ledger_table", "ours_cell", "quoted_table", "rerun_table", "self_play_table", "walkaway_table"]
