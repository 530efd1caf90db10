"""Tests of the exact Pareto frontier, bargaining points and deal efficiency (negolib.study.efficiency)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from negolib.games.multi_issue.domains import Domain, Issue, get_domain
from negolib.games.multi_issue.env import Episode
from negolib.games.multi_issue.scenarios import make_scenario
from negolib.games.multi_issue.utility import both_utilities
from negolib.study.efficiency import (
    EFFICIENCY_COLUMNS,
    UNNAMED,
    ScenarioOracle,
    bargaining,
    deal_efficiency,
    disagreement_point,
    efficiency_frame,
    frontier_contract,
    frontier_from_sets,
    issue_sets,
    kalai_point,
    nash_point,
    pareto_frontier,
    pareto_indices,
    per_arm_efficiency,
    vertex_contract,
)

TOL = 1e-9
GRID = (0.0, 0.5, 1.0)  # seller satisfaction t of each continuous issue; 0.5 is also "unnamed"


# --------------------------------------------------------------------------- brute force helpers


def minkowski_all(sets: list[np.ndarray]) -> np.ndarray:
    """Every sum of one point per set, (prod m_i, 2), no pruning."""
    total = np.zeros((1, 2))
    for pts in sets:
        total = (total[:, None, :] + pts[None, :, :]).reshape(-1, 2)
    return total


def grid_sets(continuous: np.ndarray, grid: tuple[float, ...] = GRID) -> list[np.ndarray]:
    """Each continuous segment discretized at seller satisfactions ``grid``: (len(grid), 2) each."""
    t = np.asarray(grid)
    return [np.column_stack([ws * t, wb * (1 - t)]) for ws, wb in continuous]


def brute_pareto(points: np.ndarray) -> np.ndarray:
    """Pareto-maximal rows by the O(n^2) definition, deduplicated, seller-ascending."""
    pts = np.unique(np.round(points, 12), axis=0)
    dominated = [((pts >= p).all(axis=1) & (pts > p).any(axis=1)).any() for p in pts]
    return pts[~np.asarray(dominated)]


def dominates_strictly(points: np.ndarray, target: np.ndarray, margin: float) -> bool:
    """Whether any row of ``points`` beats ``target`` by more than ``margin`` on both coordinates."""
    return bool(((points > target + margin).all(axis=1)).any())


def dist_to_polyline(p: np.ndarray, poly: np.ndarray) -> float:
    """Euclidean distance from p (2,) to the polyline poly (k, 2)."""
    if len(poly) == 1:
        return float(np.hypot(*(poly[0] - p)))
    a, d = poly[:-1], np.diff(poly, axis=0)
    t = np.clip(((p - a) * d).sum(axis=1) / np.maximum((d * d).sum(axis=1), 1e-300), 0, 1)
    return float(np.min(np.hypot(*(a + t[:, None] * d - p).T)))


def frontier_points(f, n: int = 50) -> np.ndarray:
    """Vertices plus ``n`` points on each joined segment, (m, 2)."""
    a, b = f.segments()
    t = np.linspace(0, 1, n)[None, :, None]
    dense = (a[:, None, :] + t * (b - a)[:, None, :]).reshape(-1, 2)
    return np.vstack([f.points, dense])


def small_domain(name: str = "toy") -> Domain:
    """A 5-issue synthetic domain (below the shipped minimum, fine for the oracle)."""
    return Domain(name, name, (
        Issue("price", "continuous", lo=10, hi=20, seller_sign=1),
        Issue("days", "continuous", lo=0, hi=30, seller_sign=-1),
        Issue("color", "categorical", levels=("red", "green", "blue")),
        Issue("plan", "categorical", levels=("none", "basic", "full")),
        Issue("extras", "binary", levels=(True, False)),
    ), {"seller": "s", "buyer": "b"})


def check_against_brute(f, sets: list[np.ndarray], continuous: np.ndarray, rng: np.random.Generator) -> None:
    """Brute-force points lie on/below the frontier; frontier vertices are not beaten by any of them."""
    brute = minkowski_all(list(sets) + grid_sets(continuous))
    if len(continuous):
        t = rng.random((200, len(continuous)))  # random continuous points off the grid
        disc = minkowski_all(list(sets))
        rnd = disc[rng.integers(0, len(disc), 200)] + np.column_stack([t @ continuous[:, 0],
                                                                       (1 - t) @ continuous[:, 1]])
        brute = np.vstack([brute, rnd])
    assert_below(f, brute)
    for v in f.points:
        assert not dominates_strictly(brute, v, 1e-9), v


def assert_below(f, pts: np.ndarray) -> None:
    """Every row of ``pts`` (n, 2) is on or below the frontier: under its staircase, or within TOL of
    it in Euclidean distance (on near-vertical pieces a rounding of the seller value moves the buyer
    value a lot)."""
    above = ~(pts[:, 1] <= f.buyer_at(pts[:, 0]) + TOL)
    far = [p for p in pts[above] if f.distance(p) > TOL]
    assert not far, far[:5]


def random_sets(rng: np.random.Generator, n_disc: int, n_cont: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Random integrative point sets (with the unnamed midpoint) and continuous weights."""
    k = n_disc + n_cont
    ws, wb = rng.dirichlet(np.full(k, 0.3)), rng.dirichlet(np.full(k, 0.3))
    sets = []
    for i in range(n_disc):
        n_levels = int(rng.integers(2, 5))
        ps, pb = rng.integers(n_levels), rng.integers(n_levels)
        pts = [(ws[i] * (lv == ps), wb[i] * (lv == pb)) for lv in range(n_levels)]
        sets.append(np.asarray(pts + [(ws[i] / 2, wb[i] / 2)]))
    return sets, np.column_stack([ws[n_disc:], wb[n_disc:]])


