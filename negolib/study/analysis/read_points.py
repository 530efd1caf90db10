"""Read points and their stability: what the paper reports about them beside its tables.

* :func:`adjacent_reads`: per size, the largest movement in S between adjacent read points of the shared recipe's
  run (Section 5: 0.004 at 2.3B to 0.056 at 31B).
* :func:`turn_ranges`: the range of mean episode turns over the base and shared-recipe arms and over every
  evaluated arm of the design (App. I: 9.9-12.8 and 7.3-14.4).
* :func:`read_validation`: each trained arm's validation S at its read step, its run's validation peak and final
  step (App. K: the values behind the read-point choices).
* :func:`held_out_mc_band`: whether each held-out contrast's interval clears zero by more than the Monte Carlo
  band of its endpoint (App. C).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from negolib.params import Params

ADJACENT_COLUMNS = ["size", "paper_size", "reads", "arm_from", "arm_to", "score_from", "score_to", "movement"]
RANGE_COLUMNS = ["arms", "n_arms", "min", "arm_min", "max", "arm_max", "ratio"]
VALIDATION_COLUMNS = ["arm", "run", "seed", "step", "val_at_read", "peak_step", "val_peak", "last_step", "val_last",
                      "read_is_peak"]
MC_BAND_COLUMNS = ["arm_a", "arm_b", "estimate", "ci_low", "ci_high", "nearest_bound", "mc_se", "band",
                   "excludes_zero", "clears_band"]
MC_BAND_K = 3.0
"""An endpoint within this many Monte Carlo SEs of zero is inside the band (the rule that picks App. K's re-runs,
:meth:`negolib.study.paired.Contrast.near_zero`)."""


def _scores(est: pd.DataFrame, metric: str = "score") -> dict[str, float]:
    if est is None or est.empty:
        return {}
    sub = est[est["metric"] == metric]
    return dict(zip(sub["arm"], sub["estimate"].astype(float)))


def _steps(params: Params, arm: str) -> int:
    s = params.arms[arm]
    return int(s.steps if s.steps is not None else (s.step or 0))


def shared_reads(params: Params, group: object) -> list[str]:
    """The shared recipe's read points of one size group (its early and final reads and any extra arm read from
    the same runs), in order of combined steps."""
    core = [a for a in (group.shared_early, group.shared) if a and a in params.arms]  # type: ignore[attr-defined]
    runs = {params.arms[a].run for a in core if params.arms[a].run}
    extra = [a for a in group.extra if a in params.arms and params.arms[a].run in runs]  # type: ignore[attr-defined]
    return sorted(dict.fromkeys(core + extra), key=lambda a: _steps(params, a))


def adjacent_reads(est: pd.DataFrame, params: Params) -> pd.DataFrame:
    """Per size group with two or more evaluated shared-recipe reads: the reads (``arm@steps``), the adjacent pair
    whose S moved most and the signed movement (S of the later read minus the earlier)."""
    score = _scores(est)
    rows = []
    for g in params.design.sizes:
        reads = [a for a in shared_reads(params, g) if a in score]
        if len(reads) < 2:
            continue
        pairs = list(zip(reads, reads[1:]))
        a, b = max(pairs, key=lambda p: abs(score[p[1]] - score[p[0]]))
        rows.append({"size": g.label, "paper_size": g.paper,
                     "reads": ", ".join(f"{r}@{_steps(params, r)}" for r in reads), "arm_from": a, "arm_to": b,
                     "score_from": score[a], "score_to": score[b], "movement": score[b] - score[a]})
    return pd.DataFrame(rows, columns=ADJACENT_COLUMNS)


def _range(label: str, turns: Mapping[str, float], arms: Sequence[str]) -> dict:
    have = [a for a in dict.fromkeys(arms) if a in turns and np.isfinite(turns[a])]
    if not have:
        return {"arms": label, "n_arms": 0, "min": np.nan, "arm_min": None, "max": np.nan, "arm_max": None,
                "ratio": np.nan}
    lo, hi = min(have, key=turns.__getitem__), max(have, key=turns.__getitem__)
    return {"arms": label, "n_arms": len(have), "min": turns[lo], "arm_min": lo, "max": turns[hi], "arm_max": hi,
            "ratio": turns[hi] / turns[lo] if turns[lo] > 0 else np.nan}


def turn_ranges(est: pd.DataFrame, params: Params) -> pd.DataFrame:
    """Two rows: the range of mean turns over the base and shared-recipe arms (``matched``, the arms App. I's
    matched-step accounting covers) and over every evaluated arm of the design (``all``: size groups and
    frontier sellers), each with its extreme arms and max / min."""
    turns = _scores(est, "mean_turns")
    groups = params.design.sizes
    matched = [a for g in groups for a in (g.base, g.shared_early, g.shared) if a]
    everything = [a for g in groups for a in (g.base, g.shared_early, g.shared, g.lr3, g.lr10, *g.extra) if a]
    everything += list(params.design.frontier)
    return pd.DataFrame([_range("matched", turns, matched), _range("all", turns, everything)], columns=RANGE_COLUMNS)


def read_validation(vals: Mapping[tuple[str, int], pd.DataFrame], params: Params, arms: Sequence[str]) -> pd.DataFrame:
    """Per trained arm among ``arms`` whose run logged validation: the validation S at its read step (NaN when not
    logged there), the run's validation peak (step, S; the first step on a tie), its last logged step and S, and
    whether the read is the peak."""
    rows = []
    for arm in arms:
        spec = params.arms.get(arm)
        if spec is None or spec.backend != "trained" or spec.run not in params.training.runs:
            continue
        seed = params.train_seed(arm)
        log = vals.get((spec.run, seed))
        if log is None or log.empty or "score" not in log or "step" not in log:
            continue
        v = log[["step", "score"]].dropna()
        if v.empty:
            continue
        at = v[v["step"] == spec.step]
        peak = v.loc[v["score"].idxmax()]
        rows.append({"arm": arm, "run": spec.run, "seed": seed, "step": spec.step,
                     "val_at_read": float(at["score"].iloc[-1]) if len(at) else np.nan,
                     "peak_step": int(peak["step"]), "val_peak": float(peak["score"]),
                     "last_step": int(v["step"].iloc[-1]), "val_last": float(v["score"].iloc[-1]),
                     "read_is_peak": spec.step is not None and int(peak["step"]) == spec.step})
    return pd.DataFrame(rows, columns=VALIDATION_COLUMNS)


def held_out_mc_band(held: pd.DataFrame, k: float = MC_BAND_K) -> pd.DataFrame:
    """Per held-out contrast of S (:func:`negolib.study.analysis.contrasts.held_out_contrasts`): the endpoint nearest
    zero, its Monte Carlo SE, the band (``k`` SEs), whether the interval excludes zero and whether it clears zero
    by more than the band."""
    if held is None or held.empty:
        return pd.DataFrame(columns=MC_BAND_COLUMNS)
    rows = []
    for r in held[held["metric"] == "score"].to_dict("records"):
        lo, hi = float(r["ci_low"]), float(r["ci_high"])
        low_side = abs(lo) <= abs(hi)
        near, se = (lo, float(r.get("se_low", np.nan))) if low_side else (hi, float(r.get("se_high", np.nan)))
        excludes = lo > 0 or hi < 0
        band = k * se
        rows.append({"arm_a": r["arm_a"], "arm_b": r["arm_b"], "estimate": float(r["estimate"]), "ci_low": lo,
                     "ci_high": hi, "nearest_bound": near, "mc_se": se, "band": band, "excludes_zero": excludes,
                     "clears_band": bool(excludes and np.isfinite(band) and abs(near) > band)})
    return pd.DataFrame(rows, columns=MC_BAND_COLUMNS)


__all__ = ["ADJACENT_COLUMNS", "MC_BAND_COLUMNS", "MC_BAND_K", "RANGE_COLUMNS", "VALIDATION_COLUMNS",
           "adjacent_reads", "held_out_mc_band", "read_validation", "shared_reads", "turn_ranges"]
