"""Efficiency of deals (beyond the paper): exact Pareto frontier, Nash and Kalai-Smorodinsky points.

Utility is additive across issues, so the feasible (seller U~, buyer U~) pairs form the
Minkowski sum of per-issue contribution sets. With (w_s, w_b) the two parties' weights on an issue:

* an integrative (categorical or binary) issue contributes one point per level,
  ``(w_s [level = seller's preferred], w_b [level = buyer's preferred])``, and the point of an
  unnamed term ``(w_s / 2, w_b / 2)``;
* a continuous issue contributes the segment ``{(w_s t, w_b (1 - t)) : t in [0, 1]}`` (t = 1 is
  the seller's preferred end; an unnamed term is t = 1/2 and a clipped value is an end point, both
  on the segment).

The discrete part is merged issue by issue with dominance pruning (a dominated anchor d can never
help: d + C is dominated by d' + C). The continuous part C is a zonotope whose upper-right boundary
``g`` is the concave curve obtained by filling segments in increasing order of w_b / w_s (fractional
knapsack). The frontier is the Pareto-maximal part of the upper envelope of the translates
``d + g`` over the discrete Pareto anchors d. Because g is concave, a translate further right beats
one further left on a suffix of their overlap, so the envelope is built with a stack in one pass
(the "convex-hull trick").

Unnamed terms (a decision): the environment closes deals on ledgers that leave terms unnamed, so the
feasible set *includes* them by default (``include_unnamed=False`` restricts it to contracts naming
every term). For continuous terms this changes nothing (the midpoint is on the segment). For an
integrative term on which the parties want different levels, the unnamed point is the midpoint of
the chord between the two preferred levels: no level dominates it and it can be Pareto-optimal
(e.g. when the continuous terms are worth less than half of a conflicted integrative term). Including
it keeps every reachable deal on or below the frontier. When both parties prefer the same level it
is dominated and pruned.

The frontier is stored as the closure of the Pareto set: vertices sorted by seller utility (buyer
utility strictly decreasing) and a flag per consecutive pair telling whether the segment between
them is on the frontier (the frontier can be disconnected: with Dirichlet(0.3) weights it is often
a staircase of short pieces). A deal is flagged Pareto-optimal when its distance to the frontier is
below ``tol`` (default 1e-6); the open ends kept by the closure are weakly dominated but measure-zero.
Results are exact up to rounding: vertices take their buyer values from g's vertices (never by
re-evaluating g at a recomputed seller value, which a near-vertical edge of g, a weight ~1e-10,
would amplify to ~1e-8 of buyer value), and an edge vertical in floating point keeps both ends.
negolib never imports negmas; it is an optional test-only oracle (AGPL).

Entry points: :func:`pareto_frontier` (a :class:`Frontier`), :func:`bargaining` (Nash and
Kalai-Smorodinsky points), :func:`deal_efficiency`, :func:`efficiency_frame`,
:func:`per_arm_efficiency`; :func:`frontier_contract` / :func:`vertex_contract` give a ledger
reaching a frontier point.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from negolib.core.transcripts import episodes_frame
from negolib.games.multi_issue.record_scenarios import RecordScenarios
from negolib.games.multi_issue.scenarios import Scenario
from negolib.games.multi_issue.utility import both_utilities
from negolib.study.envelope import EPS, envelope_frontier

PARETO_TOL = 1e-6


class _Unnamed:
    """The option of leaving an integrative term out of the contract (phi = 0 for both parties)."""

    def __repr__(self) -> str:
        return "UNNAMED"


UNNAMED = _Unnamed()
Disagreement = Literal["reservation", "zero"]
EFFICIENCY_COLUMNS = ("pareto_distance", "pareto_optimal", "nash_distance", "kalai_distance",
                      "welfare_ratio", "max_welfare")


# --------------------------------------------------------------------------- contribution sets


@dataclass(frozen=True)
class IssueSets:
    """Per-issue contribution sets of one scenario.

    ``discrete[i]``: (m_i, 2) (seller, buyer) points of integrative issue ``discrete_issues[i]``,
    one per option in ``options[i]`` (a level, or :data:`UNNAMED`). ``continuous``: (c, 2) weights
    (w_s, w_b) of the continuous issues ``continuous_issues``.
    """

    discrete: tuple[np.ndarray, ...]
    options: tuple[tuple[Any, ...], ...]
    discrete_issues: tuple[int, ...]
    continuous: np.ndarray
    continuous_issues: tuple[int, ...]


def issue_sets(scenario: Scenario, include_unnamed: bool = True) -> IssueSets:
    """The contribution sets of every issue of ``scenario`` (see the module docstring)."""
    if scenario.seller.evaluations:
        return _imported_sets(scenario)
    ws, wb = scenario.seller.weights, scenario.buyer.weights
    disc, opts, d_idx, cont, c_idx = [], [], [], [], []
    for k, issue in enumerate(scenario.domain.issues):
        if issue.kind == "continuous":
            cont.append((ws[k], wb[k]))
            c_idx.append(k)
            continue
        ps, pb = scenario.seller.preferred[k], scenario.buyer.preferred[k]
        levels = tuple(issue.levels) + ((UNNAMED,) if include_unnamed else ())
        pts = [(ws[k] / 2, wb[k] / 2) if lv is UNNAMED else (ws[k] * (lv == ps), wb[k] * (lv == pb))
               for lv in levels]
        disc.append(np.asarray(pts, dtype=float))
        opts.append(levels)
        d_idx.append(k)
    return IssueSets(tuple(disc), tuple(opts), tuple(d_idx), np.asarray(cont, dtype=float).reshape(-1, 2),
                     tuple(c_idx))


def _imported_sets(scenario: Scenario) -> IssueSets:
    """Contribution sets of an imported scenario (complete contracts: an unnamed term scores each
    party's worst evaluation, a point dominated by every level, so it is left out).

    A table issue contributes one point per level, (w_s e_s, w_b e_b). A continuous issue on which
    the parties' linear evaluations run in opposite directions is a segment of weights
    (w_s |de_s|, w_b |de_b|) translated by the point of both parties' worst ends (a one-option set
    whose option, :data:`UNNAMED`, writes nothing); otherwise its two ends are its options (a
    point in between is dominated by one of them).
    """
    s, b = scenario.seller, scenario.buyer
    disc, opts, d_idx, cont, c_idx = [], [], [], [], []
    for k, issue in enumerate(scenario.domain.issues):
        es, eb, ws, wb = s.evaluations[k], b.evaluations[k], s.weights[k], b.weights[k]
        if issue.kind != "continuous":
            disc.append(np.column_stack([ws * np.asarray(es, dtype=float), wb * np.asarray(eb, dtype=float)]))
            opts.append(tuple(issue.levels))
            d_idx.append(k)
            continue
        ds, db = es[1] - es[0], eb[1] - eb[0]
        if ds * db < 0:
            disc.append(np.array([[ws * min(es), wb * min(eb)]]))
            opts.append((UNNAMED,))
            cont.append((ws * abs(ds), wb * abs(db)))
            c_idx.append(k)
        else:
            disc.append(np.array([[ws * es[0], wb * eb[0]], [ws * es[1], wb * eb[1]]]))
            opts.append((issue.lo, issue.hi))
        d_idx.append(k)
    return IssueSets(tuple(disc), tuple(opts), tuple(d_idx), np.asarray(cont, dtype=float).reshape(-1, 2),
                     tuple(c_idx))


def pareto_indices(points: np.ndarray) -> np.ndarray:
    """Indices of the Pareto-maximal rows of ``points`` (n, 2), sorted by seller ascending.

    Duplicates (within EPS) keep one representative; the result has buyer strictly decreasing.
    """
    order = np.lexsort((-points[:, 1], -points[:, 0]))  # seller desc, then buyer desc
    ys = points[order, 1]
    seen = np.concatenate([[-np.inf], np.maximum.accumulate(ys)[:-1]])
    return order[ys > seen + EPS][::-1]


def merge_discrete(sets: Iterable[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Pareto part of the Minkowski sum of point sets (each (m_i, 2)).

    Returns (anchors (M, 2) seller-ascending, choices (M, n_sets) option index per set).
    """
    anchors, choices = np.zeros((1, 2)), np.zeros((1, 0), dtype=int)
    for pts in sets:
        keep = pareto_indices(pts)
        pts = pts[keep]
        total = (anchors[:, None, :] + pts[None, :, :]).reshape(-1, 2)
        rows = np.repeat(np.arange(len(anchors)), len(pts))
        cols = np.tile(keep, len(anchors))
        sel = pareto_indices(total)
        anchors = total[sel]
        choices = np.column_stack([choices[rows[sel]], cols[sel]])
    return anchors, choices