# --------------------------------------------------------------------------- merge vs brute force


def test_pareto_indices_small() -> None:
    pts = np.array([[0.0, 1.0], [0.5, 0.5], [0.4, 0.4], [1.0, 0.0], [0.5, 0.5], [0.2, 1.0]])
    keep = pareto_indices(pts)
    assert sorted(map(tuple, pts[keep])) == [(0.2, 1.0), (0.5, 0.5), (1.0, 0.0)]
    assert np.all(np.diff(pts[keep, 0]) > 0)


def test_discrete_only_matches_brute_force_exactly() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        sets, _ = random_sets(rng, 5, 0)
        f = frontier_from_sets(sets, np.zeros((0, 2)))
        brute = brute_pareto(minkowski_all(sets))
        assert not f.joined.any()
        np.testing.assert_allclose(np.sort(f.points, axis=0), np.sort(brute, axis=0), atol=1e-9)


def test_continuous_only_is_the_concave_knapsack_curve() -> None:
    cont = np.array([[0.2, 0.1], [0.1, 0.3], [0.3, 0.3]])
    f = frontier_from_sets([], cont)
    # fill order by w_b / w_s: 0.5, 1.0, 3.0
    expected = np.array([[0, 0.7], [0.2, 0.6], [0.5, 0.3], [0.6, 0.0]])
    np.testing.assert_allclose(f.points, expected, atol=1e-12)
    assert f.joined.all()
    slopes = np.diff(f.points[:, 1]) / np.diff(f.points[:, 0])
    assert np.all(np.diff(slopes) <= 1e-12)


def test_aligned_integrative_terms_give_one_concave_piece() -> None:
    rng = np.random.default_rng(1)
    sets, cont = random_sets(rng, 3, 4)
    aligned = [np.array([[s[:, 0].max(), s[:, 1].max()], [0, 0], [s[:, 0].max() / 2, s[:, 1].max() / 2]])
               for s in sets]
    f = frontier_from_sets(aligned, cont)
    assert f.joined.all() and len(f.anchors) == 1
    slopes = np.diff(f.points[:, 1]) / np.diff(f.points[:, 0])
    assert np.all(np.diff(slopes) <= 1e-12)


