"""Benchmark: the two market games' scripted episode sets and the multi-product allocation oracle (issue 17).

Three timings, each against a baseline measured in the same run, alternated A-B-A-... (the batched or exact path A,
the baseline B) so a steady drift of a shared host cancels; medians and ranges of CPU time are quoted:
1. ``multi_buyer``: every scripted seller against the buyer pool on the evaluation set (42 seeds x 6 markets x 4
   sellers = 1,008 episodes), batched waves against a per-episode loop (one ``play`` call per episode).
2. ``multi_product``: the same for its four scripted sellers (1,008 episodes).
3. The exact assignment oracle at K = M = 50 (``linear_sum_assignment``) against the greedy matcher.
Targets (issue 17): 1,000 episodes under 1 s of CPU per game; the oracle in milliseconds. ``--quick``: 4 seeds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from negolib.games.multi_buyer.buyers import ScriptedBuyers as MBBuyers
from negolib.games.multi_buyer.play import play_episodes as mb_play
from negolib.games.multi_buyer.scenarios import evaluation_set as mb_scenarios
from negolib.games.multi_buyer.sellers import SELLERS as MB_SELLERS
from negolib.games.multi_buyer.sellers import make_seller as mb_seller
from negolib.games.multi_product.buyers import ScriptedBuyers as MPBuyers
from negolib.games.multi_product.oracle import best_assignment, greedy_assignment
from negolib.games.multi_product.play import play_episodes as mp_play
from negolib.games.multi_product.scenarios import MarketConfig, make_scenario
from negolib.games.multi_product.scenarios import evaluation_set as mp_scenarios
from negolib.games.multi_product.sellers import SELLERS as MP_SELLERS
from negolib.games.multi_product.sellers import make_seller as mp_seller


def cpu(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(CPU seconds, result) of one call."""
    t = time.process_time()
    out = fn()
    return time.process_time() - t, out


def alternate(a: Callable[[], Any], b: Callable[[], Any], rounds: int) -> tuple[list[float], list[float], Any, Any]:
    """A, B, A, B, ..., A (``rounds`` B runs, ``rounds + 1`` A runs): the CPU times of each and their last results."""
    ta, tb = [], []
    out_a = out_b = None
    for i in range(2 * rounds + 1):
        if i % 2 == 0:
            t, out_a = cpu(a)
            ta.append(t)
        else:
            t, out_b = cpu(b)
            tb.append(t)
    return ta, tb, out_a, out_b


def span(ts: Sequence[float], unit: float = 1.0, fmt: str = "{:.3f}") -> str:
    """``median [min, max]`` of ``ts`` in ``unit``s."""
    xs = [t / unit for t in ts]
    return f"{fmt.format(statistics.median(xs))} [{fmt.format(min(xs))}, {fmt.format(max(xs))}]"


def episodes_bench(game: str, play: Callable[..., list[dict]], sellers: dict[str, Any], make: Callable[..., Any],
                   buyers: Callable[[], Any], scenarios: list[Any], rounds: int) -> float:
    """Time one game's scripted set, batched against the per-episode loop; returns the batched median per 1,000."""
    def batched() -> list[dict]:
        return [r for s in sellers for r in play(make(s, 0), buyers(), scenarios)]

    def loop() -> list[dict]:
        out = []
        for s in sellers:
            seller, buyer = make(s, 0), buyers()
            for sc in scenarios:
                rec = play(seller, buyer, [sc])[0]
                out.append(rec)
        return out

    play(make(next(iter(sellers)), 0), buyers(), scenarios[:8])  # warm imports and caches
    ta, tb, rec_a, rec_b = alternate(batched, loop, rounds)
    assert rec_a == rec_b, "batched and per-episode play disagree"
    n = len(rec_a)
    turns = sum(len(r["turns"]) for r in rec_a)
    errors = sum(r["status"] == "error" for r in rec_a)
    per_k = statistics.median(ta) * 1000 / n
    print(f"{game}: {n:,} episodes ({len(scenarios)} scenarios x {len(sellers)} scripted sellers vs the buyer pool), "
          f"{turns:,} turns, {errors} errors")
    print(f"  batched waves    : {span(ta)} s CPU (median [range] of {len(ta)} runs)  "
          f"{n / statistics.median(ta):,.0f} episodes/s  {statistics.median(ta) / turns * 1e6:.1f} us/turn")
    print(f"  per-episode loop : {span(tb)} s CPU ({len(tb)} runs, alternated with the batched runs)")
    print(f"  ratio (loop / batched, medians): {statistics.median(tb) / statistics.median(ta):.2f}x")
    print(f"  per 1,000 episodes, batched: {per_k:.3f} s CPU (target < 1 s): {'MET' if per_k < 1 else 'NOT MET'}")
    return per_k


def oracle_bench(size: int, calls: int, rounds: int) -> float:
    """Time the exact oracle against the greedy matcher on a K = M = ``size`` market; returns its median ms."""
    sc = make_scenario(MarketConfig(n_products=size, n_buyers=size, turn_budget=4 * size), 5_000_000, "bench")
    w = np.asarray(sc.valuations) - np.asarray(sc.costs)[None, :]
    best_assignment(w)
    ta, tb, exact, greedy = alternate(lambda: [best_assignment(w) for _ in range(calls)][-1],
                                      lambda: [greedy_assignment(w) for _ in range(calls)][-1], rounds)
    ms = statistics.median(ta) / calls * 1e3
    print(f"assignment oracle, K = M = {size} (welfare weights of a drawn market), {calls} calls per run:")
    print(f"  exact (linear_sum_assignment): {span(ta, calls / 1e3)} ms a call (median [range] of {len(ta)} runs)")
    print(f"  greedy matcher (baseline)    : {span(tb, calls / 1e3)} ms a call ({len(tb)} runs, alternated)")
    print(f"  ratio (greedy / exact time, medians): {statistics.median(tb) / statistics.median(ta):.2f}x; greedy "
          f"reaches {greedy.value / exact.value:.4f} of the optimum ({greedy.value:.2f} / {exact.value:.2f})")
    capped = best_assignment(w, size // 2)
    t_cap, _ = cpu(lambda: [best_assignment(w, size // 2) for _ in range(calls)])
    print(f"  exact with a cap of {size // 2} pairs (the turn budget): {t_cap / calls * 1e3:.3f} ms a call, "
          f"{len(capped.pairs)} pairs, value {capped.value:.2f}")
    print(f"  oracle in milliseconds (target): {'MET' if ms < 10 else 'NOT MET'} ({ms:.3f} ms)")
    return ms


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=42, help="evaluation seeds per market (42: 1,008 episodes a game)")
    ap.add_argument("--rounds", type=int, default=2, help="baseline runs (the timed path runs one more, around them)")
    ap.add_argument("--size", type=int, default=50, help="K = M of the oracle benchmark")
    ap.add_argument("--quick", action="store_true", help="4 seeds, one round, 20 oracle calls a run")
    args = ap.parse_args(argv)
    seeds, rounds, calls = (4, 1, 20) if args.quick else (args.seeds, args.rounds, 200)
    episodes_bench("multi_buyer", mb_play, MB_SELLERS, mb_seller, MBBuyers, mb_scenarios(seeds), rounds)
    episodes_bench("multi_product", mp_play, MP_SELLERS, mp_seller, MPBuyers, mp_scenarios(seeds), rounds)
    oracle_bench(args.size, calls, rounds)


if __name__ == "__main__":
    main()
