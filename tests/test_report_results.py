"""Notebook 5's report: the primary family, Table 1, Table 2 (and 9), openings, frontier contrasts and
Figure 2, ours beside the paper's reported values."""

from __future__ import annotations

import pandas as pd
import pytest
from paper_frames import paper_setup

from negolib.core.formatting import DASH
from negolib.study.analysis.contrasts import design_contrasts
from negolib.study.report.appendix_g_k import table9
from negolib.study.report.cells import contrast_data
from negolib.study.report.results import (
    figure2,
    frontier_table,
    openings_book_table,
    primary_family_table,
    table1,
    table2,
)


@pytest.fixture(scope="module")
def setup():
    p, paper, an, est = paper_setup()
    return p, paper, an, est, design_contrasts(an, p)


def test_table1_marks_and_paper_columns(setup):
    p, paper, an, est, con = setup
    assert con["primary"].sum() == 4 and set(con.loc[con["primary"], "metric"]) == {"score"}
    t = table1(con, est, p, paper)
    assert list(t.frame.index) == [g.label for g in p.design.sizes]
    assert t.frame.loc["Gemma 4 31B", "paper: shared − base"] == "+0.078* [+0.064, +0.092]"
    assert t.frame.loc["Gemma 4 E2B (2.3B)", "paper: 3×LR − base"] == "+0.037e [+0.017, +0.057]"
    assert t.frame.loc["Gemma 4 31B", "paper: 3×LR − shared (@104)"].endswith("†")
    ours = contrast_data(con)
    ours = ours[(ours["arm_a"] == "g31b_shared_104") & (ours["arm_b"] == "g31b_base")].iloc[0]
    assert t.frame.loc["Gemma 4 31B", "shared − base"].startswith(f"{ours['estimate']:+.3f}{ours['mark']}")
    assert list(t.data.columns[t.data.columns.get_loc("significant") + 1:][:2]) == ["mark", "ci"]
    assert len(t.notes) == 1 and t.notes[0].startswith("Fewer than 30 seed clusters (here as few as 12)")


def test_table2_and_table9_from_a_tidy_decomposition(setup):
    p, paper, _, _, _ = setup
    rows = [{"arm_a": "g12b_shared_104", "arm_b": "g12b_base", "metric": m, "estimate": v, "ci_low": v - 0.01,
             "ci_high": v + 0.01, "primary": False, "significant": True, "n_episodes": 1000}
            for m, v in (("seller_distributive", 0.04), ("seller_integrative", 0.01), ("buyer_utility", -0.05),
                         ("welfare", 0.0))]
    decomp = pd.DataFrame(rows)
    t2 = table2(decomp, {"g12b_base": 0.02, "g12b_shared_104": 0.4}, p, paper)
    row = t2.frame.loc[("Shared LR", "Gemma 4 12B")]
    assert row["Δ seller U~ distributive"] == "+0.040e"
    assert row["paper: Δ distributive"] == "+0.049e"
    assert row["opens with terms (base → arm)"] == "2.0% → 40.0%"
    assert row["paper: opens (base → arm)"] == "2.4% → 35.8%"
    t9 = table2(decomp, None, p, paper, with_ci=True)
    assert t9.name == "table9"
    assert t9.frame.loc[("Shared LR", "Gemma 4 12B"), "paper: Δ buyer U~"] == "-0.057e [-0.071, -0.044]"
    assert t9.frame.loc[("Shared LR", "Gemma 4 E2B (2.3B)"), "Δ buyer U~"] == DASH
    assert table9(decomp, None, p, paper).frame.equals(t9.frame)
    assert set(t2.data["mark"]) == {"e"} and t2.data["label"].notna().all()


def test_primary_family_with_the_papers_p_values(setup):
    p, paper, _, _, con = setup
    t = primary_family_table(con, paper)
    assert len(t.frame) == 4 and list(t.frame.index.names) == ["arm_a", "arm_b"]
    assert set(t.frame["mark"]) <= {"*", ""}
    assert set(t.frame["paper: p at 2.3B / at 4.5B-31B"]) == {"0.91 / <= 0.00014"}
    assert primary_family_table(con.iloc[:0], paper).frame.columns.tolist() == ["paper: p at 2.3B / at 4.5B-31B"]


