"""The turn protocol of bilateral price bargaining: a message plus at most one tool call, and its strict parser.

Contract: :func:`parse_turn` turns one turn into a :class:`ParsedTurn` (the counterpart-visible message, an
:class:`Action` or None, a parse error or None) and never raises. Surfaces: a :class:`StructuredTurn` (message
plus SDK tool calls: OpenAI dicts or objects, Anthropic ``tool_use`` blocks, :class:`ToolCall`), or text holding
a JSON tool call bare or in ``<tool_call>`` tags (Hermes/Qwen/SmolLM). Bad parses (the turn is a no-op):
malformed JSON, unknown tool, missing/extra/ill-typed arguments, a bad price, two or more calls. No call is
not an error: the turn is a message only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from negolib.games.bilateral.tools import MAKE_OFFER, MAX_PRICE, TOOL_NAMES, tool_schema
from negolib.protocol import clean_prose

ToolName = Literal["make_offer", "accept_offer", "walk_away"]
MAX_TEXT_CHARS = 16_000
OPEN_TAG, CLOSE_TAG = "<tool_call>", "</tool_call>"
_BLOCK_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_FENCE_RE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_CALL_START_RE = re.compile(r'\{\s*"(?:name|arguments|parameters)"')
_CALL_KEYS = ({"name", "arguments"}, {"name", "parameters"}, {"name"})


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


@dataclass(frozen=True)
class Action:
    """A valid tool call: the tool and, for ``make_offer``, the price."""

    tool: ToolName
    price: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"name": ..., "arguments": {...}}``, the JSON of the call."""
        return {"name": self.tool, "arguments": {"price": self.price} if self.tool == MAKE_OFFER else {}}


@dataclass(frozen=True)
class ParsedTurn:
    """One parsed turn: the cleaned message, the action (None: no call or a bad parse) and why it failed."""

    message: str
    action: Action | None
    error: str | None = None
    n_calls: int = 0

    @property
    def bad(self) -> bool:
        """A bad parse (a prose-only turn is not one)."""
        return self.error is not None


class _Malformed(str):
    """A tool-call candidate that could not be read (the string says why)."""


