"""Notebook 6's report: Tables 3 and 4, the held-out panel and Figure 3, ours beside the paper's."""

from __future__ import annotations

import pytest
from paper_frames import paper_setup

from negolib.core.formatting import fmt_ci
from negolib.study.analysis.contrasts import design_contrasts
from negolib.study.report.appendix_b_c import figure3, figure3_points, heldout_table, shared_recipe_arms, table3, table4
from negolib.study.report.booktable import BookTable


@pytest.fixture(scope="module")
def setup():
    p, paper, an, est = paper_setup()
    return p, paper, an, est, design_contrasts(an, p)


def test_table4_puts_paper_values_in_labelled_columns(setup):
    p, paper, an, est, _ = setup
    t = table4(est, list(p.arms), p, paper)
    assert isinstance(t, BookTable) and len(t.frame) == 21
    assert "paper: S" in t.paper_columns and "S (all domains)" not in t.paper_columns
    assert t.frame.loc["e2b_base", "paper: S"] == "0.422 [0.400, 0.446]"
    ours = est[(est["arm"] == "e2b_base") & (est["metric"] == "score")].iloc[0]
    assert t.frame.loc["e2b_base", "S (all domains)"] == fmt_ci(ours["estimate"], ours["ci_low"], ours["ci_high"],
                                                                signed=False)
    assert t.frame.loc["e2b_base", "S (all domains)"] != t.frame.loc["e2b_base", "paper: S"]


def test_table3(setup):
    p, paper, _, est, _ = setup
    t3 = table3(est, ["e2b_base", "sonnet5"], p, paper)
    assert t3.frame.loc["sonnet5", "paper: joint welfare"] == "1.175"
    assert t3.frame.loc["sonnet5", "paper: arm"] == "Claude Sonnet 5"


def test_heldout_panel_beside_the_papers_gains(setup):
    p, paper, _, _, con = setup
    t = heldout_table(con, p, paper).frame
    row = t[t["arm"] == "g12b_shared_104"].iloc[0]
    assert row["paper: held-out gain"] == "+0.032 [+0.003, +0.063]" and row["recipe"] == "shared LR"
    assert row["held-out gain over base"].startswith(("+", "-"))


def test_figure3_draws(setup):
    import matplotlib

    matplotlib.use("Agg")
    p, paper, an, est, con = setup
    fig3 = figure3(p, est, con, paper)
    assert len(fig3.axes) == 3


def test_figure3_draws_when_a_base_seller_never_closes(setup):
    """A base seller with no deals has no deal-only utility (nan): the base -> trained arrow is
    left out instead of failing the draw (matplotlib cannot clip a path with nan ends)."""
    import matplotlib

    matplotlib.use("Agg")
    p, paper, an, est, con = setup
    est = est.copy()
    bases = {g.base for g in p.design.sizes}
    nan_rows = est["arm"].isin(bases) & (est["metric"] == "deal_utility")
    assert nan_rows.any()
    est.loc[nan_rows, ["estimate", "ci_low", "ci_high"]] = float("nan")
    fig = figure3(p, est, con, paper)
    fig.canvas.draw()
    assert len(fig.axes) == 3


def test_figure3a_is_the_shared_recipe_only(setup):
    """Figure 3a joins the base (0 steps), the shared-recipe reads and the extra reads of the same run; the
    3x-LR arms (and reads of their run, e.g. 4.5B 3x at step 64) are not on the curve."""
    p, paper, an, est, con = setup
    by = {g.paper: g for g in p.design.sizes}
    assert shared_recipe_arms(p, by["31B"]) == ["g31b_shared_56", "g31b_shared_104", "g31b_shared_40"]
    assert shared_recipe_arms(p, by["E4B"]) == ["e4b_shared_56", "e4b_shared_104"]
    look = {(a, b): e for a, b, m, e in zip(con["arm_a"], con["arm_b"], con["metric"], con["estimate"])
            if m == "score"}
    pts = figure3_points(p, by["31B"], con)
    assert [x for x, *_ in pts] == [0, 40, 56, 104]
    assert pts[0][1] == 0.0 and pts[2][1] == look[("g31b_shared_56", "g31b_base")]
    assert all(y != look[("g31b_lr3_56", "g31b_base")] for _, y, *_ in pts[1:])
    assert [x for x, *_ in figure3_points(p, by["E4B"], con)] == [0, 56, 104]
    assert figure3_points(p, by["E4B"], con.iloc[:0]) == []
