"""Finding and checking the tool calls of one turn: the extraction the tool-calling games share (bilateral, markets).

Contract: :func:`extract` reads a turn on every surface (a :class:`StructuredTurn` of SDK calls: OpenAI dicts or
objects, Anthropic ``tool_use`` blocks, :class:`ToolCall`; or text with JSON calls bare, fenced or in ``<tool_call>``
tags) into an :class:`Extracted`: the cleaned prose (:mod:`negolib.core.crossing`: the text is scrubbed before a tag is
read; what is left after the calls is cleaned of template and tool-call tags alike), the call candidates as (name,
arguments) pairs or :class:`Malformed` (why one is unreadable), a surface error, and the structured calls as
JSON-ready transcript data.
It never raises on odd input (hostile SDK objects may: callers catch). :func:`tool_name`, :func:`call_arguments`
and :func:`positive_number` are the strict call checks, driven by a game's tool schemas; the game checks the rest.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from negolib.agents.base import AgentReply
from negolib.core.crossing import clean_prose, one_line, scrub

MAX_TEXT_CHARS = 16_000
OPEN_TAG, CLOSE_TAG = "<tool_call>", "</tool_call>"
ToolFormat = Literal["native", "text"]
"""How a chat carries tool calls: ``native`` (assistant ``tool_calls`` and ``tool`` result messages, for tool-calling
APIs and chat templates with tool support) or ``text`` (``<tool_call>`` JSON in the assistant text, the tool schemas
in the system prompt, results folded into the next user message)."""
_BLOCK_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_FENCE_RE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_CALL_START_RE = re.compile(r'\{\s*"(?:name|arguments|parameters)"')
CALL_KEYS = ({"name", "arguments"}, {"name", "parameters"}, {"name"})
LIST_ERROR = "tool_calls must be a list of tool calls"


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


Candidate = tuple[Any, Any] | Malformed


class Extracted(NamedTuple):
    """One turn, extracted: the cleaned prose, the call candidates, a surface error (None: the surface was readable)
    and the structured calls for the transcript (None for a text turn)."""

    message: str
    candidates: list[Candidate]
    error: str | None
    raw: list[Any] | None


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
    text = one_line(text[: 4 * limit])
    return text if len(text) <= limit else text[: limit - 3] + "..."


def function_tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """One tool as an OpenAI-style function schema (strict: no other arguments), the shape every game's tools use."""
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required,
                       "additionalProperties": False}}}


def reply_turn(reply: AgentReply) -> str | StructuredTurn:
    """What an environment steps for ``reply``: a structured turn when it carries tool calls, else its text."""
    if "tool_calls" in reply.extra:
        return StructuredTurn(reply.text, reply.extra["tool_calls"] or ())
    return reply.text


# -- text -----------------------------------------------------------------------------------------------------


def _decode_whole(text: str) -> Any:
    """One JSON value filling ``text`` (fences allowed); :class:`Malformed` when it is not one."""
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
    """Every decoded call candidate in ``text`` (tagged blocks, an unclosed tag, bare JSON) and the prose left; a
    tagged list holds one candidate per element."""
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


def _text_call(obj: Any) -> Candidate:
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


def structured_call(call: Any) -> tuple[Any, Any]:
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


def _calls(turn: StructuredTurn) -> Sequence[Any] | None:
    """The turn's calls as a sequence (None: not a list of calls)."""
    calls = turn.tool_calls if turn.tool_calls is not None else ()
    if type(calls) is not list and (isinstance(calls, (str, bytes, Mapping)) or not isinstance(calls, Sequence)):
        return None
    return calls


def _structured(calls: Sequence[Any]) -> tuple[list[Candidate], list[Any]]:
    """The candidates of SDK ``calls`` and their transcript data."""
    candidates: list[Candidate] = []
    raw: list[Any] = []
    for call in calls:
        try:
            pair: Any = structured_call(call)
        except ValueError as exc:
            pair = Malformed(str(exc))
        candidates.append(pair)
        raw.append(_raw_item(call, pair))
    return candidates, raw


def raw_calls(turn: Any) -> list[Any] | None:
    """The structured calls of ``turn`` as JSON-ready data for a transcript (None for a text turn)."""
    if not isinstance(turn, StructuredTurn):
        return None
    calls = _calls(turn)
    return [short(turn.tool_calls, 200)] if calls is None else _structured(calls)[1]


# -- a turn ---------------------------------------------------------------------------------------------------


def extract(turn: Any) -> Extracted:
    """The :class:`Extracted` of one turn (see the module docstring)."""
    candidates: list[Candidate] = []
    raw: list[Any] | None = None
    if isinstance(turn, StructuredTurn):
        text = turn.message if isinstance(turn.message, str) else ""
        calls = _calls(turn)
        if calls is None:
            return Extracted(clean_prose(text[:MAX_TEXT_CHARS]), [], LIST_ERROR, [short(turn.tool_calls, 200)])
        candidates, raw = _structured(calls)
    elif isinstance(turn, str):
        text = turn
    else:
        return Extracted("", [], f"a turn must be text or a StructuredTurn, got {type(turn).__name__}", None)
    text = scrub(text[:MAX_TEXT_CHARS], tool_tags=False)  # characters and template tags before any tag is read
    if "{" in text or "<" in text:
        found, text = _text_candidates(text)
        candidates += [_text_call(obj) for obj in found]
    return Extracted(clean_prose(text), candidates, None, raw)