class _DuplicateKeys(dict):
    """A decoded JSON object that repeated a key."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    return d if len(d) == len(pairs) else _DuplicateKeys(d)


_DECODER = json.JSONDecoder(object_pairs_hook=_object)


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = value if isinstance(value, str) else repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__
        text = f"<{type(value).__name__}>"
    text = clean_prose(text[: 4 * limit])
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _decode_whole(text: str) -> Any:
    """One JSON value filling ``text`` (fences allowed); ``_Malformed`` when it is not one."""
    body = _FENCE_RE.sub("", text.strip())
    try:
        obj, end = _DECODER.raw_decode(body)
    except (ValueError, RecursionError) as exc:
        return _Malformed(f"malformed JSON in the tool call ({_short(str(exc))})")
    if body[end:].strip():
        return _Malformed("text after the JSON inside <tool_call> tags")
    return obj


def _candidates(obj: Any) -> list[Any]:
    """A decoded tag block as call candidates: a list holds one candidate per element."""
    return list(obj) if isinstance(obj, list) else [obj]


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
            obj, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError) as exc:
            if _CALL_START_RE.match(text, start):
                found.append(_Malformed(f"malformed JSON tool call ({_short(str(exc))})"))
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
    """Every tool-call candidate in ``text`` (tagged blocks, an unclosed tag, bare JSON) and the prose left."""
    found: list[Any] = []
    for m in _BLOCK_RE.finditer(text):
        obj = _decode_whole(m.group(1))
        found.extend([obj] if isinstance(obj, _Malformed) else _candidates(obj))
    prose = _BLOCK_RE.sub(" ", text)
    if OPEN_TAG in prose:  # an unclosed tag (generation stopped on the closing tag): its JSON still counts
        head, _, tail = prose.partition(OPEN_TAG)
        body = _FENCE_RE.sub("", tail.strip())
        try:
            obj, end = _DECODER.raw_decode(body)
            found.extend(_candidates(obj))
            prose = head + " " + body[end:]
        except (ValueError, RecursionError):
            found.append(_Malformed("unclosed <tool_call> tag without a readable JSON call after it"))
            prose = head
    bare, prose = _scan_bare(prose.replace(OPEN_TAG, " ").replace(CLOSE_TAG, " "))
    return found + bare, prose


def _structured_call(call: Any) -> tuple[Any, Any]:
    """(name, arguments) of an SDK tool call; ``ValueError`` when it has neither shape."""
    if isinstance(call, ToolCall):
        return call.name, call.arguments
    if isinstance(call, Mapping):
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
                raise ValueError(f"unexpected keys {sorted(map(_short, extra))} in the tool call")
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


def _price(value: Any) -> float:
    if type(value) not in (int, float):  # bool, a numeric string, null, an object: ill-typed
        raise ValueError(f"make_offer: price must be a number, got {_short(value)}")
    try:
        price = float(value)
    except OverflowError:
        raise ValueError("make_offer: price is absurdly large") from None
    if not math.isfinite(price):
        raise ValueError(f"make_offer: price must be finite, got {price}")
    if price <= 0:
        raise ValueError(f"make_offer: price must be positive, got {price:g}")
    if price > MAX_PRICE:
        raise ValueError(f"make_offer: price {price:g} is absurdly large (max {MAX_PRICE:g})")
    return price


def validate_call(name: Any, arguments: Any) -> Action:
    """The :class:`Action` of one call, or ``ValueError`` saying why it is not a valid call of the schema."""
    if not isinstance(name, str):
        raise ValueError(f"tool name must be a string, got {_short(name)}")
    if name not in TOOL_NAMES:
        raise ValueError(f"unknown tool {_short(name)!r}; tools: {', '.join(TOOL_NAMES)}")
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        arguments = {}
    if isinstance(arguments, str):
        try:
            body = arguments.strip()
            arguments, end = _DECODER.raw_decode(body)
        except (ValueError, RecursionError):
            raise ValueError(f"{name}: malformed JSON arguments") from None
        if body[end:].strip():
            raise ValueError(f"{name}: text after the JSON arguments")
    if type(arguments) is _DuplicateKeys:
        raise ValueError(f"{name}: duplicate keys in the arguments")
    if not isinstance(arguments, Mapping):
        raise ValueError(f"{name}: arguments must be an object, got {type(arguments).__name__}")
    schema = tool_schema(name)
    allowed, required = set(schema["properties"]), set(schema["required"])
    extra = set(arguments) - allowed
    if extra:
        raise ValueError(f"{name}: unexpected arguments {sorted(_short(k) for k in extra)}")
    missing = required - set(arguments)
    if missing:
        raise ValueError(f"{name}: missing arguments {sorted(missing)}")
    if name == MAKE_OFFER:
        return Action(MAKE_OFFER, _price(arguments["price"]))
    return Action(name)  # type: ignore[arg-type]


def _validate_candidate(obj: Any) -> Action:
    if isinstance(obj, _Malformed):
        raise ValueError(str(obj))
    if type(obj) is _DuplicateKeys:
        raise ValueError("duplicate keys in the JSON tool call")
    if not isinstance(obj, dict):
        raise ValueError(f"a tool call must be a JSON object, got {type(obj).__name__}")
    if set(obj) not in _CALL_KEYS:
        raise ValueError(f"a JSON tool call has exactly 'name' and 'arguments', got keys {sorted(map(_short, obj))}")
    return validate_call(obj["name"], obj.get("arguments", obj.get("parameters")))


def parse_turn(turn: str | StructuredTurn) -> ParsedTurn:
    """Parse one turn (text or :class:`StructuredTurn`); never raises (see the module docstring)."""
    try:
        return _parse(turn)
    except Exception as exc:  # noqa: BLE001 - hostile SDK objects: a bad parse, never a crash
        return ParsedTurn("", None, f"unreadable turn ({type(exc).__name__}: {_short(str(exc))})")


def _parse(turn: str | StructuredTurn) -> ParsedTurn:
    structured: list[Any] = []
    if isinstance(turn, StructuredTurn):
        text = turn.message if isinstance(turn.message, str) else ""
        calls = turn.tool_calls
        if calls is None:
            calls = ()
        if isinstance(calls, (str, bytes, Mapping)) or not isinstance(calls, Sequence):
            return ParsedTurn(clean_prose(text[:MAX_TEXT_CHARS]), None,
                              "tool_calls must be a list of tool calls")
        for call in calls:
            try:
                structured.append(_structured_call(call))
            except ValueError as exc:
                structured.append(_Malformed(str(exc)))
    elif isinstance(turn, str):
        text = turn
    else:
        return ParsedTurn("", None, f"a turn must be text or a StructuredTurn, got {type(turn).__name__}")
    found, prose = _text_candidates(text[:MAX_TEXT_CHARS])
    message = clean_prose(prose)
    n = len(structured) + len(found)
    if n == 0:
        return ParsedTurn(message, None)
    if n > 1:
        return ParsedTurn(message, None, f"double tool call: {n} tool calls in one turn (at most one is allowed)", n)
    try:
        if structured:
            first = structured[0]
            if isinstance(first, _Malformed):
                raise ValueError(str(first))
            action = validate_call(*first)
        else:
            action = _validate_candidate(found[0])
    except ValueError as exc:
        return ParsedTurn(message, None, str(exc), 1)
    return ParsedTurn(message, action, None, 1)


def format_tool_call(action: Action) -> str:
    """The Hermes-style text of a call: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""
    return f"{OPEN_TAG}\n{json.dumps(action.to_dict())}\n{CLOSE_TAG}"


def raw_calls(turn: str | StructuredTurn) -> list[Any] | None:
    """The structured calls of ``turn`` as JSON-ready data for a transcript (None for a text turn)."""
    if not isinstance(turn, StructuredTurn):
        return None
    out: list[Any] = []
    calls = turn.tool_calls or ()
    for call in calls if isinstance(calls, Sequence) and not isinstance(calls, (str, bytes)) else [calls]:
        try:
            name, args = _structured_call(call)
            item: Any = {"name": name, "arguments": args}
            text = json.dumps(item)
            if len(text) > MAX_TEXT_CHARS:
                raise ValueError("too long")
            out.append(item)
        except Exception:  # noqa: BLE001 - keep a readable trace of what could not be stored
            out.append(_short(call, 200))
    return out


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
