"""Notebook 3's report (and App. D's summary): the learning ladder's table and curves, training curves and
the per-run summary beside the paper's logged KL and entropy."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
from paper_frames import paper_setup

from negolib.core.formatting import DASH
from negolib.study.analysis.training import training_summary
from negolib.study.report.training import ladder_curves, ladder_table, training_curves, training_table


def _lines(ax) -> dict[str, object]:
    return {ln.get_label(): ln for ln in ax.get_lines()}


def test_training_curves_draw_the_episode_spread_and_a_rolling_mean():
    import matplotlib

    matplotlib.use("Agg")
    from negolib.study.diagnostics import rolling_step_means

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
    assert "paper (0.02)" in _lines(axes["KL (k3)"])  # the paper's logged KL, labelled


def test_ladder_curves_draw_one_line_per_run_and_the_optimum():
    import matplotlib

    matplotlib.use("Agg")

    curves = {"rung": [0.1, 0.3, 0.5, 0.6, 0.7, 0.7], "env_mask_zero": [0.1, 0.1, 0.2, 0.1, 0.1, 0.2],
              "lr_zero": [0.1, 0.1, 0.2, 0.1, 0.1, 0.2]}
    fig = ladder_curves(curves, optimum=0.75, window=2)
    (ax,) = fig.axes
    lines = _lines(ax)
    assert {"rung", "env_mask_zero", "lr_zero", "optimum (0.750)"} == set(lines)
    assert list(lines["rung"].get_ydata()) == curves["rung"] and list(lines["rung"].get_xdata()) == [1, 2, 3, 4, 5, 6]
    assert len(ax.patches) == 2  # the early and the late window
    assert len(ladder_curves(curves).axes[0].patches) == 0


def test_training_table_shows_first_to_last_beside_the_papers_kl_and_entropy():
    _, paper, _, _ = paper_setup()
    log = pd.DataFrame({"step": [1, 2], "reward": [-0.4, -0.35], "kl": [0.0, 0.00012], "wall_time_s": [1.2, 3.4],
                        "tokens_generated": 10, "tokens_trained": 10})
    s = training_summary({("run", 0): log}, None, {"run": 1e6})
    t = training_table(s, paper)
    row = t.frame.loc[("run", 0)]
    assert row["reward"] == "-0.400 → -0.350" and row["KL (k3)"] == "0.0000 → 0.0001" and row["score S"] == DASH
    assert row["wall time (s)"] == "3" and row["training FLOPs"] == "1.6e+08"  # 2 (2 N 10 + 6 N 10), N = 1e6
    assert row["paper: entropy start → end (continued steps)"] == DASH  # no profile: no size for the run
    assert list(t.data.columns)[:2] == ["steps", "reward"]  # the data file holds what is shown (index dropped)
    plain = training_table(training_summary({("run", 0): log}), paper).frame
    assert "training FLOPs" not in plain  # no parameter count given: no FLOPs column


def test_training_table_shows_each_runs_own_sizes_entropy_and_kl():
    p, paper, _, _ = paper_setup()
    log = pd.DataFrame({"step": [1, 2], "reward": [-0.4, -0.35], "kl": [0.0, 0.001], "entropy": [0.3, 0.2]})
    s = training_summary({("e2b_shared", 0): log, ("g31b_shared_cont", 0): log, ("elsewhere", 0): log})
    f = training_table(s, paper, p).frame
    assert f.loc[("e2b_shared", 0), "paper: entropy start → end (continued steps)"] == "0.269 → 0.261"
    assert f.loc[("g31b_shared_cont", 0), "paper: entropy start → end (continued steps)"] == "0.099 → 0.111"
    assert f.loc[("g31b_shared_cont", 0), "paper: KL at end of continuation"] == "0.0485"
    assert f.loc[("elsewhere", 0), "paper: size"] == DASH


def test_ladder_table_says_whether_each_run_behaved_as_required():
    gain = SimpleNamespace(estimate=0.1, ci_low=0.05, ci_high=0.15)
    flat = SimpleNamespace(estimate=0.0, ci_low=-0.01, ci_high=0.01)
    run = lambda g, learned: SimpleNamespace(training=SimpleNamespace(train_gain=g, weight_change=0.001),  # noqa: E731
                                             eval_gain=g, eval_initial=[0.1, 0.2], eval_trained=[0.3, 0.4],
                                             learned=learned)
    t = ladder_table({"rung": run(gain, True), "lr_zero": run(flat, False), "env_mask_zero": run(gain, True)},
                     caption="2 steps")
    f = t.frame
    assert t.name == "learning_ladder" and t.caption == "2 steps"
    assert f.loc["rung", "training gain [99% CI]"] == "+0.100 [+0.050, +0.150]"
    assert f.loc["rung", "S initial -> evaluated"] == "0.150 -> 0.350"
    assert list(f["as required"]) == ["yes", "yes", "NO"] and list(f["must learn"]) == ["yes", "no", "no"]
