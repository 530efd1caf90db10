"""Training run logs: a torn last line (a crash mid-write) is dropped on resume and never glued to the
next row, in the per-step logs and in the training transcripts; other bad lines name file and line."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from negolib.core.transcripts import TranscriptError, TranscriptStore
from negolib.games.multi_issue.rollout import make_specs, run_episodes
from negolib.games.multi_issue.scenarios import eval_seeds, scenario_set
from negolib.games.multi_issue.scripted import make_scripted
from negolib.training.runlog import RunLog, append_records, prune_transcripts


def _torn(path, text='{"step": 3, "loss": 0.'):
    with open(path, "a") as fh:
        fh.write(text)


def test_a_torn_row_is_dropped_not_glued_to_the_next(tmp_path):
    log = RunLog(tmp_path, "train_log")
    log.append({"step": 1, "loss": 0.5})
    log.append({"step": 2, "loss": float("nan")})
    _torn(log.jsonl)
    with pytest.warns(UserWarning, match=r"train_log.jsonl:3: ignoring a partial last line"):
        assert log.steps() == {1, 2}
    log.append({"step": 3, "loss": 0.25})  # the resumed run redoes step 3: the torn line goes first
    assert [r["step"] for r in log.rows()] == [1, 2, 3] and log.rows()[1]["loss"] is None
    df = pd.read_json(log.jsonl, lines=True)
    assert list(df["step"]) == [1, 2, 3]
    assert list(pd.read_csv(log.csv)["step"]) == [1, 2, 3]


def test_truncate_after_drops_a_torn_tail_even_with_nothing_to_redo(tmp_path):
    log = RunLog(tmp_path, "validation_log")
    for step in (0, 5):
        log.append({"step": step, "score": 0.1 * step})
    _torn(log.jsonl)
    log.truncate_after(5)
    assert log.jsonl.read_text().endswith("\n") and [r["step"] for r in log.rows()] == [0, 5]
    log.truncate_after(0)
    assert [r["step"] for r in log.rows()] == [0]


def test_a_corrupt_row_names_file_and_line(tmp_path):
    log = RunLog(tmp_path, "train_log")
    log.append({"step": 1})
    with open(log.jsonl, "a") as fh:
        fh.write('{"step": 2, "loss": \n{"step": "3"}\n')
    with pytest.raises(TranscriptError, match=r"train_log.jsonl:2: corrupt row"):
        log.rows()
    log.jsonl.write_text('{"step": 1}\n{"step": "3"}\n')
    with pytest.raises(TranscriptError, match=r"train_log.jsonl:2: field 'step'"):
        log.rows()
    with pytest.raises(ValueError, match="integer 'step'"):
        log.append({"loss": 1.0})


def _training_records(step):
    agents = {"boulware": make_scripted("boulware"), "conceder": make_scripted("conceder")}
    specs = make_specs("run", "boulware", ["conceder"], scenario_set(eval_seeds(2), ["car"]))
    recs = run_episodes(specs, agents, progress=False).records
    return [{**r, "step": step} for r in recs]


def test_training_transcripts_drop_a_torn_tail_on_prune_and_append(tmp_path):
    path = tmp_path / "transcripts" / "train.jsonl"
    append_records(path, _training_records(1))
    append_records(path, _training_records(2))
    _torn(path, json.dumps(_training_records(3)[0])[:80])
    prune_transcripts(path, 2)  # resume from step 2: the torn step-3 line goes
    lines = path.read_text().splitlines(keepends=True)
    assert len(lines) == 4 and all(x.endswith("\n") for x in lines)
    assert [json.loads(x)["step"] for x in lines] == [1, 1, 2, 2]
    prune_transcripts(path, 1)
    assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == [1, 1]
    _torn(path, '{"schema": 2, "arm": "ru')
    append_records(path, _training_records(2))
    assert [r["step"] for r in TranscriptStore(path).iter_raw()] == [1, 1, 2, 2]
    assert len(pd.read_json(path, lines=True)) == 4


def test_prune_names_a_corrupt_transcript_line(tmp_path):
    path = tmp_path / "train.jsonl"
    append_records(path, _training_records(1))
    with open(path, "a") as fh:
        fh.write('{"schema": 2, "arm": "run", \n')
    append_records(path, _training_records(2))
    with pytest.raises(TranscriptError, match=rf"{path}:3: corrupt record"):
        prune_transcripts(path, 1)
