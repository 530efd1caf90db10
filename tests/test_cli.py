"""The command line: evaluate (resumable, settings checked, one run per file), summary (validated,
one protocol), domains, clear errors without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from negolib.cli import main
from negolib.core.transcripts import TranscriptStore


def test_evaluate_writes_transcripts_resumes_and_prints_summary(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    args = ["evaluate", "--sellers", "fixed_offer,boulware", "--buyers", "conceder,hardheaded", "--seeds", "2",
            "--domains", "car,job_offer", "--out", str(out), "--no-progress"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "16 episodes played, 0 already complete" in text
    for col in ("score", "deal_rate", "deal_utility", "welfare", "mean_turns", "bad_parse_rate",
                "invalid_accept_rate"):
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


# -- resume checks, the run lock, validated summaries ------------------------------------------------

EVAL = ["evaluate", "--sellers", "fixed_offer,boulware", "--buyers", "conceder", "--seeds", "1", "--domains", "car",
        "--no-progress"]


def test_a_rerun_with_other_settings_refuses_and_says_what_differs(tmp_path, capsys):
    out = tmp_path / "E.jsonl"
    assert main([*EVAL, "--out", str(out)]) == 0
    capsys.readouterr()
    before = out.read_bytes()
    assert main([*EVAL, "--out", str(out), "--max-rounds", "2", "--first-mover", "buyer", "--agent-seed", "5"]) == 2
    cap = capsys.readouterr()
    assert "already complete" not in cap.out
    err = cap.err
    assert err.startswith(f"error: {out}:1: 2 complete episode(s)")
    for text in ("config.max_rounds: 12 in the file, 2 in this run", 'config.first_mover: "seller" in the file',
                 "agent_seed: 0 in the file, 5 in this run", "seller.seed: 0 in the file, 5 in this run",
                 "another --out"):
        assert text in err, err
    assert out.read_bytes() == before
    assert main([*EVAL, "--out", str(tmp_path / "other.jsonl"), "--max-rounds", "2"]) == 0
    assert main([*EVAL, "--out", str(out)]) == 0  # the same settings still resume
    assert "0 episodes played, 2 already complete" in capsys.readouterr().out


def test_a_second_run_on_the_same_file_refuses(tmp_path, capsys):
    out = tmp_path / "E.jsonl"
    with TranscriptStore(out).run_lock():
        assert main([*EVAL, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {out}: another run is writing this transcript file") and "E.jsonl.lock" in err
    assert not out.exists()


def _deal_record(tmp_path):
    out = tmp_path / "src.jsonl"
    main(["evaluate", "--sellers", "boulware", "--buyers", "conceder", "--seeds", "2", "--domains", "car",
          "--out", str(out), "--no-progress"])
    lines = out.read_text().splitlines()
    return [json.loads(x) for x in lines]


def _summary_error(path, capsys) -> str:
    assert main(["summary", str(path)]) == 2
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err and cap.out == ""
    return cap.err


def test_summary_refuses_out_of_range_and_unknown_status(tmp_path, capsys):
    recs = _deal_record(tmp_path)
    capsys.readouterr()
    path = tmp_path / "E.jsonl"
    forged = json.loads(json.dumps(recs))
    forged[1]["outcome"].update(seller_utility=5.0, score=5.0)
    path.write_text("".join(json.dumps(r) + "\n" for r in forged))
    assert _summary_error(path, capsys).startswith(f"error: {path}:2: field 'outcome.seller_utility'")
    path.write_text("".join(json.dumps(r) + "\n" for r in [recs[0], {**recs[1], "status": "settled"}]))
    assert "unknown status 'settled'" in _summary_error(path, capsys)


MALFORMED = [
    ("array", lambda rec: b"[1, 2]\n", ":2: must be a JSON object"),
    ("outcome-string", lambda rec: json.dumps({**rec, "outcome": "deal"}).encode() + b"\n", ":2: field 'outcome'"),
    ("no-turns", lambda rec: json.dumps({k: v for k, v in rec.items() if k != "turns"}).encode() + b"\n",
     ":2: field 'turns': is required"),
    ("text-seed", lambda rec: json.dumps({**rec, "seed": "5000001"}).encode() + b"\n", ":2: field 'seed'"),
    ("utf8", lambda rec: json.dumps(rec).encode().replace(b"car", b"c\xe9r", 1) + b"\n", ":2: not valid UTF-8"),
]


@pytest.mark.parametrize("name, bad_line, message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_summary_names_file_and_line_of_malformed_input(tmp_path, capsys, name, bad_line, message):
    recs = _deal_record(tmp_path)
    capsys.readouterr()
    path = tmp_path / "E.jsonl"
    path.write_bytes(json.dumps(recs[0]).encode() + b"\n" + bad_line(recs[1]))
    err = _summary_error(path, capsys)
    assert err.startswith(f"error: {path}{message}"), err


def test_summary_of_an_empty_file_and_no_traceback_from_the_command_line(tmp_path):
    path = tmp_path / "E.jsonl"
    path.write_bytes(b"")
    r = subprocess.run([sys.executable, "-m", "negolib", "summary", str(path)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr == f"error: {path}: empty file (no records)\n"
    path.write_bytes(b'{"schema": 2, "arm": "x\xff"}\n')
    r = subprocess.run([sys.executable, "-m", "negolib", "summary", str(path)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith(f"error: {path}:1: not valid UTF-8")
    assert "Traceback" not in r.stderr


def test_summary_refuses_another_protocols_records(tmp_path, capsys):
    from negolib.games.multi_issue.scripted import make_scripted
    from negolib.study.evaluation import ArmSpec, DeviationLog, Protocol, SeedBlock, evaluate_arms, freeze

    scripted = {"backend": "scripted"}
    p = Protocol("tiny", (ArmSpec("fixed", {**scripted, "strategy": "fixed_offer"}),),
                 {"con": {**scripted, "strategy": "conceder"}}, ("car",), seeds=SeedBlock(n=2))
    proto = tmp_path / "protocol.yaml"
    freeze(p, proto)
    path = tmp_path / "E.jsonl"
    evaluate_arms(p, {"fixed": make_scripted("fixed_offer"), "con": make_scripted("conceder")}, path, progress=False)
    assert main(["summary", str(path), "--protocol", str(proto)]) == 0
    capsys.readouterr()
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    recs[1]["protocol_hash"] = "f" * 64
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert "one analysis never mixes protocols" in _summary_error(path, capsys)
    assert main(["summary", str(path), "--protocol", str(proto)]) == 2
    assert "records of another protocol" in capsys.readouterr().err
    path.write_text("".join(json.dumps({**r, "protocol_hash": "f" * 64}) + "\n" for r in recs))
    assert main(["summary", str(path), "--protocol", str(proto)]) == 2  # all foreign: still refused
    assert "fixed: 2 record(s) with ffffffffffff" in capsys.readouterr().err
    DeviationLog.for_protocol(proto).log_deviation(["fixed"], "played under the draft protocol", True)
    assert main(["summary", str(path), "--protocol", str(proto)]) == 0


def test_train_command_runs_the_smoke_profile_and_resumes(tmp_path, capsys):
    argv = ["train", "--params", "params/smoke.yaml", "--output-dir", str(tmp_path), "--runs", "tiny_grpo",
            "--no-progress"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert "tiny_grpo (seed 0)" in first
    assert main(argv) == 0  # a rerun resumes from the finished run
    assert main(["train", "--params", "params/smoke.yaml", "--runs", "none_such"]) == 2
