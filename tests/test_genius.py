"""Genius XML both ways, checked against NegMAS (a test-only oracle: AGPL, never imported by negolib).

Export: NegMAS loads the folder; on random complete contracts its utility of each profile is our U~;
no outcome NegMAS enumerates lies above our exact frontier and every frontier vertex, as a contract,
scores its coordinates in NegMAS. Import (fixtures under tests/fixtures/genius): every outcome's
utility equals NegMAS's with Genius's normalisation (a discrete evaluation over the issue's largest),
reservation values and discount factors are NegMAS's, and on all-discrete fixtures our exact frontier
equals NegMAS's ``pareto_frontier``.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from negolib.games.multi_issue.domains import load_domains
from negolib.games.multi_issue.genius import export_scenario, read_genius_folder
from negolib.games.multi_issue.scenarios import Scenario, make_scenario
from negolib.games.multi_issue.utility import both_utilities
from negolib.study.efficiency import pareto_frontier, vertex_contract

negmas = pytest.importorskip("negmas")
from negmas.inout import Scenario as NegmasScenario  # noqa: E402
from negmas.preferences import LinearAdditiveUtilityFunction  # noqa: E402
from negmas.preferences import pareto_frontier as negmas_frontier  # noqa: E402
from negmas.preferences.value_fun import TableFun  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "genius"
TOL = 1e-9


def _load(folder: Path) -> Any:
    return NegmasScenario.from_genius_folder(folder)


def _by_role(ns: Any, seller_stem: str) -> tuple[Any, Any]:
    """(seller ufun, buyer ufun) of a NegMAS scenario, by the profiles' file stems."""
    seller = next(u for u in ns.ufuns if u.name == seller_stem)
    buyer = next(u for u in ns.ufuns if u.name != seller_stem)
    return seller, buyer


def _base(u: Any) -> Any:
    return getattr(u, "ufun", u)  # a discounted ufun wraps the linear one


def _genius(u: Any, reserved: float | None = None) -> Any:
    """The NegMAS ufun with Genius's normalisation: each discrete table over its largest evaluation
    (``reserved``: another reserved value; NegMAS's frontier keeps only outcomes above them)."""
    base = _base(u)
    values = []
    for v in base.values:
        if isinstance(v, TableFun):
            top = max(v.mapping.values())
            v = TableFun({k: x / top for k, x in v.mapping.items()})
        values.append(v)
    return LinearAdditiveUtilityFunction(values=values, weights=base.weights, outcome_space=base.outcome_space,
                                         reserved_value=base.reserved_value if reserved is None else reserved)


def _ledger(sc: Scenario, outcome: tuple[Any, ...]) -> dict[str, Any]:
    out = {}
    for issue, v in zip(sc.domain.issues, outcome):
        if issue.kind == "binary":
            v = v == "yes"
        elif issue.kind == "table":
            v = str(v)
        out[issue.name] = v
    return out


def _random_outcomes(ns: Any, n: int, seed: int) -> list[tuple[Any, ...]]:
    rng = np.random.default_rng(seed)
    outs = []
    for _ in range(n):
        o = []
        for issue in ns.outcome_space.issues:
            if issue.is_continuous():
                o.append(float(rng.uniform(issue.min_value, issue.max_value)))
            else:
                vals = list(issue.all)
                o.append(vals[int(rng.integers(len(vals)))])
        outs.append(tuple(o))
    return outs


def _check_frontier_bounds(sc: Scenario, su: Any, bu: Any, ns: Any) -> None:
    """No NegMAS Pareto outcome (continuous issues at their two ends, where linear evaluators peak) lies
    above our frontier (NegMAS compares in float32: 1e-6); every vertex of ours, as a contract, scores
    its coordinates in NegMAS."""
    f = pareto_frontier(sc, include_unnamed=False) if not sc.seller.evaluations else pareto_frontier(sc)
    pts, _ = negmas_frontier([su, bu], issues=ns.outcome_space.issues, n_discretization=2)
    for x, y in pts:
        assert y <= float(f.buyer_at(x)) + 1e-6
    for i in range(len(f.points)):
        contract = vertex_contract(sc, f, i, include_unnamed=False) if not sc.seller.evaluations \
            else vertex_contract(sc, f, i)
        outcome = tuple(("yes" if contract[i.name] else "no") if i.kind == "binary" else contract[i.name]
                        for i in sc.domain.issues)
        if any(i.kind == "table" for i in sc.domain.issues):
            outcome = tuple(int(v) if _is_int_issue(ns, k) else v for k, v in enumerate(outcome))
        assert abs(su(outcome) - f.points[i, 0]) < TOL and abs(bu(outcome) - f.points[i, 1]) < TOL