def test_unnamed_integrative_term_can_be_pareto_optimal() -> None:
    # a conflicted integrative term worth far more than the continuous one: the unnamed midpoint's
    # translate is the only curve defined around seller = 0.5
    sets = [np.array([[0.9, 0.0], [0.0, 0.9], [0.45, 0.45]])]
    cont = np.array([[0.1, 0.1]])
    with_unnamed = frontier_from_sets(sets, cont)
    without = frontier_from_sets([sets[0][:2]], cont)
    assert with_unnamed.distance(np.array([0.5, 0.5])) < 1e-12
    assert without.distance(np.array([0.5, 0.5])) > 0.1
    assert not with_unnamed.joined.all()  # three disjoint pieces


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_disc=st.integers(0, 4), n_cont=st.integers(0, 3))
@example(seed=571, n_disc=4, n_cont=3)  # a near-vertical edge of g (w_s ~ 2e-10): vertex buyer values
def test_random_weights_against_brute_force(seed: int, n_disc: int, n_cont: int) -> None:
    if n_disc + n_cont == 0:
        return
    rng = np.random.default_rng(seed)
    sets, cont = random_sets(rng, n_disc, n_cont)
    f = frontier_from_sets(sets, cont)
    # monotone: seller nondecreasing, buyer nonincreasing, no repeated vertex
    assert np.all(np.diff(f.points[:, 0]) >= -1e-15) and np.all(np.diff(f.points[:, 1]) <= 1e-15)
    assert np.all(np.hypot(*np.diff(f.points, axis=0).T) > 0)
    # concave within each translate of the continuous curve
    for i in range(len(f.joined) - 1):
        if f.joined[i] and f.joined[i + 1] and f.segment_anchor[i] == f.segment_anchor[i + 1]:
            (x0, y0), (x1, y1), (x2, y2) = f.points[i:i + 3]
            assert (y1 - y0) * (x2 - x1) >= (y2 - y1) * (x1 - x0) - 1e-12
    # ideal corners: each party's total weight is its best value
    total = np.array([sum(s[:, 0].max() for s in sets) + cont[:, 0].sum(),
                      sum(s[:, 1].max() for s in sets) + cont[:, 1].sum()])
    np.testing.assert_allclose(f.ideal, total, atol=1e-12)
    check_against_brute(f, sets, cont, rng)
    # every vertex is achievable: its anchor is one option per set and the rest is on the curve
    for a, choice in zip(f.anchors, f.choices):
        np.testing.assert_allclose(a, sum((s[c] for s, c in zip(sets, choice)), np.zeros(2)), atol=1e-12)
    for v, j in zip(f.points, f.vertex_anchor):
        assert dist_to_polyline(v - f.anchors[j], f.curve) < 1e-10


# --------------------------------------------------------------------------- real scenarios


@pytest.mark.parametrize("seed", [0, 7, 5_000_053])
def test_car_frontier_against_brute_force_grid(seed: int) -> None:
    sc = make_scenario(get_domain("car"), seed)
    f = pareto_frontier(sc)
    sets = issue_sets(sc)
    check_against_brute(f, list(sets.discrete), sets.continuous, np.random.default_rng(seed))
    np.testing.assert_allclose([f.points[0, 1], f.points[-1, 0]], [1.0, 1.0], atol=1e-12)


@pytest.mark.parametrize("domain", ["car", "acquisition", "job_offer", "supply_contract"])
def test_frontier_vertices_are_achievable_contracts(domain: str) -> None:
    for seed in (1, 2, 3, 47, 51):
        sc = make_scenario(get_domain(domain), seed)
        f = pareto_frontier(sc)
        for i, v in enumerate(f.points):
            ledger = vertex_contract(sc, f, i)
            u = np.asarray(both_utilities(sc, ledger))
            # exact up to rounding, which near-vertical pieces (a seller weight ~1e-8: a slope ~1e8)
            # amplify in the buyer value; still far below PARETO_TOL
            np.testing.assert_allclose(u, v, atol=1e-6)
            assert f.distance(u) < 1e-7
            assert set(ledger) <= set(sc.domain.issue_names)
            best = both_utilities(sc, frontier_contract(sc, f, float(v[0])))
            assert best[0] == pytest.approx(v[0], abs=1e-9) and best[1] >= v[1] - 1e-7


