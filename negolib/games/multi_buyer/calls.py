"""Finding the tool calls of one turn, on the surfaces the bilateral game reads (its extraction, kept game-local).

Contract: :func:`extract` returns a turn's cleaned prose, its tool-call candidates as (name, arguments) pairs or
:class:`Malformed` (why a candidate is unreadable), a surface error, and the structured calls as JSON-ready data
for the transcript; it never raises on odd input (hostile SDK objects may still raise: callers catch). Surfaces: a
:class:`StructuredTurn` (message plus SDK calls: OpenAI dicts or objects, Anthropic ``tool_use`` blocks,
:class:`ToolCall`), or text with JSON calls bare or in ``<tool_call>`` tags. Validation is the caller's job.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from negolib.agents.base import AgentReply
from negolib.protocol import clean_prose

MAX_TEXT_CHARS = 16_000
OPEN_TAG, CLOSE_TAG = "<tool_call>", "</tool_call>"
_BLOCK_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_FENCE_RE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_CALL_START_RE = re.compile(r'\{\s*"(?:name|arguments|parameters)"')
CALL_KEYS = ({"name", "arguments"}, {"name", "parameters"}, {"name"})


@dataclass(frozen=True)
class ToolCall:
    """A tool call as an agent hands it over: ``arguments`` a dict or a JSON string."""

    name: Any
    arguments: Any = None


@dataclass(frozen=True)
class StructuredTurn:
    """A turn from a tool-calling API: the message text and the calls as the SDK returned them."""

    message: Any
    tool_calls: Sequence[Any] = ()


class Malformed(str):
    """A tool-call candidate that could not be read (the string says why)."""


class DuplicateKeys(dict):
    """A decoded JSON object that repeated a key."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    return d if len(d) == len(pairs) else DuplicateKeys(d)


DECODER = json.JSONDecoder(object_pairs_hook=_object)


def short(value: Any, limit: int = 60) -> str:
    """``value`` as a short, clean text for an error message (never raises)."""
    try:
        text = value if isinstance(value, str) else repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__
        text = f"<{type(value).__name__}>"
    text = clean_prose(text[: 4 * limit])
    return text if len(text) <= limit else text[: limit - 3] + "..."


def reply_turn(reply: AgentReply) -> str | StructuredTurn:
    """What the environment steps for ``reply``: a structured turn when it carries tool calls, else its text."""
    if "tool_calls" in reply.extra:
        return StructuredTurn(reply.text, reply.extra["tool_calls"] or ())
    return reply.text


# -- text -----------------------------------------------------------------------------------------------------


def _decode_whole(text: str) -> Any:
    body = _FENCE_RE.sub("", text.strip())
    try:
        obj, end = DECODER.raw_decode(body)
    except (ValueError, RecursionError) as exc:
        return Malformed(f"malformed JSON in the tool call ({short(str(exc))})")
    if body[end:].strip():
        return Malformed("text after the JSON inside <tool_call> tags")
    return obj


def _scan_bare(text: str) -> tuple[list[Any], str]:
    """Bare JSON objects that look like tool calls (a "name", "arguments" or "parameters" key) and the text
    without them; a '{' opening such an object that does not decode is a malformed candidate."""
    found: list[Any] = []
    keep: list[str] = []
    pos = 0
    while True:
        start = text.find("{", pos)
        if start < 0:
            keep.append(text[pos:])
            return found, "".join(keep)
        try:
            obj, end = DECODER.raw_decode(text, start)
        except (ValueError, RecursionError) as exc:
            if _CALL_START_RE.match(text, start):
                found.append(Malformed(f"malformed JSON tool call ({short(str(exc))})"))
            keep.append(text[pos:start + 1])
            pos = start + 1
            continue
        if isinstance(obj, dict) and obj.keys() & {"name", "arguments", "parameters"}:
            found.append(obj)
            keep.append(text[pos:start])
        else:
            keep.append(text[pos:end])
        pos = end


def _text_candidates(text: str) -> tuple[list[Any], str]:
    """Every decoded call candidate in ``text`` (tagged blocks, an unclosed tag, bare JSON) and the prose left."""
    found: list[Any] = []
    for m in _BLOCK_RE.finditer(text):
        obj = _decode_whole(m.group(1))
        found.extend([obj] if isinstance(obj, Malformed) else list(obj) if isinstance(obj, list) else [obj])
    prose = _BLOCK_RE.sub(" ", text)
    if OPEN_TAG in prose:  # an unclosed tag (generation stopped on the closing tag): its JSON still counts
        head, _, tail = prose.partition(OPEN_TAG)
        body = _FENCE_RE.sub("", tail.strip())
        try:
            obj, end = DECODER.raw_decode(body)
            found.extend(list(obj) if isinstance(obj, list) else [obj])
            prose = head + " " + body[end:]
        except (ValueError, RecursionError):
            found.append(Malformed("unclosed <tool_call> tag without a readable JSON call after it"))
            prose = head
    bare, prose = _scan_bare(prose.replace(OPEN_TAG, " ").replace(CLOSE_TAG, " "))
    return found + bare, prose


