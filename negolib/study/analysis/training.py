"""Training runs in numbers: per-run summaries of the step logs with training FLOPs (App. D, App. I), and
the per-size parameter counts and relative compute of Table 8.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from negolib.core.formatting import is_number
from negolib.training.flops import flops_from_log

SUMMARY_SERIES = (("reward", "reward"), ("score", "score"), ("deal_rate", "deal_rate"), ("kl", "kl"),
                  ("entropy", "entropy"))
"""(logged column, summary prefix) of the step-log series summarised first -> last."""


def first_last(df: pd.DataFrame | None, col: str) -> tuple[float, float]:
    """The first and the last logged (non-NaN) value of ``df[col]``; NaN when there is none."""
    if df is None or df.empty or col not in df or df[col].notna().sum() == 0:
        return np.nan, np.nan
    v = df[col].dropna()
    return float(v.iloc[0]), float(v.iloc[-1])


def training_summary(logs: Mapping[tuple[str, int], pd.DataFrame],
                     validation: Mapping[tuple[str, int], pd.DataFrame] | None = None,
                     n_params: Mapping[str, float] | None = None) -> pd.DataFrame:
    """One row per (run, seed) with a non-empty step log: ``steps``; ``<series>_first`` and ``<series>_last``
    of reward, score S, deal rate, KL (k3) and entropy, and of the validation S (``validation_score_*``);
    the last step's ``wall_time_s``; and ``training_flops``, the cumulative training FLOPs of App. I
    (2 N D_gen + 6 N D_train from the logged token counts) where ``n_params[run]`` is known and the log has
    the token counts (``flops_counted``; NaN otherwise)."""
    rows = []
    for (run, seed), log in logs.items():
        if log.empty:
            continue
        last = log.iloc[-1]
        val = (validation or {}).get((run, seed), pd.DataFrame())
        row: dict[str, Any] = {"run": run, "seed": seed, "steps": int(last.get("step", len(log)))}
        for col, name in SUMMARY_SERIES:
            row[f"{name}_first"], row[f"{name}_last"] = first_last(log, col)
        row["validation_score_first"], row["validation_score_last"] = first_last(val, "score")
        wall = last.get("wall_time_s")
        row["wall_time_s"] = float(wall) if is_number(wall) else np.nan
        n = (n_params or {}).get(run)
        counted = bool(n) and {"tokens_generated", "tokens_trained"} <= set(log.columns)
        fl = flops_from_log(log.to_dict("records"), n) if counted else []
        row["flops_counted"], row["training_flops"] = counted, fl[-1]["cum_flops"] if fl else np.nan
        rows.append(row)
    cols = ["run", "seed", "steps", *[f"{n}_{e}" for _, n in SUMMARY_SERIES for e in ("first", "last")],
            "validation_score_first", "validation_score_last", "wall_time_s", "flops_counted",
            "training_flops"]
    return pd.DataFrame(rows, columns=cols)


def size_compute(sizes: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Table 8 (ours): per size, ``params`` and ``non_embedding_params`` (counts from the loaded weights) and
    the relative training FLOPs per step ``rel_flops`` = N / N of the first size [App. I] (NaN without
    counts). ``sizes``: one mapping per size with ``label``, ``params`` and optional
    ``non_embedding_params`` and ``device`` (default ``CPU``)."""
    base = sizes[0]["params"] if sizes and sizes[0].get("params") else None
    rows = []
    for s in sizes:
        n = s.get("params")
        rows.append({"size": s["label"], "params": n if is_number(n) else np.nan,
                     "non_embedding_params": s.get("non_embedding_params") if is_number(
                         s.get("non_embedding_params")) else np.nan,
                     "rel_flops": n / base if n and base else np.nan, "device": s.get("device", "CPU")})
    return pd.DataFrame(rows, columns=["size", "params", "non_embedding_params", "rel_flops", "device"])


__all__ = ["SUMMARY_SERIES", "first_last", "size_compute", "training_summary"]
