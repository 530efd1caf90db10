"""Paired contrasts of arms over the paper's episode tables [paper §4 "Paired evaluation"].

Contract: :func:`paired_contrast` / :func:`contrast_table` pair two arms' episodes on (domain, seed, buyer), reduce
each seed cluster to the sums of a metric's ratio terms (:mod:`negolib.games.multi_issue.metrics`: a metric is a
signed sum of ratios ``sum(num) / sum(den)``) and resample clusters with one shared
:class:`~negolib.stats.ClusterResampler`; :func:`arm_estimate` is one arm's metric with its interval.
:func:`refine_near_zero` (ours, beyond the paper: off unless :func:`contrast_table` is asked, ``refine=True``)
re-runs, at 10^5 resamples with the same seed, every contrast whose endpoint lies within 3 Monte Carlo SEs of 0;
the paper re-ran only the two contrasts App. K names (:mod:`negolib.study.analysis.quoted` re-runs those). Every
contrast also carries the exact two-sided sign-flip test over its seed clusters (``p_signflip``, with the smallest
p it could give, ``p_signflip_min``) and a ``few_clusters`` flag (fewer than 30: its percentile interval is not to
be trusted); bootstrap p-values are floored at ``1 / (B + 1)`` and Holm runs on the floored values. The bootstrap itself
(intervals, p-values, the sign-flip test, Holm, the minimum detectable effect) is :mod:`negolib.stats`, which
imports no game.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from negolib.core.formatting import fmt_ci
from negolib.games.multi_issue.metrics import Metric, episode_columns, get_metric
from negolib.stats import (
    ClusterResampler,
    Interval,
    RatioStat,
    few_clusters,
    holm,
    minimum_detectable_effect,
    resample_stats,
    signflip_test,
    summarize,
)

KEY = ("domain", "seed", "buyer")


@dataclass(frozen=True)
class ContrastSpec:
    """What to contrast: ``metric(arm_a) - metric(arm_b)`` on paired episodes."""

    arm_a: str
    arm_b: str
    metric: Metric
    restrict_both_closed: bool = False
    buyer: str | tuple[str, ...] | None = None
    domains: tuple[str, ...] | None = None
    cluster_col: str = "seed"


@dataclass(frozen=True)
class Pairing:
    """Rows of arm a and arm b aligned on the (domain, seed, buyer) key, sorted by (seed, domain, buyer)."""

    a: pd.DataFrame
    b: pd.DataFrame
    n_dropped: int


class EpisodeIndex:
    """Integer views of an episode table, built once and shared by every contrast of an analysis.

    Scenario keys become int64 codes ordered by (seed, domain, buyer); metric columns are evaluated
    once on the whole table and cached, which requires a metric's ``num``/``den``/``restrict`` to
    act row by row (every metric of :mod:`negolib.games.multi_issue.metrics` does).
    """

    def __init__(self, df: pd.DataFrame) -> None:
        self.df = df
        codes = [pd.factorize(df[c], sort=True) for c in ("seed", "domain", "buyer")]
        (cs, us), (cd, ud), (cb, ub) = codes
        self.key = (cs.astype(np.int64) * len(ud) + cd) * len(ub) + cb
        arm_codes, arms = pd.factorize(df["arm"])
        self._arm_rows = {a: np.flatnonzero(arm_codes == i) for i, a in enumerate(arms)}
        self.deal = df["deal"].to_numpy().astype(bool) if "deal" in df.columns else None
        self._masks: dict[tuple, np.ndarray | None] = {}
        self._columns: dict[Metric, tuple[np.ndarray, np.ndarray]] = {}
        self._positions: dict[tuple, np.ndarray] = {}

    def rows(self, arm: str, buyer: str | Sequence[str] | None = None,
             domains: Sequence[str] | None = None) -> np.ndarray:
        """Row positions of ``arm`` passing the buyer/domain filters; KeyError for an unknown arm."""
        if arm not in self._arm_rows:
            raise KeyError(f"arm {arm!r} has no episodes; arms: {sorted(self._arm_rows)}")
        rows = self._arm_rows[arm]
        mask = self._mask(buyer, domains)
        return rows if mask is None else rows[mask[rows]]

    def _mask(self, buyer: str | Sequence[str] | None, domains: Sequence[str] | None) -> np.ndarray | None:
        b = buyer if buyer is None or isinstance(buyer, str) else tuple(buyer)
        d = None if domains is None else tuple(domains)
        if (b, d) not in self._masks:
            if b is None and d is None:
                self._masks[(b, d)] = None
            else:
                keep = np.ones(len(self.df), dtype=bool)
                if b is not None:
                    keep &= self.df["buyer"].isin([b] if isinstance(b, str) else list(b)).to_numpy()
                if d is not None:
                    keep &= self.df["domain"].isin(list(d)).to_numpy()
                self._masks[(b, d)] = keep
        return self._masks[(b, d)]

    def columns(self, term: Metric) -> tuple[np.ndarray, np.ndarray]:
        """(num, den) of a simple metric on every row, shape (n_rows,) each (cached)."""
        if term not in self._columns:
            self._columns[term] = episode_columns(self.df, term)
        return self._columns[term]

    def positions(self, resampler: ClusterResampler, cluster_col: str) -> np.ndarray:
        """Resampler column of every row's cluster (cached per cluster list and column)."""
        k = (cluster_col, tuple(resampler.clusters.tolist()))
        if k not in self._positions:
            self._positions[k] = resampler.positions(self.df[cluster_col].to_numpy())
        return self._positions[k]

    def pair(self, arm_a: str, arm_b: str, buyer: str | Sequence[str] | None = None,
             domains: Sequence[str] | None = None,
             restrict_both_closed: bool = False) -> tuple[np.ndarray, np.ndarray, int]:
        """Aligned row positions (ia, ib) of the paired episodes, sorted by key, and the dropped count."""
        ra, rb = self.rows(arm_a, buyer, domains), self.rows(arm_b, buyer, domains)
        ka, kb = self.key[ra], self.key[rb]
        for arm, k in ((arm_a, ka), (arm_b, kb)):
            uniq, cnt = np.unique(k, return_counts=True)
            if np.any(cnt > 1):
                first = np.flatnonzero(self.key == uniq[cnt > 1][0])[0]
                key = tuple(self.df.iloc[first][list(KEY)])
                raise ValueError(f"arm {arm!r} has {int((cnt - 1).sum())} duplicate episode key(s), "
                                 f"e.g. {key}")
        _, xa, xb = np.intersect1d(ka, kb, assume_unique=True, return_indices=True)
        ia, ib = ra[xa], rb[xb]
        n_dropped = ra.size + rb.size - 2 * ia.size
        if restrict_both_closed:
            if self.deal is None:
                raise KeyError("restrict_both_closed needs a 'deal' column")
            keep = self.deal[ia] & self.deal[ib]
            ia, ib = ia[keep], ib[keep]
        return ia, ib, int(n_dropped)