def test_primary_family_shows_floored_p_sign_flip_and_few_clusters(setup):
    """Issue 27: the fresh-clone default book printed +0.0365 [+0.0001, +0.1042], p = 0.0 over 5 clusters."""
    p, paper, _, _, con = setup
    t = primary_family_table(con, paper)
    assert list(t.frame.columns[:9]) == ["S(a) − S(b) [95% CI]", "mark", "p (bootstrap)", "p (Holm)", "p (sign-flip)",
                                         "smallest attainable p (sign-flip)", "clusters", "episodes", "se"]
    assert set(t.frame["smallest attainable p (sign-flip)"]) == {"4.9e-04 (2/2^12)"}
    assert set(t.frame["clusters"]) == {"12 †"} and any("fewer than 30 seed clusters" in n for n in t.notes)
    assert any("1/(B+1)" in n for n in t.notes) and any("1/16" in n for n in t.notes)
    assert {"p_signflip", "p_signflip_min", "few_clusters", "n_resamples"} <= set(t.data.columns)
    row = {"arm_a": "smollm2_grpo", "arm_b": "smollm2_warmup", "metric": "score", "estimate": 0.0365,
           "ci_low": 0.0001, "ci_high": 0.1042, "p_value": 1 / 10_001, "p_holm": 1 / 10_001, "primary": True,
           "significant": True, "p_signflip": 0.0625, "p_signflip_min": 0.0625, "signflip_exact": True,
           "few_clusters": True, "se": 0.03, "mde": 0.1, "n_clusters": 5, "n_episodes": 10, "n_resamples": 10_000}
    r = primary_family_table(pd.DataFrame([row]), paper).frame.iloc[0]
    assert r["S(a) − S(b) [95% CI]"] == "+0.0365* [+0.0001, +0.1042]"
    assert r["p (bootstrap)"] == "≤ 1.0e-04" and r["p (sign-flip)"] == "0.0625"
    assert r["smallest attainable p (sign-flip)"] == "0.0625 (2/2^5)" and r["clusters"] == "5 †"
    assert any("as few as 5" in n and "126 distinct resamples" in n and "85%" in n
               for n in primary_family_table(pd.DataFrame([row]), paper).notes)
    wide = primary_family_table(pd.DataFrame([{**row, "n_clusters": 64, "few_clusters": False}]), paper)
    assert wide.frame.iloc[0]["clusters"] == "64" and not any("fewer than 30" in n for n in wide.notes)


def test_openings_and_frontier_put_the_paper_beside_ours(setup):
    p, paper, _, _, con = setup
    openings = pd.DataFrame([{"arm": "g12b_lr3_56", "n_episodes": 10, "opens_with_terms": 0.5,
                              "mean_terms_named": 3.0, "mean_terms_share": 0.3, "opening_score": 0.6,
                              "deal_minus_opening": -0.1}])
    t = openings_book_table(openings, p, paper)
    row = t.frame.loc["g12b_lr3_56"]
    assert row["opens with terms"] == "50.0%" and row["paper: opens with terms"] == "76.6%"
    assert row["deal − opening"] == "-0.100" and row["paper: deal − opening"] == "-0.128"
    f = frontier_table(con, p, paper).frame
    row = f[(f["seller"] == "g12b_lr3_56") & (f["reference"] == "sonnet5")].iloc[0]
    assert row["paper: difference"] == "+0.086 [+0.068, +0.104]" and row["difference in S"] != DASH


