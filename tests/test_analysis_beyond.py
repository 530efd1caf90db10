"""Notebook 9's analyses: LM arms against scripted sellers, variants against their sellers (paired)."""

from __future__ import annotations

from pathlib import Path

from paper_frames import assert_tidy

from negolib.games.multi_issue.metrics import synthetic_episodes
from negolib.params import load_params
from negolib.study.analysis.arms import compute_results
from negolib.study.analysis.beyond import (
    fixed_opening_contrasts,
    fixed_opening_pairs,
    own_opening_pairs,
    scripted_baseline_contrasts,
    seeds_scaffold_arms,
    turn_order_contrasts,
    variant_base,
)
from negolib.study.analysis.resamplers import Analysis

ROOT = Path(__file__).resolve().parent.parent


def test_beyond_contrasts_are_numeric_and_paired():
    p = load_params(ROOT / "params" / "smoke.yaml")
    arms = list(p.arms)
    df = synthetic_episodes(arms + ["boulware.buyer_opens"], n_seeds=4, seed=2, buyers=tuple(p.evaluation.buyers))
    res = compute_results(df[df["arm"].isin(arms)], p)
    sb = scripted_baseline_contrasts(res)
    lm = [a for a in res.arms if p.is_lm(a)]
    assert set(sb["arm_a"]) == set(lm) and set(sb["arm_b"]) == set(res.arms) - set(lm)
    assert_tidy(sb, identifiers=("arm_a", "arm_b", "metric"))
    an = Analysis(df, n_resamples=200, seed=0)
    to = turn_order_contrasts(an, ["boulware.buyer_opens"])
    assert list(zip(to["arm_a"], to["arm_b"])) == [("boulware.buyer_opens", "boulware")]
    assert variant_base("boulware.buyer_opens") == "boulware"
    fixed = [a for a in arms if p.arms[a].backend == "fixed_opening"]
    pairs = [("boulware_open_best", "boulware"), ("tiny_grpo_open_none", "tiny_grpo"),  # scripted and trained
             ("tiny_base_open_own", "tiny_base")]                                           # base, GRPO's openings
    assert fixed_opening_pairs(p, fixed) == pairs
    assert own_opening_pairs(p, fixed) == [("tiny_grpo", "tiny_base_open_own")]
    fo = fixed_opening_contrasts(an, p, fixed)
    assert list(zip(fo["arm_a"], fo["arm_b"])) == [*pairs, ("tiny_grpo", "tiny_base_open_own")]
    ss = seeds_scaffold_arms(p, arms)
    assert list(ss.columns) == ["arm", "run", "train_seed", "scaffold"]
    assert_tidy(ss, identifiers=("arm", "run", "scaffold"))
