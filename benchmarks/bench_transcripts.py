"""Benchmark: the cost of validating transcripts on read (issue 13).

Writes ~10k scripted episode records (a few seeds played, then replicated over seeds, arms and
buyers) to a JSONL file, then reads it back in A-B-A order: A is the raw baseline (``json.loads``
of every line, no checks, a dict per key), B is :meth:`TranscriptStore.records` (UTF-8 and JSON
checked per line, every record validated, duplicate and protocol checks). Prints seconds per read
and the ratio B / mean(A). Target: under 2x (validation is plain Python, not a schema library).

Run: ``python benchmarks/bench_transcripts.py [--records N]`` (pin one core with ``taskset -c 0``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from negolib.core.transcripts import TranscriptStore
from negolib.games.multi_issue.rollout import make_specs, run_episodes
from negolib.games.multi_issue.scenarios import eval_seeds, scenario_set
from negolib.games.multi_issue.scripted import make_scripted


def write_file(path: Path, n: int) -> int:
    """~``n`` records: 16 played episodes replicated under distinct keys; returns the byte size."""
    agents = {"boulware": make_scripted("boulware"), "conceder": make_scripted("conceder")}
    specs = make_specs("a", "boulware", ["conceder"], scenario_set(eval_seeds(2), None)[:16])
    base = run_episodes(specs, agents, progress=False).records
    with open(path, "w") as fh:
        for i in range(n):
            rec = dict(base[i % len(base)], arm=f"arm{i // 1000}", seed=base[i % len(base)]["seed"] + i)
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
    return path.stat().st_size


def raw_read(path: Path) -> int:
    """The baseline: decode every line, keep the last record per key, no checks."""
    latest = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            latest[(rec["arm"], rec["domain"], rec["seed"], rec["buyer"])] = rec
    return len(latest)


def timed(fn) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    n = fn()
    return time.perf_counter() - t0, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.jsonl"
        size = write_file(path, args.records)
        store = TranscriptStore(path)
        raw_read(path)  # warm the page cache
        a1, n1 = timed(lambda: raw_read(path))
        b, n2 = timed(lambda: len(store.records()))
        a2, n3 = timed(lambda: raw_read(path))
    assert n1 == n2 == n3 == args.records, (n1, n2, n3)
    a = (a1 + a2) / 2
    print(f"{args.records} records, {size / 1e6:.1f} MB")
    print(f"A raw json.loads          {a1:.3f} s")
    print(f"B validated records()     {b:.3f} s")
    print(f"A raw json.loads (again)  {a2:.3f} s")
    print(f"ratio B / mean(A)         {b / a:.2f}x (target < 2x)")


if __name__ == "__main__":
    main()