def test_figure2_draws_ours_beside_the_papers(setup):
    import matplotlib

    matplotlib.use("Agg")
    p, paper, _, est, con = setup
    fig2 = figure2(p, est, con, paper)
    titles = [ax.get_title() for ax in fig2.axes]
    assert any("ours" in t for t in titles) and any("paper (reported)" in t for t in titles)
    ours_b, paper_b = fig2.axes[2], fig2.axes[3]
    assert ours_b.get_title().startswith("(b) primary contrasts (statistics.primary)")
    ticks = [t.get_text() for t in ours_b.get_xticklabels()]
    assert ticks == [f"{a}\n− {b}" for a, b in p.statistics.primary]  # the primary family, not trained − base
    prim = con[con["primary"]].set_index("arm_a")
    for (a, _), line in zip(p.statistics.primary, ours_b.lines[::3]):
        assert line.get_ydata()[0] == pytest.approx(prim.loc[a, "estimate"])
    assert [t.get_text() for t in paper_b.get_xticklabels()][0].startswith("Gemma 4 E2B")
    assert len(paper_b.get_xticklabels()) == 4


def test_figure2b_plots_the_primary_contrast_not_the_gain_over_base(setup):
    """The default profile's primary pairs GRPO with its warm-up: Figure 2(b) shows that contrast, and no arm's
    difference from the raw base (the +0.66 the issue saw, mostly the warm-up's work)."""
    import dataclasses

    import matplotlib

    matplotlib.use("Agg")
    p, paper, _, est, _ = setup
    q = dataclasses.replace(p, statistics=dataclasses.replace(p.statistics,
                                                              primary=[["e2b_lr3_56", "e2b_shared_64"]]))
    con = pd.DataFrame([
        {"arm_a": "e2b_lr3_56", "arm_b": "e2b_shared_64", "metric": "score", "estimate": 0.0365, "ci_low": 0.0001,
         "ci_high": 0.1042, "primary": True, "significant": True, "few_clusters": True},
        {"arm_a": "e2b_lr3_56", "arm_b": "e2b_base", "metric": "score", "estimate": 0.66, "ci_low": 0.6,
         "ci_high": 0.7, "primary": False, "significant": True, "few_clusters": True}])
    bx = figure2(q, est, con, paper).axes[2]
    assert [t.get_text() for t in bx.get_xticklabels()] == ["e2b_lr3_56\n− e2b_shared_64"]
    ys = [y for line in bx.lines for y in line.get_ydata()]
    assert 0.66 not in ys and 0.0365 in ys
    texts = [t.get_text() for t in bx.texts]
    assert texts == ["+0.0365* †\n[+0.0001, +0.1042]"]


def test_table2_shows_the_papers_marks_as_printed(setup):
    """The paper printed ``e`` on 2.3B 3x LR delta buyer U~ (-0.011 [-0.022, -0.000]); its upper bound rounds
    to zero, so a mark re-derived from the rounded interval would drop it: the book shows the printed mark."""
    p, paper, _, _, _ = setup
    assert paper.get("table2", "lr3", "E2B", "d_buyer_utility") == [-0.011, -0.022, -0.0]
    assert paper.mark("table2", "lr3", "E2B", "d_buyer_utility") == "e"
    t9 = table2(pd.DataFrame(), None, p, paper, with_ci=True).frame
    assert t9.loc[("3× LR", "Gemma 4 E2B (2.3B)"), "paper: Δ buyer U~"].startswith("-0.011e [")
    assert table2(pd.DataFrame(), None, p, paper).frame.loc[("3× LR", "Gemma 4 E2B (2.3B)"),
                                                            "paper: Δ buyer U~"] == "-0.011e"
    assert paper.mark("table2", "shared", "E2B", "d_welfare") == ""  # [+0.011, -0.003, +0.026]: as printed
    assert paper.mark("table1", "E2B", "lr3_minus_base") == "e"  # a transcribed mark is read as it stands


def test_every_paper_interval_with_a_zero_bound_has_its_printed_mark(setup):
    """No paper mark is re-derived from a bound that rounds to zero: each such interval of Table 2/9 has its
    printed mark (beside it in paper_reported.yaml, or in negolib.study.paper.PRINTED_MARKS)."""
    from negolib.study.paper import PRINTED_MARKS

    _, paper, _, _, _ = setup
    for role, sizes in (paper.get("table2") or {}).items():
        for size, vals in sizes.items():
            for key, v in vals.items():
                if isinstance(v, list) and len(v) == 3 and 0.0 in (v[1], v[2]):
                    assert f"{key}_mark" in vals or ("table2", role, size, key) in PRINTED_MARKS, (role, size, key)
