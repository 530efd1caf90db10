"""Arm-level estimates and the results bundle: numeric frames, each arm resampled over its own seeds."""

from __future__ import annotations

from pathlib import Path

from paper_frames import ESTIMATED, assert_tidy, paper_setup

from negolib.games.multi_issue.metrics import synthetic_episodes
from negolib.params import load_params
from negolib.study.analysis.arms import (
    ESTIMATE_COLUMNS,
    TABLE3_METRICS,
    TABLE4_METRICS,
    TABLE5_METRICS,
    arm_estimates,
    compute_results,
    point_estimates,
)
from negolib.study.analysis.resamplers import Analysis

ROOT = Path(__file__).resolve().parent.parent


def test_arm_estimates_are_tidy_numbers():
    p, _, an, est = paper_setup()
    assert list(est.columns) == ESTIMATE_COLUMNS
    assert set(est["arm"]) == set(p.arms) and set(est["metric"]) == set(ESTIMATED)
    assert_tidy(est, identifiers=("arm", "metric"))
    assert (est["ci_low"] <= est["estimate"]).all() and (est["estimate"] <= est["ci_high"]).all()
    assert arm_estimates(an, ["not_played"], ["score"]).empty


def test_an_arm_on_a_subset_is_resampled_over_its_own_seeds():
    _, _, an, _ = paper_setup()
    df = an.df[~((an.df["arm"] == "e2b_base") & (an.df["seed"] > an.df["seed"].min() + 3))]
    est = arm_estimates(Analysis(df, n_resamples=200, seed=0), ["e2b_base", "e4b_base"], ["score"])
    assert dict(zip(est["arm"], est["n_clusters"])) == {"e2b_base": 4, "e4b_base": 12}


def test_point_estimates_without_intervals():
    _, _, an, _ = paper_setup()
    pe = point_estimates(an.df, ["e2b_base", "e4b_base"], ["score", "deal_rate"])
    assert list(pe.columns) == ["arm", "metric", "estimate"] and len(pe) == 4
    assert_tidy(pe, identifiers=("arm", "metric"))


def test_compute_results_estimates_every_table_metric_and_the_design_contrasts():
    p = load_params(ROOT / "params" / "smoke.yaml")
    arms = list(p.arms)
    df = synthetic_episodes(arms, [0.01 * i for i in range(len(arms))], n_seeds=4, seed=1,
                            buyers=tuple(p.evaluation.buyers))
    res = compute_results(df, p)
    assert res.arms == arms and not res.empty
    assert set(res.est["metric"]) >= set(TABLE3_METRICS + TABLE4_METRICS + TABLE5_METRICS) - {"score_held_out"}
    assert_tidy(res.est, identifiers=("arm", "metric"))
    assert_tidy(res.contrasts, identifiers=("arm_a", "arm_b", "metric"))
    assert list(res.primary()["arm_a"]) == [a for a, _ in p.statistics.primary]
    empty = compute_results(df.iloc[:0], p)
    assert empty.empty and empty.contrasts.empty and empty.primary().empty
