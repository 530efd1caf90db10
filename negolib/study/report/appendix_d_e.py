"""Notebook 7 (training diagnostics and guards, paper App. D, E): the prespecified guards of every trained
arm, Table 5 (the guards side by side at one size), Table 6 (buyer's-voice openers on the held-out
domain) and the style diagnostics, with the paper's reported values beside ours. (The per-run training
summary of App. D is :func:`negolib.study.report.training.training_table`.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from negolib.core.formatting import DASH, fmt_ci, fmt_num, fmt_pct
from negolib.params import Params, SizeGroup
from negolib.study.paired import estimate_lookup
from negolib.study.paper import PaperReported
from negolib.study.report.booktable import BookTable, fmt_paper, simple_table
from negolib.study.report.cells import arm_label, estimate_cell, frame, paper_ref

GUARD_NOTES = {"seller_bad_parse_rate": "over the seller's own turns",
               "invalid_accept_rate": "ACCEPTs with no buyer COUNTER to accept, over the seller's own turns",
               None: "read hand_read_sample(...) in the book: 5 per arm per domain family"}


def _limit(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _guard_words(r: Mapping[str, Any]) -> tuple[Any, str, str]:
    """(interval, threshold, note) of one guard row of :func:`negolib.study.analysis.guards.guards_frame`."""
    metric = r["metric"] if isinstance(r["metric"], str) else None
    if metric is None:
        return None, "manual", GUARD_NOTES[None]
    ci = fmt_ci(r["ci_estimate"], r["ci_low"], r["ci_high"], signed=True, missing=None)
    if metric == "deal_rate":
        return ci, f"delta >= {_limit(r['limit'])}", f"delta deal-only U~ {r['d_deal_utility']:+.3f}"
    if metric == "mean_turns":
        return ci, f"arm < {_limit(r['limit'])}", f"{r['share_at_cap']:.1%} of episodes at the cap"
    return ci, f"delta <= {_limit(r['limit'])}", GUARD_NOTES.get(metric, "")


def guards_display(guards: pd.DataFrame) -> pd.DataFrame:
    """The guards of :func:`negolib.study.analysis.guards.guards_frame` worded for display: the arm each was
    ``compared with`` and which that is (``comparator``: the starting policy, or the base as a fallback), the
    change's interval (``ci``), the guard's ``threshold`` and a ``note`` in place of the numbers behind them."""
    if guards.empty:
        return guards
    rows = []
    for r in guards.to_dict("records"):
        ci, threshold, note = _guard_words(r)
        row = {"arm": r["arm"], "compared with": r["base_arm"], "comparator": r.get("comparator", "given")}
        row.update({k: r[k] for k in ("guard", "metric")})
        row.update({"comparator value": r["base"], "arm value": r["arm_value"], "delta": r["delta"]})
        row.update({"ci": ci, "threshold": threshold, "passed": r["passed"], "note": note, "n_paired": r["n_paired"]})
        row.update({k: v for k, v in r.items() if k == "protocol_hash"})
        rows.append(row)
    return pd.DataFrame(rows)


GUARDS_CAPTION = ("Each trained arm against the policy its training started from (comparator \"starting "
                  "policy\": the run's format warm-up, step 0, where it has one; the base for a run without one), "
                  "so that a guard cannot pass because the comparator never parsed or closed a deal. Where no arm "
                  "holding that policy was evaluated the comparator is the same-size base, and says so.")


def guards_table(guards: pd.DataFrame) -> BookTable:
    """Every trained arm's prespecified guards (and ours) against the policy its training started from (or its
    base, where that arm was not evaluated: the ``comparator`` column says which), indexed by (arm, guard)."""
    shown = guards_display(guards)
    return simple_table("guards", "Prespecified guards of every trained arm, against the policy training started "
                        "from", shown.set_index(["arm", "guard"]) if len(shown) else shown, GUARDS_CAPTION)


def template_tag_table(serving: pd.DataFrame, params: Params | None = None) -> BookTable:
    """The template-tag guard per arm: template tags the agents stripped from the seller's replies before
    parsing (:func:`negolib.study.analysis.serving.serving_frame`); it passes with none stripped. Beside it, the
    paper's result (App. J: "no arm produced a template-tag leak")."""
    rows = [{"arm": r.arm, "seller": arm_label(params, r.arm), "seller turns": int(r.n_seller_turns),
             "tags stripped": int(r.n_tags_stripped), "episodes with a tag": int(r.n_tag_episodes),
             "passed": bool(r.tag_guard_passed), "paper: leaks": "none in any arm (App. J)"}
            for r in serving.itertuples()]
    return BookTable("template_tags", "Template-tag guard: tags stripped from the seller's replies, per arm",
                     frame(rows, "arm"),
                     "The agents strip chat-template tags and special tokens before a reply is parsed or shown "
                     "to the buyer; each one stripped is counted here, so the guard fails for an arm whose "
                     "replies carried any. API sellers' replies are not stripped (zero).", serving)