def test_buyer_ideal_corner_is_lexicographic() -> None:
    sc = make_scenario(get_domain("car"), 11)
    f = pareto_frontier(sc)
    ws, wb = np.array(sc.seller.weights), np.array(sc.buyer.weights)
    best = 0.0
    for k, issue in enumerate(sc.domain.issues):
        if issue.kind == "continuous":
            best += ws[k] if wb[k] == 0 else 0.0
        else:
            best += ws[k] if (sc.seller.preferred[k] == sc.buyer.preferred[k] or wb[k] == 0) else 0.0
    np.testing.assert_allclose(f.points[0], [best, 1.0], atol=1e-12)


def random_ledger(sc, rng: np.random.Generator) -> dict:
    """Random values incl. unnamed, out-of-range and off-schema terms."""
    ledger: dict = {"not_a_term": 3}
    for issue in sc.domain.issues:
        if rng.random() < 0.2:
            continue
        if issue.kind == "continuous":
            span = issue.hi - issue.lo
            ledger[issue.name] = float(rng.uniform(issue.lo - 0.2 * span, issue.hi + 0.2 * span))
        else:
            ledger[issue.name] = issue.levels[int(rng.integers(len(issue.levels)))]
    return ledger


def test_random_ledgers_lie_on_or_below_the_frontier() -> None:
    rng = np.random.default_rng(3)
    for name in ("car", "supply_contract"):
        for seed in range(5):
            sc = make_scenario(get_domain(name), seed)
            f = pareto_frontier(sc)
            pts = np.array([both_utilities(sc, random_ledger(sc, rng)) for _ in range(100)])
            assert_below(f, pts)


def test_named_only_frontier_lies_below_the_full_one() -> None:
    sc = make_scenario(get_domain("car"), 21)
    full, named = pareto_frontier(sc), pareto_frontier(sc, include_unnamed=False)
    assert_below(full, frontier_points(named))
    led = frontier_contract(sc, named, float(named.points[2, 0]), include_unnamed=False)
    assert set(led) == set(sc.domain.issue_names)


# --------------------------------------------------------------------------- bargaining points


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["reservation", "zero"])
def test_nash_point_maximises_the_nash_product(seed: int, mode: str) -> None:
    sc = make_scenario(get_domain("car"), seed)
    f = pareto_frontier(sc)
    d = disagreement_point(sc, mode)
    n = nash_point(f, d)
    assert f.distance(n) < 1e-9
    pts = frontier_points(f, 400)
    gain = pts - d
    prod = np.where((gain > 0).all(axis=1), gain[:, 0] * gain[:, 1], -np.inf)
    assert (n[0] - d[0]) * (n[1] - d[1]) >= prod.max() - 1e-12


@pytest.mark.parametrize("seed", range(8))
def test_kalai_point_is_on_the_ray_and_the_boundary(seed: int) -> None:
    sc = make_scenario(get_domain("acquisition"), seed)
    f = pareto_frontier(sc)
    b = bargaining(f, disagreement_point(sc))
    v = b.ideal - b.disagreement
    w = b.kalai - b.disagreement
    assert abs(v[0] * w[1] - v[1] * w[0]) < 1e-12 and np.all(w > 0)
    assert_below(f, b.kalai[None, :])  # feasible (free disposal)
    beyond = b.kalai + 1e-7 * v
    above = beyond[1] > f.buyer_at(beyond[0]) or beyond[0] > f.points[-1, 0]
    assert above  # and maximal along the ray


def test_kalai_point_lies_on_the_frontier_when_the_ray_hits_it() -> None:
    on = 0
    for seed in range(20):
        sc = make_scenario(get_domain("car"), seed)
        f = pareto_frontier(sc)
        k = kalai_point(f, disagreement_point(sc))
        on += f.distance(k) < 1e-9
    assert on >= 15  # the ray can only miss the frontier through one of its (rare) gaps


def test_kalai_for_a_symmetric_segment() -> None:
    f = frontier_from_sets([], np.array([[0.5, 0.5], [0.5, 0.5]]))
    np.testing.assert_allclose(kalai_point(f, np.zeros(2)), [0.5, 0.5], atol=1e-12)
    np.testing.assert_allclose(nash_point(f, np.zeros(2)), [0.5, 0.5], atol=1e-12)
    np.testing.assert_allclose(kalai_point(f, np.array([0.2, 0.4])), [0.4, 0.6], atol=1e-12)


