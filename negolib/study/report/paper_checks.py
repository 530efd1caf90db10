"""Tables of what the paper reports beside its tables (App. A, C, E, I, K and Table 8's topology), ours beside the
paper's values. They read the frames of :mod:`negolib.study.analysis.transcript_checks`,
:mod:`negolib.study.analysis.read_points` and :func:`negolib.study.analysis.serving.size_topology`;
a row the paper has no value for shows a dash, and a paper quantity this profile cannot compute says why.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from negolib.core.formatting import DASH, fmt_ci, fmt_num, fmt_pct, is_number
from negolib.params import Params
from negolib.study.paper import PaperReported
from negolib.study.report.booktable import BookTable, fmt_paper
from negolib.study.report.cells import fmt_count, frame, paper_ref

NOT_HERE = "not run here"


def _paper_arm(params: Params, paper: PaperReported, arm: str) -> dict[str, Any]:
    return paper.arm(paper_ref(params, arm))


def _missing_refs(params: Params, arms: Any, refs: list[str]) -> list[str]:
    """The paper arms among ``refs`` that no arm of ``arms`` is shown beside."""
    have = {paper_ref(params, a) for a in arms}
    return [r for r in refs if r not in have]


def _pct_range(v: Any) -> str:
    if isinstance(v, (list, tuple)) and len(v) == 2:
        return f"{fmt_pct(v[0], 0)}–{fmt_pct(v[1], 0)}"
    return fmt_pct(v) if is_number(v) else DASH


def prose_guard_table(guard: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """App. K's guard "the seller's prose reaches the buyer", per arm (:func:`prose_guard`)."""
    said = paper.get("appendix_a", "prose_reaches_buyer", default=None) or DASH
    rows = [{"arm": r["arm"], "seller turns": r["n_seller_turns"], "turns without prose": r["n_empty_prose"],
             "with prose": fmt_pct(r["prose_share"]), "guard": "pass" if r["passed"] else "FAIL",
             "paper": said if paper_ref(params, r["arm"]) else DASH} for r in guard.to_dict("records")]
    return BookTable("prose_guard", "App. K guard: the seller's prose reaches the buyer", frame(rows, "arm"),
                     "Per arm, the seller turns whose prose (the text the buyer reads) is blank; the guard passes when "
                     "none is.", guard)


def _accept_terms_paper(p: dict[str, Any], paper: PaperReported) -> str:
    share = paper.get("appendix_a", "accept_with_terms_share", default={}) or {}
    recipe, size = p.get("recipe"), p.get("size")
    if recipe == "lr10":
        return fmt_pct(share.get("e2b_lr10_56"), 0)
    if recipe in ("base", "shared"):
        return _pct_range(share.get("base_and_shared")) + " (base and shared-LR arms)"
    if recipe == "lr3" and size != "E2B":
        return _pct_range(share.get("lr3_above_2b")) + " (3× LR above 2.3B)"
    return DASH


def _share_cell(sub: pd.DataFrame, metric: str) -> str:
    if metric not in sub.index:
        return DASH
    r = sub.loc[metric]
    return f"{fmt_pct(r['estimate'])} [{fmt_pct(r['ci_low'])}, {fmt_pct(r['ci_high'])}]"


