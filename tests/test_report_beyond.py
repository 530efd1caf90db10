"""Notebook 9's report: scripted baselines, turn order, fixed openings, seeds and scaffold, efficiency and
the Pareto figure; the paper ran none of them, and each table says so."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from paper_frames import played

from negolib.core.formatting import DASH
from negolib.games.multi_issue.metrics import synthetic_episodes
from negolib.params import load_params
from negolib.study.analysis.arms import compute_results
from negolib.study.analysis.beyond import (
    fixed_opening_contrasts,
    scripted_baseline_contrasts,
    seeds_scaffold_arms,
    turn_order_contrasts,
)
from negolib.study.analysis.resamplers import Analysis
from negolib.study.report.beyond import (
    efficiency_table,
    fixed_openings_table,
    pareto_figure,
    scripted_baselines_table,
    seeds_scaffold_table,
    turn_order_table,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def smoke():
    p = load_params(ROOT / "params" / "smoke.yaml")
    arms = list(p.arms)
    df = synthetic_episodes(arms + ["boulware.buyer_opens"], n_seeds=4, seed=2, buyers=tuple(p.evaluation.buyers))
    return p, df, compute_results(df[df["arm"].isin(arms)], p)


def test_beyond_tables_say_the_paper_ran_none(smoke):
    p, df, res = smoke
    sb = scripted_baselines_table(res, scripted_baseline_contrasts(res)).frame
    lm = [a for a in res.arms if p.is_lm(a)]
    assert list(sb.columns) == ["label", "S", *[f"{m} − it" for m in lm], "paper: value"]
    assert set(sb["paper: value"]) == {"not run (App. A)"} and (sb["S"] != DASH).all()
    an = Analysis(df, n_resamples=200, seed=0)
    to = turn_order_table(turn_order_contrasts(an, ["boulware.buyer_opens"]), ["boulware.buyer_opens"]).frame
    assert list(to.index) == ["boulware"] and to.loc["boulware", "episodes"] > 0
    assert to.loc["boulware", "paper: value"].startswith("untested")
    fixed = ["boulware_open_best"]
    fo = fixed_openings_table(fixed_opening_contrasts(an, p, fixed), p, fixed, {"boulware": 0.5}).frame
    assert fo.loc["boulware_open_best", "opens with terms (fixed / free)"] == f"{DASH} / 50.0%"
    ss = seeds_scaffold_table(seeds_scaffold_arms(p, res.arms), res.est).frame
    assert list(ss.columns)[-1] == "paper: value"


def test_efficiency_table_and_the_pareto_figure():
    import matplotlib

    matplotlib.use("Agg")
    records, _ = played()
    eff = pd.DataFrame([{"arm": "boulware", "n_deals": 3, "pareto_distance": 0.012345678}])
    t = efficiency_table(eff)
    assert t.frame.loc["boulware", "pareto_distance"] == 0.0123 and t.frame.loc["boulware", "seller"] == "boulware"
    assert set(t.frame["paper: value"]) == {"not computed (App. K)"}
    rec = records[0]
    fig = pareto_figure(records, rec["domain"], rec["seed"])
    assert len(fig.axes) == 1