def candidate_call(candidate: Candidate) -> tuple[Any, Any]:
    """(name, arguments) of a readable candidate; ``ValueError`` saying why a malformed one is not a call."""
    if isinstance(candidate, Malformed):
        raise ValueError(str(candidate))
    return candidate


# -- strict argument checks -----------------------------------------------------------------------------------


class ArgumentKeys(NamedTuple):
    """The argument names a tool's schema allows and those it requires."""

    allowed: frozenset[str]
    required: frozenset[str]


def schema_keys(tool: Mapping[str, Any]) -> ArgumentKeys:
    """The :class:`ArgumentKeys` of an OpenAI-style tool schema (``{"type": "function", "function": {...}}``) or of
    its ``parameters`` object."""
    params = tool["function"]["parameters"] if "function" in tool else tool
    return ArgumentKeys(frozenset(params["properties"]), frozenset(params.get("required", ())))


def tool_name(name: Any, known: Sequence[str], listing: str | None = None) -> str:
    """``name`` when it is one of the ``known`` tools; ``ValueError`` for a non-string or an unknown name (the
    message ends with ``listing``, by default the known tools)."""
    if not isinstance(name, str):
        raise ValueError(f"tool name must be a string, got {short(name)}")
    if name not in known:
        raise ValueError(f"unknown tool {short(name)!r}; {listing or 'tools: ' + ', '.join(known)}")
    return name


def call_arguments(name: str, arguments: Any, keys: ArgumentKeys) -> dict[str, Any]:
    """The argument object of a call of tool ``name`` (a dict, a JSON string, or None/blank for none), checked
    against ``keys``: ``ValueError`` for malformed JSON, text after it, duplicate keys, a non-object, an argument
    the schema does not allow or one it requires missing."""
    if type(arguments) is dict:  # the common case first
        pass
    elif arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        arguments = {}
    elif isinstance(arguments, str):
        body = arguments.strip()
        try:
            arguments, end = DECODER.raw_decode(body)
        except (ValueError, RecursionError):
            raise ValueError(f"{name}: malformed JSON arguments") from None
        if body[end:].strip():
            raise ValueError(f"{name}: text after the JSON arguments")
    if type(arguments) is DuplicateKeys:
        raise ValueError(f"{name}: duplicate keys in the arguments")
    if type(arguments) is not dict:
        if not isinstance(arguments, Mapping):
            raise ValueError(f"{name}: arguments must be an object, got {type(arguments).__name__}")
        arguments = dict(arguments)
    if not keys.allowed.issuperset(arguments):
        extra = set(arguments) - keys.allowed
        raise ValueError(f"{name}: unexpected arguments {sorted(short(k) for k in extra)}")
    if not keys.required.issubset(arguments):
        raise ValueError(f"{name}: missing arguments {sorted(keys.required - set(arguments))}")
    return arguments


def positive_number(tool: str, field: str, value: Any, maximum: float) -> float:
    """``value`` as a price: a JSON number (not a bool or a numeric string), finite, positive, at most ``maximum``;
    ``ValueError`` naming ``tool`` and ``field`` otherwise."""
    if type(value) not in (int, float):  # bool, a numeric string, null, an object: ill-typed
        raise ValueError(f"{tool}: {field} must be a number, got {short(value)}")
    try:
        price = float(value)
    except OverflowError:
        raise ValueError(f"{tool}: {field} is absurdly large") from None
    if not math.isfinite(price):
        raise ValueError(f"{tool}: {field} must be finite, got {price}")
    if price <= 0:
        raise ValueError(f"{tool}: {field} must be positive, got {price:g}")
    if price > maximum:
        raise ValueError(f"{tool}: {field} {price:g} is absurdly large (max {maximum:g})")
    return price


def money(price: float) -> str:
    """A price as the tool-calling games write it in messages: ``$1,234.50``."""
    return f"${price:,.2f}"


def format_call(call: Mapping[str, Any]) -> str:
    """The Hermes-style text of a call: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""
    return f"{OPEN_TAG}\n{json.dumps(call)}\n{CLOSE_TAG}"


def from_openai_message(message: Any) -> StructuredTurn:
    """A :class:`StructuredTurn` from an OpenAI chat completion message (SDK object or dict)."""
    get = message.get if isinstance(message, Mapping) else lambda k, d=None: getattr(message, k, d)
    return StructuredTurn(get("content") or "", tuple(get("tool_calls") or ()))


def from_anthropic_content(content: Sequence[Any]) -> StructuredTurn:
    """A :class:`StructuredTurn` from an Anthropic message's content blocks (text and ``tool_use``)."""
    texts, calls = [], []
    for block in content:
        kind = block.get("type") if isinstance(block, Mapping) else getattr(block, "type", None)
        if kind == "text":
            texts.append(block["text"] if isinstance(block, Mapping) else block.text)
        elif kind == "tool_use":
            calls.append(block)
    return StructuredTurn("\n".join(texts), tuple(calls))



__all__ = ["CALL_KEYS", "CLOSE_TAG", "DECODER", "OPEN_TAG", "ArgumentKeys", "DuplicateKeys", "Extracted", "Malformed",
           "StructuredTurn", "ToolCall", "ToolFormat", "call_arguments", "candidate_call", "extract", "format_call",
           "from_anthropic_content", "from_openai_message", "money", "positive_number", "raw_calls", "reply_turn",
           "schema_keys", "short", "structured_call", "tool_name"]
