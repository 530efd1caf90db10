"""The decomposition of Tables 2 and 9: numeric, named as the report reads it, its parts summing exactly."""

from __future__ import annotations

import pandas as pd
import pytest
from paper_frames import assert_tidy, played

from negolib.study.analysis.decomposition import DECOMP_METRICS, decomposition
from negolib.study.analysis.resamplers import Analysis
from negolib.study.diagnostics import decomposition_columns, decomposition_table
from negolib.study.report.cells import decomposition_data


@pytest.fixture(scope="module")
def decomp():
    _, df = played()
    an = Analysis(df, n_resamples=300, seed=0)
    return an, decomposition(an, [("conceder", "boulware"), ("tit_for_tat", "boulware"), ("nobody", "boulware")])


def test_decomposition_is_numeric_and_named(decomp):
    _, d = decomp
    assert set(d["metric"]) == {*DECOMP_METRICS, "seller_utility"}
    assert set(d["arm_a"]) == {"conceder", "tit_for_tat"} and set(d["arm_b"]) == {"boulware"}
    assert_tidy(d, identifiers=("arm_a", "arm_b", "metric"))
    assert not {"mark", "ci", "label"} & set(d.columns)
    assert not d["primary"].any()


def test_the_parts_sum_to_the_sellers_and_the_joint_change(decomp):
    _, d = decomp
    for _, g in d.groupby("arm_a"):
        e = g.set_index("metric")["estimate"]
        assert e["seller_distributive"] + e["seller_integrative"] == pytest.approx(e["seller_utility"])
        assert e["seller_utility"] + e["buyer_utility"] == pytest.approx(e["welfare"])


def test_with_its_display_columns_it_is_the_diagnostics_table(decomp):
    """The book's table2_data.csv / table9_data.csv: diagnostics.decomposition_table's columns, renamed."""
    an, d = decomp
    df = decomposition_columns(an.df)
    seeds = sorted(set(df["seed"]))
    sub = df[df["arm"].isin(["conceder", "boulware"])]
    theirs = decomposition_table(sub, "boulware", ["conceder"], an.resampler(seeds), an.alpha, refine=False)
    theirs = theirs.rename(columns={"arm": "arm_a", "base_arm": "arm_b"})
    ours = decomposition_data(d[d["arm_a"] == "conceder"].reset_index(drop=True))
    assert list(ours.columns) == list(theirs.columns)
    pd.testing.assert_frame_equal(ours.drop(columns=["metric"]), theirs.drop(columns=["metric"]))
