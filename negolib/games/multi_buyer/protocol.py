"""The turn protocol of the multi-buyer market and its strict parsers (seller turns and buyer answers).

Contract: a turn is a message plus tool calls, read on the bilateral game's surfaces with its extraction code (a
:class:`~negolib.games.bilateral.protocol.StructuredTurn` of SDK calls, or text with a JSON call bare or in
``<tool_call>`` tags). :func:`parse_seller_turn`: exactly one valid ``message_buyer`` call, else a bad parse (no
call, two calls, unknown tool or recipient, a bad offer, extra keys). :func:`parse_buyer_turn`: at most one call
of the buyer's three; no call is a decline in words, not an error. Both never raise.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Literal, NamedTuple

from negolib.games.bilateral import protocol as _bp
from negolib.games.bilateral.protocol import StructuredTurn, ToolCall
from negolib.games.multi_buyer.scenarios import buyer_id
from negolib.games.multi_buyer.tools import (
    ACCEPT_OFFER,
    BUYER_TOOL_NAMES,
    COUNTER_OFFER,
    DECLINE,
    MAX_PRICE,
    MESSAGE_BUYER,
)
from negolib.protocol import clean_prose

BuyerTool = Literal["accept_offer", "counter_offer", "decline"]
MAX_TEXT_CHARS = _bp.MAX_TEXT_CHARS
NO_CALL_ERROR = "no message_buyer call: every seller turn must address one buyer"
_BUYER_RE = re.compile(r"buyer_([1-9][0-9]?)")
_short = _bp._short

__all__ = ["BuyerAction", "ParsedTurn", "SellerAction", "StructuredTurn", "ToolCall", "format_tool_call",
           "parse_buyer_turn", "parse_seller_turn"]


class SellerAction(NamedTuple):
    """A valid seller call: the addressed buyer (0-based index) and the binding offer, if any."""

    to: int
    offer: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"name": "message_buyer", "arguments": {"to": "buyer_k", "offer": ...}}`` (no offer key without one)."""
        args: dict[str, Any] = {"to": buyer_id(self.to)}
        if self.offer is not None:
            args["offer"] = self.offer
        return {"name": MESSAGE_BUYER, "arguments": args}


class BuyerAction(NamedTuple):
    """A valid buyer call: the tool and, for ``counter_offer``, the price."""

    tool: BuyerTool
    price: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.tool, "arguments": {"price": self.price} if self.tool == COUNTER_OFFER else {}}


class ParsedTurn(NamedTuple):
    """One parsed turn: the cleaned message, the action (None: no call or a bad parse) and why it failed."""

    message: str
    action: SellerAction | BuyerAction | None
    error: str | None = None
    n_calls: int = 0
    raw_calls: list[Any] | None = None  # the structured calls as JSON-ready data (None for a text turn)

    @property
    def bad(self) -> bool:
        return self.error is not None


def _price(tool: str, name: str, value: Any) -> float:
    if type(value) not in (int, float):  # bool, a numeric string, an object: ill-typed
        raise ValueError(f"{tool}: {name} must be a number, got {_short(value)}")
    try:
        price = float(value)
    except OverflowError:
        raise ValueError(f"{tool}: {name} is absurdly large") from None
    if not math.isfinite(price):
        raise ValueError(f"{tool}: {name} must be finite, got {price}")
    if price <= 0:
        raise ValueError(f"{tool}: {name} must be positive, got {price:g}")
    if price > MAX_PRICE:
        raise ValueError(f"{tool}: {name} {price:g} is absurdly large (max {MAX_PRICE:g})")
    return price


