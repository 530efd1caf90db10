"""The one sanitiser for text that crosses between parties (:mod:`negolib.core.crossing`): characters, line breaks, and
template and tool-call tags removed together to a fixed point; one line; quoted."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from negolib.core.crossing import TEMPLATE_TAG_RE, TOOL_TAG_RE, clean_prose, one_line, quoted, scrub

PIECES = ["<", ">", "|", "/", "tool_call", "tool_response", "tools", "<|im_end|>", "<|im_", "end|>", "<tool_",
          "call>", "</tool_", "<tool_call>", "</tool_call>", "<end_of_turn>", "<start_of_", "turn>", "[INST]", "[/",
          "INST]", "```", "json", "\u200b", "\ufeff", "\u202e", "\u2066", "\r", "\n", "\r\n", "\u2028", "\x85", " ",
          "a", '"', "TO:", "Standing:"]


def no_leak(text: str) -> bool:
    return not (TEMPLATE_TAG_RE.search(text) or TOOL_TAG_RE.search(text) or "```" in text)


@pytest.mark.parametrize("raw, want", [
    ("a </tool_<|im_end|>call> b", "a b"),          # a tool tag split by a template tag
    ("a <|im_<tool_call>end|> b", "a b"),           # a template tag split by a tool tag
    ("a <tool_<tool_<end_of_turn>call>call> b", "a b"),  # nested twice
    ("a </tool_\u200bcall> b", "a b"),             # split by a zero-width character
    ("a <TOOL_CALL> b </ tool_response > <tools>", "a b"),
    ("x\r\ny\rz", "x\ny\nz"),                       # carriage returns are line breaks, not characters
    ("x\u2028y\x85z\x0bw", "xyzw"),                 # other line breaks removed, as the paper's game removes them
    ("P\u00adR\u034fI\ufeffC\u202eE\u2069:", "PRICE:"),  # invisible, BOM and bidi characters removed
])
def test_clean_prose_removes_split_and_nested_tags_and_odd_characters(raw, want):
    assert clean_prose(raw) == want


def test_scrub_can_keep_tool_tags_for_the_extraction():
    assert scrub("<tool_<|im_end|>call>{}</tool_call>", tool_tags=False) == "<tool_call>{}</tool_call>"
    assert scrub("<tool_<|im_end|>call>{}</tool_call>") == "{}"


def test_one_line_and_quoted():
    assert one_line("a\n\nb \r\n c\u2029d") == "a b cd"
    assert quoted('He said "yes"\nStanding: none') == "\"He said 'yes' Standing: none\""
    assert quoted("") == '""'


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30))
def test_every_function_reaches_a_fixed_point_with_nothing_left_to_leak(pieces):
    raw = "".join(pieces)
    for f in (scrub, clean_prose, one_line):
        out = f(raw)
        assert f(out) == out and no_leak(out), (f.__name__, raw, out)
        assert not [c for c in out if unicodedata.category(c) in ("Cf", "Zl", "Zp")]
        assert not [c for c in out if unicodedata.category(c) == "Cc" and c not in "\n\t"]
    line = quoted(raw)
    assert "\n" not in line and line.count('"') == 2 and line.startswith('"') and line.endswith('"')
