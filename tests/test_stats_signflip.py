"""The exact paired sign-flip (randomisation) test over seed clusters and the bootstrap p-value floor (issue 27):
known answers from a brute-force enumeration and from ``scipy.stats.permutation_test``, and sabotaged twins that
the same checks catch."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from negolib import stats
from negolib.games.multi_issue.metrics import buyer_split, synthetic_episodes
from negolib.stats import (
    FEW_CLUSTERS,
    ClusterResampler,
    few_clusters,
    percentile_coverage,
    signflip_diffs,
    summarize,
)
from negolib.study.paired import contrast_table, paired_contrast


def _brute_force(d: np.ndarray) -> float:
    """Two-sided sign-flip p of the mean of ``d`` by listing all 2^C sign vectors (independent of negolib)."""
    t = abs(d.sum())
    signs = itertools.product((1.0, -1.0), repeat=d.size)
    return float(np.mean([abs(np.dot(s, d)) >= t - 1e-12 for s in signs]))


def _agrees_with_brute_force(test: Callable[[np.ndarray], float]) -> bool:
    rng = np.random.default_rng(5)
    for c in range(1, 11):
        for _ in range(3):
            d = rng.normal(rng.choice([0.0, 0.1]), 0.2, c)
            if not np.isclose(test(d), _brute_force(d), rtol=0, atol=1e-12):
                return False
    return True


def test_exact_sign_flip_equals_brute_force_enumeration() -> None:
    assert _agrees_with_brute_force(lambda d: signflip_diffs(d).p_value)


def test_sabotaged_sign_flip_is_caught() -> None:
    """The same check fails a one-sided test (the issue's 1/32 floor at 5 clusters) and a test that leaves the
    observed pattern out of its reference set (which can give p = 0)."""
    def one_sided(d: np.ndarray) -> float:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
        return float(np.mean(signs @ d >= d.sum() - 1e-12))

    def without_identity(d: np.ndarray) -> float:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))[1:]
        return float(np.mean(np.abs(signs @ d) > abs(d.sum())))

    assert not _agrees_with_brute_force(one_sided)
    assert not _agrees_with_brute_force(without_identity)


@pytest.mark.parametrize("c", [2, 3, 5, 8, 12])
def test_sign_flip_equals_scipy_permutation_test(c: int) -> None:
    """``permutation_type='samples'`` flips signs of a one-sample statistic and swaps the members of each pair of
    a paired statistic: both are this test, exact when ``n_resamples >= 2^C``."""
    rng = np.random.default_rng(c)
    x, y = rng.normal(0.55, 0.2, c), rng.normal(0.5, 0.2, c)
    ours = signflip_diffs(x - y)
    one = scipy.stats.permutation_test((x - y,), np.mean, permutation_type="samples", n_resamples=np.inf)
    paired = scipy.stats.permutation_test((x, y), lambda a, b, axis=-1: np.mean(a - b, axis=axis),
                                          permutation_type="samples", n_resamples=np.inf, vectorized=True)
    assert ours.exact and ours.n_patterns == 2 ** c
    assert ours.p_value == pytest.approx(one.pvalue, abs=1e-12)
    assert ours.p_value == pytest.approx(paired.pvalue, abs=1e-12)


@pytest.mark.parametrize("c", [1, 2, 5, 10, 20])
def test_smallest_attainable_p_is_two_over_two_to_the_c(c: int) -> None:
    """All differences of one sign reach the floor: 1/16 at 5 clusters (two-sided), above 0.05."""
    s = signflip_diffs(np.linspace(0.1, 0.3, c))
    assert s.p_min == 2 / 2 ** c and s.p_value == s.p_min
    if c == 5:
        assert s.p_min == 1 / 16 > 0.05


def test_monte_carlo_above_the_exact_limit() -> None:
    rng = np.random.default_rng(0)
    d = rng.normal(0.04, 0.2, 14)
    exact = signflip_diffs(d)
    mc = signflip_diffs(d, max_exact=10, n_resamples=20_000, seed=3)
    assert exact.exact and not mc.exact and mc.n_patterns == 20_000
    assert mc.p_min == 1 / 20_001 and mc == signflip_diffs(d, max_exact=10, n_resamples=20_000, seed=3)
    assert abs(mc.p_value - exact.p_value) < 4 * np.sqrt(exact.p_value * (1 - exact.p_value) / 20_000) + 1e-4
    strong = signflip_diffs(np.linspace(0.1, 0.3, 40), n_resamples=999)
    assert strong.p_value == strong.p_min == 1 / 1000  # (k + 1) / (B + 1), never 0


def _episodes(n_seeds: int = 5) -> pd.DataFrame:
    return synthetic_episodes(["base", "rl"], [0.0, 0.06], n_seeds=n_seeds, domains=["d0", "d1"], seed=11)


def test_the_contrast_carries_the_sign_flip_over_its_cluster_sums() -> None:
    """For S (a mean over paired episodes) swapping the arms in a seed flips the sign of that seed's summed
    paired difference: the contrast's sign-flip p is the one-sample test on the cluster sums."""
    df = _episodes()
    c = paired_contrast(df, "rl", "base", "score", ClusterResampler.from_frame(df, 200, seed=0))
    piv = df.pivot_table(index="seed", columns="arm", values="score", aggfunc="sum")
    assert c.p_signflip == pytest.approx(_brute_force((piv["rl"] - piv["base"]).to_numpy()), abs=1e-12)
    assert c.p_signflip_min == 1 / 16 and c.signflip_exact and c.few_clusters and c.n_clusters == 5


@pytest.mark.parametrize("metric", ["deal_utility", "deal_rate"])
def test_ratio_contrast_sign_flip_equals_relabelling_the_arms(metric: str) -> None:
    """For a ratio metric the test recomputes the ratio of sums with the arms' labels swapped in each subset of
    seeds: the brute force relabels the episode table and recomputes the estimate."""
    df = _episodes()
    res = ClusterResampler.from_frame(df, 20, seed=0)
    c = paired_contrast(df, "rl", "base", metric, res)
    seeds = sorted(df["seed"].unique())
    values = []
    for flips in itertools.product((False, True), repeat=len(seeds)):
        swap = df["seed"].isin([s for s, f in zip(seeds, flips) if f])
        arm = df["arm"].where(~swap, df["arm"].map({"rl": "base", "base": "rl"}))
        values.append(paired_contrast(df.assign(arm=arm), "rl", "base", metric, res).estimate)
    values = np.asarray(values)
    assert values[0] == pytest.approx(c.estimate, abs=1e-12)
    expected = np.mean(np.abs(values) >= abs(c.estimate) - 1e-12)
    assert c.p_signflip == pytest.approx(expected, abs=1e-12)


def test_identical_arms_and_a_two_part_metric() -> None:
    df = _episodes(8)
    twin = df[df["arm"] == "rl"].assign(arm="rl_copy")
    both = pd.concat([df, twin], ignore_index=True)
    res = ClusterResampler.from_frame(both, 100, seed=0)
    for metric in ("score", "deal_utility", buyer_split("buyer_a", "buyer_b")):
        assert paired_contrast(both, "rl", "rl_copy", metric, res).p_signflip == 1.0
    with pytest.raises(ValueError, match="one metric"):
        stats.signflip_test(stats.RatioStat(np.ones((3, 3)), np.ones((3, 3)), np.ones(3), 1))


def test_few_clusters_threshold_and_the_coverage_behind_it() -> None:
    assert FEW_CLUSTERS == 30 and few_clusters(5) and few_clusters(29) and not few_clusters(30)
    assert percentile_coverage(5) == pytest.approx(0.8455, abs=1e-4)
    assert percentile_coverage(30) == pytest.approx(0.9362, abs=1e-4)
    assert percentile_coverage(10) == pytest.approx(0.9041, abs=1e-4)
    assert percentile_coverage(64) == pytest.approx(0.9437, abs=1e-4)
    assert np.isnan(percentile_coverage(1))


def test_contrast_table_holm_on_floored_p_and_the_new_columns() -> None:
    """A huge gain over 5 clusters: every resample lies above 0, yet p is 1/(B+1), Holm multiplies the floored
    values, and the sign-flip test (floor 1/16) cannot reject: the table says so."""
    df = synthetic_episodes(["base", "a", "b"], [0.0, 0.5, 0.5], n_seeds=5, domains=["d0", "d1"], seed=1,
                            noise_sd=0.01, scenario_sd=0.01, cluster_sd=0.01)
    t = contrast_table(df, [("a", "base"), ("b", "base")], primary=[("a", "base"), ("b", "base")],
                       resampler=ClusterResampler.from_frame(df, 999, seed=0), refine=False)
    assert (t["p_value"] == 1 / 1000).all() and (t["p_holm"] == 2 / 1000).all() and t["significant"].all()
    assert (t["p_signflip"] == 1 / 16).all() and (t["p_signflip_min"] == 1 / 16).all()
    assert t["few_clusters"].all() and t["signflip_exact"].all()


def _floor_violations(summarize_fn: Callable[[np.ndarray], stats.Interval]) -> list[int]:
    return [b for b in (10, 100, 1000) if summarize_fn(np.linspace(0.01, 0.2, b)).p_value < 1 / (b + 1)]


def test_sabotaged_floor_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The floor check passes on :func:`summarize` and fails on a twin whose p-values are computed with the floor
    removed (p = 0 when every resample lies above 0, as in the issue)."""
    assert _floor_violations(summarize) == []
    monkeypatch.setattr(stats, "p_floor", lambda n: 0.0)
    assert _floor_violations(stats.summarize) == [10, 100, 1000]