def _arguments(name: str, arguments: Any) -> dict[str, Any]:
    """The decoded argument object of a call, or ``ValueError``."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    if isinstance(arguments, str):
        body = arguments.strip()
        try:
            arguments, end = _bp._DECODER.raw_decode(body)
        except (ValueError, RecursionError):
            raise ValueError(f"{name}: malformed JSON arguments") from None
        if body[end:].strip():
            raise ValueError(f"{name}: text after the JSON arguments")
    if type(arguments) is _bp._DuplicateKeys:
        raise ValueError(f"{name}: duplicate keys in the arguments")
    if not isinstance(arguments, dict):
        raise ValueError(f"{name}: arguments must be an object, got {type(arguments).__name__}")
    return arguments


def _keys(name: str, args: dict[str, Any], allowed: set[str], required: set[str]) -> None:
    extra = set(args) - allowed
    if extra:
        raise ValueError(f"{name}: unexpected arguments {sorted(_short(k) for k in extra)}")
    missing = required - set(args)
    if missing:
        raise ValueError(f"{name}: missing arguments {sorted(missing)}")


def validate_seller_call(name: Any, arguments: Any, n_buyers: int) -> SellerAction:
    """The :class:`SellerAction` of one call in a market of ``n_buyers``, or ``ValueError`` saying why not."""
    if not isinstance(name, str):
        raise ValueError(f"tool name must be a string, got {_short(name)}")
    if name != MESSAGE_BUYER:
        raise ValueError(f"unknown tool {_short(name)!r}; the seller's tool is {MESSAGE_BUYER}")
    args = _arguments(name, arguments)
    _keys(name, args, {"to", "offer"}, {"to"})
    to = args["to"]
    m = _BUYER_RE.fullmatch(to) if isinstance(to, str) else None
    if m is None or not 1 <= int(m.group(1)) <= n_buyers:
        raise ValueError(f"{name}: unknown recipient {_short(to)}; buyers are buyer_1 .. buyer_{n_buyers}")
    offer = args.get("offer")
    return SellerAction(int(m.group(1)) - 1, None if offer is None else _price(name, "offer", offer))


def validate_buyer_call(name: Any, arguments: Any) -> BuyerAction:
    """The :class:`BuyerAction` of one call, or ``ValueError`` saying why not."""
    if not isinstance(name, str):
        raise ValueError(f"tool name must be a string, got {_short(name)}")
    if name not in BUYER_TOOL_NAMES:
        raise ValueError(f"unknown tool {_short(name)!r}; tools: {', '.join(BUYER_TOOL_NAMES)}")
    args = _arguments(name, arguments)
    if name == COUNTER_OFFER:
        _keys(name, args, {"price"}, {"price"})
        return BuyerAction(COUNTER_OFFER, _price(name, "price", args["price"]))
    _keys(name, args, set(), set())
    return BuyerAction(ACCEPT_OFFER if name == ACCEPT_OFFER else DECLINE)


class _TextCall(NamedTuple):
    """A call candidate decoded from the turn's text (a JSON value, or why it could not be read)."""

    obj: Any


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
    """A structured call as stored in the transcript: ``{"name", "arguments"}`` (copied) when that is plain JSON
    data, else a short text trace of what could not be stored."""
    if isinstance(pair, tuple):
        name, args = pair
        if type(name) is str and len(name) <= 200 and _flat_args(args):
            return {"name": name, "arguments": None if args is None else dict(args)}
        item = {"name": name, "arguments": args}
        if _json_ready(item, [MAX_TEXT_CHARS]):
            return json.loads(json.dumps(item))
    return _short(call, 200)


