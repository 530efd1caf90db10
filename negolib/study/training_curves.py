"""Training curves: the per-step spread of a run's episodes (from its training records) and rolling means of its step
log, as tidy frames the report layer draws."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from negolib.study.record_view import Record
from negolib.study.record_view import seller_turns as _seller_turns

SPREAD_METRICS = ("reward", "score", "bad_parse_rate")  # per-episode values; a deal (0/1) has no useful quartiles
CURVE_METRICS = ("reward", "score", "deal_rate", "kl", "bad_parse_rate")
SPREAD_COLS = ["step", "metric", "n", "mean", "min", "q25", "median", "q75", "max"]


def _training_values(rec: Record) -> dict[str, float]:
    """One training episode's reward (Eq. 1 as trained on), score S and seller bad-parse share, as the
    step log computes them (a driver-cut "truncated" episode scores the no-deal floor -lambda)."""
    train = rec.get("training") or {}
    out = rec.get("outcome") or {}
    if rec.get("status") == "truncated" or not out:
        score = -float(rec["config"]["no_deal_penalty"])
    else:
        score = float(out["score"])
    seller = _seller_turns(rec)
    bad = sum(t.get("action") is None for t in seller) / len(seller) if seller else math.nan
    return {"reward": float(train["reward"]), "score": score, "bad_parse_rate": bad}


def training_step_spread(records: Iterable[Record]) -> pd.DataFrame:
    """Per optimizer step and metric (:data:`SPREAD_METRICS`), the spread of the step's training episodes.

    ``records``: a run's training transcript records (``transcripts/train.jsonl``; each has ``step`` and
    ``training.reward``). Error trajectories (status ``"error"`` or ``training.excluded``) are left out, as
    they are left out of the update. Returns a tidy frame with :data:`SPREAD_COLS`: ``n`` episodes, their
    ``mean``, ``min``, quartiles (``q25``, ``median``, ``q75``) and ``max``; one row per (step, metric)
    with at least one value, sorted by step."""
    values: dict[tuple[int, str], list[float]] = {}
    for rec in records:
        if "step" not in rec:
            raise ValueError(f"not a training transcript record (no 'step'): {rec.get('arm')!r}")
        train = rec.get("training") or {}
        if rec.get("status") == "error" or train.get("excluded") or train.get("reward") is None:
            continue
        for metric, v in _training_values(rec).items():
            if not math.isnan(v):
                values.setdefault((int(rec["step"]), metric), []).append(v)
    rows = []
    for (step, metric), vs in sorted(values.items(), key=lambda kv: (kv[0][0], SPREAD_METRICS.index(kv[0][1]))):
        a = np.asarray(vs, dtype=float)
        q25, median, q75 = np.quantile(a, [0.25, 0.5, 0.75])
        rows.append({"step": step, "metric": metric, "n": a.size, "mean": float(a.mean()), "min": float(a.min()),
                     "q25": float(q25), "median": float(median), "q75": float(q75), "max": float(a.max())})
    return pd.DataFrame(rows, columns=SPREAD_COLS)


def rolling_step_means(log: pd.DataFrame, metrics: Sequence[str] = CURVE_METRICS, window: int = 3) -> pd.DataFrame:
    """Trailing rolling means over ``window`` logged steps of each of ``metrics`` present in a step log.

    Returns a tidy frame (``step``, ``metric``, ``value``, ``rolling``) with ``rolling`` NaN until
    ``window`` logged values are in (so a run shorter than ``window`` steps has no rolling mean)."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    frames = []
    if "step" not in log.columns:
        log = log.assign(step=np.arange(1, len(log) + 1))
    log = log.sort_values("step")
    for m in metrics:
        if m not in log.columns:
            continue
        s = log[["step", m]].dropna()
        if s.empty:
            continue
        v = s[m].astype(float)
        frames.append(pd.DataFrame({"step": s["step"].to_numpy(), "metric": m, "value": v.to_numpy(),
                                    "rolling": v.rolling(window, min_periods=window).mean().to_numpy()}))
    cols = ["step", "metric", "value", "rolling"]
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


__all__ = ["CURVE_METRICS", "SPREAD_COLS", "SPREAD_METRICS", "rolling_step_means", "training_step_spread"]