def test_degenerate_disagreement_gives_nan() -> None:
    f = frontier_from_sets([], np.array([[0.5, 0.5]]))
    assert np.isnan(nash_point(f, np.array([0.6, 0.6]))).all()
    assert np.isnan(kalai_point(f, np.array([0.6, 0.6]))).all()


# --------------------------------------------------------------------------- deals


def test_deal_distance_zero_on_frontier_and_positive_when_dominated() -> None:
    rng = np.random.default_rng(5)
    for seed in range(5):
        sc = make_scenario(get_domain("car"), seed)
        oracle = ScenarioOracle.of(sc)
        f = oracle.frontier
        a, b = f.segments()
        for i in rng.integers(0, len(a), 5):
            x = float(a[i, 0] + rng.random() * (b[i, 0] - a[i, 0]))
            out = deal_efficiency(sc, frontier_contract(sc, f, x), oracle=oracle)
            assert out["pareto_distance"] < 1e-9 and out["pareto_optimal"]
            assert out["welfare_ratio"] <= 1 + 1e-12
        empty = deal_efficiency(sc, {}, oracle=oracle)
        assert empty["pareto_distance"] > 1e-6 and not empty["pareto_optimal"]
        assert empty["seller_utility"] == pytest.approx(0.5)


def test_welfare_ratio_is_one_at_the_max_welfare_vertex() -> None:
    sc = make_scenario(get_domain("media_rights"), 4)
    oracle = ScenarioOracle.of(sc)
    f = oracle.frontier
    v = f.points[np.argmax(f.points.sum(axis=1))]
    out = deal_efficiency(sc, frontier_contract(sc, f, float(v[0])), oracle=oracle)
    assert out["welfare_ratio"] == pytest.approx(1.0)
    nash = oracle.bargaining.nash
    out = deal_efficiency(sc, frontier_contract(sc, f, float(nash[0])), oracle=oracle)
    assert out["nash_distance"] < 1e-9


def test_disagreement_choice_is_exposed() -> None:
    sc = make_scenario(get_domain("car"), 2)
    zero = deal_efficiency(sc, {}, disagreement="zero")
    res = deal_efficiency(sc, {}, disagreement="reservation")
    assert zero["pareto_distance"] == res["pareto_distance"]
    with pytest.raises(ValueError, match="disagreement"):
        deal_efficiency(sc, {}, disagreement="median")  # type: ignore[arg-type]


def _term(issue: Issue, value) -> dict:
    return {"name": issue.name, "value": value}


def _play(sc, terms: list[dict] | None, arm: str) -> dict:
    """A two-turn episode: the seller counters with ``terms`` (or never agrees), the buyer accepts."""
    ep = Episode(sc)
    if terms is None:
        while not ep.done:
            ep.step('Let us talk. {"action": "COUNTER", "terms": []}')
    else:
        ep.step("Here is my offer. " + json.dumps({"action": "COUNTER", "terms": terms}))
        ep.step('Deal. {"action": "ACCEPT"}')
    return ep.record(arm=arm, seller="s", buyer="b")