def _calls(turn: str | StructuredTurn) -> tuple[str, list[Any], str | None, list[Any] | None]:
    """(cleaned message, call candidates, a surface error or None, the structured calls for the transcript)."""
    structured: list[Any] = []
    raw: list[Any] | None = None
    if isinstance(turn, StructuredTurn):
        text = turn.message if isinstance(turn.message, str) else ""
        calls = turn.tool_calls if turn.tool_calls is not None else ()
        if isinstance(calls, (str, bytes, dict)) or not isinstance(calls, (list, tuple)):
            return clean_prose(text[:MAX_TEXT_CHARS]), [], "tool_calls must be a list of tool calls", \
                [_short(calls, 200)]
        raw = []
        for call in calls:
            try:
                pair: Any = _bp._structured_call(call)
            except ValueError as exc:
                pair = _bp._Malformed(str(exc))
            structured.append(pair)
            raw.append(_raw_item(call, pair))
    elif isinstance(turn, str):
        text = turn
    else:
        return "", [], f"a turn must be text or a StructuredTurn, got {type(turn).__name__}", None
    if "{" in text or "<" in text:
        found, prose = _bp._text_candidates(text[:MAX_TEXT_CHARS])
    else:
        found, prose = [], text[:MAX_TEXT_CHARS]
    return clean_prose(prose), structured + [_TextCall(c) for c in found], None, raw


def _name_args(candidate: Any) -> tuple[Any, Any]:
    """(name, arguments) of a candidate: a structured (name, args) pair or a decoded text object."""
    if isinstance(candidate, _bp._Malformed):
        raise ValueError(str(candidate))
    if isinstance(candidate, _TextCall):
        obj = candidate.obj
        if isinstance(obj, _bp._Malformed):
            raise ValueError(str(obj))
        if type(obj) is _bp._DuplicateKeys:
            raise ValueError("duplicate keys in the JSON tool call")
        if not isinstance(obj, dict):
            raise ValueError(f"a tool call must be a JSON object, got {type(obj).__name__}")
        if set(obj) not in _bp._CALL_KEYS:
            raise ValueError(f"a JSON tool call has exactly 'name' and 'arguments', got keys "
                             f"{sorted(map(_short, obj))}")
        return obj["name"], obj.get("arguments", obj.get("parameters"))
    return candidate


def parse_seller_turn(turn: str | StructuredTurn, n_buyers: int) -> ParsedTurn:
    """Parse a seller turn of a market of ``n_buyers``; never raises (see the module docstring)."""
    try:
        message, found, error, raw = _calls(turn)
        if error is not None:
            return ParsedTurn(message, None, error, 0, raw)
        if not found:
            return ParsedTurn(message, None, NO_CALL_ERROR, 0, raw)
        if len(found) > 1:
            return ParsedTurn(message, None, f"double tool call: {len(found)} calls in one turn (exactly one "
                              "message_buyer call is allowed)", len(found), raw)
        try:
            return ParsedTurn(message, validate_seller_call(*_name_args(found[0]), n_buyers), None, 1, raw)
        except ValueError as exc:
            return ParsedTurn(message, None, str(exc), 1, raw)
    except Exception as exc:  # noqa: BLE001 - hostile SDK objects: a bad parse, never a crash
        return ParsedTurn("", None, f"unreadable turn ({type(exc).__name__}: {_short(str(exc))})")


def parse_buyer_turn(turn: str | StructuredTurn) -> ParsedTurn:
    """Parse a buyer's answer; never raises (see the module docstring)."""
    try:
        message, found, error, raw = _calls(turn)
        if error is not None:
            return ParsedTurn(message, None, error, 0, raw)
        if not found:
            return ParsedTurn(message, None, None, 0, raw)
        if len(found) > 1:
            return ParsedTurn(message, None, f"double tool call: {len(found)} calls in one turn (at most one is "
                              "allowed)", len(found), raw)
        try:
            return ParsedTurn(message, validate_buyer_call(*_name_args(found[0])), None, 1, raw)
        except ValueError as exc:
            return ParsedTurn(message, None, str(exc), 1, raw)
    except Exception as exc:  # noqa: BLE001 - hostile SDK objects: a bad parse, never a crash
        return ParsedTurn("", None, f"unreadable turn ({type(exc).__name__}: {_short(str(exc))})")


def format_tool_call(action: SellerAction | BuyerAction) -> str:
    """The Hermes-style text of a call: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""
    return f"{_bp.OPEN_TAG}\n{json.dumps(action.to_dict())}\n{_bp.CLOSE_TAG}"
