"""The prespecified guards per trained arm: numbers (interval bounds, limits) the report words."""

from __future__ import annotations

import numpy as np
import pandas as pd
from paper_frames import assert_tidy, played

from negolib.study.analysis.guards import guards_frame
from negolib.study.analysis.resamplers import Analysis


def test_guards_frame_is_numeric_with_paired_intervals():
    _, df = played()
    an = Analysis(df, n_resamples=300, seed=0)
    g = guards_frame(an, [("conceder", "boulware"), ("tit_for_tat", "boulware"), ("nobody", "boulware")])
    assert list(g["arm"].unique()) == ["conceder", "tit_for_tat"] and len(g) == 10
    assert_tidy(g, identifiers=("arm", "base_arm", "comparator", "guard", "metric", "protocol_hash"))
    measured = g[g["metric"].notna()]
    assert measured[["ci_low", "ci_high", "limit"]].notna().all().all()
    assert (measured["ci_low"] <= measured["ci_high"]).all()
    assert np.allclose(measured["ci_estimate"], measured["delta"])  # the interval is about the same change
    manual = g[g["metric"].isna()]
    assert manual["passed"].isna().all() and manual["ci_low"].isna().all()
    turns = g[g["metric"] == "mean_turns"].iloc[0]
    assert turns["limit"] == 24 and 0 <= turns["share_at_cap"] <= 1
    assert guards_frame(an, [("nobody", "boulware")]).empty


def _profile(name: str):
    from paper_frames import ROOT

    from negolib.params import load_params

    return load_params(ROOT / "params" / f"{name}.yaml")


def test_the_starting_policy_of_each_trained_arm():
    """Default: GRPO started from the format warm-up (its run's step 0), the warm-up from the raw base; smoke the
    same (though its primary pairs GRPO with the base); paper: no warm-up, so the base, through continuations."""
    from negolib.study.analysis.guards import starting_policy

    d = _profile("default")
    assert starting_policy(d, "smollm2_grpo") == "smollm2_warmup"
    assert [b for a, b in d.statistics.primary if a == "smollm2_grpo"] == ["smollm2_warmup"]  # the primary agrees
    assert starting_policy(d, "smollm2_warmup") == "smollm2_base"
    assert starting_policy(d, "smollm2_base") is None and starting_policy(d, "boulware") is None
    s = _profile("smoke")
    assert starting_policy(s, "tiny_grpo") == "tiny_warmup"
    p = _profile("paper")
    assert starting_policy(p, "e2b_shared_104") == "e2b_base"  # a continuation of e2b_shared, from e2b_base
    assert starting_policy(p, "g31b_lr3_56") == "g31b_base"


def _warmup_study() -> pd.DataFrame:
    """A raw base that closes nothing, a warm-up that closes most scenarios, a GRPO arm that closes fewer."""
    from negolib.games.multi_issue.metrics import synthetic_episodes

    return synthetic_episodes(["smollm2_base", "smollm2_warmup", "smollm2_grpo"], [-5.0, 0.4, 0.0], n_seeds=8,
                              domains=["d0", "d1", "d2"], seed=2)


def test_guards_compare_with_the_starting_policy_so_the_deal_rate_guard_can_fail():
    from negolib.study.analysis.guards import STARTING_POLICY, guard_comparators

    d = _profile("default")
    an = Analysis(_warmup_study(), n_resamples=200, seed=0)
    trained = [("smollm2_warmup", "smollm2_base"), ("smollm2_grpo", "smollm2_base")]
    pairs = guard_comparators(d, trained, an.has)
    assert pairs == [("smollm2_warmup", "smollm2_base", STARTING_POLICY),
                     ("smollm2_grpo", "smollm2_warmup", STARTING_POLICY)]
    g = guards_frame(an, pairs).set_index(["arm", "metric"])
    deal = g.loc[("smollm2_grpo", "deal_rate")]
    assert deal["base_arm"] == "smollm2_warmup" and deal["comparator"] == STARTING_POLICY
    assert deal["delta"] < -0.05 and not deal["passed"]  # GRPO lost deals the warm-up closed
    trivial = guards_frame(an, [("smollm2_grpo", "smollm2_base")]).set_index("metric").loc["deal_rate"]
    assert trivial["passed"] and trivial["base"] == 0.0  # against the raw base the guard passes trivially


def test_guards_fall_back_to_the_base_when_the_starting_policy_was_not_evaluated():
    from negolib.study.analysis.guards import BASE_FALLBACK, GIVEN, guard_comparators

    d = _profile("default")
    df = _warmup_study()
    an = Analysis(df[df["arm"] != "smollm2_warmup"], n_resamples=200, seed=0)
    pairs = guard_comparators(d, [("smollm2_grpo", "smollm2_base")], an.has)
    assert pairs == [("smollm2_grpo", "smollm2_base", BASE_FALLBACK)]
    g = guards_frame(an, pairs)
    assert set(g["comparator"]) == {BASE_FALLBACK} and set(g["base_arm"]) == {"smollm2_base"}
    assert set(guards_frame(an, [("smollm2_grpo", "smollm2_base")])["comparator"]) == {GIVEN}