def continuous_curve(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Pareto boundary g of the zonotope of continuous segments.

    ``weights``: (c, 2) (w_s, w_b). Returns (vertices (k + 1, 2) seller-ascending, fill order (k,)
    indices of the issues with w_s > 0 sorted by w_b / w_s). Issues with w_s = 0 stay at the buyer's
    end. g is concave and nonincreasing.
    """
    base = float(weights[:, 1].sum()) if len(weights) else 0.0
    active = np.flatnonzero(weights[:, 0] > 0) if len(weights) else np.zeros(0, dtype=int)
    order = active[np.argsort(weights[active, 1] / weights[active, 0], kind="stable")]
    steps = np.column_stack([weights[order, 0], -weights[order, 1]])
    verts = np.vstack([[0.0, base], [0.0, base] + np.cumsum(steps, axis=0)])
    return verts, order


# --------------------------------------------------------------------------- the frontier


@dataclass(frozen=True)
class Frontier:
    """Closure of the Pareto set in (seller U~, buyer U~) space, and how to reach each point.

    ``points`` (n, 2): distinct vertices, seller nondecreasing, buyer nonincreasing (two vertices
    share a coordinate only at a jump, where the closure keeps the open end of a piece, which is
    weakly dominated). ``joined`` (n - 1,): whether the segment between vertices i and i + 1 is on
    the frontier. ``vertex_anchor`` (n,) and
    ``segment_anchor`` (n - 1,) (-1 where not joined): the discrete anchor whose translate of
    ``curve`` passes there. ``anchors`` (M, 2), ``choices`` (M, n_discrete), ``curve`` (k + 1, 2) and
    ``fill_order`` (k,) come from :func:`merge_discrete` and :func:`continuous_curve`.
    """

    points: np.ndarray
    joined: np.ndarray
    vertex_anchor: np.ndarray
    segment_anchor: np.ndarray
    anchors: np.ndarray
    choices: np.ndarray
    curve: np.ndarray
    fill_order: np.ndarray

    @property
    def ideal(self) -> np.ndarray:
        """(2,) the best utility each party can get anywhere on the frontier."""
        return self.points.max(axis=0)

    @property
    def max_welfare(self) -> float:
        """The largest seller + buyer U~ over feasible contracts (attained at a vertex)."""
        return float(self.points.sum(axis=1).max())

    def segments(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts (s, 2), ends (s, 2)) of the joined segments."""
        return self.points[:-1][self.joined], self.points[1:][self.joined]

    def buyer_at(self, seller: np.ndarray | float) -> np.ndarray:
        """Best buyer U~ over frontier points with seller U~ >= ``seller`` (shape of ``seller``).

        This is the boundary of the free-disposal hull: every feasible (x, y) has
        ``y <= buyer_at(x)``. NaN beyond the seller's maximum.
        """
        x = np.asarray(seller, dtype=float)
        px, py = self.points[:, 0], self.points[:, 1]
        i = np.searchsorted(px, x - EPS, side="left")
        ic = np.clip(i, 1, len(px) - 1) if len(px) > 1 else np.zeros_like(i)
        out = py[np.minimum(i, len(px) - 1)].astype(float)
        if len(px) > 1:
            x0, x1, y0, y1 = px[ic - 1], px[ic], py[ic - 1], py[ic]
            frac = np.clip((x - x0) / np.where(x1 > x0, x1 - x0, 1.0), 0.0, 1.0)
            on_seg = (i > 0) & (i < len(px)) & self.joined[ic - 1]
            out = np.where(on_seg, y0 + frac * (y1 - y0), out)
        return np.where(x > px[-1] + EPS, np.nan, out)

    def seller_at(self, buyer: np.ndarray | float) -> np.ndarray:
        """Best seller U~ over frontier points with buyer U~ >= ``buyer``; NaN above the buyer's maximum."""
        mirrored = _mirror(self)
        return mirrored.buyer_at(buyer)

    def distance(self, point: np.ndarray) -> float:
        """Euclidean distance from ``point`` (2,) to the frontier (its vertices and joined segments)."""
        p = np.asarray(point, dtype=float)
        best = float(np.min(np.hypot(*(self.points - p).T)))
        a, b = self.segments()
        if len(a):
            d = b - a
            t = np.clip(((p - a) * d).sum(axis=1) / np.maximum((d * d).sum(axis=1), EPS * EPS), 0, 1)
            best = min(best, float(np.min(np.hypot(*(a + t[:, None] * d - p).T))))
        return best


def _mirror(frontier: Frontier) -> Frontier:
    """The frontier with the parties swapped (geometry only)."""
    return Frontier(frontier.points[::-1, ::-1].copy(), frontier.joined[::-1].copy(),
                    frontier.vertex_anchor[::-1].copy(), frontier.segment_anchor[::-1].copy(),
                    frontier.anchors, frontier.choices, frontier.curve, frontier.fill_order)


def frontier_from_sets(discrete: Iterable[np.ndarray], continuous: np.ndarray) -> Frontier:
    """The exact frontier of (sum of discrete point sets) + (sum of continuous segments).

    ``discrete``: point sets (m_i, 2); ``continuous``: (c, 2) weights (w_s, w_b) of the segments
    from (0, w_b) to (w_s, 0).
    """
    anchors, choices = merge_discrete(discrete)
    curve, order = continuous_curve(np.asarray(continuous, dtype=float).reshape(-1, 2))
    pts, joined, v_anchor, s_anchor = envelope_frontier(anchors, curve)
    return Frontier(pts, joined, v_anchor, s_anchor, anchors, choices, curve, order)


def pareto_frontier(scenario: Scenario, include_unnamed: bool = True) -> Frontier:
    """The exact Pareto frontier of a scenario (see the module docstring on unnamed terms)."""
    sets = issue_sets(scenario, include_unnamed)
    return frontier_from_sets(sets.discrete, sets.continuous)


# --------------------------------------------------------------------------- contracts


def _locate(frontier: Frontier, seller: float) -> tuple[int, float]:
    """(anchor index, seller value) of the frontier point at ``seller``."""
    px = frontier.points[:, 0]
    i = int(np.argmin(np.abs(px - seller)))
    if abs(px[i] - seller) <= 1e-9:
        return int(frontier.vertex_anchor[i]), float(seller)
    k = int(np.searchsorted(px, seller)) - 1
    if 0 <= k < len(frontier.joined) and frontier.joined[k]:
        return int(frontier.segment_anchor[k]), float(seller)
    raise ValueError(f"seller value {seller} is not on the frontier (it falls in a gap or outside "
                     f"[{px[0]:.6f}, {px[-1]:.6f}])")


def fill_levels(frontier: Frontier, continuous: np.ndarray, amount: float) -> np.ndarray:
    """Seller satisfactions t (c,) of the continuous issues giving the seller ``amount`` on curve g."""
    t = np.zeros(len(continuous))
    left = amount
    for k in frontier.fill_order:
        w = continuous[k, 0]
        t[k] = min(1.0, max(0.0, left / w))
        left -= w * t[k]
    return t


def _contract(scenario: Scenario, sets: IssueSets, frontier: Frontier, j: int, x: float) -> dict[str, Any]:
    """The ledger of anchor ``j`` plus the continuous fill giving the seller ``x`` in total."""
    ledger: dict[str, Any] = {}
    for col, (k, options) in enumerate(zip(sets.discrete_issues, sets.options)):
        level = options[int(frontier.choices[j, col])]
        if level is not UNNAMED:
            ledger[scenario.domain.issues[k].name] = level
    ts = fill_levels(frontier, sets.continuous, x - float(frontier.anchors[j, 0]))
    for k, t in zip(sets.continuous_issues, ts):
        issue = scenario.domain.issues[k]
        frac = t if scenario.seller.signs[k] > 0 else 1.0 - t
        ledger[issue.name] = float(issue.lo + frac * (issue.hi - issue.lo))
    return ledger


def frontier_contract(scenario: Scenario, frontier: Frontier, seller: float,
                      include_unnamed: bool = True) -> dict[str, Any]:
    """A ledger reaching the best frontier point at seller U~ = ``seller`` (a vertex or a joined
    segment; at a jump, the higher of the two vertices there).

    ``frontier`` must come from :func:`pareto_frontier` with the same ``include_unnamed``.
    Integrative terms chosen as unnamed are left out of the ledger.
    """
    j, x = _locate(frontier, seller)
    return _contract(scenario, issue_sets(scenario, include_unnamed), frontier, j, x)


def vertex_contract(scenario: Scenario, frontier: Frontier, i: int,
                    include_unnamed: bool = True) -> dict[str, Any]:
    """A ledger reaching vertex ``i`` of ``frontier`` exactly (see :func:`frontier_contract`)."""
    sets = issue_sets(scenario, include_unnamed)
    return _contract(scenario, sets, frontier, int(frontier.vertex_anchor[i]), float(frontier.points[i, 0]))


# --------------------------------------------------------------------------- bargaining solutions


@dataclass(frozen=True)
class Bargaining:
    """Reference points, each (2,) as (seller U~, buyer U~); NaN where undefined.

    ``ideal`` is the Kalai-Smorodinsky ideal: each party's best frontier value among points that
    give the other at least its disagreement value. ``kalai`` is the furthest feasible point on the
    segment from the disagreement point to the ideal: it lies on the frontier unless that line
    crosses one of the frontier's gaps, where it lies on the boundary of the free-disposal hull
    (weakly Pareto; about 8% of the shipped scenarios with reservation disagreement points).
    ``nash`` maximises the Nash product over the frontier.
    """

    disagreement: np.ndarray
    ideal: np.ndarray
    nash: np.ndarray
    kalai: np.ndarray


def disagreement_point(scenario: Scenario, disagreement: Disagreement = "reservation") -> np.ndarray:
    """(2,) the parties' reservation values, or (0, 0)."""
    if disagreement == "reservation":
        return np.array([scenario.seller.reservation, scenario.buyer.reservation])
    if disagreement == "zero":
        return np.zeros(2)
    raise ValueError(f"disagreement must be 'reservation' or 'zero', got {disagreement!r}")


def nash_point(frontier: Frontier, d: np.ndarray) -> np.ndarray:
    """(2,) the frontier point maximising (x - d_s)(y - d_b) over x > d_s, y > d_b (NaN if none)."""
    cands = [frontier.points]
    a, b = frontier.segments()
    if len(a):
        u, v = (b - a).T
        p, q = (a - d).T
        denom = 2 * u * v
        t = np.where(denom < 0, -(u * q + v * p) / np.where(denom < 0, denom, -1.0), 0.0)
        cands.append(a + np.clip(t, 0, 1)[:, None] * (b - a))
    c = np.vstack(cands)
    gain = c - d
    prod = np.where((gain > 0).all(axis=1), gain[:, 0] * gain[:, 1], -np.inf)
    return c[int(np.argmax(prod))].copy() if np.isfinite(prod.max()) else np.full(2, np.nan)


def kalai_ideal(frontier: Frontier, d: np.ndarray) -> np.ndarray:
    """(2,) each party's best frontier value given the other gets at least its disagreement value."""
    return np.array([float(frontier.seller_at(d[1])), float(frontier.buyer_at(d[0]))])


def _staircase(frontier: Frontier, lo: np.ndarray) -> np.ndarray:
    """(p, 2) boundary of the free-disposal hull: the frontier with gaps closed by a drop then a run,
    extended left and down past ``lo`` (2,)."""
    pts = [np.array([min(lo[0], frontier.points[0, 0]) - 1.0, frontier.points[0, 1]])]
    for i, p in enumerate(frontier.points):
        if i > 0 and not frontier.joined[i - 1]:
            pts.append(np.array([frontier.points[i - 1, 0], p[1]]))
        pts.append(p)
    pts.append(np.array([frontier.points[-1, 0], min(lo[1], frontier.points[-1, 1]) - 1.0]))
    return np.asarray(pts)


def kalai_point(frontier: Frontier, d: np.ndarray) -> np.ndarray:
    """(2,) the furthest feasible point (weakly Pareto) on the ray from ``d`` towards the KS ideal."""
    ideal = kalai_ideal(frontier, d)
    v = ideal - d
    if not np.all(np.isfinite(v)) or np.any(v <= 0):
        return np.full(2, np.nan)
    stair = _staircase(frontier, d)
    a, e = stair[:-1], stair[1:] - stair[:-1]
    cross = v[0] * e[:, 1] - v[1] * e[:, 0]
    ok = np.abs(cross) > EPS
    w = a - d
    safe = np.where(ok, cross, 1.0)
    lam = (w[:, 0] * e[:, 1] - w[:, 1] * e[:, 0]) / safe
    mu = (w[:, 0] * v[1] - w[:, 1] * v[0]) / safe
    hit = ok & (mu >= -1e-12) & (mu <= 1 + 1e-12) & (lam >= -1e-12)
    if not hit.any():
        return np.full(2, np.nan)
    return d + float(lam[hit].max()) * v


def bargaining(frontier: Frontier, d: np.ndarray) -> Bargaining:
    """The Nash and Kalai-Smorodinsky points of ``frontier`` for disagreement point ``d`` (2,)."""
    d = np.asarray(d, dtype=float)
    return Bargaining(d, kalai_ideal(frontier, d), nash_point(frontier, d), kalai_point(frontier, d))


# --------------------------------------------------------------------------- deals


@dataclass(frozen=True)
class ScenarioOracle:
    """A scenario with its frontier and bargaining points, computed once and reused for every deal."""

    scenario: Scenario
    frontier: Frontier
    bargaining: Bargaining

    @classmethod
    def of(cls, scenario: Scenario, disagreement: Disagreement = "reservation",
           include_unnamed: bool = True) -> ScenarioOracle:
        f = pareto_frontier(scenario, include_unnamed)
        return cls(scenario, f, bargaining(f, disagreement_point(scenario, disagreement)))


def _dist(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.hypot(*(a - b))) if np.all(np.isfinite(b)) else math.nan


def point_efficiency(oracle: ScenarioOracle, point: np.ndarray, tol: float = PARETO_TOL) -> dict[str, Any]:
    """Efficiency measures of a (seller U~, buyer U~) point (2,) against a scenario's oracle."""
    f, b = oracle.frontier, oracle.bargaining
    dist = f.distance(point)
    return {
        "seller_utility": float(point[0]), "buyer_utility": float(point[1]),
        "pareto_distance": dist, "pareto_optimal": bool(dist < tol),
        "nash_seller": float(b.nash[0]), "nash_buyer": float(b.nash[1]),
        "nash_distance": _dist(point, b.nash),
        "kalai_seller": float(b.kalai[0]), "kalai_buyer": float(b.kalai[1]),
        "kalai_distance": _dist(point, b.kalai),
        "max_welfare": f.max_welfare, "welfare_ratio": float(point.sum()) / f.max_welfare,
    }


def deal_efficiency(scenario: Scenario, ledger: Mapping[str, Any], disagreement: Disagreement = "reservation",
                    oracle: ScenarioOracle | None = None, tol: float = PARETO_TOL) -> dict[str, Any]:
    """Efficiency of a deal closed on ``ledger``: distances to the frontier, Nash and Kalai points,
    Pareto-optimal flag (distance < ``tol``) and welfare ratio (welfare / max welfare)."""
    oracle = oracle or ScenarioOracle.of(scenario, disagreement)
    return point_efficiency(oracle, np.asarray(both_utilities(scenario, ledger)), tol)


def _deal_mask(df: pd.DataFrame) -> pd.Series:
    if "status" in df:
        return df["status"].eq("deal")
    if "deal" in df:
        return df["deal"].fillna(False).astype(bool)
    raise ValueError(f"episode frame needs a 'status' or 'deal' column; has {list(df.columns)}")


def efficiency_frame(data: pd.DataFrame | Iterable[dict[str, Any]],
                     disagreement: Disagreement = "reservation", tol: float = PARETO_TOL,
                     cache: dict[tuple[str, int, str], ScenarioOracle] | None = None,
                     domains_dir: str | Path | None = None, scenarios: Mapping[str, Scenario] | None = None
                     ) -> pd.DataFrame:
    """The episode frame with efficiency columns added (one row per episode).

    ``data``: a frame from :func:`negolib.core.transcripts.episodes_frame` (columns ``domain``, ``seed``,
    ``status`` or ``deal``, ``final_ledger`` as JSON) or the records themselves. Adds
    :data:`EFFICIENCY_COLUMNS` and the Nash/Kalai points; NaN (NA for ``pareto_optimal``) on
    no-deals, except ``max_welfare``, a property of the scenario, filled on every row. Oracles are
    cached per (domain, seed, disagreement) in ``cache`` (a fresh dict by default); a row's scenario is the imported
    one its domain names in ``scenarios`` (fixed preferences: :func:`negolib.profile_genius.imported_scenarios`),
    else drawn from (domain, seed) of ``domains_dir`` (default: the shipped ones).
    """
    df, cache = data.copy() if isinstance(data, pd.DataFrame) else episodes_frame(data), {} if cache is None else cache
    look, deals, rows = RecordScenarios(scenarios, directory=domains_dir), _deal_mask(df) if len(df) else None, []
    look.require(pd.unique(df["domain"]) if len(df) else (), "efficiency_frame")  # before any oracle is built
    for idx, row in df.iterrows():
        key = (str(row["domain"]), int(row["seed"]), disagreement)
        if key not in cache:
            cache[key] = ScenarioOracle.of(look.scenario(key[0], key[1]), disagreement)
        oracle = cache[key]
        ledger = row.get("final_ledger")
        if deals[idx] and isinstance(ledger, str) and ledger != "null":
            point = np.asarray(both_utilities(oracle.scenario, json.loads(ledger)))
            rows.append(point_efficiency(oracle, point, tol))
        else:
            rows.append({"max_welfare": oracle.frontier.max_welfare})
    extra = pd.DataFrame(rows, index=df.index)
    for col in ("pareto_distance", "nash_distance", "kalai_distance", "welfare_ratio", "nash_seller",
                "nash_buyer", "kalai_seller", "kalai_buyer", "max_welfare"):
        df[col] = extra[col].astype(float) if col in extra else np.nan
    flag = extra["pareto_optimal"] if "pareto_optimal" in extra else pd.Series(pd.NA, index=df.index)
    df["pareto_optimal"] = flag.astype("boolean")
    return df


def per_arm_efficiency(df: pd.DataFrame, by: str | list[str] = "arm",
                       scenarios: Mapping[str, Scenario] | None = None) -> pd.DataFrame:
    """Per-arm summary over deals: counts, Pareto-optimal share and mean efficiency columns.

    ``df``: an episode frame, with or without the efficiency columns (added when missing, ``scenarios`` as in
    :func:`efficiency_frame`)."""
    if not set(EFFICIENCY_COLUMNS) <= set(df.columns):
        df = efficiency_frame(df, scenarios=scenarios)
    deals = df[_deal_mask(df)]
    keys = [by] if isinstance(by, str) else list(by)
    counts = df.groupby(keys).size().rename("n_episodes").to_frame()
    counts["n_deals"] = deals.groupby(keys).size().reindex(counts.index, fill_value=0)
    means = deals.groupby(keys).agg(
        pareto_optimal_share=("pareto_optimal", lambda s: float(s.astype(float).mean())),
        pareto_distance=("pareto_distance", "mean"), nash_distance=("nash_distance", "mean"),
        kalai_distance=("kalai_distance", "mean"), welfare_ratio=("welfare_ratio", "mean"),
        max_welfare=("max_welfare", "mean"))
    return counts.join(means).reset_index()
