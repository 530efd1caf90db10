"""Transcripts: schema-versioned JSONL, atomic appends, crash tails, resume, DataFrames."""

from __future__ import annotations

import json
import multiprocessing as mp

import pytest

from negolib.agents.scripted import make_scripted
from negolib.rollout import make_specs, run_episodes
from negolib.scenarios import eval_seeds, scenario_set
from negolib.transcripts import SCHEMA_VERSION, TranscriptStore, record_key


def _records(n=4, arm="a"):
    agents = {"boulware": make_scripted("boulware"), "conceder": make_scripted("conceder")}
    specs = make_specs(arm, "boulware", ["conceder"], scenario_set(eval_seeds(n), ["car"]))
    return run_episodes(specs, agents, progress=False).records


def test_roundtrip_and_dataframes(tmp_path):
    store = TranscriptStore(tmp_path / "t.jsonl")
    recs = _records()
    assert store.append(recs) == 4
    assert store.records() == recs
    df = store.to_dataframe()
    assert len(df) == 4 and {"arm", "domain", "seed", "buyer", "score", "deal", "welfare"} <= set(df)
    tdf = store.turns_dataframe()
    assert len(tdf) == sum(len(r["turns"]) for r in recs)
    assert store.to_parquet(tmp_path / "t.parquet").exists()
    assert all(json.loads(line)["schema"] == SCHEMA_VERSION for line in store.path.open())


def test_partial_last_line_is_ignored_and_truncated(tmp_path):
    store = TranscriptStore(tmp_path / "t.jsonl")
    recs = _records(3)
    store.append(recs[:2])
    with store.path.open("a") as fh:
        fh.write(json.dumps(recs[2])[:50])  # a crash mid-write
    with pytest.warns(UserWarning, match="partial last line"):
        assert len(store.records()) == 2
    store.append(recs[2:])
    assert [record_key(r) for r in store.records()] == [record_key(r) for r in recs]


def test_error_rows_are_superseded_and_not_complete(tmp_path):
    store = TranscriptStore(tmp_path / "t.jsonl")
    rec = _records(1)[0]
    err = {**rec, "status": "error", "error": "timeout"}
    store.append([err])
    assert store.completed_keys() == set() and store.records(include_errors=True) == [err]
    store.append([rec])
    store.append([{**rec, "status": "error", "error": "late duplicate"}])
    assert store.records() == [rec] and store.records(include_errors=True) == [rec]


def test_rejects_wrong_schema_and_corrupt_lines(tmp_path):
    store = TranscriptStore(tmp_path / "t.jsonl")
    with pytest.raises(ValueError, match="schema"):
        store.append([{"schema": 99, "arm": "a", "domain": "d", "seed": 1, "buyer": "b"}])
    store.path.write_text("not json\n")
    with pytest.raises(ValueError, match="corrupt record"):
        store.records()


def _writer(path, arm, n):
    TranscriptStore(path).append(_records(n, arm))


def test_concurrent_writers_do_not_corrupt(tmp_path):
    path = tmp_path / "t.jsonl"
    procs = [mp.get_context("fork").Process(target=_writer, args=(path, f"arm{i}", 6)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    recs = TranscriptStore(path).records()
    assert len(recs) == 24 and len({record_key(r) for r in recs}) == 24
