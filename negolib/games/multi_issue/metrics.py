"""Per-arm metrics as ratios of per-episode columns.

Every metric is a ratio ``sum(num) / sum(den)`` over the episodes it is restricted to, so that the
statistics layer (:mod:`negolib.stats`) can reduce each seed cluster to two sums and resample
clusters with one matrix product. A mean is ``num = x, den = 1``; a rate over turns is
``num = bad_parses, den = turns``; a deal-only mean is ``num = x on deals (0 otherwise),
den = deal``. The buyer split is the one composite metric: a difference of two buyer-restricted
means of S, built by :func:`buyer_split` from the buyers' names.

Choices (ours):

* **Joint welfare** is seller U~ + buyer U~ averaged over deals only (``welfare / deal``). A
  no-deal has no contract and therefore no welfare to sum; the paper's welfare deltas (Table 2)
  are over scenarios both arms closed, which a deal-only ratio restricted with
  ``restrict_both_closed`` reproduces exactly.
* **Invalid-term rate** is per named term (``n_invalid_terms / n_named_terms``): the share of term
  entries in parsed actions that were unusable.
* **Off-schema share** is the paper's (App. A): the share of the terms *the seller* names in its
  counters that are off the domain's schema (``n_seller_off_schema_terms / n_seller_named_terms``);
  the buyer's terms and terms attached to accepts (which evaluation never applies) are not counted.
* **Accept-with-terms share** is the paper's (App. A): the share of the *seller's* closing accepts
  that carried terms (deals closed by the seller; the buyer's closing accepts are not counted).
* **Bad-parse rates** are over all turns (both parties) and over the seller's own turns.
* **Invalid-accept rate** is over the seller's own turns: the share that were an ACCEPT with no
  buyer COUNTER to accept (the fair-ACCEPT rule of :mod:`negolib.games.multi_issue.env`, ours). Such a turn is also
  one of the seller's bad parses.

Column contract: the episode table of :func:`negolib.core.transcripts.episodes_frame` (one row per
episode; ``seller_utility``/``buyer_utility``/``welfare`` NaN on no-deal).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from negolib.games.multi_issue.domains import load_domains

Column = str | Callable[[pd.DataFrame], np.ndarray] | None

# Columns every per-arm metric needs besides the key (arm, domain, seed, buyer).
BASE_COLUMNS = ("score", "held_out", "deal", "seller_utility", "buyer_utility", "welfare", "turns",
                "bad_parses", "seller_bad_parses", "seller_turns", "n_invalid_terms",
                "n_off_schema_terms", "n_named_terms", "accept_with_terms", "seller_invalid_accepts",
                "closed_by", "n_seller_off_schema_terms", "n_seller_named_terms")


@dataclass(frozen=True)
class Metric:
    """One per-arm metric ``sum(num) / sum(den)`` over the episodes passing ``restrict``.

    ``num``/``den``/``restrict`` are a column name or a function ``df -> array`` of length
    ``len(df)``; ``den=None`` means 1 per episode (a mean) and ``restrict=None`` keeps every
    episode. A restricted-out episode contributes 0 to both sums. ``minus`` makes a composite:
    the value is this ratio minus the ratio of ``minus`` (used by the buyer split).
    """

    name: str
    label: str
    num: Column
    den: Column = None
    restrict: Column = None
    minus: Metric | None = None

    @property
    def terms(self) -> tuple[tuple[float, Metric], ...]:
        """(sign, simple ratio metric) pairs whose signed sum is this metric."""
        if self.minus is None:
            return ((1.0, self),)
        head = Metric(self.name, self.label, self.num, self.den, self.restrict)
        return ((1.0, head),) + tuple((-s, m) for s, m in self.minus.terms)


def _column(df: pd.DataFrame, spec: Column, default: float, what: str, metric: str) -> np.ndarray:
    """Evaluate a column spec to a float array of length ``len(df)``."""
    if spec is None:
        return np.full(len(df), default, dtype=float)
    if isinstance(spec, str):
        if spec not in df.columns:
            raise KeyError(f"metric {metric!r}: {what} column {spec!r} is not in the episode table")
        values = df[spec].to_numpy()
    else:
        values = np.asarray(spec(df))
    out = np.asarray(pd.to_numeric(pd.Series(values), errors="coerce"), dtype=float)
    if out.shape != (len(df),):
        raise ValueError(f"metric {metric!r}: {what} has shape {out.shape}, expected ({len(df)},)")
    return out


def episode_columns(df: pd.DataFrame, metric: Metric) -> tuple[np.ndarray, np.ndarray]:
    """Per-episode (num, den), each shape (n_episodes,), for a simple (non-composite) metric.

    Restricted-out episodes get 0 in both. Raises ``ValueError`` if a kept episode has a NaN
    numerator or denominator (e.g. a deal-only column used without its deal mask).
    """
    if metric.minus is not None:
        raise ValueError(f"metric {metric.name!r} is composite; use its .terms")
    num = _column(df, metric.num, 1.0, "numerator", metric.name)
    den = _column(df, metric.den, 1.0, "denominator", metric.name)
    keep = _column(df, metric.restrict, 1.0, "restriction", metric.name) != 0
    num, den = np.where(keep, num, 0.0), np.where(keep, den, 0.0)
    bad = np.isnan(num) | np.isnan(den)
    if bad.any():
        raise ValueError(f"metric {metric.name!r}: {int(bad.sum())} episode(s) have a NaN numerator "
                         "or denominator")
    return num, den


def metric_value(df: pd.DataFrame, metric: Metric) -> float:
    """Point estimate of a metric on ``df`` (NaN when a denominator sums to 0)."""
    total = 0.0
    for sign, term in metric.terms:
        num, den = episode_columns(df, term)
        d = den.sum()
        if d == 0:
            return float("nan")
        total += sign * num.sum() / d
    return float(total)


def deal_only(col: str) -> Callable[[pd.DataFrame], np.ndarray]:
    """Numerator function: ``col`` on deals, 0 on no-deals (its NaN there is dropped)."""

    def fn(df: pd.DataFrame) -> np.ndarray:
        deal = df["deal"].to_numpy().astype(bool)
        return np.where(deal, pd.to_numeric(df[col], errors="coerce").fillna(0.0).to_numpy(), 0.0)

    fn.__name__ = f"deal_only_{col}"
    return fn


def buyer_is(buyer: str) -> Callable[[pd.DataFrame], np.ndarray]:
    """Restriction function: episodes played against ``buyer``."""

    def fn(df: pd.DataFrame) -> np.ndarray:
        return (df["buyer"] == buyer).to_numpy()

    fn.__name__ = f"buyer_is_{buyer}"
    return fn


def buyer_split(buyer_a: str, buyer_b: str) -> Metric:
    """S against ``buyer_a`` minus S against ``buyer_b`` (a difference of two restricted means)."""
    minus = Metric("score_vs_b", f"S vs {buyer_b}", "score", None, buyer_is(buyer_b))
    return Metric("buyer_split", f"buyer split (S vs {buyer_a} - S vs {buyer_b})", "score", None,
                  buyer_is(buyer_a), minus)


def _held_out(df: pd.DataFrame) -> np.ndarray:
    return df["held_out"].to_numpy().astype(bool)


def _deal(df: pd.DataFrame) -> np.ndarray:
    return df["deal"].to_numpy().astype(float)


def _as_float(col: str) -> Callable[[pd.DataFrame], np.ndarray]:
    def fn(df: pd.DataFrame) -> np.ndarray:
        return df[col].to_numpy().astype(float)

    fn.__name__ = f"float_{col}"
    return fn


def _seller_close(df: pd.DataFrame) -> np.ndarray:
    """1 for a deal the seller closed (its ACCEPT ended the episode), else 0."""
    return (df["deal"].to_numpy().astype(bool) & (df["closed_by"].to_numpy() == "seller")).astype(float)


def _seller_accept_with_terms(df: pd.DataFrame) -> np.ndarray:
    return _seller_close(df) * df["accept_with_terms"].to_numpy().astype(float)


def _build_metrics() -> dict[str, Metric]:
    ms = [
        Metric("score", "S", "score"),
        Metric("score_held_out", "S (held-out domain)", "score", None, _held_out),
        Metric("deal_rate", "deal rate", _deal),
        Metric("deal_utility", "deal-only seller U~", deal_only("seller_utility"), _deal),
        Metric("buyer_utility", "deal-only buyer U~", deal_only("buyer_utility"), _deal),
        Metric("welfare", "joint welfare (deals)", deal_only("welfare"), _deal),
        Metric("seller_distributive", "deal-only seller U~, distributive terms",
               deal_only("seller_distributive"), _deal),
        Metric("seller_integrative", "deal-only seller U~, integrative terms",
               deal_only("seller_integrative"), _deal),
        Metric("mean_turns", "mean turns (of 24)", "turns"),
        Metric("bad_parse_rate", "bad-parse rate (all turns)", "bad_parses", "turns"),
        Metric("seller_bad_parse_rate", "bad-parse rate (seller turns)", "seller_bad_parses",
               "seller_turns"),
        Metric("invalid_accept_rate", "invalid-accept rate (seller turns)", "seller_invalid_accepts",
               "seller_turns"),
        Metric("invalid_term_rate", "invalid-term rate (per named term)", "n_invalid_terms",
               "n_named_terms"),
        Metric("off_schema_rate", "off-schema share (of the terms the seller names)",
               "n_seller_off_schema_terms", "n_seller_named_terms"),
        Metric("accept_with_terms", "accept-with-terms share (of the seller's closing accepts)",
               _seller_accept_with_terms, _seller_close),
    ]
    return {m.name: m for m in ms}


METRICS: dict[str, Metric] = _build_metrics()

# The per-arm table (the buyer split is appended when two buyers are known).
ARM_TABLE_METRICS = ("score", "score_held_out", "deal_rate", "deal_utility", "welfare", "mean_turns",
                     "bad_parse_rate", "seller_bad_parse_rate", "invalid_accept_rate", "invalid_term_rate",
                     "off_schema_rate", "accept_with_terms")


def get_metric(metric: str | Metric) -> Metric:
    """A metric by name (from :data:`METRICS`) or the metric itself."""
    if isinstance(metric, Metric):
        return metric
    if metric not in METRICS:
        raise KeyError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")
    return METRICS[metric]


def infer_buyers(df: pd.DataFrame) -> tuple[str, str] | None:
    """The two buyers of the table in sorted order, or None when there are not exactly two."""
    buyers = sorted(str(b) for b in pd.unique(df["buyer"]))
    return (buyers[0], buyers[1]) if len(buyers) == 2 else None


def arm_table(df: pd.DataFrame, metrics: Iterable[str | Metric] | None = None,
              buyers: Sequence[str] | None = None) -> pd.DataFrame:
    """Point estimates per arm (rows, sorted) for each metric (columns); no intervals.

    ``buyers=(A, B)`` adds ``buyer_split`` (S vs A minus S vs B); by default it is added when the
    table has exactly two buyers (sorted by name). Undefined ratios are NaN.
    """
    ms = [get_metric(m) for m in (metrics if metrics is not None else ARM_TABLE_METRICS)]
    pair = tuple(buyers) if buyers is not None else infer_buyers(df)
    if pair is not None and metrics is None:
        ms.append(buyer_split(str(pair[0]), str(pair[1])))
    rows = {}
    for arm, sub in df.groupby("arm", sort=True):
        rows[arm] = {m.name: metric_value(sub, m) for m in ms}
        rows[arm]["n_episodes"] = len(sub)
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "arm"
    return out


def add_utility_split(df: pd.DataFrame, domains: dict | None = None) -> pd.DataFrame:
    """Copy of ``df`` with ``seller_distributive``/``seller_integrative`` (and buyer) columns.

    Sums the per-term contributions (``seller_terms``/``buyer_terms``, domain order) over the
    domain's continuous (distributive) and categorical/binary (integrative) issues; the two parts
    sum to U~ up to U~'s clipping to [0, 1] (which never binds: contributions are >= 0 and sum
    to <= 1). ``domains`` maps name -> Domain (default: :func:`negolib.games.multi_issue.domains.load_domains`).
    """
    if domains is None:
        domains = load_domains()
    masks = {name: np.array([i.distributive for i in d.issues]) for name, d in domains.items()}
    out = df.copy()
    for party in ("seller", "buyer"):
        dist, integ = [], []
        for dom, terms in zip(df["domain"], df[f"{party}_terms"]):
            c = np.asarray(terms, dtype=float)
            mask = masks[dom]
            if c.shape != mask.shape:
                raise ValueError(f"domain {dom!r}: {party}_terms has {c.size} entries, schema has {mask.size}")
            dist.append(float(c[mask].sum()))
            integ.append(float(c[~mask].sum()))
        out[f"{party}_distributive"] = dist
        out[f"{party}_integrative"] = integ
    return out


def synthetic_episodes(arms: Sequence[str], effects: Sequence[float] | None = None, n_seeds: int = 64,
                       domains: Sequence[str] | None = None, buyers: Sequence[str] = ("buyer_a", "buyer_b"),
                       cluster_sd: float = 0.1, scenario_sd: float = 0.1, noise_sd: float = 0.15,
                       seed: int = 0, held_out: str | None = None) -> pd.DataFrame:
    """A synthetic episode table with the columns of :func:`negolib.core.transcripts.episodes_frame`.

    Every arm plays every (domain, seed, buyer) scenario. Latent seller quality is
    ``0.5 + effects[arm] + u_seed + v_scenario + e`` with ``u_seed ~ N(0, cluster_sd)`` shared by a
    seed's episodes in every arm and domain (the intra-cluster correlation), ``v`` shared by the
    arms on a scenario (the pairing), ``e`` per episode. A deal happens with probability
    ``sigmoid(4 latent)``; the seller's U~ is the clipped latent, split at random into distributive and
    integrative parts (0 on no-deals). For tests, benchmarks and demos.
    """
    rng = np.random.default_rng(seed)
    domains = list(domains) if domains is not None else [f"domain_{i}" for i in range(8)] + ["car"]
    held = held_out if held_out is not None else domains[-1]
    eff = list(effects) if effects is not None else [0.0] * len(arms)
    n_dom, n_buy = len(domains), len(buyers)
    u = rng.normal(0, cluster_sd, n_seeds)[:, None, None]
    v = rng.normal(0, scenario_sd, (n_seeds, n_dom, n_buy))
    sd, dd, bd = np.meshgrid(np.arange(n_seeds), np.arange(n_dom), np.arange(n_buy), indexing="ij")
    frames = []
    for arm, delta in zip(arms, eff):
        lat = (0.5 + delta + u + v + rng.normal(0, noise_sd, v.shape)).ravel()
        deal = rng.random(lat.size) < 1 / (1 + np.exp(-4 * lat))
        su = np.clip(lat, 0, 1)
        bu = np.clip(1 - lat + rng.normal(0, 0.1, lat.size), 0, 1)
        seller_turns = rng.integers(1, 13, lat.size)
        turns = np.where(deal, 2 * seller_turns - rng.integers(0, 2, lat.size), 24)
        seller_turns = np.where(deal, seller_turns, 12)
        named = rng.integers(0, 30, lat.size)
        frames.append(pd.DataFrame({
            "arm": arm, "seller": arm, "buyer": np.asarray(buyers)[bd.ravel()],
            "domain": np.asarray(domains)[dd.ravel()], "seed": 5_000_000 + sd.ravel(),
            "held_out": np.asarray(domains)[dd.ravel()] == held,
            "status": np.where(deal, "deal", "no_deal"), "deal": deal,
            "seller_utility": np.where(deal, su, np.nan), "buyer_utility": np.where(deal, bu, np.nan),
            "turns": turns, "rounds": (turns + 1) // 2, "seller_turns": seller_turns,
            "seller_bad_parses": rng.binomial(seller_turns, 0.02),
            "seller_invalid_accepts": np.zeros(lat.size, dtype=int),
            "accept_with_terms": deal & (rng.random(lat.size) < 0.1),
            "score": np.where(deal, su, -0.3),
            "n_invalid_terms": rng.binomial(named, 0.03), "n_off_schema_terms": rng.binomial(named, 0.02),
            "n_named_terms": named,
        }))
    df = pd.concat(frames, ignore_index=True)
    # derived without further draws (the random streams above stay as they were): the party to move last
    # closed (the seller opens, so an odd turn count is the seller's accept); the seller names half the terms
    df["closed_by"] = np.where(df["deal"], np.where(df["turns"] % 2 == 1, "seller", "buyer"), None)
    df["n_seller_named_terms"] = df["n_named_terms"] // 2
    df["n_seller_off_schema_terms"] = df["n_off_schema_terms"] // 2
    df["bad_parses"] = df["seller_bad_parses"] + rng.binomial(df["turns"] - df["seller_turns"], 0.01)
    df["reward"] = df["score"] - 0.05 * df["seller_bad_parses"] / df["seller_turns"]
    df["welfare"] = df["seller_utility"] + df["buyer_utility"]
    frac = rng.uniform(0.3, 0.7, len(df))
    su_all = df["seller_utility"].fillna(0.0).to_numpy()
    df["seller_distributive"] = frac * su_all
    df["seller_integrative"] = su_all - df["seller_distributive"]
    return df
