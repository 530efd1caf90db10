"""Benchmark: the environment + scripted agents over the full 1,152-episode evaluation set.

One scripted seller against two scripted buyers (64 seeds x 9 domains x 2 buyers). Prints CPU
time, episodes/s and the ratio of the batched engine (``run_episodes``) against the simplest
per-episode loop (``play_one``) measured in the same run. SPEC target: the whole set in under
1 s of CPU time.
"""

from __future__ import annotations

import argparse
import time

from negolib.games.multi_issue.rollout import make_specs, play_one, run_episodes
from negolib.games.multi_issue.scenarios import evaluation_set
from negolib.games.multi_issue.scripted import make_scripted


def _timed(fn) -> tuple[float, float, object]:
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - c0, time.perf_counter() - w0, out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seller", default="boulware")
    ap.add_argument("--buyers", default="hardheaded,conceder")
    ap.add_argument("--seeds", type=int, default=64, help="seeds per domain (64 = the full set)")
    ap.add_argument("--quick", action="store_true", help="8 seeds per domain")
    args = ap.parse_args(argv)
    seeds = 8 if args.quick else args.seeds
    buyers = args.buyers.split(",")
    agents = {n: make_scripted(n) for n in [args.seller, *buyers]}
    specs = make_specs(args.seller, args.seller, buyers, evaluation_set(seeds))
    n = len(specs)
    run_episodes(specs[:32], agents, progress=False)  # warm caches and imports
    cpu_b, wall_b, res = _timed(lambda: run_episodes(specs, agents, progress=False))
    cpu_l, wall_l, loop = _timed(lambda: [play_one(s, agents) for s in specs])
    assert res.records == loop, "batched and per-episode engines disagree"
    turns = sum(len(r["turns"]) for r in res.records)
    print(f"episodes: {n} ({seeds} seeds x 9 domains x {len(buyers)} buyers), turns: {turns}")
    print(f"batched engine : {cpu_b:6.3f} s CPU ({wall_b:6.3f} s wall)  {n / cpu_b:8.0f} episodes/s  "
          f"{turns / cpu_b:8.0f} turns/s")
    print(f"per-episode loop: {cpu_l:6.3f} s CPU ({wall_l:6.3f} s wall)  {n / cpu_l:8.0f} episodes/s")
    print(f"ratio (loop / batched CPU time): {cpu_l / cpu_b:.2f}x")
    scale = 1152 / n
    print(f"full 1,152-episode set, batched: {cpu_b * scale:.2f} s CPU (target < 1 s): "
          f"{'MET' if cpu_b * scale < 1 else 'NOT MET'}")


if __name__ == "__main__":
    main()
