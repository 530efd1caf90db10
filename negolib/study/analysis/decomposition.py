"""Tables 2 and 9 inputs: paired deal-only changes split into the seller's distributive and integrative parts.

For each (trained arm, base) pair, over the scenarios both arms closed on the seeds both played:
the change in the seller's distributive and integrative U~ (they sum to the seller's deal-only change),
in the buyer's U~ and in joint welfare (:func:`negolib.study.diagnostics.decomposition_table`, exploratory:
``significant`` where the 95% interval excludes zero).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from negolib.games.multi_issue.scenarios import Scenario
from negolib.study.analysis.contrasts import numeric
from negolib.study.analysis.resamplers import Analysis
from negolib.study.diagnostics import SPLIT_SKIPPED, decomposition_columns, decomposition_table

DECOMP_METRICS = ("seller_distributive", "seller_integrative", "buyer_utility", "welfare")
DECOMP_NAMES = {"seller_dist": "seller_distributive", "seller_int": "seller_integrative", "buyer_u": "buyer_utility",
                "welfare": "welfare", "seller_u": "seller_utility"}
"""The decomposition metrics of :mod:`negolib.study.diagnostics` -> their names in the analysis frames."""


def decomposition(an: Analysis, pairs: Sequence[tuple[str, str]],
                  scenarios: Mapping[str, Scenario] | None = None) -> pd.DataFrame:
    """Paired deal-only changes (arm_a - arm_b) over scenarios both arms closed, split into the seller's
    distributive and integrative parts, the buyer's U~ and joint welfare; metrics named as in
    :data:`DECOMP_NAMES` (:data:`DECOMP_METRICS` and the seller's total ``seller_utility``). ``scenarios``: the
    imported ones by domain name; episodes whose split cannot be made are left out (``n_skipped``; the reasons in
    ``attrs["skipped"]``)."""
    pairs = [(a, b) for a, b in pairs if an.has(a) and an.has(b)]
    if not pairs:
        return pd.DataFrame()
    df = decomposition_columns(an.df, scenarios=scenarios)
    parts = []
    for a, b in pairs:
        seeds = sorted(set(df.loc[df["arm"] == a, "seed"]) & set(df.loc[df["arm"] == b, "seed"]))
        if not seeds:
            continue
        sub = df[df["arm"].isin([a, b]) & df["seed"].isin(seeds)]
        t = decomposition_table(sub, b, [a], an.resampler(seeds), an.alpha, refine=False)
        parts.append(t.rename(columns={"arm": "arm_a", "base_arm": "arm_b"}))
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if not out.empty:
        out["metric"] = out["metric"].map(DECOMP_NAMES)
        out = numeric(out).drop(columns=["label"], errors="ignore")
        out.attrs["skipped"] = "; ".join(sorted(set(df[SPLIT_SKIPPED]) - {""}))
    return out


__all__ = ["DECOMP_METRICS", "DECOMP_NAMES", "decomposition"]
