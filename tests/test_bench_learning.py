"""benchmarks/bench_learning.py (issue 14, the ladder's negotiation rung): the dry run exercises every phase
(warm-up, evaluation of the start, GRPO through build_run, evaluation of the reloaded checkpoint, the paired
bootstrap) on a tiny random model and prints the LEARNING line; a rerun finds the warm-up in its cache."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_learning.py"
LINE = re.compile(r"^LEARNING: gain [+-]\d+\.\d{3} \[[+-]\d+\.\d{3}, [+-]\d+\.\d{3}\] over (\d+) paired episodes, "
                  r"\d+ s$", re.M)


def _module():
    spec = importlib.util.spec_from_file_location("bench_learning", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_learning"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_dry_run_prints_the_learning_line_and_caches_the_warmup(tmp_path):
    out = tmp_path / "result.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--no-progress", "--threads", "1",
                           "--work-dir", str(tmp_path / "work"), "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("LEARNING:")]
    assert len(lines) == 1 and lines[0] == proc.stdout.strip().splitlines()[-1], proc.stdout[-2000:]
    m = LINE.match(lines[0])
    assert m, lines[0]
    res = json.loads(out.read_text())
    assert int(m.group(1)) == res["episodes"] == res["clusters"] == res["setting"]["eval_episodes"]
    assert res["ci_low"] <= res["gain"] <= res["ci_high"]
    assert len(res["step_rewards"]) == res["setting"]["steps"]
    assert Path(res["checkpoint"]).is_dir() and not res["seconds"]["warmup_cached"]
    # the warm-up is cached under the work dir: asking again returns the same folder without training
    mod = _module()
    s = mod.PRESETS["dry"]
    work = tmp_path / "work"
    folder, cached = mod.warmed_up_model(s, mod.initial_model(s, work), work, progress=False)
    assert cached and Path(folder).is_dir()


def test_evaluation_scenarios_are_paired_seed_clusters():
    mod = _module()
    s = mod.PRESETS["quick"]
    sc = mod.eval_scenarios(s)
    assert len(sc) == s.eval_episodes and len({x.seed for x in sc}) == len(sc)
    assert {x.domain.name for x in sc} == {s.domain} and not any(x.domain.held_out for x in sc)
    lesson = mod.lesson_config(s, lr=1e-4)  # the rung is the book's matched lesson with the preset's numbers
    assert (lesson.learning_rate, lesson.steps, lesson.min_valid_terms) == (1e-4, s.steps, s.min_valid_terms)
    assert [(x.domain.name, x.seed) for x in sc] == [(x.domain.name, x.seed) for x in mod.eval_scenarios(s)]
