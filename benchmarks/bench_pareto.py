"""Benchmark: the exact Pareto frontier of a 10-issue scenario (the car domain) vs negmas on a grid.

Times :func:`negolib.study.efficiency.pareto_frontier` (exact, continuous terms included) per scenario
over many seeds, and the full oracle (frontier + Nash + Kalai) over the evaluation scenario set.
Then, when negmas is importable (an optional AGPL oracle, never imported by negolib), times
``negmas.preferences.pareto_frontier`` on a grid of the same scenarios (each continuous term at
``--grid`` evenly spaced values, every level of every integrative term, plus "unnamed"), checks
that no grid outcome lies above the exact frontier, and prints the per-scenario time ratio. SPEC
target: a 10-issue scenario in milliseconds.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from negolib.games.multi_issue.domains import get_domain
from negolib.games.multi_issue.scenarios import Scenario, evaluation_set, make_scenario
from negolib.study.efficiency import Frontier, ScenarioOracle, issue_sets, pareto_frontier


def grid_per_issue(scenario: Scenario, n_grid: int) -> list[np.ndarray]:
    """(m_k, 2) contribution points per issue: integrative options, then continuous terms at n_grid values."""
    sets = issue_sets(scenario)
    t = np.linspace(0.0, 1.0, n_grid)
    cont = [np.column_stack([ws * t, wb * (1 - t)]) for ws, wb in sets.continuous]
    return list(sets.discrete) + cont


def negmas_frontier(per_issue: list[np.ndarray]) -> tuple[np.ndarray, float]:
    """negmas's Pareto frontier of the grid, (p, 2), and the seconds it took (ufun build excluded)."""
    import negmas
    from negmas.preferences import LinearAdditiveUtilityFunction
    from negmas.preferences import pareto_frontier as nm_pareto
    from negmas.preferences.value_fun import TableFun

    issues = [negmas.make_issue(list(range(len(p))), f"i{k}") for k, p in enumerate(per_issue)]
    space = negmas.make_os(issues)
    ufuns = [LinearAdditiveUtilityFunction(
        values=[TableFun({i: float(p[i, col]) for i in range(len(p))}) for p in per_issue],
        weights=[1.0] * len(per_issue), outcome_space=space) for col in (0, 1)]
    t0 = time.perf_counter()
    pts, _ = nm_pareto(ufuns, issues=issues)
    return np.asarray(pts, dtype=float).reshape(-1, 2), time.perf_counter() - t0


def grid_gap(frontier: Frontier, pts: np.ndarray) -> tuple[float, float]:
    """(largest height of a grid point above the exact frontier, mean distance of grid Pareto points
    below it)."""
    above = pts[:, 1] - frontier.buyer_at(pts[:, 0])
    dist = np.array([frontier.distance(p) for p in pts])
    return float(np.nanmax(np.where(above > 0, np.minimum(above, dist), 0.0))), float(dist.mean())


def time_exact(scenarios: list[Scenario], repeats: int) -> float:
    """Best-of-``repeats`` mean seconds per scenario of the exact frontier."""
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for sc in scenarios:
            pareto_frontier(sc)
        best = min(best, (time.perf_counter() - t0) / len(scenarios))
    return best


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--domain", default="car")
    ap.add_argument("--seeds", type=int, default=500, help="scenarios timed for the exact frontier")
    ap.add_argument("--negmas-seeds", type=int, default=3, help="scenarios timed with negmas")
    ap.add_argument("--grid", type=int, default=3, help="values per continuous term on the negmas grid")
    ap.add_argument("--quick", action="store_true", help="50 seeds, 1 negmas scenario on a 2-value grid")
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds, args.negmas_seeds, args.grid = 50, 1, 2
    dom = get_domain(args.domain)
    scenarios = [make_scenario(dom, 5_000_000 + s) for s in range(args.seeds)]
    pareto_frontier(scenarios[0])  # warm imports
    exact = time_exact(scenarios, 3)
    sizes = [len(pareto_frontier(sc).points) for sc in scenarios[:50]]
    print(f"domain {dom.name}: {len(dom.issues)} issues, {args.seeds} scenarios")
    print(f"exact frontier : {exact * 1e3:8.3f} ms/scenario  ({np.mean(sizes):.0f} vertices on average)")
    eval_set = evaluation_set(8 if args.quick else 64)
    t0 = time.perf_counter()
    for sc in eval_set:
        ScenarioOracle.of(sc)
    oracle = (time.perf_counter() - t0) / len(eval_set)
    print(f"full oracle    : {oracle * 1e3:8.3f} ms/scenario over the {len(eval_set)}-scenario evaluation set "
          f"(frontier + Nash + Kalai); target: milliseconds -> {'MET' if oracle < 0.01 else 'NOT MET'}")
    out: dict[str, Any] = {"exact_ms": exact * 1e3, "oracle_ms": oracle * 1e3}
    try:
        import negmas  # noqa: F401
    except ImportError:
        print("negmas not importable: no ratio (install the 'oracle' extra)")
        return out
    nm_times, gaps, mean_dist = [], [], []
    for sc in scenarios[:args.negmas_seeds]:
        per_issue = grid_per_issue(sc, args.grid)
        pts, dt = negmas_frontier(per_issue)
        above, below = grid_gap(pareto_frontier(sc), pts)
        nm_times.append(dt)
        gaps.append(above)
        mean_dist.append(below)
    n_out = int(np.prod([len(p) for p in grid_per_issue(scenarios[0], args.grid)]))
    nm = float(np.mean(nm_times))
    print(f"negmas grid    : {nm * 1e3:8.1f} ms/scenario  ({n_out} outcomes: {args.grid} values per continuous "
          f"term, every level + unnamed; {len(nm_times)} scenarios)")
    print(f"ratio (negmas grid / exact): {nm / exact:,.0f}x")
    print(f"grid vs exact  : max height of a grid point above the exact frontier {max(gaps):.1e}; "
          f"mean distance of grid Pareto points below it {np.mean(mean_dist):.4f}")
    out.update(negmas_ms=nm * 1e3, ratio=nm / exact, max_above=max(gaps))
    return out


if __name__ == "__main__":
    main()
