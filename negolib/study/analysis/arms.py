"""Arm-level estimates (each arm resampled over the seeds it played) and what the results notebooks read.

:func:`compute_results` estimates every metric of Tables 3-5 (and the post-hoc buyer split) per arm and
runs the profile's design contrasts; :class:`Results` holds them with the analysis they came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from negolib.games.multi_issue.metrics import arm_table, buyer_split
from negolib.params import Params
from negolib.study.analysis.contrasts import design_contrasts
from negolib.study.analysis.resamplers import Analysis
from negolib.study.paired import arm_estimate

ESTIMATE_COLUMNS = ["arm", "metric", "estimate", "ci_low", "ci_high", "n_episodes", "n_clusters"]
TABLE4_METRICS = ("score", "score_held_out", "deal_rate", "mean_turns", "bad_parse_rate")
TABLE3_METRICS = ("score", "deal_rate", "deal_utility", "welfare")
TABLE5_METRICS = ("score", "deal_rate", "deal_utility", "seller_bad_parse_rate", "mean_turns")


def arm_estimates(an: Analysis, arms: Sequence[str], metrics: Sequence[Any],
                  domains: Sequence[str] | None = None, buyer: str | None = None) -> pd.DataFrame:
    """Tidy (arm, metric, estimate, ci_low, ci_high, n_episodes, n_clusters) with arm-level intervals.

    ``metrics``: names in :data:`negolib.games.multi_issue.metrics.METRICS` or
    :class:`~negolib.games.multi_issue.metrics.Metric` objects (e.g. ``buyer_split(a, b)``). Each arm is resampled
    over the seeds it played."""
    rows = []
    for arm in arms:
        if not an.has(arm):
            continue
        sub = an.df[an.df["arm"] == arm]
        res = an.resampler(sub["seed"])
        for m in metrics:
            try:
                e = arm_estimate(sub, arm, m, res, an.alpha, buyer=buyer, domains=domains)
            except (KeyError, ValueError):  # no episodes after the filter, or an undefined ratio
                continue
            rows.append({"arm": arm, "metric": e.metric, "estimate": e.estimate, "ci_low": e.ci_low,
                         "ci_high": e.ci_high, "n_episodes": e.n_episodes, "n_clusters": e.n_clusters})
    return pd.DataFrame(rows, columns=ESTIMATE_COLUMNS)


def point_estimates(df: pd.DataFrame, arms: Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
    """Tidy point estimates (no intervals) of metrics per arm (``metrics.arm_table``)."""
    sub = df[df["arm"].isin(list(arms))] if not df.empty else df
    if sub.empty:
        return pd.DataFrame(columns=["arm", "metric", "estimate"])
    t = arm_table(sub, list(metrics))
    long = t.drop(columns=["n_episodes"], errors="ignore").reset_index().melt(id_vars="arm", var_name="metric",
                                                                             value_name="estimate")
    return long


@dataclass
class Results:
    """Everything the results notebooks read: the analysis, arm estimates and the design contrasts."""

    params: Params
    an: Analysis
    est: pd.DataFrame
    contrasts: pd.DataFrame

    @property
    def empty(self) -> bool:
        return self.an.df.empty

    @property
    def arms(self) -> list[str]:
        """Evaluated arms, in the profile's order."""
        have = set(self.an.arms())
        return [a for a in self.params.arms if a in have]

    def primary(self) -> pd.DataFrame:
        """The contrasts of the prespecified primary family (empty frame when none ran)."""
        return self.contrasts[self.contrasts["primary"]] if not self.contrasts.empty else pd.DataFrame()


def compute_results(df: pd.DataFrame, params: Params) -> Results:
    """Arm estimates (every metric of Tables 3-5 and the buyer split) and the design contrasts."""
    an = Analysis.from_params(df, params)
    if df.empty:
        return Results(params, an, pd.DataFrame(columns=["arm", "metric", "estimate", "ci_low", "ci_high"]),
                       pd.DataFrame())
    arms = [a for a in params.arms if an.has(a)]
    metrics: list[Any] = list(dict.fromkeys(TABLE4_METRICS + TABLE3_METRICS + TABLE5_METRICS))
    if len(params.design.buyer_split) == 2:
        metrics.append(buyer_split(*params.design.buyer_split))
    est = arm_estimates(an, arms, metrics)
    return Results(params, an, est, design_contrasts(an, params))


__all__ = ["ESTIMATE_COLUMNS", "Results", "TABLE3_METRICS", "TABLE4_METRICS", "TABLE5_METRICS", "arm_estimates",
           "compute_results", "point_estimates"]