def pair_episodes(df: pd.DataFrame, arm_a: str, arm_b: str, *, buyer: str | Sequence[str] | None = None,
                  domains: Sequence[str] | None = None, restrict_both_closed: bool = False) -> Pairing:
    """Episodes present in both arms by (domain, seed, buyer); counts the unpaired ones dropped.

    With ``restrict_both_closed`` only scenarios both arms closed with a deal are kept (not
    counted as dropped). Raises ``KeyError`` for an arm with no episodes, ``ValueError`` for a
    duplicate key within an arm.
    """
    ia, ib, dropped = EpisodeIndex(df).pair(arm_a, arm_b, buyer, domains, restrict_both_closed)
    return Pairing(df.iloc[ia].reset_index(drop=True), df.iloc[ib].reset_index(drop=True), dropped)


def _bincount_terms(index: EpisodeIndex, rows: np.ndarray, metric: Metric, pos: np.ndarray,
                    g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    nums, dens, signs = [], [], []
    p = pos[rows]
    for sign, term in metric.terms:
        num, den = index.columns(term)
        nums.append(np.bincount(p, weights=num[rows], minlength=g))
        dens.append(np.bincount(p, weights=den[rows], minlength=g))
        signs.append(sign)
    return np.column_stack(nums), np.column_stack(dens), np.asarray(signs, dtype=float)


def cluster_sums(rows: pd.DataFrame, metric: Metric, resampler: ClusterResampler,
                 cluster_col: str = "seed") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-cluster sums ``num, den`` (each ``(G, T)``) and ``signs`` (``(T,)``) of a metric's terms."""
    index = EpisodeIndex(rows) if len(rows) else None
    g = resampler.n_clusters
    if index is None:
        t = len(metric.terms)
        return np.zeros((g, t)), np.zeros((g, t)), np.array([s for s, _ in metric.terms], dtype=float)
    pos = index.positions(resampler, cluster_col)
    return _bincount_terms(index, np.arange(len(rows)), metric, pos, g)


@dataclass(frozen=True)
class Contrast:
    """One paired contrast ``metric(arm_a) - metric(arm_b)`` with its percentile interval.

    ``p_value``/``p_count`` are the bootstrap's, floored at ``1 / (B + 1)``; ``p_signflip`` is the exact
    two-sided sign-flip test over the clusters (:func:`negolib.stats.signflip_test`) and ``p_signflip_min``
    the smallest p it could give at this many clusters (``2 / 2^G``; Monte Carlo above 20 clusters:
    ``signflip_exact`` False). ``few_clusters``: fewer than :data:`negolib.stats.FEW_CLUSTERS` clusters,
    too few for the percentile interval to be trusted (:func:`negolib.stats.few_clusters`).
    ``distribution`` is the ``(B,)`` bootstrap distribution (NaN where undefined).
    """

    arm_a: str
    arm_b: str
    metric: str
    estimate: float
    ci_low: float
    ci_high: float
    p_value: float
    p_count: float
    se_low: float
    se_high: float
    alpha: float
    n_clusters: int
    n_episodes: int
    n_dropped: int
    n_resamples: int
    n_undefined: int
    refined: bool = False
    p_signflip: float = float("nan")
    p_signflip_min: float = float("nan")
    signflip_exact: bool = True
    few_clusters: bool = True
    spec: ContrastSpec | None = field(default=None, repr=False, compare=False)
    distribution: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def excludes_zero(self) -> bool:
        return bool(self.ci_low > 0 or self.ci_high < 0)

    def near_zero(self, k: float = 3.0) -> bool:
        """True when an endpoint lies within ``k`` Monte Carlo SEs of 0 (a zero SE, as for a
        degenerate distribution, never counts: more resamples cannot move such an endpoint)."""
        lo = self.se_low > 0 and abs(self.ci_low) <= k * self.se_low
        hi = self.se_high > 0 and abs(self.ci_high) <= k * self.se_high
        return bool(lo or hi)


def run_contrasts(df: pd.DataFrame, specs: Sequence[ContrastSpec], resampler: ClusterResampler,
                  alpha: float = 0.05, index: EpisodeIndex | None = None) -> list[Contrast]:
    """Evaluate many contrasts on one shared set of resamples (one matrix product per batch).

    The table is indexed once (``index``, built from ``df`` when None); each distinct pairing is
    computed once and reused across metrics.
    """
    index = index or EpisodeIndex(df)
    g = resampler.n_clusters
    pairings: dict[tuple, tuple[np.ndarray, np.ndarray, int]] = {}
    stats, pairs = [], []
    for spec in specs:
        key = (spec.arm_a, spec.arm_b, spec.buyer, spec.domains, spec.restrict_both_closed)
        if key not in pairings:
            pairings[key] = index.pair(spec.arm_a, spec.arm_b, spec.buyer, spec.domains,
                                       spec.restrict_both_closed)
        ia, ib, _ = pairings[key]
        pos = index.positions(resampler, spec.cluster_col)
        na, da, sa = _bincount_terms(index, ia, spec.metric, pos, g)
        nb, db, sb = _bincount_terms(index, ib, spec.metric, pos, g)
        stats.append(RatioStat(np.hstack([na, nb]), np.hstack([da, db]), np.concatenate([sa, sb]), sa.size))
        pairs.append((pairings[key], np.bincount(pos[ia], minlength=g) > 0))
    dists = resample_stats(resampler, stats)
    out = []
    for j, (spec, ((ia, _, dropped), active), stat) in enumerate(zip(specs, pairs, stats)):
        s = summarize(dists[:, j], alpha)
        sf = signflip_test(stat, active, n_resamples=resampler.n_resamples, seed=resampler.seed)
        n_cl = int(active.sum())
        out.append(Contrast(spec.arm_a, spec.arm_b, spec.metric.name, stat.value(), s.ci_low, s.ci_high,
                            s.p_value, s.p_count, s.se_low, s.se_high, alpha, n_cl, int(ia.size),
                            dropped, resampler.n_resamples, s.n_undefined, False, sf.p_value, sf.p_min, sf.exact,
                            few_clusters(n_cl), spec, dists[:, j].copy()))
    return out


def paired_contrast(df: pd.DataFrame, arm_a: str, arm_b: str, metric: str | Metric,
                    resampler: ClusterResampler, restrict_both_closed: bool = False,
                    buyer: str | Sequence[str] | None = None, domains: Sequence[str] | None = None,
                    alpha: float = 0.05, cluster_col: str = "seed") -> Contrast:
    """Paired within-scenario contrast ``metric(arm_a) - metric(arm_b)`` with a cluster bootstrap CI.

    Only episodes present in both arms by (domain, seed, buyer) enter (``n_dropped`` counts the
    rest); ``restrict_both_closed`` keeps only scenarios both arms closed (decomposition).
    """
    spec = _spec(arm_a, arm_b, metric, restrict_both_closed, buyer, domains, cluster_col)
    return run_contrasts(df, [spec], resampler, alpha)[0]


def _spec(arm_a: str, arm_b: str, metric: str | Metric, restrict_both_closed: bool,
          buyer: str | Sequence[str] | None, domains: Sequence[str] | None,
          cluster_col: str = "seed") -> ContrastSpec:
    b = buyer if buyer is None or isinstance(buyer, str) else tuple(buyer)
    d = None if domains is None else tuple(domains)
    return ContrastSpec(arm_a, arm_b, get_metric(metric), restrict_both_closed, b, d, cluster_col)


def refine_near_zero(df: pd.DataFrame, contrasts: Sequence[Contrast], resampler: ClusterResampler,
                     n_resamples: int = 100_000, k: float = 3.0,
                     index: EpisodeIndex | None = None) -> list[Contrast]:
    """Re-run, at ``n_resamples`` with the same seed, every contrast whose endpoint is within ``k``
    Monte Carlo SEs of 0; returns the list with those replaced (``refined=True``)."""
    idx = [i for i, c in enumerate(contrasts) if c.spec is not None and c.near_zero(k)]
    if not idx:
        return list(contrasts)
    fine = resampler.with_resamples(n_resamples)
    specs = [contrasts[i].spec for i in idx]
    redone = run_contrasts(df, specs, fine, contrasts[idx[0]].alpha, index)  # type: ignore[arg-type]
    out = list(contrasts)
    for i, c in zip(idx, redone):
        out[i] = replace(c, refined=True)
    return out


@dataclass(frozen=True)
class ArmEstimate:
    """One arm's metric with its seed-cluster percentile interval."""

    arm: str
    metric: str
    estimate: float
    ci_low: float
    ci_high: float
    se_low: float
    se_high: float
    n_clusters: int
    n_episodes: int
    n_resamples: int
    n_undefined: int


def arm_estimate(df: pd.DataFrame, arm: str, metric: str | Metric, resampler: ClusterResampler,
                 alpha: float = 0.05, buyer: str | Sequence[str] | None = None,
                 domains: Sequence[str] | None = None, cluster_col: str = "seed") -> ArmEstimate:
    """Point estimate and percentile interval of a single arm's metric (arm-level, unpaired)."""
    m = get_metric(metric)
    index = EpisodeIndex(df)
    rows = index.rows(arm, buyer, domains)
    if rows.size == 0:
        raise KeyError(f"arm {arm!r} has no episodes after filtering")
    pos = index.positions(resampler, cluster_col)
    num, den, signs = _bincount_terms(index, rows, m, pos, resampler.n_clusters)
    stat = RatioStat(num, den, signs, signs.size)
    s = summarize(resample_stats(resampler, [stat])[:, 0], alpha)
    return ArmEstimate(arm, m.name, stat.value(), s.ci_low, s.ci_high, s.se_low, s.se_high,
                       int(np.unique(pos[rows]).size), int(rows.size), resampler.n_resamples, s.n_undefined)


@dataclass(frozen=True)
class ContrastDifference:
    """A difference of two paired contrasts on shared resamples, e.g. (12B gain) - (4.5B gain)."""

    first: str
    second: str
    estimate: float
    interval: Interval


def contrast_se(c: Contrast) -> float:
    """The standard deviation of a contrast's defined bootstrap draws (NaN without a distribution)."""
    if c.distribution is None:
        return float("nan")
    d = c.distribution[np.isfinite(c.distribution)]
    return float(d.std(ddof=1)) if d.size > 1 else float("nan")


def contrast_difference(first: Contrast, second: Contrast, alpha: float = 0.05) -> ContrastDifference:
    """``first - second`` with a percentile interval from the two resampled distributions.

    Both contrasts must come from the same :class:`ClusterResampler` (same seed and B), so that
    resample b of one is resample b of the other; the paper's gain differences across sizes
    ("+0.015 [+0.001, +0.029] within the conventional pair") are contrasts of this kind.
    """
    if first.distribution is None or second.distribution is None:
        raise ValueError("both contrasts need their bootstrap distribution (run them with run_contrasts)")
    if first.distribution.shape != second.distribution.shape:
        raise ValueError("contrasts were resampled differently: share one ClusterResampler")
    dist = first.distribution - second.distribution
    return ContrastDifference(f"{first.arm_a} - {first.arm_b}", f"{second.arm_a} - {second.arm_b}",
                              first.estimate - second.estimate, summarize(dist, alpha))


def _primary_keys(primary: Iterable[Sequence[str]] | None) -> set[tuple[str, str, str]]:
    keys = set()
    for item in primary or ():
        item = tuple(item)
        if len(item) == 2:
            keys.add((str(item[0]), str(item[1]), "score"))
        elif len(item) == 3:
            keys.add((str(item[0]), str(item[1]), str(item[2])))
        else:
            raise ValueError(f"primary entries are (arm_a, arm_b) or (arm_a, arm_b, metric), got {item!r}")
    return keys


def contrast_table(df: pd.DataFrame, pairs: Sequence[tuple[str, str]],
                   metrics: Sequence[str | Metric] = ("score",), resampler: ClusterResampler | None = None,
                   primary: Iterable[Sequence[str]] | None = None, alpha: float = 0.05, *,
                   refine: bool = False, refine_resamples: int = 100_000, refine_k: float = 3.0,
                   restrict_both_closed: bool = False, buyer: str | Sequence[str] | None = None,
                   domains: Sequence[str] | None = None, seed: int = 0) -> pd.DataFrame:
    """Tidy table of every (pair, metric) contrast on one shared set of resamples.

    ``primary`` lists the prespecified family ((arm_a, arm_b) for S, or (arm_a, arm_b, metric));
    it is Holm-corrected (``p_holm``, NaN elsewhere) and marked ``*`` when significant after
    correction; every other row is exploratory and marked ``e`` when its interval excludes 0.
    With ``refine`` (ours, beyond the paper) contrasts whose endpoint lies within ``refine_k`` Monte Carlo SEs of 0
    are re-run at ``refine_resamples`` before Holm (``refined`` column). ``resampler=None`` builds a
    10^4-resample one over the table's seeds with ``seed``. ``p_value`` is floored at ``1 / (B + 1)`` (so is
    Holm's input); ``p_signflip``, ``p_signflip_min``, ``signflip_exact`` and ``few_clusters`` are
    :class:`Contrast`'s; the ``ci`` column prints its bounds at the precision that decides their sign.
    """
    res = resampler or ClusterResampler.from_frame(df, seed=seed)
    specs = [_spec(a, b, m, restrict_both_closed, buyer, domains) for a, b in pairs for m in metrics]
    index = EpisodeIndex(df)
    results = run_contrasts(df, specs, res, alpha, index)
    if refine:
        results = refine_near_zero(df, results, res, refine_resamples, refine_k, index)
    out = pd.DataFrame([_row(c) for c in results])
    if out.empty:
        return out
    keys = _primary_keys(primary)
    row_keys = list(zip(out["arm_a"], out["arm_b"], out["metric"]))
    missing = keys - set(row_keys)
    if missing:
        raise ValueError(f"primary contrasts not in the table: {sorted(missing)}")
    out["primary"] = [k in keys for k in row_keys]
    out["p_holm"] = np.nan
    if out["primary"].any():
        out.loc[out["primary"], "p_holm"] = holm(out.loc[out["primary"], "p_value"].to_numpy())
    test_p = np.where(out["primary"], out["p_holm"], out["p_value"])
    out["significant"] = test_p < alpha
    out["mark"] = np.where(out["significant"], np.where(out["primary"], "*", "e"), "")
    out["ci"] = [fmt_ci(e, lo, hi, signed=True, missing=None)
                 for e, lo, hi in zip(out["estimate"], out["ci_low"], out["ci_high"])]
    cols = ["arm_a", "arm_b", "metric", "estimate", "ci_low", "ci_high", "p_value", "p_holm", "primary",
            "significant", "mark", "ci"]
    return out[cols + [c for c in out.columns if c not in cols]]


def _row(c: Contrast) -> dict:
    return {"arm_a": c.arm_a, "arm_b": c.arm_b, "metric": c.metric, "estimate": c.estimate,
            "ci_low": c.ci_low, "ci_high": c.ci_high, "p_value": c.p_value, "p_count": c.p_count,
            "se_low": c.se_low, "se_high": c.se_high, "n_clusters": c.n_clusters,
            "n_episodes": c.n_episodes, "n_dropped": c.n_dropped, "n_resamples": c.n_resamples,
            "n_undefined": c.n_undefined, "refined": c.refined, "se": (se := contrast_se(c)),
            "mde": minimum_detectable_effect(se, c.n_clusters, c.alpha), "p_signflip": c.p_signflip,
            "p_signflip_min": c.p_signflip_min, "signflip_exact": c.signflip_exact, "few_clusters": c.few_clusters}


# -- looking rows up in the tidy frames ----------------------------------------------------------

def contrast_lookup(contrasts: pd.DataFrame) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(arm_a, arm_b, metric) -> row dict."""
    if contrasts is None or contrasts.empty:
        return {}
    return {(r["arm_a"], r["arm_b"], r["metric"]): r for r in contrasts.to_dict("records")}


def estimate_lookup(est: pd.DataFrame) -> dict[tuple[str, str], dict[str, Any]]:
    """(arm, metric) -> row dict."""
    if est is None or est.empty:
        return {}
    return {(r["arm"], r["metric"]): r for r in est.to_dict("records")}