def app_a_shares_table(est: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """App. A: per arm, the off-schema share of the terms the seller names and the accept-with-terms share of its
    closing accepts (arm estimates of :data:`APP_A_METRICS` with seed-cluster intervals), the paper's beside."""
    off = paper.get("appendix_a", "off_schema_share_of_named_terms")
    rows = []
    for arm in dict.fromkeys(est["arm"]) if len(est) else []:
        sub = est[est["arm"] == arm].set_index("metric")
        p = _paper_arm(params, paper, arm)

        rows.append({"arm": arm, "off-schema share of named terms": _share_cell(sub, "off_schema_rate"),
                     "paper: off-schema share": _pct_range(off) + " (every arm)" if p else DASH,
                     "accept-with-terms share of closing accepts": _share_cell(sub, "accept_with_terms"),
                     "paper: accept-with-terms share": _accept_terms_paper(p, paper) if p else DASH})
    return BookTable("app_a_shares", "Off-schema terms and accepts with terms (App. A)", frame(rows, "arm"),
                     "Off-schema: the seller's counter terms named outside the domain's schema, over all terms it "
                     "names. Accept with terms: the seller's closing accepts that carried terms (ignored in "
                     "evaluation), over its closing accepts. 95% seed-cluster intervals.", est)


def nodeal_counter_table(nodeal: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """App. E: in each arm's no-deal episodes, the share of the seller's turns that counter."""
    rows = []
    for r in nodeal.to_dict("records"):
        ref = paper_ref(params, r["arm"]) or ""
        rows.append({"arm": r["arm"], "no-deal episodes": r["n_nodeal_episodes"],
                     "seller turns": r["n_nodeal_seller_turns"], "counters": r["n_nodeal_counters"],
                     "counter share": fmt_pct(r["counter_share"]),
                     "paper: counter share": fmt_pct(paper.get("style", ref, "nodeal_counter_share"))})
    refs = [k for k, v in (paper.get("style", default={}) or {}).items()
            if isinstance(v, dict) and "nodeal_counter_share" in v]
    for ref in _missing_refs(params, nodeal["arm"], refs):
        rows.append({"arm": f"paper: {paper.arm_label(ref)}", "counter share": f"{NOT_HERE} (no such arm or no no-deal "
                     "episode)", "paper: counter share": fmt_pct(paper.get("style", ref, "nodeal_counter_share"))})
    return BookTable("nodeal_counters", "Countering turns in the no-deal episodes (App. E)", frame(rows, "arm"),
                     "paper: the 10× LR arm issues counter on 95% of its seller turns in its no-deal episodes.",
                     nodeal)


def turn_totals_table(totals: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """App. E's counts beside ours: episodes, turns, seller bad parses and unfilled placeholders per arm; the
    paper's 131 placeholders (10× LR arm) and 8,400 turns with no bad parse (31B 3× LR arm)."""
    rows = []
    for r in totals.to_dict("records"):
        st = paper.get("style", paper_ref(params, r["arm"]) or "", default={}) or {}
        rows.append({"arm": r["arm"], "episodes": r["n_episodes"], "turns": fmt_count(r["n_turns"]),
                     "seller bad parses": r["n_seller_bad_parses"],
                     "unfilled placeholders": fmt_count(r["n_placeholders"]) if is_number(r["n_placeholders"])
                     else DASH,
                     "paper: turns": fmt_count(st.get("turns_total")) if "turns_total" in st else DASH,
                     "paper: bad parses": st.get("bad_parses", DASH),
                     "paper: unfilled placeholders": st.get("unfilled_placeholders", DASH)})
    style = paper.get("style", default={}) or {}
    refs = [k for k, v in style.items() if isinstance(v, dict) and ("turns_total" in v or "unfilled_placeholders" in v)]
    for ref in _missing_refs(params, totals["arm"], refs):
        st = style[ref]
        rows.append({"arm": f"paper: {paper.arm_label(ref)}", "turns": f"{NOT_HERE} (the profile has no such arm)",
                     "paper: turns": fmt_count(st["turns_total"]) if "turns_total" in st else DASH,
                     "paper: bad parses": st.get("bad_parses", DASH),
                     "paper: unfilled placeholders": st.get("unfilled_placeholders", DASH)})
    return BookTable("turn_totals", "Turns, bad parses and unfilled placeholders per arm (App. E)",
                     frame(rows, "arm"), "paper: 131 placeholders over the 10× LR arm's 1,152 episodes; zero bad "
                     "parses across the 31B 3× LR arm's 8,400 turns.", totals)


def adjacent_reads_table(adj: pd.DataFrame, paper: PaperReported) -> BookTable:
    """Section 5's stability check: per size, the largest movement in S between adjacent shared-recipe reads."""
    p = paper.get("training", "adjacent_read_movement", default={}) or {}
    rows = [{"size": r["size"], "reads (arm@steps)": r["reads"], "largest move": f"{r['arm_from']} → {r['arm_to']}",
             "S": f"{fmt_num(r['score_from'])} → {fmt_num(r['score_to'])}",
             "movement": fmt_num(r["movement"], 3, True),
             "paper: largest movement": fmt_num(p[r["paper_size"]]) if r["paper_size"] in p else DASH}
            for r in adj.to_dict("records")]
    ours = set(adj["paper_size"]) if len(adj) else set()
    rows += [{"size": f"paper: {paper.get('sizes', k, 'label', default=k)}",
              "reads (arm@steps)": f"{NOT_HERE} (fewer than two shared-recipe reads of this size evaluated)",
              "paper: largest movement": fmt_num(v)} for k, v in p.items() if k not in ours]
    return BookTable("adjacent_reads", "Largest movement in S between adjacent read points (§5)", frame(rows, "size"),
                     "paper: 0.004 at 2.3B to 0.056 at 31B (Table 4; the 4.5B and 12B values are not printed). One "
                     "training run per arm: a rough stability check, not run-to-run variance.", adj)


def turn_ranges_table(ranges: pd.DataFrame, paper: PaperReported) -> BookTable:
    """App. I: the range of mean episode turns over the matched-step arms and over every evaluated arm."""
    keys = {"matched": ("episode_turns_range_matched", "base and shared-recipe arms"),
            "all": ("episode_turns_range_all", "every evaluated arm of the design")}
    rows = []
    for r in ranges.to_dict("records"):
        key, label = keys[r["arms"]]
        pv = paper.get("training", key)
        rows.append({"arms": label, "n": r["n_arms"],
                     "mean turns": DASH if not r["n_arms"] else
                     f"{fmt_num(r['min'], 1)} ({r['arm_min']}) to {fmt_num(r['max'], 1)} ({r['arm_max']})",
                     "max / min": fmt_num(r["ratio"], 2),
                     "paper": f"{pv[0]:g} to {pv[1]:g}" if isinstance(pv, list) else DASH})
    return BookTable("turn_ranges", "Mean episode turns across arms (App. I)", frame(rows, "arms"),
                     "paper: token counts differ by at most about 30% across the matched-step arms while N differs by "
                     "13×; across all 21 arms the range is about two-fold.", ranges)


VALIDATION_PAPER = {"g31b_shared_104": "g31b_continued", "e4b_shared_56": "e4b_initial",
                    "g31b_shared_56": "g31b_initial", "e2b_lr3_56": "e2b_lr3", "e2b_lr10_56": "e2b_lr10",
                    "g12b_lr3_56": "g12b_lr3"}
"""The paper arm each of App. K's validation notes is about (keys of ``training.validation``)."""


def read_validation_table(val: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """App. K: each trained arm's validation S at its read step, its run's peak and final step, the paper's
    validation values behind its read-point notes beside."""
    pv = paper.get("training", "validation", default={}) or {}
    rows = []
    for r in val.to_dict("records"):
        note = pv.get(VALIDATION_PAPER.get(paper_ref(params, r["arm"]) or "", ""), {})
        rows.append({"arm": r["arm"], "run": r["run"], "read step": r["step"], "validation S at read":
                     fmt_num(r["val_at_read"]), "peak (step: S)": f"{r['peak_step']}: {fmt_num(r['val_peak'])}",
                     "last (step: S)": f"{r['last_step']}: {fmt_num(r['val_last'])}",
                     "read is peak": "yes" if r["read_is_peak"] else "no",
                     "paper": ", ".join(f"{k} {v:g}" for k, v in note.items()) or DASH})
    return BookTable("read_validation", "Validation behind the read points (App. K)", frame(rows, "arm"),
                     "Validation S from each run's validation log. The paper reads by the step-matching rule, not by "
                     "validation; its notes give these values for the substituted and off-peak reads.", val)


def held_out_mc_table(band: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """App. C: whether each held-out contrast clears zero by more than the Monte Carlo band of its nearest
    endpoint; for the held-out gains over base the paper's interval and verdict beside."""
    roles = {}
    for g in params.design.sizes:
        for role, key in (("shared", "shared_minus_base"), ("lr3", "lr3_minus_base")):
            a = getattr(g, role)
            if a:
                roles[(a, g.base)] = (role, g.paper, key)
    clears = set(paper.get("held_out", "mc_band_clears", default=[]) or [])
    rows = []
    for r in band.to_dict("records"):
        role, size, key = roles.get((r["arm_a"], r["arm_b"]), (None, None, None))
        pci = paper.get("held_out", key, size) if key else None
        verdict = DASH
        if isinstance(pci, list):
            verdict = ("clears the band" if f"{role}.{size}" in clears else
                       "excludes zero, inside the band" if pci[1] > 0 or pci[2] < 0 else "includes zero")
        rows.append({"contrast": f"{r['arm_a']} − {r['arm_b']}",
                     "ours": fmt_ci(r["estimate"], r["ci_low"], r["ci_high"], 3, signed=True),
                     "nearest bound ± band": f"{fmt_num(r['nearest_bound'], 4, True)} ± {fmt_num(r['band'], 4)}",
                     "ours: verdict": "clears the band" if r["clears_band"] else
                     ("excludes zero, inside the band" if r["excludes_zero"] else "includes zero"),
                     "paper": fmt_paper(pci, signed=True), "paper: verdict": verdict})
    return BookTable("held_out_mc_band", "Held-out contrasts against the Monte Carlo band (App. C)",
                     frame(rows, "contrast"), "Band: 3 Monte Carlo SEs of the endpoint nearest zero (the rule that "
                     "picks App. K's re-runs). paper: of the eight held-out gains only the 2.3B 3× LR interval clears "
                     "zero by more than the band (the band's width is not printed).", band)


def _vals(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return " / ".join(f"{x:g}" for x in v) if v else DASH
    return DASH if v is None or (isinstance(v, float) and pd.isna(v)) else f"{v:g}" if is_number(v) else str(v)


def topology_table(topo: pd.DataFrame, paper: PaperReported) -> BookTable:
    """Table 8's serving and training topology per size: ours (evaluation backend, device, tensor-parallel degree,
    memory fraction; training runs' tensor-parallel degree and generation memory fraction) beside the paper's
    accelerators, tensor-parallel degree and memory fraction."""
    rows = []
    for r in topo.to_dict("records"):
        p = paper.get("sizes", r["paper_size"] or "", default={}) or {}
        rows.append({"size": r["size"], "eval: backend": r["eval_backend"] or DASH,
                     "eval: device": r["eval_device"] or DASH,
                     "eval: accelerators (TP)": _vals(r["eval_tp"]) if r["eval_tp"] else f"{DASH} (not vLLM)",
                     "eval: memory fraction": _vals(r["eval_memory_fraction"]) if r["eval_memory_fraction"]
                     else f"{DASH} (backend default)",
                     "train: runs": len(r["train_runs"]),
                     "train: TP": _vals(r["train_tp"]) if r["train_runs"] else f"{DASH} (no run)",
                     "train: gen. memory fraction": _vals(r["train_memory_fraction"]) if r["train_runs"]
                     else f"{DASH} (no run)",
                     "paper: accelerators (48 GB)": p.get("eval_accelerators", DASH),
                     "paper: train TP": p.get("train_tp", DASH),
                     "paper: gen. memory fraction": p.get("gen_memory_fraction", DASH)})
    return BookTable("topology", "Table 8: serving and training topology per size", frame(rows, "size"),
                     "Ours from the profile (the base arm's serving, and the training runs starting from it); a "
                     "profile on CPU serves through Hugging Face and sets no tensor parallelism or memory fraction.",
                     topo.astype({"train_runs": str, "train_tp": str, "train_memory_fraction": str}))


__all__ = ["NOT_HERE", "VALIDATION_PAPER", "adjacent_reads_table", "app_a_shares_table", "held_out_mc_table",
           "nodeal_counter_table", "prose_guard_table", "read_validation_table", "topology_table",
           "turn_ranges_table", "turn_totals_table"]
