"""Cells from tidy frames: significance marks from the numbers, intervals, labels, counts."""

from __future__ import annotations

import math

import pandas as pd

from negolib.core.formatting import DASH
from negolib.study.report.cells import (
    contrast_cell,
    contrast_data,
    contrast_marks,
    estimate_cell,
    fmt_count,
    marked_lookup,
)


def _contrasts() -> pd.DataFrame:
    return pd.DataFrame({"arm_a": ["a", "b", "c", "d"], "arm_b": "base", "metric": "score",
                         "estimate": [0.05, 0.02, -0.01, math.nan], "ci_low": [0.01, 0.001, -0.03, math.nan],
                         "ci_high": [0.09, 0.04, 0.01, math.nan], "p_value": [0.01, 0.03, 0.5, math.nan],
                         "p_holm": [0.02, math.nan, math.nan, math.nan], "primary": [True, False, False, False],
                         "significant": [True, True, False, False], "n_episodes": 10})


def test_marks_come_from_primary_and_significant():
    c = _contrasts()
    assert list(contrast_marks(c)) == ["*", "e", "", ""]
    d = contrast_data(c)
    cols = list(d.columns)
    assert cols[cols.index("significant") + 1: cols.index("significant") + 3] == ["mark", "ci"]
    assert list(d["ci"]) == ["+0.050 [+0.010, +0.090]", "+0.020 [+0.001, +0.040]", "-0.010 [-0.030, +0.010]",
                             "+nan [+nan, +nan]"]  # the data files' ci column: every value printed, no mark
    assert contrast_data(pd.DataFrame()).empty


def test_cells_show_a_dash_for_what_is_missing():
    look = marked_lookup(_contrasts())
    assert contrast_cell(look, "a", "base") == "+0.050* [+0.010, +0.090]"
    assert contrast_cell(look, "b", "base") == "+0.020e [+0.001, +0.040]"
    assert contrast_cell(look, "d", "base") == DASH and contrast_cell(look, None, "base") == DASH
    est = {("a", "score"): {"estimate": 0.4, "ci_low": 0.3, "ci_high": 0.5}}
    assert estimate_cell(est, "a", "score") == "0.400 [0.300, 0.500]" and estimate_cell(est, "a", "score",
                                                                                          ci=False) == "0.400"
    assert estimate_cell(est, "b", "score") == DASH
    assert [fmt_count(n) for n in (2.3e9, 1.35e8, 4600, None)] == ["2.30B", "135.0M", "4.6k", DASH]