def test_efficiency_frame_and_per_arm_summary_from_records() -> None:
    dom = get_domain("car")
    records = []
    for seed in (5_000_000, 5_000_001, 5_000_002):
        sc = make_scenario(dom, seed)
        f = pareto_frontier(sc)
        led = frontier_contract(sc, f, float(f.points[len(f.points) // 2, 0]))
        terms = [_term(dom.issue(k), v) for k, v in led.items()]
        records.append(_play(sc, terms, "frontier"))
        records.append(_play(sc, [_term(dom.issue("price"), 38)], "vague"))
        records.append(_play(sc, None, "stubborn"))
    df = efficiency_frame(records)
    assert set(EFFICIENCY_COLUMNS) <= set(df.columns) and len(df) == 9
    front = df[df["arm"] == "frontier"]
    assert front["pareto_optimal"].all() and (front["pareto_distance"] < 1e-6).all()
    stub = df[df["arm"] == "stubborn"]
    assert stub["pareto_distance"].isna().all() and stub["pareto_optimal"].isna().all()
    assert stub["max_welfare"].notna().all()
    vague = df[df["arm"] == "vague"]
    assert (vague["pareto_distance"] > 1e-6).all()
    summary = per_arm_efficiency(df).set_index("arm")
    assert summary.loc["frontier", "pareto_optimal_share"] == 1.0
    assert summary.loc["vague", "pareto_optimal_share"] == 0.0
    assert summary.loc["stubborn", "n_deals"] == 0 and summary.loc["stubborn", "n_episodes"] == 3
    assert math.isnan(summary.loc["stubborn", "welfare_ratio"])
    # the same from an episode frame without efficiency columns, with a shared cache
    cache: dict = {}
    from negolib.core.transcripts import episodes_frame

    again = per_arm_efficiency(efficiency_frame(episodes_frame(records), cache=cache))
    pd.testing.assert_frame_equal(summary.reset_index(), again)
    assert len(cache) == 3


def test_frontier_contract_rejects_seller_values_off_the_frontier() -> None:
    sc = make_scenario(get_domain("car"), 0)
    f = pareto_frontier(sc)
    with pytest.raises(ValueError, match="not on the frontier"):
        frontier_contract(sc, f, 1.5)
    if (~f.joined).any():
        i = int(np.flatnonzero(~f.joined)[0])
        with pytest.raises(ValueError, match="gap"):
            frontier_contract(sc, f, float(f.points[i:i + 2, 0].mean()))


def test_per_arm_summary_by_several_keys() -> None:
    sc = make_scenario(get_domain("car"), 5_000_000)
    df = pd.DataFrame({"arm": ["a", "a", "b"], "buyer": ["x", "y", "x"], "domain": "car",
                       "seed": 5_000_000, "status": ["deal", "no_deal", "deal"],
                       "final_ledger": [json.dumps({"price": 40}), None, json.dumps({})]})
    out = per_arm_efficiency(df, by=["arm", "buyer"])
    assert list(out.columns[:4]) == ["arm", "buyer", "n_episodes", "n_deals"]
    assert out["n_deals"].tolist() == [1, 0, 1]
    ratio = out.set_index(["arm", "buyer"]).loc[("b", "x"), "welfare_ratio"]
    assert ratio == pytest.approx(1.0 / pareto_frontier(sc).max_welfare)


def test_unnamed_label_is_a_sentinel() -> None:
    sc = make_scenario(get_domain("car"), 0)
    sets = issue_sets(sc)
    assert all(opts[-1] is UNNAMED for opts in sets.options)
    assert len(sets.continuous) == 4 and len(sets.discrete) == 6


# --------------------------------------------------------------------------- optional negmas oracle


@pytest.mark.oracle
def test_against_negmas_on_a_grid() -> None:
    negmas = pytest.importorskip("negmas")
    from negmas.preferences import LinearAdditiveUtilityFunction
    from negmas.preferences import pareto_frontier as nm_pareto
    from negmas.preferences.value_fun import TableFun

    for seed in range(4):
        sc = make_scenario(small_domain(), seed)
        sets = issue_sets(sc)
        # every issue becomes a discrete negmas issue whose values index our options
        per_issue = list(sets.discrete) + grid_sets(sets.continuous)
        issues = [negmas.make_issue(list(range(len(p))), f"i{k}") for k, p in enumerate(per_issue)]
        space = negmas.make_os(issues)
        ufuns = [
            LinearAdditiveUtilityFunction(
                values=[TableFun({i: float(p[i, col]) for i in range(len(p))}) for p in per_issue],
                weights=[1.0] * len(per_issue), outcome_space=space)
            for col in (0, 1)
        ]
        nm_points, _ = nm_pareto(ufuns, issues=issues)
        nm_raw = np.asarray(nm_points, dtype=float)
        nm = np.unique(np.round(nm_raw, 9), axis=0)
        brute = np.unique(np.round(brute_pareto(minkowski_all(per_issue)), 9), axis=0)
        np.testing.assert_allclose(nm, brute, atol=1e-9)
        f = pareto_frontier(sc)
        assert_below(f, nm_raw)
        for v in f.points:  # no grid outcome beats an exact frontier vertex
            assert not dominates_strictly(nm_raw, v, 1e-9)
