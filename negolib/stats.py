"""The seed-cluster bootstrap [paper §4 "Paired evaluation", App. K]: resampling, ratio statistics,
percentile intervals, p-values, Holm and the minimum detectable effect. It imports no game: any game's per-cluster
sums go in (the paper's paired contrasts of arms over its episode tables are :mod:`negolib.study.paired`).

Shapes: ``G`` clusters (evaluation seeds), ``B`` resamples, ``T`` ratio terms of a statistic.

* One :class:`ClusterResampler` per analysis draws ``B`` resamples of the ``G`` clusters exactly
  as ``scipy.stats.bootstrap`` does for a paired (one-index) percentile bootstrap with the same
  seed and batch size (``rng.integers(0, G, (batch, G))`` per batch from
  ``np.random.default_rng(seed)``, i.e. scipy's ``rng=seed``; the legacy ``random_state=seed``
  draws from a ``RandomState`` instead) and caches them as a ``(B, G)`` count matrix shared by
  every contrast and metric.
* A :class:`RatioStat` is a signed sum of ratios ``sum(num) / sum(den)`` over per-cluster sums ``(G, T)``;
  every resampled value of every statistic of an analysis comes from one matrix product ``counts @ sums``
  per batch (:func:`resample_stats`).
* Intervals are percentile intervals with scipy's quantile rule (Hyndman-Fan 7, ``'linear'``).
  The p-value inverts that same interpolated percentile function:
  ``p = min(1, 2 min(a_lo, 1 - a_hi))`` with ``a_lo = sup{q: Q(q) <= 0}`` and
  ``a_hi = inf{q: Q(q) >= 0}``, so ``p < alpha`` exactly when the ``1 - alpha`` interval excludes
  0, at every ``alpha``. The counting formula,
  ``min(1, 2 min(#(d* <= 0), #(d* >= 0)) / B)``, is reported beside it as ``p_count``; the two
  differ by less than ``2 / (B - 1)`` (counting is exactly consistent only with an order-statistic
  interval, not with scipy's interpolated one). Where ``p`` lies within rounding of ``alpha`` it
  is resolved in favour of the reported interval, so the equivalence also holds in floating point.
* Monte Carlo standard error of an endpoint at level ``q`` (order-statistic / binomial method):
  the number of resamples below the true quantile is Binomial(B, q), so the endpoint's sampling
  spread is ``(Q(q + s) - Q(q - s)) / 2`` with ``s = sqrt(q (1 - q) / B)``. For a statistic
  on a coarse lattice (a deal-rate difference on few clusters) the window can fall inside one
  atom and the SE reads 0: the endpoint then cannot move with more resamples either.
* Every bootstrap p-value is floored at ``1 / (B + 1)``, ``B`` the number of defined resamples
  (:func:`p_floor`): with no resample on the far side of 0 the resampling cannot resolve a smaller p,
  and a p of exactly 0 is not a result. ``p < alpha`` exactly when the interval excludes 0 therefore
  holds for every ``alpha > 1 / (B + 1)``; below that level no ``B``-resample bootstrap decides.
* Beside the bootstrap, an exact paired **sign-flip (randomisation) test** over the clusters
  (:func:`signflip_test`, two-sided): under the sharp null that the two arms' labels are exchangeable
  within each cluster, the contrast is recomputed with the arms swapped in every subset of clusters.
  Its smallest attainable p is ``2 / 2^G`` (a pattern and its complement give ``+T`` and ``-T``):
  1/16 at 5 clusters, so no test at level 0.05 can reject there, whatever the data (the one-sided
  test's floor would be 1/32). Above :data:`MAX_EXACT_CLUSTERS` it is a seeded Monte Carlo with the
  ``(k + 1) / (B + 1)`` rule.
* With fewer than :data:`FEW_CLUSTERS` clusters a contrast is flagged ``few_clusters``
  (:func:`few_clusters`): its percentile interval is not to be trusted (see there for the threshold).
* Resamples whose ratio is undefined (a resampled denominator sums to 0) are counted in
  ``n_undefined`` and excluded; percentiles and p-values use the defined ones.
* Minimum detectable effect (ours, a power calculation): the smallest true gain that a two-sided
  level-``alpha`` test over ``G`` paired clusters detects with probability ``power``, treating
  the contrast as a paired t statistic on ``G - 1`` degrees of freedom whose standard error is the
  bootstrap distribution's standard deviation (:func:`minimum_detectable_effect`; it equals
  statsmodels' ``TTestPower`` effect size times that SE times ``sqrt(G)``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd


class ClusterResampler:
    """One seeded set of ``B`` cluster resamples, cached as ``(B, G)`` counts and shared by all stats.

    ``clusters`` is the ordered list of the analysis' cluster ids (shape ``(G,)``, unique); column
    ``g`` of the count matrix counts how often ``clusters[g]`` was drawn. ``batch_size=None``
    draws all resamples in one batch, like ``scipy.stats.bootstrap(batch=None)``.
    """

    def __init__(self, clusters: Iterable, n_resamples: int = 10_000, seed: int = 0,
                 batch_size: int | None = None) -> None:
        self.clusters = np.asarray(list(clusters))
        if self.clusters.ndim != 1 or self.clusters.size < 1:
            raise ValueError("clusters must be a non-empty 1-d sequence")
        if len(pd.unique(self.clusters)) != self.clusters.size:
            raise ValueError("clusters must be unique")
        if int(n_resamples) != n_resamples or n_resamples < 1:
            raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
        if batch_size is not None and (int(batch_size) != batch_size or batch_size < 1):
            raise ValueError(f"batch_size must be a positive integer or None, got {batch_size!r}")
        self.n_resamples = int(n_resamples)
        self.seed = seed
        self.batch_size = None if batch_size is None else int(batch_size)
        self._order = np.argsort(self.clusters, kind="stable")
        self._sorted = self.clusters[self._order]
        self._batches: list[np.ndarray] | None = None

    @classmethod
    def from_frame(cls, df: pd.DataFrame, n_resamples: int = 10_000, seed: int = 0,
                   batch_size: int | None = None, cluster_col: str = "seed") -> ClusterResampler:
        """A resampler over the sorted unique values of ``df[cluster_col]``."""
        return cls(np.sort(pd.unique(df[cluster_col])), n_resamples, seed, batch_size)

    def __repr__(self) -> str:
        return (f"ClusterResampler(G={self.n_clusters}, n_resamples={self.n_resamples}, "
                f"seed={self.seed!r}, batch_size={self.batch_size})")

    @property
    def n_clusters(self) -> int:
        return int(self.clusters.size)

    def with_resamples(self, n_resamples: int) -> ClusterResampler:
        """Same clusters, seed and batch size, a different number of resamples."""
        return ClusterResampler(self.clusters, n_resamples, self.seed, self.batch_size)

    def draws(self) -> Iterable[np.ndarray]:
        """The raw index draws, one ``(batch, G)`` int64 array per batch (scipy's exact sequence)."""
        rng = np.random.default_rng(self.seed)
        g, b_all = self.n_clusters, self.n_resamples
        step = self.batch_size or b_all
        for k in range(0, b_all, step):
            yield rng.integers(0, g, (min(step, b_all - k), g), dtype="int64")

    @property
    def batches(self) -> list[np.ndarray]:
        """Cached count matrices, one ``(batch, G)`` float64 array per batch."""
        if self._batches is None:
            g = self.n_clusters
            out = []
            for idx in self.draws():
                b = idx.shape[0]
                flat = (idx + g * np.arange(b)[:, None]).ravel()
                out.append(np.bincount(flat, minlength=b * g).reshape(b, g).astype(float))
            self._batches = out
        return self._batches

    @property
    def counts(self) -> np.ndarray:
        """The full ``(B, G)`` count matrix (rows sum to G)."""
        return np.vstack(self.batches)

    def apply(self, sums: np.ndarray) -> np.ndarray:
        """Resampled totals ``counts @ sums``: ``(G,)`` -> ``(B,)``, ``(G, K)`` -> ``(B, K)``."""
        sums = np.asarray(sums, dtype=float)
        if sums.shape[0] != self.n_clusters:
            raise ValueError(f"sums have {sums.shape[0]} rows, resampler has {self.n_clusters} clusters")
        return np.concatenate([c @ sums for c in self.batches], axis=0)

    def positions(self, values: np.ndarray | Sequence) -> np.ndarray:
        """Column index of each cluster id in ``values``; unknown ids raise ``KeyError``."""
        values = np.asarray(values)
        pos = np.searchsorted(self._sorted, values)
        pos = np.clip(pos, 0, self.n_clusters - 1)
        bad = self._sorted[pos] != values
        if np.any(bad):
            unknown = sorted(set(np.asarray(values)[bad].tolist()))[:5]
            raise KeyError(f"cluster ids not in the resampler: {unknown}")
        return self._order[pos]


@dataclass(frozen=True)
class RatioStat:
    """A statistic ``f(a) - f(b)`` with ``f(part) = sum_t signs[t] * sum_g num[g, t] / sum_g den[g, t]``.

    ``num``/``den`` have shape ``(G, T)`` and ``signs`` shape ``(T,)``; terms ``[:n_first]`` form
    part a and the rest part b (``n_first == T``: no b part, the statistic is ``f(a)``). Each part
    is summed on its own before the subtraction, so identical parts cancel exactly.
    """

    num: np.ndarray
    den: np.ndarray
    signs: np.ndarray
    n_first: int

    @property
    def starts(self) -> list[int]:
        """Term offsets of the parts (one or two)."""
        return [0] if self.n_first >= self.signs.size else [0, self.n_first]

    def value(self) -> float:
        """The statistic on the original sample (NaN when a denominator sums to 0)."""
        d = self.den.sum(axis=0)
        if np.any(d == 0):
            return float("nan")
        parts = np.add.reduceat(self.signs * self.num.sum(axis=0) / d, self.starts)
        return float(parts[0] - parts[1]) if parts.size == 2 else float(parts[0])


def resample_stats(resampler: ClusterResampler, stats: Sequence[RatioStat],
                   chunk_cells: int = 1 << 22) -> np.ndarray:
    """Bootstrap distributions ``(B, len(stats))``; NaN marks an undefined resample.

    All statistics share the resampler's counts: one ``(b, G) @ (G, U)`` product per batch, ``U``
    the number of distinct cluster-sum columns (identical columns, such as the shared paired-episode
    counts of mean metrics or two identical arms, are resampled once, so they stay bitwise equal).
    Batches are processed in row chunks of at most ``chunk_cells / (2 sum T)`` rows to bound memory.
    """
    if not stats:
        return np.empty((resampler.n_resamples, 0))
    t_sizes = np.array([s.signs.size for s in stats])
    offsets = np.concatenate([[0], np.cumsum(t_sizes)[:-1]])
    starts = np.concatenate([o + np.asarray(s.starts) for o, s in zip(offsets, stats)])
    n_parts = np.array([len(s.starts) for s in stats])
    first = np.concatenate([[0], np.cumsum(n_parts)[:-1]])
    two = n_parts == 2
    sums = np.hstack([np.hstack([s.num for s in stats]), np.hstack([s.den for s in stats])])
    uniq, inverse = np.unique(sums, axis=1, return_inverse=True)
    inverse = inverse.reshape(-1)
    signs = np.concatenate([s.signs for s in stats])
    t_all = int(t_sizes.sum())
    rows = max(1, chunk_cells // sums.shape[1])
    out = []
    for c in resampler.batches:
        for k in range(0, c.shape[0], rows):
            tot = (c[k:k + rows] @ uniq)[:, inverse]
            num, den = tot[:, :t_all], tot[:, t_all:]
            ratio = np.divide(num, den, out=np.full_like(num, np.nan), where=den != 0)
            parts = np.add.reduceat(ratio * signs, starts, axis=1)
            value = parts[:, first]
            value[:, two] -= parts[:, first[two] + 1]
            out.append(value)
    return np.concatenate(out, axis=0)


def _quantiles(y: np.ndarray, q: np.ndarray | float) -> np.ndarray:
    """scipy's ``stats.quantile(method='linear')`` of sorted 1-d ``y`` at levels ``q``."""
    n = y.size
    q = np.asarray(q, dtype=float)
    jg = q * n + (1 - q)
    jp1 = jg // 1
    j = jp1 - 1
    g = np.where(j < 0, 0.0, jg % 1)
    j = np.clip(j, 0, n - 1).astype(np.int64)
    jp1 = np.clip(jp1, 0, n - 1).astype(np.int64)
    return (1 - g) * y[j] + g * y[jp1]


def _crossing(y: np.ndarray, k: int) -> float:
    """Level ``q`` where the interpolated quantile of sorted ``y`` reaches 0 between y[k-1], y[k]."""
    n = y.size
    if k == 0:
        return 0.0
    if k == n:
        return 1.0
    t = -y[k - 1] / (y[k] - y[k - 1])
    return float((k - 1 + t) / (n - 1))


def inversion_p(y: np.ndarray) -> float:
    """Two-sided p-value inverting the interpolated percentile interval of sorted ``y`` (see module)."""
    a_lo = _crossing(y, int(np.searchsorted(y, 0.0, side="right")))
    a_hi = _crossing(y, int(np.searchsorted(y, 0.0, side="left")))
    return float(min(1.0, 2.0 * min(a_lo, 1.0 - a_hi)))


def count_p(y: np.ndarray) -> float:
    """The counting p-value ``min(1, 2 min(#(y <= 0), #(y >= 0)) / n)``."""
    return float(min(1.0, 2.0 * min(np.count_nonzero(y <= 0), np.count_nonzero(y >= 0)) / y.size))


def p_floor(n_resamples: int) -> float:
    """The smallest p-value a ``B``-resample bootstrap reports, ``1 / (B + 1)`` (NaN for ``B < 1``)."""
    return 1.0 / (n_resamples + 1) if n_resamples >= 1 else float("nan")


@dataclass(frozen=True)
class Interval:
    """Percentile interval summary of one bootstrap distribution; ``p_value`` and ``p_count`` are
    floored at ``p_floor = 1 / (B + 1)``, ``B`` the defined resamples."""

    ci_low: float
    ci_high: float
    p_value: float
    p_count: float
    se_low: float
    se_high: float
    n_undefined: int
    p_floor: float = float("nan")


def summarize(dist: np.ndarray, alpha: float = 0.05) -> Interval:
    """Percentile interval, p-values (floored at ``1 / (B + 1)``) and endpoint Monte Carlo SEs of a
    ``(B,)`` distribution."""
    defined = np.sort(dist[~np.isnan(dist)])
    n_undef = int(dist.size - defined.size)
    if defined.size == 0:
        nan = float("nan")
        return Interval(nan, nan, nan, nan, nan, nan, n_undef)
    q_lo = (1 - (1 - alpha)) / 2
    q_hi = 1 - q_lo
    s_lo = math.sqrt(q_lo * (1 - q_lo) / defined.size)
    s_hi = math.sqrt(q_hi * (1 - q_hi) / defined.size)
    qs = np.clip([q_lo, q_hi, q_lo - s_lo, q_lo + s_lo, q_hi - s_hi, q_hi + s_hi], 0.0, 1.0)
    v = _quantiles(defined, qs)
    p = inversion_p(defined)
    # Keep p < alpha <=> the reported interval excludes 0 even when p sits within rounding of alpha.
    excludes = v[0] > 0 or v[1] < 0
    if excludes and not p < alpha:
        p = float(np.nextafter(alpha, 0.0))
    elif not excludes and p < alpha:
        p = float(alpha)
    floor = p_floor(defined.size)  # after the guard: at alpha <= 1/(B+1) the floor wins (no B-resample test decides)
    return Interval(float(v[0]), float(v[1]), max(p, floor), max(count_p(defined), floor),
                    float(v[3] - v[2]) / 2, float(v[5] - v[4]) / 2, n_undef, floor)


FEW_CLUSTERS = 30
"""Below this many clusters a contrast's percentile interval is flagged as not to be trusted (:func:`few_clusters`)."""

MAX_EXACT_CLUSTERS = 20
"""Up to this many clusters :func:`signflip_test` enumerates every sign pattern (2^19 after symmetry)."""


def few_clusters(n_clusters: int, threshold: int = FEW_CLUSTERS) -> bool:
    """True when ``n_clusters`` is below ``threshold`` (:data:`FEW_CLUSTERS`, 30): too few clusters for a
    percentile cluster-bootstrap interval to be trusted.

    Why 30: cluster-robust and cluster-bootstrap inference is known to be unreliable with few clusters.
    Cameron, Gelbach & Miller (2008, "Bootstrap-based improvements for inference with clustered errors",
    REStat 90(3)) simulate 5 to 30 clusters and find the unrefined methods (Wald with cluster-robust SEs, the
    pairs cluster bootstrap of the estimate) over-reject throughout, worst at 5-10; MacKinnon & Webb (2017,
    J. Appl. Econometrics 32(2)) and MacKinnon, Nielsen & Webb (2023, J. Econometrics 232(2)) warn that even
    ~50 unbalanced clusters can mislead. A percentile bootstrap over ``G`` clusters has at most
    ``C(2G-1, G)`` distinct resamples (126 at ``G = 5``), and even for a normal mean its interval is too
    narrow (bootstrap variance ``(G-1)/G`` of the sample's, normal rather than ``t_{G-1}`` quantiles): its
    normal-theory coverage (:func:`percentile_coverage`) is 84.6% at 5 clusters, 90.4% at 10 and 93.6% at 30.
    The threshold is a convention, not a sharp line: 30 is the largest design Cameron, Gelbach & Miller
    found wanting, and the coverage shortfall keeps shrinking slowly above it (94.4% at 64).
    """
    return bool(n_clusters < threshold)


def percentile_coverage(n_clusters: int, alpha: float = 0.05) -> float:
    """Normal-theory coverage of a nominal ``1 - alpha`` percentile bootstrap interval for the mean of
    ``n_clusters`` i.i.d. normal cluster values: ``P(|t_{G-1}| <= z_{1-alpha/2} sqrt((G-1)/G))``
    (NaN below 2 clusters). It ignores the discreteness of the resamples, which only lowers it further."""
    if n_clusters < 2:
        return float("nan")
    from scipy.stats import norm, t

    g = int(n_clusters)
    return float(2 * t.cdf(norm.ppf(1 - alpha / 2) * math.sqrt((g - 1) / g), g - 1) - 1)


@dataclass(frozen=True)
class SignFlip:
    """An exact (or Monte Carlo) two-sided paired sign-flip test over ``n_clusters`` clusters.

    ``p_min`` is the smallest p-value the test could give on any data of this design: ``2 / 2^G`` exact
    (``1/16`` at 5 clusters), ``1 / (B + 1)`` Monte Carlo; ``n_patterns`` sign patterns were evaluated
    (``2^G`` or ``B``), ``n_undefined`` of them gave an undefined ratio and were left out."""

    p_value: float
    p_min: float
    n_clusters: int
    n_patterns: int
    exact: bool
    n_undefined: int


def _swapped_values(stat: RatioStat, flips: np.ndarray, dn: np.ndarray, dd: np.ndarray) -> np.ndarray:
    """The statistic ``(k,)`` with arms a and b swapped in the clusters ``flips`` ``(k, C)`` (0/1) marks."""
    t = stat.n_first
    na, nb = stat.num.sum(axis=0)[:t], stat.num.sum(axis=0)[t:]
    da, db = stat.den.sum(axis=0)[:t], stat.den.sum(axis=0)[t:]
    sn, sd = flips @ dn, flips @ dd
    num_a, num_b, den_a, den_b = na + sn, nb - sn, da + sd, db - sd
    ok = np.all(den_a != 0, axis=1) & np.all(den_b != 0, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = (stat.signs[:t] * num_a / den_a).sum(axis=1) - (stat.signs[t:] * num_b / den_b).sum(axis=1)
    return np.where(ok, value, np.nan)


def signflip_test(stat: RatioStat, active: np.ndarray | None = None, *, max_exact: int = MAX_EXACT_CLUSTERS,
                  n_resamples: int = 10_000, seed: int = 0, chunk_rows: int = 1 << 15) -> SignFlip:
    """Two-sided paired sign-flip (randomisation) test of a contrast ``stat`` (``f(a) - f(b)``, both parts
    the same metric: ``signs[:n_first] == signs[n_first:]``).

    Under the sharp null that arms a and b are exchangeable within each cluster, swapping their per-cluster
    sums in any subset of the ``active`` clusters (``(G,)`` bool; default: clusters with any nonzero sum)
    leaves the statistic's distribution unchanged. For a mean metric on paired episodes this is flipping the
    sign of each cluster's summed paired difference (the one-sample sign-flip test of ``scipy.stats.
    permutation_test``); for a ratio metric it recomputes the ratio of sums. With ``C <= max_exact`` active
    clusters every pattern is enumerated (half of them: a pattern's complement gives exactly ``-T``):
    ``p = #{|T_s| >= |T|} / 2^C``, at least ``2 / 2^C``. Above, ``n_resamples`` patterns are drawn from
    ``default_rng(seed)`` and ``p = (k + 1) / (B + 1)``. Ties count within a relative ``1e-10``.
    """
    t = stat.n_first
    if 2 * t != stat.signs.size or not np.array_equal(stat.signs[:t], stat.signs[t:]):
        raise ValueError("a sign-flip test needs a contrast of one metric between two arms (f(a) - f(b))")
    dn_all, dd_all = stat.num[:, t:] - stat.num[:, :t], stat.den[:, t:] - stat.den[:, :t]
    if active is None:
        active = np.any(stat.num != 0, axis=1) | np.any(stat.den != 0, axis=1)
    active = np.asarray(active, dtype=bool)
    dn, dd = dn_all[active], dd_all[active]
    c = int(dn.shape[0])
    nan = float("nan")
    if c == 0:
        return SignFlip(nan, nan, 0, 0, True, 0)
    t_obs = float(_swapped_values(stat, np.zeros((1, c)), dn, dd)[0])
    tol = 1e-10 * abs(t_obs)
    hits = defined = 0
    if c <= max_exact:
        half = 1 << (c - 1)  # cluster 0 is never flipped; the complements mirror these patterns
        bits = np.arange(c - 1)
        for lo in range(0, half, chunk_rows):
            codes = np.arange(lo, min(half, lo + chunk_rows))
            flips = np.zeros((codes.size, c))
            flips[:, 1:] = (codes[:, None] >> bits) & 1
            v = _swapped_values(stat, flips, dn, dd)
            ok = ~np.isnan(v)
            defined += int(ok.sum())
            hits += int(np.count_nonzero(np.abs(v[ok]) >= abs(t_obs) - tol))
        p = hits / defined if defined and np.isfinite(t_obs) else nan
        return SignFlip(p, 1.0 / defined if defined else nan, c, 2 * half, True, 2 * (half - defined))
    rng = np.random.default_rng(seed)
    for lo in range(0, n_resamples, chunk_rows):
        flips = rng.integers(0, 2, (min(chunk_rows, n_resamples - lo), c)).astype(float)
        v = _swapped_values(stat, flips, dn, dd)
        ok = ~np.isnan(v)
        defined += int(ok.sum())
        hits += int(np.count_nonzero(np.abs(v[ok]) >= abs(t_obs) - tol))
    p = (hits + 1) / (defined + 1) if np.isfinite(t_obs) else nan
    return SignFlip(p, 1.0 / (defined + 1), c, int(n_resamples), False, int(n_resamples - defined))


def signflip_diffs(diffs: np.ndarray | Sequence[float], **kwargs: Any) -> SignFlip:
    """:func:`signflip_test` of the mean of per-cluster paired differences ``diffs`` ``(C,)``: each cluster's
    sign flipped (every cluster enters, zeros included); ``kwargs`` as :func:`signflip_test`'s."""
    d = np.asarray(diffs, dtype=float)
    if d.ndim != 1:
        raise ValueError("diffs must be 1-d (one paired difference per cluster)")
    stat = RatioStat(np.column_stack([d, np.zeros_like(d)]), np.ones((d.size, 2)), np.ones(2), 1)
    return signflip_test(stat, np.ones(d.size, dtype=bool), **kwargs)


def minimum_detectable_effect(se: float, n_clusters: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest |true gain| a two-sided level-``alpha`` paired test over ``n_clusters`` clusters
    detects with probability ``power``, for a contrast whose standard error is ``se``.

    Solves ``P(|T'| > t_{1-alpha/2, G-1}) = power`` for the noncentrality ``delta / se`` of a
    noncentral t on ``G - 1`` degrees of freedom (the exact paired-t power, as statsmodels'
    ``TTestPower``). NaN when ``se`` is not a positive finite number or ``G < 2``.
    """
    if not (se > 0 and math.isfinite(se)) or n_clusters < 2 or not 0 < alpha < 1 or not alpha < power < 1:
        return float("nan")
    return _noncentrality(int(n_clusters) - 1, float(alpha), float(power)) * se


@functools.cache
def _noncentrality(df: int, alpha: float, power: float) -> float:
    """The noncentrality at which a two-sided level-``alpha`` t test on ``df`` degrees of freedom
    has power ``power`` (a pure function of its arguments, memoised)."""
    from scipy import optimize
    from scipy.stats import nct, t

    crit = t.ppf(1 - alpha / 2, df)

    def gap(nc: float) -> float:  # the far tail underflows to NaN in scipy's nct at large nc: it is 0
        return float(np.nan_to_num(nct.sf(crit, df, nc)) + np.nan_to_num(nct.cdf(-crit, df, nc))) - power

    hi = crit + 4.0
    while gap(hi) < 0:
        hi += 4.0
    return float(optimize.brentq(gap, 0.0, hi, xtol=1e-12))


def holm(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values (same order as the input; same arithmetic as statsmodels)."""
    p = np.asarray(pvalues, dtype=float)
    if p.ndim != 1:
        raise ValueError("pvalues must be 1-d")
    if np.any(np.isnan(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError("pvalues must lie in [0, 1] (no NaN)")
    m = p.size
    order = np.argsort(p)
    adj_sorted = np.maximum.accumulate(p[order] * np.arange(m, 0, -1))
    adj_sorted[adj_sorted > 1] = 1
    out = np.empty(m)
    out[order] = adj_sorted
    return out
