"""The prespecified guards per trained arm: numbers (interval bounds, limits) the report words."""

from __future__ import annotations

import numpy as np
from paper_frames import assert_tidy, played

from negolib.analysis.guards import guards_frame
from negolib.analysis.resamplers import Analysis


def test_guards_frame_is_numeric_with_paired_intervals():
    _, df = played()
    an = Analysis(df, n_resamples=300, seed=0)
    g = guards_frame(an, [("conceder", "boulware"), ("tit_for_tat", "boulware"), ("nobody", "boulware")])
    assert list(g["arm"].unique()) == ["conceder", "tit_for_tat"] and len(g) == 10
    assert_tidy(g, identifiers=("arm", "base_arm", "guard", "metric", "protocol_hash"))
    measured = g[g["metric"].notna()]
    assert measured[["ci_low", "ci_high", "limit"]].notna().all().all()
    assert (measured["ci_low"] <= measured["ci_high"]).all()
    assert np.allclose(measured["ci_estimate"], measured["delta"])  # the interval is about the same change
    manual = g[g["metric"].isna()]
    assert manual["passed"].isna().all() and manual["ci_low"].isna().all()
    turns = g[g["metric"] == "mean_turns"].iloc[0]
    assert turns["limit"] == 24 and 0 <= turns["share_at_cap"] <= 1
    assert guards_frame(an, [("nobody", "boulware")]).empty
