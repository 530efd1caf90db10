"""Transcripts: schema-versioned JSONL, atomic appends, crash tails, resume, DataFrames, validation on
read (fields, ranges, statuses, duplicates, protocols), settings checked on resume, the run lock."""

from __future__ import annotations

import json
import multiprocessing as mp

import pytest

from negolib.core.transcripts import (
    SCHEMA_VERSION,
    RunLockedError,
    RunSettings,
    SettingsMismatchError,
    TranscriptError,
    TranscriptStore,
    episode_settings,
    record_key,
    validate_record,
)
from negolib.games.multi_issue.rollout import make_specs, run_episodes
from negolib.games.multi_issue.scenarios import eval_seeds, scenario_set
from negolib.games.multi_issue.scripted import make_scripted


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


# -- validation on read ---------------------------------------------------------------------------

def _write(path, recs_or_lines):
    """Write records (dicts, JSON-encoded) or raw lines (bytes/str) one per line."""
    with open(path, "wb") as fh:
        for x in recs_or_lines:
            if isinstance(x, dict):
                x = json.dumps(x)
            fh.write((x.encode("utf-8") if isinstance(x, str) else x) + b"\n")


def _edit(rec, fn):
    rec = json.loads(json.dumps(rec))
    fn(rec)
    return rec


def _set_outcome(**kw):
    return lambda r: r["outcome"].update(kw)


def _drop(key):
    return lambda r: r.pop(key)


BAD_RECORDS = [
    # (edit of a complete deal record, text the error must contain)
    (_set_outcome(seller_utility=5.0, score=5.0), "field 'outcome.seller_utility': U~ must be in [0, 1]"),
    (_set_outcome(buyer_utility=-0.2), "field 'outcome.buyer_utility'"),
    (_set_outcome(score=2.0), "field 'outcome.score': S must be a number in [-0.3, 1]"),
    (_set_outcome(score=1.0), "Eq. 1"),  # in range, but not the seller's U~ of the deal
    (lambda r: r.update(status="won"), "unknown status 'won'"),
    (lambda r: r.update(status="no_deal"), "field 'outcome.deal': is true but status is 'no_deal'"),
    (lambda r: r.update(outcome="deal"), "field 'outcome': must be a JSON object or null, got a string"),
    (lambda r: r.update(outcome=None), "needs an outcome object"),
    (_drop("turns"), "field 'turns': is required"),
    (lambda r: r.update(seed="5000000"), "field 'seed': must be an integer"),
    (lambda r: r.update(seed=True), "field 'seed': must be an integer"),
    (lambda r: r.update(schema=1), "field 'schema': schema 1, this negolib reads schema 2"),
    (lambda r: r["turns"][0].pop("role"), "field 'turns[0]': missing field(s) ['role']"),
    (lambda r: r["turns"][1].update(input_tokens="12"), "field 'turns[1].input_tokens'"),
    (lambda r: r["turns"][0].update(action={"action": "COUNTER", "terms": "all"}), "field 'turns[0].action'"),
    (lambda r: r["turns"][0].update(invalid_accept="no"), "field 'turns[0].invalid_accept'"),
    (lambda r: r["outcome"].update(invalid_accepts=-1), "field 'outcome.invalid_accepts'"),
]


@pytest.mark.parametrize("edit, message", BAD_RECORDS)
def test_a_bad_record_names_file_line_and_field(tmp_path, edit, message):
    recs = _records(3)
    assert recs[1]["status"] == "deal"
    path = tmp_path / "t.jsonl"
    _write(path, [recs[0], _edit(recs[1], edit), recs[2]])
    with pytest.raises(TranscriptError) as err:
        TranscriptStore(path).records()
    assert str(err.value).startswith(f"{path}:2: ") and message in str(err.value), str(err.value)
    with pytest.raises(TranscriptError, match=r"appending record 0"):  # never written either
        TranscriptStore(tmp_path / "new.jsonl").append([_edit(recs[1], edit)])
    assert not (tmp_path / "new.jsonl").exists()


MALFORMED_LINES = [
    (b"[1, 2, 3]", "must be a JSON object (one episode record), got a JSON array"),
    (b"", "corrupt record"),
    (b'{"schema": 2, "arm": "a", "domain": "car", "seed": NaN}', "NaN is not a valid JSON value"),
    (b'{"schema": 2, "arm": "caf\xe9"}', "not valid UTF-8"),
]


@pytest.mark.parametrize("line, message", MALFORMED_LINES)
def test_a_malformed_line_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "t.jsonl"
    _write(path, [_records(1)[0], line])
    with pytest.raises(TranscriptError) as err:
        list(TranscriptStore(path).iter_raw())
    assert str(err.value).startswith(f"{path}:2: ") and message in str(err.value), str(err.value)


def test_records_made_before_the_accept_rule_fields_still_validate():
    rec = _records(1)[0]
    assert SCHEMA_VERSION == 2 and rec["schema"] == 2
    old = _edit(rec, lambda r: [r["outcome"].pop("invalid_accepts", None),
                                r["outcome"].pop("seller_invalid_accepts", None),
                                *[t.pop("invalid_accept", None) for t in r["turns"]]])
    assert validate_record(old) == old


