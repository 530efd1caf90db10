"""The GPU learning check (issue 14 item 3) parses, renders, and runs every phase in its tiny CPU dry run."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_learning_check.py"


def _load():
    spec = importlib.util.spec_from_file_location("gpu_learning_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_defaults_are_the_paper_shapes():
    args = _load().parse_args([])
    assert (args.scenarios, args.rollouts, args.max_rounds) == (16, 8, 12)
    assert 128 <= args.max_new_tokens <= 768 and 128 <= args.eval_max_new_tokens <= 768
    assert args.eval_seeds * len(args.eval_buyers.split(",")) >= 128  # paired episodes per arm (one domain)
    assert {"plain", "paged"} <= set(args.ab_paths.split(",")) and args.train_gen == "auto"
    assert args.model == "auto" and not args.dry_run


def test_shell_wrapper_is_valid_bash():
    sh = ROOT / "benchmarks" / "gpu_learning_check.sh"
    subprocess.run(["bash", "-n", str(sh)], check=True)
    text = sh.read_text()
    for mode in ("--prepare", "--stage", "--dry-run", "timeout"):
        assert mode in text


def test_render_and_readme_block(tmp_path):
    mod = _load()
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n## GPU learning check (issue 14 item 3): prepared, NOT yet run\n\n{mod.README_BEGIN}\n"
                      f"old\n{mod.README_END}\n\ntail\n")
    res = {"device": {"cuda": True, "gpu": "H200"}, "model": {"source": "m"}, "phases": {},
           "status": {"training": "failed: X"}}
    mod.update_readme(readme, mod.render_markdown(res), gpu_run=True)
    text = readme.read_text()
    assert "old" not in text and "failed: X" in text and text.endswith("tail\n")
    assert "## GPU learning check (issue 14 item 3), as measured" in text


def test_auto_generation_path_is_the_fastest_that_worked():
    mod = _load()
    ab = {"paths": {"plain": {"status": "ok", "tokens_per_s": 1676.0},
                    "agent": {"status": "ok", "tokens_per_s": 4512.0},
                    "paged": {"status": "ok", "tokens_per_s": 860.0},
                    "static": {"status": "ok", "tokens_per_s": 9e9}}}
    auto = mod.parse_args([])
    assert mod.generation_path(auto, ab) == "agent"  # the H200's A/B of 2026-12-04 (static is not a training path)
    assert mod.generation_path(auto, None) == "paged"
    ab["paths"]["agent"]["status"] = "failed: RuntimeError"
    assert mod.generation_path(auto, ab) == "plain"
    ab["paths"]["paged"]["status"] = "failed: RuntimeError"
    assert mod.generation_path(mod.parse_args(["--train-gen", "paged"]), ab) == "plain"  # a failed choice: plain


@pytest.mark.parametrize("gen", ["paged", "agent"])
def test_dry_run_every_phase(tmp_path, gen):
    pytest.importorskip("trl")
    import torch

    torch.set_num_threads(2)
    out = tmp_path / "r.json"
    md = tmp_path / "r.md"
    # A deadline already passed: training stops by the deadline after its one guaranteed step.
    res = _load().main(["--dry-run", "--deadline-s", "1", "--out", str(tmp_path / "work"), "--json", str(out),
                        "--markdown", str(md), "--train-gen", gen])
    data = json.loads(out.read_text())
    assert data["status"] == {p: "ok" for p in ("generation_ab", "warmup", "training", "evaluation")}, data["status"]
    ab = data["phases"]["generation_ab"]
    for name in ("plain", "agent", "paged", "static"):
        row = ab["paths"][name]
        assert row["status"] == "ok" and row["tokens"] == ab["rows"] * ab["new_tokens_per_row"], (name, row)
        assert row["tokens_per_s"] > 0
    tr = data["phases"]["training"]
    assert tr["steps"] == 1 and tr["stopped_by_deadline"] and tr["generation"] == gen
    assert tr["paged_failure"] is None and len(tr["curve"]) == 1
    for key in ("reward", "score", "deal_rate", "kl", "step_s"):
        assert tr["curve"][0][key] is not None, key
    ev = data["phases"]["evaluation"]
    assert ev["episodes_per_arm"] == 8
    for arm in ("start", "trained"):
        assert ev["arms"][arm]["episodes"] == 8 and ev["arms"][arm]["paged_failure"] is None
        assert ev["arms"][arm]["generation"] == gen
    for metric in ("score", "deal_rate", "seller_bad_parse_rate"):
        c = ev["contrasts"][metric]
        assert c["n_episodes"] == 8 and c["ci_low"] <= c["estimate"] <= c["ci_high"]
    assert ev["weight_change_rel"] is not None and ev["weight_change_rel"] > 0
    assert "Paired evaluation" in md.read_text() and res["dry_run"]
