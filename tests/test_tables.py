"""Table builders on synthetic frames: our numbers in our columns, the paper's in "paper: ..." columns."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from negolib.metrics import synthetic_episodes
from negolib.params import load_params
from negolib.tables import (
    DASH,
    Analysis,
    BookTable,
    arm_estimates,
    design_contrasts,
    fmt_ci,
    fmt_paper,
    load_paper_reported,
    table1,
    table2,
    table3,
    table4,
    table5,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def setup():
    p = load_params(ROOT / "params" / "paper.yaml")
    paper = load_paper_reported(p.paper_reported_path)
    arms = list(p.arms)
    df = synthetic_episodes(arms, [0.005 * i for i in range(len(arms))], n_seeds=12,
                            buyers=("buyer_terra", "buyer_sonnet5"), seed=3)
    an = Analysis(df, n_resamples=400, seed=0)
    est = arm_estimates(an, arms, ("score", "score_held_out", "deal_rate", "mean_turns", "bad_parse_rate",
                                   "deal_utility", "welfare", "seller_bad_parse_rate"))
    return p, paper, an, est


def test_paper_reported_holds_the_papers_numbers():
    paper = load_paper_reported(ROOT / "params" / "paper_reported.yaml")
    assert len(paper.get("arms")) == 21
    assert paper.arm("e2b_base")["score"] == [0.422, 0.400, 0.446]
    assert paper.get("table1", "31B", "shared_minus_base") == [0.078, 0.064, 0.092]
    assert paper.get("cost", "usd_per_frontier_episode") == 0.069
    assert paper.get("statistics", "primary_p_e2b") == 0.91
    assert paper.get("training", "kl_step56", "g31b_lr3_56") == 0.437
    assert paper.get("design", "episodes_total") == 24_192


def test_table4_puts_paper_values_in_labelled_columns(setup):
    p, paper, an, est = setup
    t = table4(est, list(p.arms), p, paper)
    assert isinstance(t, BookTable) and len(t.frame) == 21
    assert "paper: S" in t.paper_columns and "S (all domains)" not in t.paper_columns
    assert t.frame.loc["e2b_base", "paper: S"] == "0.422 [0.400, 0.446]"
    ours = est[(est["arm"] == "e2b_base") & (est["metric"] == "score")].iloc[0]
    assert t.frame.loc["e2b_base", "S (all domains)"] == fmt_ci(ours["estimate"], ours["ci_low"], ours["ci_high"],
                                                                       signed=False)
    assert t.frame.loc["e2b_base", "S (all domains)"] != t.frame.loc["e2b_base", "paper: S"]


def test_table1_marks_and_paper_columns(setup):
    p, paper, an, est = setup
    con = design_contrasts(an, p)
    assert con["primary"].sum() == 4 and set(con.loc[con["primary"], "metric"]) == {"score"}
    t = table1(con, est, p, paper)
    assert list(t.frame.index) == [g.label for g in p.design.sizes]
    assert t.frame.loc["Gemma 4 31B", "paper: shared − base"] == "+0.078* [+0.064, +0.092]"
    assert t.frame.loc["Gemma 4 E2B (2.3B)", "paper: 3×LR − base"] == "+0.037e [+0.017, +0.057]"
    assert t.frame.loc["Gemma 4 31B", "paper: 3×LR − shared (@104)"].endswith("†")
    ours = con[(con["arm_a"] == "g31b_shared_104") & (con["arm_b"] == "g31b_base")].iloc[0]
    assert t.frame.loc["Gemma 4 31B", "shared − base"].startswith(f"{ours['estimate']:+.3f}{ours['mark']}")


def test_table3_and_table5(setup):
    p, paper, an, est = setup
    t3 = table3(est, ["e2b_base", "sonnet5"], p, paper)
    assert t3.frame.loc["sonnet5", "paper: joint welfare"] == "1.175"
    t5 = table5(est, None, p.design.sizes[0], p, paper)
    assert list(t5.frame.index) == ["e2b_base", "e2b_shared_64", "e2b_shared_104", "e2b_lr3_56", "e2b_lr10_56"]
    assert t5.frame.loc["e2b_lr10_56", "paper: bad-parse (seller)"] == "0.0282"
    assert t5.frame.loc["e2b_lr10_56", "paper: buyer split"] == "+0.175"
    assert t5.frame.loc["e2b_lr10_56", "buyer split"] == DASH  # no split computed here: never invented


def test_table2_and_table9_from_a_tidy_decomposition(setup):
    p, paper, _, _ = setup
    rows = [{"arm_a": "g12b_shared_104", "arm_b": "g12b_base", "metric": m, "estimate": v, "ci_low": v - 0.01,
             "ci_high": v + 0.01, "mark": "e", "n_episodes": 1000}
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


def test_booktable_renders_and_saves(tmp_path, setup):
    p, paper, _, est = setup
    t = table4(est, ["e2b_base"], p, paper)
    files = t.save(tmp_path)
    assert {f.name for f in files} >= {"table4.csv", "table4.md", "table4.html", "table4_data.csv"}
    md = (tmp_path / "table4.md").read_text()
    assert "Table 4" in md and "paper: S" in md and "0.422 [0.400, 0.446]" in md
    assert "paper: S" in t._repr_html_()
    csv = pd.read_csv(tmp_path / "table4.csv", index_col=0)
    assert csv.loc["e2b_base", "paper: deal rate"] == pytest.approx(0.939)


def test_formatting_never_invents_numbers():
    assert fmt_ci(float("nan"), 0, 1, signed=False) == DASH
    assert fmt_paper(None) == DASH
    assert fmt_paper([0.023, 0.011, 0.035], signed=True, mark="*") == "+0.023* [+0.011, +0.035]"
    assert fmt_paper(0.0004, 4) == "0.0004"


def test_figures_draw_ours_beside_the_papers(setup):
    import matplotlib

    matplotlib.use("Agg")
    from negolib.plots import figure2, figure3

    p, paper, an, est = setup
    con = design_contrasts(an, p)
    fig2 = figure2(p, est, con, paper)
    titles = [ax.get_title() for ax in fig2.axes]
    assert any("ours" in t for t in titles) and any("paper (reported)" in t for t in titles)
    fig3 = figure3(p, est, con, paper)
    assert len(fig3.axes) == 3


def test_figure3_draws_when_a_base_seller_never_closes(setup):
    """A base seller with no deals has no deal-only utility (nan): the base -> trained arrow is
    left out instead of failing the draw (matplotlib cannot clip a path with nan ends)."""
    import matplotlib

    matplotlib.use("Agg")
    from negolib.plots import figure3

    p, paper, an, est = setup
    con = design_contrasts(an, p)
    est = est.copy()
    bases = {g.base for g in p.design.sizes}
    nan_rows = est["arm"].isin(bases) & (est["metric"] == "deal_utility")
    assert nan_rows.any()
    est.loc[nan_rows, ["estimate", "ci_low", "ci_high"]] = float("nan")
    fig = figure3(p, est, con, paper)
    fig.canvas.draw()
    assert len(fig.axes) == 3


def test_paper_reported_with_a_key_given_twice_is_refused(tmp_path):
    from negolib.errors import ValidationError
    from negolib.tables import load_paper_reported

    path = tmp_path / "paper_reported.yaml"
    path.write_text("arms:\n  base: {score: 0.1}\n  base: {score: 0.9}\n", encoding="utf-8")
    with pytest.raises(ValidationError, match=r"paper_reported\.yaml.*arms\.base.*given twice"):
        load_paper_reported(path)


def _lines(ax) -> dict[str, object]:
    return {ln.get_label(): ln for ln in ax.get_lines()}


def test_training_curves_draw_the_episode_spread_and_a_rolling_mean():
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np

    from negolib.diagnostics import rolling_step_means
    from negolib.plots import training_curves

    steps = np.arange(1, 7)
    log = pd.DataFrame({"step": steps, "reward": steps / 10, "score": steps / 8, "deal_rate": 0.5,
                        "kl": steps / 100, "bad_parse_rate": 0.1, "entropy": 1.0})
    spread = pd.DataFrame([{"step": s, "metric": m, "n": 4, "mean": s / 10, "min": 0.0, "q25": s / 20,
                            "median": s / 10, "q75": s / 5, "max": 1.0}
                           for s in steps for m in ("reward", "score", "bad_parse_rate")])
    fig = training_curves(log, "run", paper_kl=0.02, spread=spread, rolling=rolling_step_means(log, window=3))
    axes = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    assert list(axes) == ["reward", "score S", "deal rate", "KL (k3)", "entropy", "bad-parse rate"]
    for title in ("reward", "score S", "bad-parse rate"):  # two bands: min-max and the IQR
        assert len(axes[title].collections) == 2
        assert {"step mean", "rolling mean"} <= set(_lines(axes[title]))
    for title in ("deal rate", "KL (k3)"):  # no per-episode band, a rolling mean all the same
        assert not axes[title].collections and "rolling mean" in _lines(axes[title])
    assert "rolling mean" not in _lines(axes["entropy"])
    roll = _lines(axes["reward"])["rolling mean"]
    assert list(roll.get_xdata()) == [3, 4, 5, 6] and np.allclose(roll.get_ydata(), [0.2, 0.3, 0.4, 0.5])
    short = training_curves(log.head(2), rolling=rolling_step_means(log.head(2), window=3))
    assert all("rolling mean" not in _lines(ax) for ax in short.axes)  # too few steps: no rolling line
    assert len(training_curves(log).axes[0].collections) == 0  # no spread given: the plain curves


def test_ladder_curves_draw_one_line_per_run_and_the_optimum():
    import matplotlib

    matplotlib.use("Agg")
    from negolib.plots import ladder_curves

    curves = {"rung": [0.1, 0.3, 0.5, 0.6, 0.7, 0.7], "env_mask_zero": [0.1, 0.1, 0.2, 0.1, 0.1, 0.2],
              "lr_zero": [0.1, 0.1, 0.2, 0.1, 0.1, 0.2]}
    fig = ladder_curves(curves, optimum=0.75, window=2)
    (ax,) = fig.axes
    lines = _lines(ax)
    assert {"rung", "env_mask_zero", "lr_zero", "optimum (0.750)"} == set(lines)
    assert list(lines["rung"].get_ydata()) == curves["rung"] and list(lines["rung"].get_xdata()) == [1, 2, 3, 4, 5, 6]
    assert len(ax.patches) == 2  # the early and the late window
    assert len(ladder_curves(curves).axes[0].patches) == 0
