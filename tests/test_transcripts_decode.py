"""Transcript lines decode the same through orjson's fast path and the standard library's strict decoder."""

from __future__ import annotations

import json

import pytest

import negolib.transcripts as tr
from negolib.transcripts import TranscriptError, decode_line

LINES = [
    b'{"a": 1, "b": [1.5, -0.0, 1e-300, 12345678901234567890123], "c": "\\u00e9t\\u00e9 \\ud83d\\ude00"}\n',
    b'{"seed": 9223372036854775807, "neg": -9223372036854775808, "u": 18446744073709551616}\n',  # 64-bit edges
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
