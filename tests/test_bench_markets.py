"""benchmarks/bench_markets.py --quick runs both market games' scripted sets and the oracle and prints every line
the full run prints (timings are printed, never asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_markets.py"
NUM = r"\d+\.\d+"


def test_quick_run_prints_both_games_and_the_oracle_with_ratios():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--size", "20"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for game in ("multi_buyer", "multi_product"):
        m = re.search(rf"^{game}: 96 episodes \(24 scenarios x 4 scripted sellers vs the buyer pool\), [\d,]+ turns, "
                      r"0 errors$", out, re.M)
        assert m, out
    assert len(re.findall(rf"^  batched waves    : {NUM} \[{NUM}, {NUM}\] s CPU \(median \[range\] of 2 runs\)",
                          out, re.M)) == 2
    assert len(re.findall(rf"^  ratio \(loop / batched, medians\): {NUM}x$", out, re.M)) == 2
    assert len(re.findall(r"^  per 1,000 episodes, batched: \d+\.\d{3} s CPU \(target < 1 s\): (MET|NOT MET)$", out,
                          re.M)) == 2
    assert "assignment oracle, K = M = 20" in out
    m = re.search(rf"ratio \(greedy / exact time, medians\): {NUM}x; greedy reaches (0\.\d+|1\.0+) of the optimum", out)
    assert m and 0.5 <= float(m.group(1)) <= 1.0
    assert re.search(r"^  oracle in milliseconds \(target\): (MET|NOT MET) \(\d+\.\d{3} ms\)$", out, re.M)
