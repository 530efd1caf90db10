"""The command line: evaluate (resumable), summary, domains, clear errors."""

from __future__ import annotations

import subprocess
import sys

from negolib.cli import main
from negolib.transcripts import TranscriptStore


def test_evaluate_writes_transcripts_resumes_and_prints_summary(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    args = ["evaluate", "--sellers", "fixed_offer,boulware", "--buyers", "conceder,hardheaded", "--seeds", "2",
            "--domains", "car,job_offer", "--out", str(out), "--no-progress"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "16 episodes played, 0 already complete" in text
    for col in ("score", "deal_rate", "deal_utility", "welfare", "mean_turns", "bad_parse_rate"):
        assert col in text
    assert len(TranscriptStore(out).records()) == 16
    assert main(args) == 0
    assert "0 episodes played, 16 already complete" in capsys.readouterr().out
    assert main(["summary", str(out)]) == 0
    assert "fixed_offer" in capsys.readouterr().out


def test_buyer_opens_flag(tmp_path):
    out = tmp_path / "t.jsonl"
    main(["evaluate", "--sellers", "linear", "--buyers", "linear", "--seeds", "1", "--domains", "car",
          "--first-mover", "buyer", "--out", str(out), "--no-progress"])
    rec = TranscriptStore(out).records()[0]
    assert rec["turns"][0]["role"] == "buyer" and rec["config"]["first_mover"] == "buyer"


def test_module_entry_point_and_errors(tmp_path):
    r = subprocess.run([sys.executable, "-m", "negolib", "domains"], capture_output=True, text=True, check=True)
    assert "car (held out)" in r.stdout and "price" in r.stdout
    r = subprocess.run([sys.executable, "-m", "negolib", "evaluate", "--sellers", "nonsense", "--seeds", "1",
                        "--out", str(tmp_path / "x.jsonl")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("error:") and "choose from" in r.stderr
    r = subprocess.run([sys.executable, "-m", "negolib", "summary", str(tmp_path / "none.jsonl")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "no transcript file" in r.stderr
