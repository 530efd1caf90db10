"""The GPU check script imports, parses its arguments and runs its tiny CPU dry run."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_grpo_check.py"


def _load():
    spec = importlib.util.spec_from_file_location("gpu_grpo_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_defaults_are_the_production_shape():
    args = _load().parse_args([])
    assert (args.scenarios, args.rollouts, args.max_rounds, args.hidden, args.layers) == (16, 8, 12, 2048, 16)
    assert not args.dry_run and args.backend == "auto"


def test_shell_wrapper_is_valid_bash():
    sh = ROOT / "benchmarks" / "gpu_check.sh"
    assert sh.is_file()
    subprocess.run(["bash", "-n", str(sh)], check=True)


def test_dry_run_on_cpu(tmp_path):
    pytest.importorskip("trl")
    import torch

    torch.set_num_threads(2)
    out = tmp_path / "summary.json"
    rows = _load().main(["--dry-run", "--out", str(tmp_path / "run"), "--json", str(out)])
    assert len(rows) == 1
    r = rows[0]
    for key in ("step_s", "generation_s", "buyer_s", "update_s", "seller_tokens", "gen_tokens_per_s"):
        assert r[key] is not None and r[key] >= 0, key
    assert json.loads(out.read_text())["backend"] == "hf"
