"""Text that crosses from one party to another: the one sanitiser every game uses [paper App. A, K].

Contract: :func:`scrub` is the character and tag filter, run on a party's raw text before any label or tag check
reads it: a carriage return (alone or before a newline) becomes a plain newline; the other line breaks (NEL,
U+2028/2029, vertical tab, form feed, the separator controls) are removed, with every control, zero-width,
invisible, bidirectional and Unicode tag character (as the paper's game always removed them); chat-template tags,
tool-call tags (``<tool_call>``, ``<tool_response>``, ``<tools>``) and code fences are removed together, to a fixed
point, so that no tag of either kind can be rebuilt from pieces split by another
(``</tool_<|im_end|>call>``, ``<|im_<tool_call>end|>``). :func:`clean_prose` is :func:`scrub` with runs of spaces
collapsed (lines kept: the paper's game shows a party's prose alone as the other's message). :func:`one_line` is
the single-line rule of the paper's game (its evaluation history): the clean prose on one line. :func:`quoted` is
how a party's words are shown among lines the environment writes: one line in double quotes, its own double quotes
turned into single ones, so it can never pass for a system, offer, ledger or other party's line. All are pure,
idempotent and never raise on a ``str``.
"""

from __future__ import annotations

import re

# Chat-template tags and special tokens of common model families (those of every shipped model included).
TEMPLATE_TAG_RE = re.compile(
    r"<\|[^<>|\n]{0,40}\|>"            # <|im_start|>, <|eot_id|>, <|endoftext|>
    r"|<\|[a-z_]{1,20}>|<[a-z_]{1,20}\|>"  # Gemma 4 style <|turn>, <channel|>
    r"|</?s>|<(?:start|end)_of_turn>|\[/?INST\]|<</?SYS>>|<bos>|<eos>|<pad>|<unk>|<mask>"
    r"|<(?:start|end)_of_image>|<image_soft_token>|<unused\d{1,5}>|\[multimodal\]"  # Gemma 3
    r"|<(?:jupyter_(?:start|text|code|output|script)|issue_(?:start|comment|closed)|empty_output"
    r"|repo_?name|file_?sep|filename|gh_stars|fim_(?:prefix|middle|suffix|pad))>"  # SmolLM2 / StarCoder
)
# The tags a tool-calling template or the text tool format reads (Hermes / Qwen / SmolLM): calls, results, schemas.
TOOL_TAG_RE = re.compile(r"<\s*/?\s*tool_(?:call|response)\s*>|<\s*/?\s*tools\s*>", re.I)
_FENCE_RE = re.compile(r"```[a-zA-Z]*")
# A carriage return, alone or before a newline, becomes a newline.
_BREAK_RE = re.compile("\r\n?")
# C0/C1 controls (not tab, newline or carriage return; NEL, vertical tab, form feed and the separators included),
# line and paragraph separators, zero-width and invisible characters (soft hyphen, combining grapheme joiner, Hangul
# and Khmer fillers), bidirectional embeddings, overrides and isolates (U+202A-U+202E,
# U+2066-U+2069, U+200E/F, U+061C), interlinear annotations, the BOM and the Unicode tag characters.
_CONTROL_RE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u2028-\u202e"
    "\u2060-\u2064\u2066-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb\U000e0000-\U000e007f]"
)


def _strip_tags(text: str, tool_tags: bool) -> str:
    """Remove template tags, tool-call tags (when ``tool_tags``) and code fences until none is left (removing one
    can join the pieces of another)."""
    while True:
        before = len(text)
        if "<" in text or "[" in text:
            text = TEMPLATE_TAG_RE.sub("", text)
            if tool_tags:
                text = TOOL_TAG_RE.sub("", text)
        if "`" in text:
            text = _FENCE_RE.sub("", text)
        if len(text) == before:  # every step only deletes: an unchanged length means nothing was removed
            return text


def scrub(text: str, tool_tags: bool = True) -> str:
    """``text`` with line breaks made plain newlines, control, invisible and bidi characters removed, and template
    tags, tool-call tags and code fences removed to a fixed point (see the module docstring). ``tool_tags=False``
    keeps well-formed tool-call tags, for the extraction that reads them; what it leaves still goes through
    :func:`clean_prose`."""
    if not (text.isascii() and text.isprintable()):
        text = _CONTROL_RE.sub("", _BREAK_RE.sub("\n", text))
    return _strip_tags(text, tool_tags)


def clean_prose(text: str) -> str:
    """Counterpart-visible text: :func:`scrub` of ``text``, runs of spaces collapsed, at most one blank line."""
    text = scrub(text).strip()
    if "  " in text or "\t" in text or "\n" in text:
        text = re.sub(r"[ \t]*\n[ \t]*", "\n", re.sub(r"[ \t]+", " ", text))
        text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def one_line(text: str) -> str:
    """:func:`clean_prose` of ``text`` on one line (every run of whitespace one space), repeated to a fixed point:
    joining lines can bring a tag's pieces together again (``<|im_`` CR ``end|>``)."""
    while True:
        out = " ".join(clean_prose(text).split())
        if out == text:
            return out
        text = out


def quoted(text: str) -> str:
    """``text`` as one party's words among the environment's lines: :func:`one_line` in double quotes, its own
    double quotes made single, so nothing in it can close the quote or start a line."""
    return '"' + one_line(text).replace('"', "'") + '"'


__all__ = ["TEMPLATE_TAG_RE", "TOOL_TAG_RE", "clean_prose", "one_line", "quoted", "scrub"]
