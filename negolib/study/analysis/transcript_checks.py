"""Per-arm counts the paper reports from its transcripts that the other analyses do not compute.

* :func:`prose_guard`: App. K's guard "the seller's prose reaches the buyer": every seller turn carries prose to
  the buyer (the ``prose`` field is the text the buyer reads).
* :func:`nodeal_counters`: in an arm's no-deal episodes, the share of the seller's turns that COUNTER (App. E: the
  10x LR arm counters on 95% of them).
* :func:`turn_totals`: turns, seller turns and unfilled placeholders per arm (App. E: the 10x LR arm forwards 131
  placeholders over its 1,152 episodes; the 31B 3x LR arm has no bad parse across its 8,400 turns).
* :data:`APP_A_METRICS`: the off-schema share of the terms the seller names and the accept-with-terms share of
  its closing accepts (App. A), as metrics of :func:`negolib.study.analysis.arms.arm_estimates`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

APP_A_METRICS = ("off_schema_rate", "accept_with_terms")
"""App. A's two shares (metrics of :mod:`negolib.games.multi_issue.metrics`)."""

PROSE_COLUMNS = ["arm", "n_seller_turns", "n_empty_prose", "prose_share", "passed"]
NODEAL_COLUMNS = ["arm", "n_nodeal_episodes", "n_nodeal_seller_turns", "n_nodeal_counters", "counter_share"]
TOTAL_COLUMNS = ["arm", "n_episodes", "n_turns", "n_seller_turns", "n_seller_bad_parses", "n_placeholders"]


def _action(t: dict[str, Any]) -> str | None:
    return (t.get("action") or {}).get("action")


def prose_guard(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Per arm: seller turns, those whose prose reaching the buyer is empty (blank after stripping), the share
    with prose, and ``passed`` (no seller turn reached the buyer without prose)."""
    counts: dict[str, list[int]] = {}
    for rec in records:
        c = counts.setdefault(rec["arm"], [0, 0])
        for t in rec["turns"]:
            if t["role"] == "seller":
                c[0] += 1
                c[1] += not t["prose"].strip()
    rows = [{"arm": a, "n_seller_turns": n, "n_empty_prose": e, "prose_share": (n - e) / n if n else np.nan,
             "passed": n > 0 and e == 0} for a, (n, e) in counts.items()]
    return pd.DataFrame(rows, columns=PROSE_COLUMNS)


def nodeal_counters(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Per arm with a no-deal episode: those episodes, their seller turns, the seller turns that COUNTER and the
    share (``counter_share``; NaN without seller turns)."""
    counts: dict[str, list[int]] = {}
    for rec in records:
        if rec.get("status") != "no_deal":
            continue
        c = counts.setdefault(rec["arm"], [0, 0, 0])
        c[0] += 1
        for t in rec["turns"]:
            if t["role"] == "seller":
                c[1] += 1
                c[2] += _action(t) == "COUNTER"
    rows = [{"arm": a, "n_nodeal_episodes": e, "n_nodeal_seller_turns": n, "n_nodeal_counters": k,
             "counter_share": k / n if n else np.nan} for a, (e, n, k) in counts.items()]
    return pd.DataFrame(rows, columns=NODEAL_COLUMNS)


def turn_totals(df: pd.DataFrame, style: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per arm of the episode table (:func:`negolib.core.transcripts.episodes_frame`): episodes, turns, seller turns,
    seller bad parses and, from :func:`negolib.study.diagnostics.style_table` when given, unfilled placeholders."""
    if df is None or df.empty:
        return pd.DataFrame(columns=TOTAL_COLUMNS)
    g = df.groupby("arm", sort=False)
    out = pd.DataFrame({"n_episodes": g.size(), "n_turns": g["turns"].sum(), "n_seller_turns": g["seller_turns"].sum(),
                        "n_seller_bad_parses": g["seller_bad_parses"].sum()}).reset_index()
    ph = {} if style is None or style.empty else dict(zip(style["arm"], style["n_placeholders"]))
    out["n_placeholders"] = [ph.get(a, np.nan) for a in out["arm"]]
    return out[TOTAL_COLUMNS]


__all__ = ["APP_A_METRICS", "NODEAL_COLUMNS", "PROSE_COLUMNS", "TOTAL_COLUMNS", "nodeal_counters", "prose_guard",
           "turn_totals"]
