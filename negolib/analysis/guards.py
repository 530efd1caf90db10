"""The prespecified guards of each trained arm against its base (App. E), on the seeds both played.

One row per (arm, guard) from :func:`negolib.diagnostics.guards_table`: the base's and the arm's value,
the change with its paired seed-cluster interval (``ci_low``, ``ci_high``), the guard's ``limit`` on the
change (or on the arm's value for the turn cap) and whether it ``passed`` (None for the hand-read guard).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from negolib.analysis.resamplers import Analysis
from negolib.diagnostics import guards_table


def guards_frame(an: Analysis, pairs: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """The four prespecified guards (and ours, accepts only offers) of each (arm, base) pair, on the seeds
    both played, with paired seed-cluster intervals."""
    frames = []
    for arm, base in pairs:
        if an.has(arm) and an.has(base):
            sub, res = an.pair_frame(arm, base)
            frames.append(guards_table(sub, base, arm, res, alpha=an.alpha))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


__all__ = ["guards_frame"]
