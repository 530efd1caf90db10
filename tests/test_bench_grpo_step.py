"""benchmarks/bench_grpo_step.py (issue 27, cheaper steps): the dry run times every variant on a tiny model and
prints each lever's ratio against its baseline measured in the same run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[1]


def test_dry_run_times_every_variant_and_prints_the_ratios(tmp_path):
    out = tmp_path / "result.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_grpo_step.py"), "--dry-run",
                           "--rounds", "1", "--threads", "1", "--work-dir", str(tmp_path / "w"), "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads(out.read_text())
    assert set(res["variants"]) == {"reference", "no_reference", "untrimmed", "trimmed", "stock_prompt",
                                   "shared_prompt"}
    assert set(res["ratios"]) == {"no_reference/reference", "trimmed/untrimmed", "shared_prompt/stock_prompt"}
    assert all(v > 0 for v in res["ratios"].values())
    assert proc.stdout.count("GRPO STEP:") == 3


def test_a_recipe_may_not_change_the_lessons_task(tmp_path):
    from negolib.study.lesson import train_lesson
    from negolib.training.config import LessonConfig

    with pytest.raises(ValueError, match="task"):
        train_lesson(LessonConfig(start_run="x"), tmp_path, tmp_path / "o", recipe={"max_rounds": 3})