def _is_int_issue(ns: Any, k: int) -> bool:
    issue = ns.outcome_space.issues[k]
    return issue.is_integer() and not issue.is_continuous()


# --------------------------------------------------------------------------- export


@pytest.mark.parametrize("name,seed", [(n, s) for n in sorted(load_domains()) for s in (3,)] + [("car", 5000011)])
def test_export_matches_negmas(tmp_path: Path, name: str, seed: int) -> None:
    sc = make_scenario(load_domains()[name], seed)
    export_scenario(sc, tmp_path)
    ns = _load(tmp_path)
    su, bu = _by_role(ns, f"{name}_{seed}-seller")
    assert su.reserved_value == sc.seller.reservation and bu.reserved_value == sc.buyer.reservation
    for outcome in _random_outcomes(ns, 300, seed):
        ours = both_utilities(sc, _ledger(sc, outcome))
        assert abs(su(outcome) - ours[0]) < TOL and abs(bu(outcome) - ours[1]) < TOL
    _check_frontier_bounds(sc, su, bu, ns)


def test_export_round_trips_through_import(tmp_path: Path) -> None:
    sc = make_scenario(load_domains()["job_offer"], 11)
    export_scenario(sc, tmp_path)
    imp = read_genius_folder(tmp_path)
    assert imp.domain.issue_names == sc.domain.issue_names
    a, b = pareto_frontier(sc, include_unnamed=False), pareto_frontier(imp)
    assert a.points.shape == b.points.shape and np.abs(a.points - b.points).max() < TOL


# --------------------------------------------------------------------------- import


CASES = {"laptop": (None, "laptop-seller"), "numeric": (None, "prof1"), "discounted": ("party_b", "party_b")}


@pytest.mark.parametrize("case", sorted(CASES))
def test_import_matches_negmas(case: str) -> None:
    flag, seller_stem = CASES[case]
    sc = read_genius_folder(FIXTURES / case, seller=flag)
    ns = _load(FIXTURES / case)
    su, bu = _by_role(ns, seller_stem)
    for prefs, u in ((sc.seller, su), (sc.buyer, bu)):
        assert prefs.reservation == _base(u).reserved_value
        assert prefs.discount == getattr(u, "discount", 1.0)
    gs, gb = _genius(su), _genius(bu)
    issues = ns.outcome_space.issues
    if all(not i.is_continuous() for i in issues):
        outcomes = list(itertools.product(*(list(i.all) for i in issues)))
    else:
        outcomes = _random_outcomes(ns, 500, 0)
    for outcome in outcomes:
        ours = both_utilities(sc, _ledger(sc, outcome))
        assert abs(gs(outcome) - ours[0]) < TOL and abs(gb(outcome) - ours[1]) < TOL
    if case == "laptop":  # Genius's normalisation matters here: NegMAS's raw utility differs
        assert any(abs(su(o) - gs(o)) > 1e-3 for o in outcomes)
    if all(not i.is_continuous() for i in issues):
        pts, _ = negmas_frontier([_genius(su, -np.inf), _genius(bu, -np.inf)], issues=issues)
        theirs = sorted({(round(x, 9), round(y, 9)) for x, y in pts})
        f = pareto_frontier(sc)
        ours_pts = sorted({(round(x, 9), round(y, 9)) for x, y in f.points})
        assert ours_pts == theirs and not f.joined.any()
    else:
        _check_frontier_bounds(sc, gs, gb, ns)


def test_roles_from_names_and_flag() -> None:
    sc = read_genius_folder(FIXTURES / "laptop")
    assert "laptop-seller" in sc.domain.briefs["seller"]
    swapped = read_genius_folder(FIXTURES / "laptop", seller="laptop-buyer.xml")
    assert swapped.seller.weights == sc.buyer.weights
    assert [i.kind for i in read_genius_folder(FIXTURES / "numeric").domain.issues] == ["table", "continuous", "table"]
