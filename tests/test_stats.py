"""Statistics layer: scipy/statsmodels oracles, invariances, properties, coverage (SPEC 8)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.multitest import multipletests

from negolib.core.formatting import fmt_ci
from negolib.games.multi_issue.metrics import METRICS, buyer_split, synthetic_episodes
from negolib.stats import ClusterResampler, count_p, holm, inversion_p, summarize
from negolib.study.paired import (
    arm_estimate,
    cluster_sums,
    contrast_table,
    pair_episodes,
    paired_contrast,
    refine_near_zero,
)


@pytest.fixture(scope="module")
def study() -> pd.DataFrame:
    return synthetic_episodes(["base", "rl", "rl3"], [0.0, 0.02, 0.08], n_seeds=24, seed=3)


def _scipy_ratio_diff(na, da, nb, db, axis=-1):
    return na.sum(axis) / da.sum(axis) - nb.sum(axis) / db.sum(axis)


def _captured_indices(g: int, n_resamples: int, seed: int, batch: int | None) -> np.ndarray:
    """The cluster indices scipy.stats.bootstrap draws (paired, so it resamples one index array)."""
    seen: list[np.ndarray] = []

    def stat(x, axis=-1):
        seen.append(np.array(x, dtype=np.int64))
        return x.mean(axis)

    scipy.stats.bootstrap((np.arange(g), np.arange(g)), lambda a, b, axis=-1: stat(a, axis), paired=True,
                          vectorized=True, method="percentile", n_resamples=n_resamples, batch=batch, rng=seed)
    return np.vstack(seen)


# ---------------------------------------------------------------------------------------------
# Oracles
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("g", "b", "batch"), [(64, 1000, None), (17, 1000, 300), (5, 257, 64)])
def test_identical_draws_to_scipy(g: int, b: int, batch: int | None) -> None:
    idx = _captured_indices(g, b, seed=11, batch=batch)
    r = ClusterResampler(np.arange(g) + 100, n_resamples=b, seed=11, batch_size=batch)
    np.testing.assert_array_equal(np.vstack(list(r.draws())), idx)
    expected = np.stack([np.bincount(row, minlength=g) for row in idx])
    np.testing.assert_array_equal(r.counts, expected)
    assert (r.counts.sum(axis=1) == g).all()


def test_equal_cluster_mean_contrast_matches_scipy(study: pd.DataFrame) -> None:
    r = ClusterResampler.from_frame(study, n_resamples=2000, seed=5)
    c = paired_contrast(study, "rl", "base", "score", r)
    # Every cluster has 18 episodes, so the mean of cluster means is the ratio of sums.
    per = study.pivot_table(index="seed", columns="arm", values="score", aggfunc="mean")
    res = scipy.stats.bootstrap((per["rl"].to_numpy(), per["base"].to_numpy()),
                                lambda a, b, axis=-1: a.mean(axis) - b.mean(axis), paired=True,
                                vectorized=True, method="percentile", n_resamples=2000, rng=5)
    np.testing.assert_allclose(c.distribution, res.bootstrap_distribution, rtol=0, atol=1e-13)
    assert c.ci_low == pytest.approx(res.confidence_interval.low, abs=1e-13)
    assert c.ci_high == pytest.approx(res.confidence_interval.high, abs=1e-13)
    assert c.estimate == pytest.approx(per["rl"].mean() - per["base"].mean(), abs=1e-13)
    assert (c.n_clusters, c.n_episodes, c.n_dropped, c.n_undefined) == (24, 432, 0, 0)


@pytest.mark.parametrize("batch", [None, 700])
def test_ratio_contrast_matches_scipy_on_cluster_sums(study: pd.DataFrame, batch: int | None) -> None:
    r = ClusterResampler.from_frame(study, n_resamples=3000, seed=7, batch_size=batch)
    c = paired_contrast(study, "rl3", "base", "deal_utility", r, alpha=0.1)
    p = pair_episodes(study, "rl3", "base")
    na, da, _ = cluster_sums(p.a, METRICS["deal_utility"], r)
    nb, db, _ = cluster_sums(p.b, METRICS["deal_utility"], r)
    res = scipy.stats.bootstrap((na[:, 0], da[:, 0], nb[:, 0], db[:, 0]), _scipy_ratio_diff, paired=True,
                                vectorized=True, method="percentile", n_resamples=3000, batch=batch,
                                confidence_level=0.9, rng=7)
    np.testing.assert_allclose(c.distribution, res.bootstrap_distribution, rtol=0, atol=1e-13)
    assert c.ci_low == pytest.approx(res.confidence_interval.low, abs=1e-13)
    assert c.ci_high == pytest.approx(res.confidence_interval.high, abs=1e-13)


def test_arm_estimate_matches_scipy_one_sample(study: pd.DataFrame) -> None:
    r = ClusterResampler.from_frame(study, n_resamples=1500, seed=2)
    e = arm_estimate(study, "rl", "bad_parse_rate", r)
    rows = study[study["arm"] == "rl"]
    num = rows.groupby("seed")["bad_parses"].sum().to_numpy(float)
    den = rows.groupby("seed")["turns"].sum().to_numpy(float)
    res = scipy.stats.bootstrap((num, den), lambda a, b, axis=-1: a.sum(axis) / b.sum(axis), paired=True,
                                vectorized=True, method="percentile", n_resamples=1500, rng=2)
    assert e.estimate == pytest.approx(num.sum() / den.sum(), abs=1e-15)
    assert e.ci_low == pytest.approx(res.confidence_interval.low, abs=1e-13)
    assert e.ci_high == pytest.approx(res.confidence_interval.high, abs=1e-13)
    assert (e.n_clusters, e.n_episodes) == (24, 432)


pvals = st.lists(st.one_of(st.sampled_from([0.0, 0.001, 0.01, 0.02, 0.04, 0.05, 0.3, 1.0]),
                           st.floats(0, 1, allow_nan=False)), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)  # statsmodels runs gc.collect() per call: slow
@given(pvals)
def test_holm_identical_to_statsmodels(p: list[float]) -> None:
    expected = multipletests(p, method="holm")[1]
    np.testing.assert_array_equal(holm(p), expected)


def test_holm_ties_and_validation() -> None:
    np.testing.assert_array_equal(holm([0.01, 0.01, 0.04]), [0.03, 0.03, 0.04])
    np.testing.assert_array_equal(holm([0.5, 0.5]), [1.0, 1.0])
    with pytest.raises(ValueError):
        holm([0.1, float("nan")])


# ---------------------------------------------------------------------------------------------
# Invariances and algebra
# ---------------------------------------------------------------------------------------------

def test_invariant_to_episode_order(study: pd.DataFrame) -> None:
    r = ClusterResampler.from_frame(study, n_resamples=1000, seed=1)
    shuffled = study.sample(frac=1.0, random_state=9).reset_index(drop=True)
    for metric in ("score", "deal_utility", "seller_bad_parse_rate"):
        a = paired_contrast(study, "rl", "base", metric, r)
        b = paired_contrast(shuffled, "rl", "base", metric, r)
        assert (a.estimate, a.ci_low, a.ci_high, a.p_value) == (b.estimate, b.ci_low, b.ci_high, b.p_value)
        np.testing.assert_array_equal(a.distribution, b.distribution)


@pytest.mark.parametrize("metric", ["score", "deal_utility", "welfare"])
def test_antisymmetric_when_arms_swap(study: pd.DataFrame, metric: str) -> None:
    r = ClusterResampler.from_frame(study, n_resamples=1000, seed=4)
    ab = paired_contrast(study, "rl3", "rl", metric, r)
    ba = paired_contrast(study, "rl", "rl3", metric, r)
    np.testing.assert_array_equal(ba.distribution, -ab.distribution)
    assert ba.estimate == pytest.approx(-ab.estimate, abs=1e-15)
    assert ba.ci_low == pytest.approx(-ab.ci_high, abs=1e-13)
    assert ba.ci_high == pytest.approx(-ab.ci_low, abs=1e-13)
    assert ba.p_value == pytest.approx(ab.p_value, abs=1e-12)
    assert ba.p_count == ab.p_count


def test_additive_over_shared_resamples(study: pd.DataFrame) -> None:
    r = ClusterResampler.from_frame(study, n_resamples=2000, seed=8)
    for metric in ("score", "mean_turns", "deal_rate"):
        ac = paired_contrast(study, "rl3", "base", metric, r)
        ab = paired_contrast(study, "rl3", "rl", metric, r)
        bc = paired_contrast(study, "rl", "base", metric, r)
        np.testing.assert_allclose(ac.distribution, ab.distribution + bc.distribution, rtol=0, atol=1e-12)
        assert ac.estimate == pytest.approx(ab.estimate + bc.estimate, abs=1e-12)


def test_identical_arms_give_zero_interval_and_p_one(study: pd.DataFrame) -> None:
    r = ClusterResampler.from_frame(study, n_resamples=500, seed=0)
    twin = study[study["arm"] == "rl"].assign(arm="rl_copy")
    df = pd.concat([study, twin], ignore_index=True)
    for metric in ("score", "deal_utility", buyer_split("buyer_a", "buyer_b")):
        c = paired_contrast(df, "rl", "rl_copy", metric, r)
        assert (c.estimate, c.ci_low, c.ci_high, c.p_value, c.p_count) == (0.0, 0.0, 0.0, 1.0, 1.0)
        assert not c.near_zero()


def _random_pair(seed: int, n_clusters: int, effect: float, icc_sd: float) -> pd.DataFrame:
    """Two arms, ``n_clusters`` seeds x 3 domains x 2 buyers, cluster-correlated differences."""
    rng = np.random.default_rng(seed)
    seeds, doms, buyers = np.meshgrid(np.arange(n_clusters), ["d0", "d1", "d2"], ["A", "B"], indexing="ij")
    n = seeds.size
    u = rng.normal(0, icc_sd, n_clusters)[seeds.ravel()]
    base = rng.normal(0.4, 0.2, n)
    key = {"seed": seeds.ravel(), "domain": doms.ravel(), "buyer": buyers.ravel()}
    a = pd.DataFrame({"arm": "a", **key, "score": base + effect + u + rng.normal(0, 0.2, n)})
    b = pd.DataFrame({"arm": "b", **key, "score": base})
    return pd.concat([a, b], ignore_index=True)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n_clusters=st.integers(3, 15), effect=st.floats(-0.2, 0.2),
       icc_sd=st.floats(0, 0.3), n_resamples=st.integers(20, 400), alpha=st.sampled_from([0.05, 0.1, 0.2]))
def test_p_below_alpha_exactly_when_interval_excludes_zero(seed, n_clusters, effect, icc_sd, n_resamples,
                                                           alpha) -> None:
    df = _random_pair(seed, n_clusters, effect, icc_sd)
    r = ClusterResampler.from_frame(df, n_resamples=n_resamples, seed=seed)
    c = paired_contrast(df, "a", "b", "score", r, alpha=alpha)
    assert (c.p_value < alpha) == c.excludes_zero
    assert abs(c.p_value - c.p_count) <= 2 / (n_resamples - 1) + 1e-12
    # The raw inversion (before any rounding guard) agrees at every level, not just ``alpha``.
    raw = inversion_p(np.sort(c.distribution))
    for level in (0.01, 0.05, 0.1, 0.2, 0.5):
        s = summarize(c.distribution, level)
        assert (raw < level) == (s.ci_low > 0 or s.ci_high < 0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0]), st.floats(-1, 1)),
                min_size=2, max_size=60), st.sampled_from([0.05, 0.1, 0.5]))
def test_inversion_p_consistent_on_arbitrary_distributions(values: list[float], alpha: float) -> None:
    d = np.asarray(values)
    s = summarize(d, alpha)
    assert s.p_value >= 1 / (d.size + 1) and s.p_count >= 1 / (d.size + 1)  # the floor, always
    if alpha > 1 / (d.size + 1):  # below the floor no B-resample bootstrap decides
        assert (s.p_value < alpha) == (s.ci_low > 0 or s.ci_high < 0)
    y = np.sort(d)
    assert abs(inversion_p(y) - count_p(y)) <= 2 / (d.size - 1) + 1e-12


def test_rounding_guard_at_the_boundary() -> None:
    # Exactly, the interpolated Q(0.9) is 0 and p = 0.2; in floating point the raw inversion gives
    # 0.19999999999999996 while the reported interval reaches 0. The reported p follows the reported interval.
    y = np.array([-1.0, -0.7, -0.5, -0.5, -0.5, -0.3, -0.3, -0.3, -0.3, -0.3, -0.25, -0.25, -0.1, -0.1, 0.1, 0.1])
    s = summarize(y, 0.2)
    assert inversion_p(y) < 0.2
    assert (s.p_value < 0.2) == (s.ci_low > 0 or s.ci_high < 0)
    assert s.p_value == pytest.approx(0.2, abs=1e-15)
    # With B = 3 resamples the floor 1/(B+1) = 0.25 lies above alpha = 0.2: no 3-resample bootstrap decides
    # at that level, so the floor wins over the interval (here Q(0.9) = +3e-16 in floating point).
    tiny = summarize(np.array([-1.0, -1.0, 0.25]), 0.2)
    assert tiny.p_floor == 0.25 and tiny.p_value == 0.25


def test_bootstrap_p_is_never_below_one_over_b_plus_one() -> None:
    """Issue 27: a percentile bootstrap reported p = 0.0 with every resample above 0."""
    for b in (1, 19, 400, 10_000):
        s = summarize(np.linspace(0.01, 0.2, b))
        assert inversion_p(np.linspace(0.01, 0.2, b)) == 0.0 and count_p(np.linspace(0.01, 0.2, b)) == 0.0
        assert s.p_value == s.p_count == s.p_floor == 1 / (b + 1)
    undefined = summarize(np.r_[np.full(9, np.nan), np.linspace(0.01, 0.2, 99)])
    assert undefined.p_floor == 1 / 100  # B counts the defined resamples
    # and the Holm family is computed on the floored values
    assert (holm([summarize(np.ones(99)).p_value] * 4) == 4 / 100).all()


def test_p_value_formulas_on_known_distribution() -> None:
    y = np.arange(-2.0, 98.0)  # 100 values, 2 negative, one zero
    assert count_p(y) == pytest.approx(2 * 3 / 100)
    # Interpolated quantile reaches 0 at index 2 exactly: a_lo = 2/99, a_hi = 2/99.
    assert inversion_p(y) == pytest.approx(2 * 2 / 99)


# ---------------------------------------------------------------------------------------------
# Pairing, ratio metrics, refinement, tables
# ---------------------------------------------------------------------------------------------

def test_unpaired_episodes_are_dropped_and_counted(study: pd.DataFrame) -> None:
    r = ClusterResampler.from_frame(study, n_resamples=200, seed=0)
    drop = study[(study["arm"] == "base")].index[:5]
    df = study.drop(index=drop)
    c = paired_contrast(df, "rl", "base", "score", r)
    assert (c.n_episodes, c.n_dropped) == (432 - 5, 5)
    with pytest.raises(ValueError, match="duplicate"):
        paired_contrast(pd.concat([df, df.iloc[:1]]), "rl", "base", "score", r)
    with pytest.raises(KeyError, match="no episodes"):
        paired_contrast(df, "rl", "ghost", "score", r)


def test_both_closed_restriction_and_filters(study: pd.DataFrame) -> None:
    r = ClusterResampler.from_frame(study, n_resamples=300, seed=0)
    p = pair_episodes(study, "rl3", "base", restrict_both_closed=True)
    assert p.a["deal"].all() and p.b["deal"].all()
    c = paired_contrast(study, "rl3", "base", "deal_utility", r, restrict_both_closed=True)
    diff = p.a["seller_utility"].to_numpy() - p.b["seller_utility"].to_numpy()
    assert c.estimate == pytest.approx(diff.mean(), abs=1e-12)
    held = paired_contrast(study, "rl3", "base", "score", r, domains=["car"])
    assert held.n_episodes == 24 * 2
    one = paired_contrast(study, "rl3", "base", "score", r, buyer="buyer_a")
    assert one.n_episodes == 24 * 9


def test_held_out_metric_equals_domain_filter(study: pd.DataFrame) -> None:
    r = ClusterResampler.from_frame(study, n_resamples=800, seed=2)
    a = paired_contrast(study, "rl3", "base", "score_held_out", r)
    b = paired_contrast(study, "rl3", "base", "score", r, domains=["car"])
    assert a.estimate == pytest.approx(b.estimate, abs=1e-14)
    np.testing.assert_allclose(a.distribution, b.distribution, rtol=0, atol=1e-14)
    assert (a.n_episodes, b.n_episodes) == (432, 48)


def test_ratio_metric_counts_undefined_resamples() -> None:
    df = synthetic_episodes(["a", "b"], n_seeds=6, seed=0)
    only = (df["arm"] == "a") & (df["seed"] != df["seed"].min())
    df.loc[only, ["deal"]] = False  # arm a closes deals on the first seed only
    df.loc[only, ["seller_utility", "buyer_utility", "welfare"]] = np.nan
    r = ClusterResampler.from_frame(df, n_resamples=2000, seed=1)
    c = paired_contrast(df, "a", "b", "deal_utility", r)
    expected_undefined = int((r.counts[:, 0] == 0).sum())
    assert 0 < expected_undefined < 2000
    assert c.n_undefined == expected_undefined
    assert np.isnan(c.distribution).sum() == expected_undefined
    assert np.isfinite(c.ci_low) and np.isfinite(c.ci_high)
    # The defined resamples are the ratio of resampled sums, computed directly.
    p = pair_episodes(df, "a", "b")
    na, da, _ = cluster_sums(p.a, METRICS["deal_utility"], r)
    nb, db, _ = cluster_sums(p.b, METRICS["deal_utility"], r)
    cnt = r.counts
    with np.errstate(invalid="ignore", divide="ignore"):
        manual = (cnt @ na[:, 0]) / (cnt @ da[:, 0]) - (cnt @ nb[:, 0]) / (cnt @ db[:, 0])
    ok = cnt[:, 0] > 0
    np.testing.assert_allclose(c.distribution[ok], manual[ok], rtol=0, atol=1e-13)


def test_near_zero_rule_and_refinement(study: pd.DataFrame) -> None:
    r = ClusterResampler.from_frame(study, n_resamples=500, seed=3)
    c = paired_contrast(study, "rl", "base", "score", r)
    assert replace(c, ci_low=2.9 * c.se_low).near_zero()
    assert not replace(c, ci_low=3.1 * c.se_low, ci_high=10.0).near_zero()
    assert replace(c, ci_low=-1.0, ci_high=-2.0 * c.se_high).near_zero()
    far = paired_contrast(study, "rl3", "base", "score", r)
    out = refine_near_zero(study, [c, far], r, n_resamples=5000, k=1e9)
    assert [x.refined for x in out] == [True, True] and out[0].n_resamples == 5000
    fine = paired_contrast(study, "rl", "base", "score", r.with_resamples(5000))
    assert out[0].ci_low == pytest.approx(fine.ci_low, abs=1e-13)
    assert out[0].ci_high == pytest.approx(fine.ci_high, abs=1e-13)
    assert refine_near_zero(study, [c, far], r, n_resamples=5000, k=0.0) == [c, far]


def test_contrast_table_holm_marks_and_format(study: pd.DataFrame) -> None:
    r = ClusterResampler.from_frame(study, n_resamples=1000, seed=6)
    pairs = [("rl", "base"), ("rl3", "base"), ("rl3", "rl")]
    t = contrast_table(study, pairs, ["score", "deal_rate"], r, primary=pairs[:2], refine=False)
    assert len(t) == 6
    prim = t[t["primary"]]
    assert list(zip(prim["arm_a"], prim["metric"])) == [("rl", "score"), ("rl3", "score")]
    np.testing.assert_array_equal(prim["p_holm"], holm(prim["p_value"].to_numpy()))
    assert t.loc[~t["primary"], "p_holm"].isna().all()
    expl = t[~t["primary"]]
    assert (expl["significant"] == (expl["p_value"] < 0.05)).all()
    assert (expl["mark"] == np.where(expl["significant"], "e", "")).all()
    assert (prim["mark"] == np.where(prim["p_holm"] < 0.05, "*", "")).all()
    one = paired_contrast(study, "rl3", "rl", "deal_rate", r)
    row = t[(t["arm_a"] == "rl3") & (t["arm_b"] == "rl") & (t["metric"] == "deal_rate")].iloc[0]
    assert (row["ci_low"], row["ci_high"], row["p_value"]) == (one.ci_low, one.ci_high, one.p_value)
    assert row["ci"] == fmt_ci(one.estimate, one.ci_low, one.ci_high, signed=True)
    with pytest.raises(ValueError, match="primary"):
        contrast_table(study, pairs, ["score"], r, primary=[("rl", "rl3")], refine=False)


def test_contrast_table_refines_only_near_zero(study: pd.DataFrame) -> None:
    r = ClusterResampler.from_frame(study, n_resamples=400, seed=6)
    t = contrast_table(study, [("rl", "base"), ("rl3", "base")], ["score", "mean_turns"], r,
                       refine=True, refine_resamples=4000)
    coarse = contrast_table(study, [("rl", "base"), ("rl3", "base")], ["score", "mean_turns"], r,
                            refine=False)
    near = [replace_flag for replace_flag in (
        (abs(lo) <= 3 * sl and sl > 0) or (abs(hi) <= 3 * sh and sh > 0)
        for lo, hi, sl, sh in zip(coarse["ci_low"], coarse["ci_high"], coarse["se_low"], coarse["se_high"]))]
    assert list(t["refined"]) == near
    assert list(t["n_resamples"]) == [4000 if f else 400 for f in near]


def test_fmt_ci() -> None:
    assert fmt_ci(0.023, 0.011, 0.035, signed=True) == "+0.023 [+0.011, +0.035]"
    assert fmt_ci(-0.0001, -0.0224, 0.0004, signed=True, decisive=False) == "-0.000 [-0.022, +0.000]"
    assert fmt_ci(-0.0001, -0.0224, 0.0004, signed=True) == "-0.0001 [-0.0224, +0.0004]"


def test_resampler_validation() -> None:
    with pytest.raises(ValueError, match="unique"):
        ClusterResampler([1, 1, 2])
    with pytest.raises(ValueError, match="n_resamples"):
        ClusterResampler([1, 2], n_resamples=0)
    r = ClusterResampler([30, 10, 20], n_resamples=5)
    np.testing.assert_array_equal(r.positions(np.array([20, 30, 10])), [2, 0, 1])
    with pytest.raises(KeyError, match="99"):
        r.positions(np.array([99]))
    with pytest.raises(ValueError, match="rows"):
        r.apply(np.ones((4, 2)))
    np.testing.assert_allclose(r.apply(np.ones(3)), np.full(5, 3.0))


# ---------------------------------------------------------------------------------------------
# Coverage on synthetic clustered data
# ---------------------------------------------------------------------------------------------

def _clustered(rng: np.random.Generator, n_clusters: int, delta: float) -> pd.DataFrame:
    """Paired arms on n_clusters seeds x 9 domains x 2 buyers; ICC of the paired difference ~0.8."""
    seeds, doms, buyers = np.meshgrid(np.arange(n_clusters), np.arange(9), np.arange(2), indexing="ij")
    n = seeds.size
    w = rng.normal(0, 1.0, n_clusters)[seeds.ravel()]
    scen = rng.normal(0, 1.0, n)
    key = {"seed": seeds.ravel(), "domain": doms.ravel().astype(str), "buyer": buyers.ravel().astype(str)}
    a = pd.DataFrame({"arm": "a", **key, "score": scen + delta + w + rng.normal(0, 0.5, n)})
    b = pd.DataFrame({"arm": "b", **key, "score": scen})
    df = pd.concat([a, b], ignore_index=True)
    df["episode"] = df["seed"] * 100 + df["domain"].astype(int) * 2 + df["buyer"].astype(int)
    return df


def test_cluster_bootstrap_covers_and_naive_undercovers() -> None:
    rng = np.random.default_rng(20240601)
    delta, reps, b = 0.3, 200, 500
    hit_cluster = hit_naive = 0
    for rep in range(reps):
        df = _clustered(rng, 30, delta)
        rc = ClusterResampler.from_frame(df, n_resamples=b, seed=rep)
        rn = ClusterResampler.from_frame(df, n_resamples=b, seed=rep, cluster_col="episode")
        c = paired_contrast(df, "a", "b", "score", rc)
        n = paired_contrast(df, "a", "b", "score", rn, cluster_col="episode")
        hit_cluster += c.ci_low <= delta <= c.ci_high
        hit_naive += n.ci_low <= delta <= n.ci_high
    assert 0.88 <= hit_cluster / reps <= 0.99
    assert hit_naive / reps < 0.85


def test_contrast_difference_of_gains_equals_direct_contrast_on_shared_resamples():
    from negolib.games.multi_issue.metrics import synthetic_episodes
    from negolib.stats import ClusterResampler
    from negolib.study.paired import contrast_difference, paired_contrast

    df = synthetic_episodes(["base", "small", "large"], [0.0, 0.02, 0.06], n_seeds=24, seed=3)
    rs = ClusterResampler.from_frame(df, n_resamples=2_000, seed=11)
    large, small = paired_contrast(df, "large", "base", "score", rs), paired_contrast(df, "small", "base", "score", rs)
    diff = contrast_difference(large, small)
    direct = paired_contrast(df, "large", "small", "score", rs)
    assert diff.estimate == pytest.approx(direct.estimate, abs=1e-12)
    assert diff.interval.ci_low == pytest.approx(direct.ci_low, abs=1e-12)
    assert diff.interval.ci_high == pytest.approx(direct.ci_high, abs=1e-12)
    with pytest.raises(ValueError, match="share one ClusterResampler"):
        contrast_difference(large, paired_contrast(df, "small", "base", "score", rs.with_resamples(500)))


@pytest.mark.parametrize("n_clusters,alpha,power", [(5, 0.05, 0.8), (16, 0.05, 0.8), (64, 0.01, 0.9), (3, 0.1, 0.5)])
def test_minimum_detectable_effect_matches_statsmodels_paired_t_power(n_clusters, alpha, power):
    from statsmodels.stats.power import TTestPower

    from negolib.stats import minimum_detectable_effect

    sd = 0.37  # the per-cluster sd of paired differences; the contrast's SE is sd / sqrt(G)
    se = sd / np.sqrt(n_clusters)
    d = TTestPower().solve_power(effect_size=None, nobs=n_clusters, alpha=alpha, power=power,
                                 alternative="two-sided")
    assert minimum_detectable_effect(se, n_clusters, alpha, power) == pytest.approx(d * sd, rel=1e-6)


def test_minimum_detectable_effect_edges_and_the_contrast_table_column():
    from negolib.stats import minimum_detectable_effect
    from negolib.study.paired import contrast_se

    assert np.isnan(minimum_detectable_effect(0.0, 10)) and np.isnan(minimum_detectable_effect(0.1, 1))
    assert minimum_detectable_effect(0.2, 10) == pytest.approx(2 * minimum_detectable_effect(0.1, 10))
    assert minimum_detectable_effect(0.1, 100) < minimum_detectable_effect(0.1, 10)  # t -> z
    df = synthetic_episodes(["a", "b"], effects=[0.1, 0.0], n_seeds=16, seed=0)
    res = ClusterResampler.from_frame(df, 2000, seed=0)
    c = paired_contrast(df, "a", "b", "score", res)
    table = contrast_table(df, [("a", "b")], resampler=res, refine=False)
    assert table.loc[0, "se"] == pytest.approx(contrast_se(c))
    assert table.loc[0, "mde"] == pytest.approx(minimum_detectable_effect(contrast_se(c), c.n_clusters))
    assert 2.0 * table.loc[0, "se"] < table.loc[0, "mde"] < 4.0 * table.loc[0, "se"]
