"""Paired contrasts of an analysis: numeric frames, the Holm family once over every seed group, and the
same numbers (and, with the report's display columns, the same table) as negolib.study.paired.contrast_table."""

from __future__ import annotations

import pandas as pd
from paper_frames import assert_tidy, paper_setup

from negolib.study.analysis.contrasts import (
    design_contrasts,
    design_pairs,
    held_out_contrasts,
    run_pairs,
    trained_pairs,
)
from negolib.study.analysis.resamplers import Analysis
from negolib.study.paired import contrast_table
from negolib.study.report.cells import contrast_data


def test_design_contrasts_mark_the_primary_family():
    p, _, an, _ = paper_setup()
    con = design_contrasts(an, p)
    assert con["primary"].sum() == 4 and set(con.loc[con["primary"], "metric"]) == {"score"}
    assert con.loc[con["primary"], "p_holm"].notna().all() and con.loc[~con["primary"], "p_holm"].isna().all()
    assert set(map(tuple, con[["arm_a", "arm_b"]].to_numpy())) == set(design_pairs(p))


def test_primary_family_carries_the_sign_flip_test_and_the_few_clusters_flag():
    """12 seed clusters: exact sign-flip with smallest p 2/2^12, flagged few (< 30); Holm on floored p-values."""
    p, _, an, _ = paper_setup()
    con = design_contrasts(an, p)
    assert con["n_clusters"].eq(12).all() and con["few_clusters"].all() and con["signflip_exact"].all()
    assert (con["p_signflip_min"] == 2 / 2 ** 12).all()
    assert (con["p_signflip"] >= con["p_signflip_min"]).all() and (con["p_signflip"] <= 1).all()
    assert (con["p_value"] >= 1 / (con["n_resamples"] + 1)).all()
    df = an.df.copy()
    for a, _ in p.statistics.primary:  # a gain no resample reaches zero from
        df.loc[df["arm"] == a, "score"] += 1.0
    strong = design_contrasts(Analysis(df, n_resamples=an.n_resamples, seed=an.seed), p)
    prim = strong[strong["primary"]]
    assert (prim["p_value"] == 1 / (an.n_resamples + 1)).all()
    assert (prim["p_holm"] == 4 / (an.n_resamples + 1)).all()
    assert (run_pairs(an, [("no_such_arm", "e2b_base")]).columns[-3:] == ["p_signflip", "p_signflip_min",
                                                                        "few_clusters"]).all()


def test_contrast_frames_are_numeric():
    p, _, an, _ = paper_setup()
    con = design_contrasts(an, p, metrics=("score", "deal_rate"))
    assert "mark" not in con and "ci" not in con
    assert_tidy(con, identifiers=("arm_a", "arm_b", "metric"))
    assert con["primary"].dtype == bool and con["significant"].dtype == bool


def test_with_its_display_columns_a_contrast_frame_is_stats_contrast_table():
    """What the book saves as ``*_data.csv`` (the report's display columns put back) is, column for column,
    the table negolib.study.paired.contrast_table builds on the same resamples (exploratory and primary)."""
    p, _, an, _ = paper_setup()
    pairs = design_pairs(p)[:6]
    primary = [pairs[0], pairs[2]]
    ours = contrast_data(run_pairs(an, pairs, ("score", "deal_rate"), primary))
    seeds = sorted(set(an.df["seed"]))
    theirs = contrast_table(an.df, pairs, ["score", "deal_rate"], an.resampler(seeds), primary, an.alpha,
                            refine=an.refine)
    pd.testing.assert_frame_equal(ours, theirs)
    assert set(ours.loc[ours["primary"] & ours["significant"], "mark"]) <= {"*"}
    assert set(ours.loc[~ours["primary"] & ours["significant"], "mark"]) <= {"e"}


def test_pairs_group_by_the_seeds_they_share():
    p, _, an, _ = paper_setup()
    df = an.df[~((an.df["arm"] == "e2b_base") & (an.df["seed"] > an.df["seed"].min() + 5))]
    sub = Analysis(df, n_resamples=200, seed=0)
    con = run_pairs(sub, [("e2b_shared_104", "e2b_base"), ("e4b_shared_104", "e4b_base")])
    n = dict(zip(con["arm_a"], con["n_clusters"]))
    assert n["e2b_shared_104"] == 6 and n["e4b_shared_104"] == 12
    assert run_pairs(sub, [("no_such_arm", "e2b_base")]).empty


def test_held_out_contrasts_are_the_design_contrasts_on_the_held_out_domain():
    """Same pairs and numbers as the design contrasts on the car domain, but every one exploratory (App. C):
    no primary family, no Holm p, so the held-out table can carry ``e`` marks and never ``*``."""
    p, _, an, _ = paper_setup()
    fresh = Analysis.from_params(an.df, p)
    held = held_out_contrasts(an.df, p)
    design = design_contrasts(fresh, p, domains=["car"])
    cols = ["arm_a", "arm_b", "metric", "estimate", "ci_low", "ci_high", "p_value"]
    pd.testing.assert_frame_equal(held[cols], design[cols])
    assert design["primary"].any() and not held["primary"].any() and held["p_holm"].isna().all()
    assert (held["significant"] == (held["p_value"] < an.alpha)).all()
    assert "*" not in set(contrast_data(held)["mark"])


def test_held_out_table_carries_no_holm_marks():
    """A strong held-out gain on a primary pair is marked ``e`` (exploratory), not ``*``."""
    from negolib.study.report.appendix_b_c import heldout_table

    p, paper, an, _ = paper_setup()
    a, b = p.statistics.primary[0]
    df = an.df.copy()
    df.loc[df["arm"] == a, "score"] += 0.5
    table = heldout_table(held_out_contrasts(df, p), p, paper)
    cells = table.frame["held-out gain over base"].astype(str)
    assert not cells.str.contains(r"\*").any() and cells.str.contains(r"\de \[").any()


def test_trained_pairs_follow_the_design():
    p, _, _, _ = paper_setup()
    pairs = trained_pairs(p)
    assert ("g12b_shared_104", "g12b_base") in pairs and all(b.endswith("_base") for _, b in pairs)
    assert len(pairs) == sum(bool(getattr(g, r)) for g in p.design.sizes for r in ("shared", "lr3", "lr10"))
