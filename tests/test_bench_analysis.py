"""``benchmarks/bench_analysis.py --smoke`` runs end to end (issue 16, section 5): the ANALYSIS line,
and the tables and frames of notebooks 05-09 computed from its synthetic transcripts. No timing is
asserted."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

from negolib.core.transcripts import TranscriptStore

ROOT = Path(__file__).resolve().parents[1]
SMOKE_ARMS = {"e2b_base", "e2b_shared_104", "e2b_lr3_56", "e4b_base", "e4b_shared_104", "sonnet5", "terra"}


def test_bench_analysis_smoke(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_analysis.py"), "--smoke",
                           "--repeats", "1", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = re.search(r"^ANALYSIS: (\d+) arms, (\d+) episodes, ([0-9.]+) s$", proc.stdout, re.M)
    assert m, proc.stdout
    n_arms, n_episodes = int(m.group(1)), int(m.group(2))
    assert n_arms == len(SMOKE_ARMS)
    assert n_episodes == n_arms * 4 * 3 * 2  # 4 seeds x 3 domains x 2 buyers per arm
    for stage in ("reading/validating", "arm estimates", "contrasts", "decomposition", "guards", "figures"):
        assert re.search(rf"^  {re.escape(stage)}\s+[0-9.]+ s \[", proc.stdout, re.M), stage
    assert re.search(r"ratio reading/validating \(B\) / json\.loads \(A\), medians: [0-9.]+x", proc.stdout)

    # the transcripts are valid records of the real schema: the real reader takes them all
    recs = TranscriptStore(tmp_path / "transcripts" / "evaluation.jsonl").records()
    assert len(recs) == n_episodes and {r["arm"] for r in recs} == SMOKE_ARMS
    assert {r["status"] for r in recs} >= {"deal", "no_deal"}
    assert any(r["outcome"]["seller_bad_parses"] for r in recs)

    frames = tmp_path / "bench_frames"
    est = pd.read_csv(frames / "estimates.csv")
    assert set(est["arm"]) == SMOKE_ARMS
    assert {"score", "deal_rate", "bad_parse_rate"} <= set(est["metric"])
    contrasts = pd.read_csv(frames / "contrasts.csv")
    pairs = set(zip(contrasts["arm_a"], contrasts["arm_b"]))
    assert {("e2b_shared_104", "e2b_base"), ("e4b_shared_104", "e4b_base")} <= pairs
    assert contrasts["primary"].sum() == 2 and contrasts["p_holm"].notna().sum() == 2
    assert contrasts["estimate"].abs().max() > 0  # arms differ: contrasts are non-trivial
    for name in ("rerun_primary", "rerun_held", "held_out", "decomposition", "guards", "efficiency"):
        assert len(pd.read_csv(frames / f"{name}.csv")), name
    assert set(pd.read_csv(frames / "rerun_primary.csv")[["arm_a", "arm_b"]].itertuples(index=False)) == \
        {("e2b_shared_104", "e2b_base"), ("e4b_shared_104", "e4b_base")}

    tables = tmp_path / "tables"
    for name in ("primary_family", "table1", "table2", "table3", "table4", "table9", "heldout", "guards",
                 "mc_error", "frontier"):
        assert len(pd.read_csv(tables / f"{name}.csv")), name
    t3 = pd.read_csv(tables / "table3_data.csv")
    assert set(t3["arm"]) <= SMOKE_ARMS and {"e2b_base", "sonnet5"} <= set(t3["arm"])
    for fig in ("figure2", "figure3", "pareto_frontier"):
        assert (tmp_path / "figures" / f"{fig}.png").stat().st_size > 0
