"""Notebook 6's report: Tables 3 and 4, the held-out panel and Figure 3, ours beside the paper's."""

from __future__ import annotations

import pytest
from paper_frames import paper_setup

from negolib.analysis.contrasts import design_contrasts
from negolib.formatting import fmt_ci
from negolib.report.appendix_b_c import figure3, heldout_table, table3, table4
from negolib.report.booktable import BookTable


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
