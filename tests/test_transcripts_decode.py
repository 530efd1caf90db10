"""Transcript lines decode the same through orjson's fast path and the standard library's strict decoder."""

from __future__ import annotations

import json
import re

import pytest

import negolib.core.transcript_records as tr
from negolib.core.transcript_records import TranscriptError, decode_line

LINES = [
    b'{"a": 1, "b": [1.5, -0.0, 1e-300, 0.0001013027327258794], "c": "\\u00e9t\\u00e9 \\ud83d\\ude00"}\n',
    b'{"seed": 9223372036854775807, "neg": -9223372036854775808}\n',  # the 64-bit edges read exactly
    b'{"nested": {"x": null, "y": true, "z": false}, "s": "line\\nbreak", "f": 0.1}\n',
    b'{"lone": "\\ud800"}\n',      # a lone surrogate: json reads it, orjson refuses (the fallback reads it)
    '{"utf8": "na\u00efve \u2013 caf\u00e9"}\n'.encode(),
]


@pytest.mark.parametrize("raw", LINES)
@pytest.mark.parametrize("fast", [True, False])
def test_decode_line_matches_the_standard_library(raw, fast, monkeypatch):
    if not fast:
        monkeypatch.setattr(tr, "orjson", None)
    assert decode_line(raw, "t.jsonl", 3) == json.loads(raw)


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("raw, problem", [
    (b'{"x": NaN}\n', "corrupt record: NaN is not a valid JSON value"),
    (b'{"x": Infinity}\n', "corrupt record: Infinity is not a valid JSON value"),
    (b'{"x": 1,}\n', "corrupt record"),
    (b'{"x": "\xff"}\n', "not valid UTF-8 (invalid start byte at byte 7 of the line)"),
])
def test_decode_line_refuses_what_strict_json_refuses_naming_file_and_line(raw, problem, fast, monkeypatch):
    if not fast:
        monkeypatch.setattr(tr, "orjson", None)
    with pytest.raises(TranscriptError, match=r"^t\.jsonl:7: ") as e:
        decode_line(raw, "t.jsonl", 7)
    assert e.value.problem.startswith(problem) and e.value.line == 7


def test_orjson_is_installed_for_the_fast_path():
    assert tr.orjson is not None, "orjson is a declared dependency (pyproject.toml)"


def test_an_integer_beyond_64_bits_fails_validation_instead_of_reading_as_another_number(tmp_path):
    """orjson reads 2**70 as a float; the record's integer fields are type-checked, so the line is refused."""
    from negolib.core.transcripts import TranscriptStore

    good = tmp_path / "good.jsonl"
    TranscriptStore(good).append([_record()])
    text = good.read_text()
    line = re.sub(r'"seed": ?5000053', f'"seed": {2**70}', text, count=1)
    assert line != text
    bad = tmp_path / "bad.jsonl"
    bad.write_text(line)
    with pytest.raises(TranscriptError, match=r"bad\.jsonl:1: field 'seed': must be"):
        TranscriptStore(bad).records()


def _record() -> dict:
    from negolib.games.multi_issue.domains import get_domain
    from negolib.games.multi_issue.rollout import make_specs, run_episodes
    from negolib.games.multi_issue.scenarios import make_scenario
    from negolib.games.multi_issue.scripted import make_scripted

    agents = {"s": make_scripted("boulware"), "b": make_scripted("linear")}
    specs = make_specs("s", "s", ["b"], [make_scenario(get_domain("car"), 5_000_053)])
    return run_episodes(specs, agents, progress=False).records[0]