def table5(est: pd.DataFrame, split: pd.DataFrame | None, group: SizeGroup, params: Params,
           paper: PaperReported) -> BookTable:
    """Table 5: guards at one size (S, deal rate, deal-only U~, seller bad-parse, turns, buyer split)."""
    look = estimate_lookup(est)
    slook = estimate_lookup(split) if split is not None else {}
    arms = [getattr(group, r) for r in ("base", "shared_early", "shared", "lr3", "lr10") if getattr(group, r)]
    arms += [a for a in group.extra if a not in arms]
    rows = []
    for arm in arms:
        if (arm, "score") not in look:
            continue
        p = paper.arm(paper_ref(params, arm))
        rows.append({"arm": arm, "seller": arm_label(params, arm), "S": estimate_cell(look, arm, "score", ci=False),
                     "deal rate": estimate_cell(look, arm, "deal_rate", ci=False),
                     "deal-only U~": estimate_cell(look, arm, "deal_utility", ci=False),
                     "bad-parse (seller turns)": estimate_cell(look, arm, "seller_bad_parse_rate", 4, ci=False),
                     "turns": estimate_cell(look, arm, "mean_turns", 2, ci=False),
                     "buyer split": fmt_num(slook.get((arm, "buyer_split"), {}).get("estimate"), 3, True),
                     "paper: arm": paper.arm_label(paper_ref(params, arm)), "paper: S": fmt_paper(p.get("score")),
                     "paper: deal rate": fmt_paper(p.get("deal_rate")),
                     "paper: deal-only U~": fmt_paper(p.get("deal_utility")),
                     "paper: bad-parse (seller)": fmt_paper(p.get("seller_bad_parse_rate"), 4),
                     "paper: turns": fmt_paper(p.get("mean_turns"), 2),
                     "paper: buyer split": fmt_paper(p.get("buyer_split"), signed=True)})
    a, b = (params.design.buyer_split + ["A", "B"])[:2]
    return BookTable("table5", f"Table 5: guards at {group.label}", frame(rows, "arm"),
                     f"Prespecified guards: deal rate holds while U~ rises, flat seller parse-failure rate, turns "
                     f"below the cap; post hoc: buyer split = S vs {a} minus S vs {b} (paper: S vs GPT-5.6-Terra "
                     "minus S vs Claude Sonnet 5).", est)


def table6(voice: Mapping[str, float], params: Params, paper: PaperReported) -> BookTable:
    """Table 6: buyer's-voice opener rate on the held-out car domain, per arm (one detector)."""
    rows = []
    for arm in params.arms:
        if arm not in voice:
            continue
        ref = paper_ref(params, arm)
        rows.append({"arm": arm, "seller": arm_label(params, arm), "buyer's-voice openers (car)": fmt_pct(voice[arm]),
                     "paper: arm": paper.arm_label(ref),
                     "paper: rate": fmt_pct(paper.arm(ref).get("buyer_voice_car"))})
    return BookTable("table6", "Table 6: buyer's-voice opener rate on the held-out car domain", frame(rows, "arm"),
                     "Only within-table comparisons are meaningful: absolute rates depend on the detector's breadth.")


STYLE_PAPER_KEYS = (("top_opener_share", "top_opener_share"), ("top3_share", "top3_opener_share"),
                    ("repeated_opener_rate", "repeated_opener_rate"), ("i_appreciate_rate", "i_appreciate_rate"),
                    ("json_leak_rate", "json_leak_rate"), ("concession_naming_rate", "closing_names_concession"))


def style_diag_table(style: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """App. E style diagnostics per arm (:func:`negolib.study.diagnostics.style_table`), with the paper's
    values for the arms it reports them for (31B and 12B 3× LR, 10× LR, ...)."""
    if style.empty:
        return BookTable("style", "Style diagnostics (App. E)", style)
    df = style.set_index("arm").copy()
    shares = [c for c in df.columns if c.endswith(("_share", "_rate", "_opening"))]
    for c in shares:
        df[c] = df[c].map(fmt_pct)
    for ours, theirs in STYLE_PAPER_KEYS:
        df[f"paper: {ours}"] = [fmt_pct(paper.get("style", paper_ref(params, a) or "", theirs)) for a in df.index]
    df = df.loc[:, [c for c in df.columns if not c.startswith("paper:") or (df[c] != DASH).any()]]
    return BookTable("style", "Style diagnostics of the sellers' prose (App. E, post hoc)", df,
                     "Over the seller's turns with prose: opener = first three words; repeated-opener rate = "
                     "openers reused within an episode; JSON leakage = action fragments in the prose.", style)


def table6_from_style(style_car: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """Table 6 from :func:`negolib.study.diagnostics.style_table` over the held-out domain's records."""
    voice = {} if style_car.empty else dict(zip(style_car["arm"], style_car["buyer_voice_opening"]))
    return table6(voice, params, paper)


__all__ = ["GUARDS_CAPTION", "GUARD_NOTES", "STYLE_PAPER_KEYS", "guards_display", "guards_table", "style_diag_table",
           "table5", "table6", "table6_from_style", "template_tag_table"]