def test_no_deal_and_error_rows_validate(tmp_path):
    agents = {"hardliner": make_scripted("hardliner"), "h2": make_scripted("hardliner")}
    specs = make_specs("a", "hardliner", ["h2"], scenario_set(eval_seeds(1), ["car"]))
    rec = run_episodes(specs, agents, progress=False).records[0]
    assert rec["status"] == "no_deal" and rec["outcome"]["seller_utility"] is None
    assert rec["outcome"]["score"] == -0.3
    validate_record(rec)
    validate_record({**rec, "status": "error", "error": "timeout", "outcome": None})


def test_conflicting_duplicates_name_both_lines_identical_ones_are_fine(tmp_path):
    recs = _records(2)
    path = tmp_path / "t.jsonl"
    _write(path, [recs[0], recs[1], recs[0]])
    assert TranscriptStore(path).records() == recs  # an identical duplicate
    other = _edit(recs[0], _set_outcome(seller_utility=0.5, score=0.5))
    _write(path, [recs[0], recs[1], other])
    with pytest.raises(TranscriptError) as err:
        TranscriptStore(path).records()
    msg = str(err.value)
    assert msg.startswith(f"{path}:3: ") and "already complete at line 1 with different content" in msg
    assert "outcome" in msg


def test_one_file_never_mixes_protocols(tmp_path):
    recs = _records(3)
    path = tmp_path / "t.jsonl"
    _write(path, [{**r, "protocol_hash": "a" * 64} for r in recs[:2]] + [{**recs[2], "protocol_hash": "b" * 64}])
    store = TranscriptStore(path)
    with pytest.raises(TranscriptError) as err:
        store.to_dataframe()
    assert str(err.value).startswith(f"{path}:3: ") and "bbbbbbbbbbbb" in str(err.value)
    assert "line 1 is of protocol aaaaaaaaaaaa" in str(err.value)
    assert len(store.records(mixed_protocols=True)) == 3  # the caller checks hashes itself
    _write(path, [{**r, "protocol_hash": "a" * 64} for r in recs[:2]] + [recs[2]])
    with pytest.raises(TranscriptError, match="no hash"):
        store.records()


# -- settings checked on resume, the run lock -----------------------------------------------------

def _settings(**config):
    from negolib.games.multi_issue.env import EnvConfig

    return RunSettings({("a", "conceder"): episode_settings(EnvConfig(**config), make_scripted("boulware").settings(),
                                                            make_scripted("conceder").settings(), agent_seed=0)})


def test_settings_are_stamped_and_checked_on_resume(tmp_path):
    path = tmp_path / "t.jsonl"
    store = TranscriptStore(path, _settings())
    store.append(_records(2))
    rec = store.records()[0]
    assert rec["settings"]["config"]["max_rounds"] == 12 and len(rec["settings_fingerprint"]) == 16
    assert len(TranscriptStore(path, _settings()).completed_keys()) == 2  # same settings: resumes
    with pytest.raises(SettingsMismatchError) as err:
        TranscriptStore(path, _settings(max_rounds=2, first_mover="buyer")).completed_keys()
    msg = str(err.value)
    assert msg.startswith(f"{path}:1: 2 complete episode(s)")
    assert "config.max_rounds: 12 in the file, 2 in this run" in msg
    assert "config.first_mover: \"seller\" in the file, \"buyer\" in this run" in msg
    assert "another transcript file" in msg and "Nothing was played" in msg
    # cells this run does not play are not checked; an unrecorded run cannot be verified
    other = RunSettings({("b", "conceder"): {"config": {"max_rounds": 2}}})
    assert len(TranscriptStore(path, other).completed_keys()) == 2
    TranscriptStore(tmp_path / "plain.jsonl").append(_records(1))
    with pytest.raises(SettingsMismatchError, match="not recorded"):
        TranscriptStore(tmp_path / "plain.jsonl", _settings()).completed_keys()


def test_run_lock_refuses_a_second_run_and_is_released(tmp_path):
    path = tmp_path / "t.jsonl"
    first, second = TranscriptStore(path), TranscriptStore(path)
    with first.run_lock():
        with first.run_lock():  # re-entrant on the same store object
            pass
        with pytest.raises(RunLockedError) as err:
            with second.run_lock():
                pass
        assert str(err.value).startswith(f"{path}: another run is writing this transcript file")
        assert f"{path}.lock" in str(err.value) and f"pid {__import__('os').getpid()}" in str(err.value)
        first.append(_records(1))  # the per-append lock is separate
    with second.run_lock():
        pass


def _hold_lock(path, ready, done):
    with TranscriptStore(path).run_lock():
        ready.set()
        done.wait(30)


def test_run_lock_across_processes(tmp_path):
    path = tmp_path / "t.jsonl"
    ctx = mp.get_context("fork")
    ready, done = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold_lock, args=(path, ready, done))
    proc.start()
    try:
        assert ready.wait(30)
        with pytest.raises(RunLockedError):
            with TranscriptStore(path).run_lock():
                pass
    finally:
        done.set()
        proc.join()
    with TranscriptStore(path).run_lock():
        pass