def _text_call(obj: Any) -> tuple[Any, Any] | Malformed:
    """(name, arguments) of a decoded text candidate, or why it is not a call."""
    if isinstance(obj, Malformed):
        return obj
    if type(obj) is DuplicateKeys:
        return Malformed("duplicate keys in the JSON tool call")
    if not isinstance(obj, dict):
        return Malformed(f"a tool call must be a JSON object, got {type(obj).__name__}")
    if set(obj) not in CALL_KEYS:
        return Malformed(f"a JSON tool call has exactly 'name' and 'arguments', got keys {sorted(map(short, obj))}")
    return obj["name"], obj.get("arguments", obj.get("parameters"))


# -- structured -----------------------------------------------------------------------------------------------


def _structured_call(call: Any) -> tuple[Any, Any]:
    """(name, arguments) of an SDK tool call; ``ValueError`` when it has no known shape."""
    if isinstance(call, ToolCall):
        return call.name, call.arguments
    if type(call) is dict or isinstance(call, Mapping):
        if "function" in call:  # OpenAI: {"id", "type": "function", "function": {"name", "arguments"}}
            fn = call["function"]
            if isinstance(fn, Mapping):
                return fn.get("name"), fn.get("arguments")
            return getattr(fn, "name", None), getattr(fn, "arguments", None)
        if call.get("type") == "tool_use" or "input" in call:  # Anthropic tool_use block
            return call.get("name"), call.get("input")
        if "name" in call:
            extra = set(call) - {"name", "arguments", "parameters", "id", "type"}
            if extra:
                raise ValueError(f"unexpected keys {sorted(map(short, extra))} in the tool call")
            return call["name"], call.get("arguments", call.get("parameters"))
        raise ValueError("a tool call needs a name")
    fn = getattr(call, "function", None)
    if fn is not None:  # OpenAI SDK ChatCompletionMessageToolCall
        return getattr(fn, "name", None), getattr(fn, "arguments", None)
    if hasattr(call, "name") and hasattr(call, "input"):  # Anthropic SDK ToolUseBlock
        return call.name, call.input
    if hasattr(call, "name"):
        return call.name, getattr(call, "arguments", None)
    raise ValueError(f"unreadable tool call of type {type(call).__name__}")


def _json_ready(value: Any, budget: list[int], depth: int = 0) -> bool:
    """Whether ``value`` is plain JSON data (finite numbers, str keys) within ``budget[0]`` characters."""
    budget[0] -= 8
    if budget[0] < 0 or depth > 8:
        return False
    if value is None or type(value) in (bool, int):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is str:
        budget[0] -= len(value)
        return budget[0] >= 0
    if type(value) in (list, tuple):
        return all(_json_ready(v, budget, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _json_ready(k, budget, depth + 1) and _json_ready(v, budget, depth + 1)
                   for k, v in value.items())
    return False


def _flat_args(args: Any) -> bool:
    """The common case, checked without recursion: None or a small dict of short strings and finite numbers."""
    if args is None:
        return True
    if type(args) is not dict or len(args) > 16:
        return False
    for k, v in args.items():
        t = type(v)
        if type(k) is not str or len(k) > 200 or (t is str and len(v) > 2000):
            return False
        if t is float:
            if not math.isfinite(v):
                return False
        elif not (t is str or t is int or t is bool or v is None):
            return False
    return True


def _raw_item(call: Any, pair: Any) -> Any:
    """A structured call as stored in the transcript: ``{"name", "arguments"}`` (a copy) when that is plain JSON
    data, else a short text trace of what could not be stored."""
    if isinstance(pair, tuple):
        name, args = pair
        if type(name) is str and len(name) <= 200 and _flat_args(args):
            return {"name": name, "arguments": None if args is None else dict(args)}
        item = {"name": name, "arguments": args}
        if _json_ready(item, [MAX_TEXT_CHARS]):
            return json.loads(json.dumps(item))
    return short(call, 200)


# -- a turn ---------------------------------------------------------------------------------------------------


def extract(turn: Any) -> tuple[str, list[tuple[Any, Any] | Malformed], str | None, list[Any] | None]:
    """(cleaned prose, call candidates, a surface error or None, the structured calls for the transcript or None
    for a text turn) of one turn."""
    candidates: list[tuple[Any, Any] | Malformed] = []
    raw: list[Any] | None = None
    if isinstance(turn, StructuredTurn):
        text = turn.message if isinstance(turn.message, str) else ""
        calls = turn.tool_calls if turn.tool_calls is not None else ()
        if type(calls) is not list and (isinstance(calls, (str, bytes, Mapping)) or not isinstance(calls, Sequence)):
            return clean_prose(text[:MAX_TEXT_CHARS]), [], "tool_calls must be a list of tool calls", \
                [short(calls, 200)]
        raw = []
        for call in calls:
            try:
                pair: Any = _structured_call(call)
            except ValueError as exc:
                pair = Malformed(str(exc))
            candidates.append(pair)
            raw.append(_raw_item(call, pair))
    elif isinstance(turn, str):
        text = turn
    else:
        return "", [], f"a turn must be text or a StructuredTurn, got {type(turn).__name__}", None
    text = text[:MAX_TEXT_CHARS]
    if "{" in text or "<" in text:
        found, text = _text_candidates(text)
        candidates += [_text_call(obj) for obj in found]
    return clean_prose(text), candidates, None, raw


def format_call(call: dict[str, Any]) -> str:
    """The Hermes-style text of a call: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""
    return f"{OPEN_TAG}\n{json.dumps(call)}\n{CLOSE_TAG}"
