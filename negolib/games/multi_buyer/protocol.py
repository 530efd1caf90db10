"""The turn protocol of the multi-buyer market and its strict parsers (seller turns and buyer answers).

Contract: a turn is a message plus tool calls, read on the bilateral game's surfaces (:mod:`.calls`: a
:class:`~.calls.StructuredTurn` of SDK calls, or text with a JSON call bare or in ``<tool_call>`` tags).
:func:`parse_seller_turn`: exactly one valid ``message_buyer`` call, else a bad parse (no call, two calls, unknown
tool or recipient, a bad offer, extra keys). :func:`parse_buyer_turn`: at most one call of the buyer's three; no
call is a decline in words, not an error. Both never raise.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal, NamedTuple

from negolib.games.multi_buyer.calls import (
    DECODER,
    DuplicateKeys,
    Malformed,
    StructuredTurn,
    ToolCall,
    extract,
    format_call,
    short,
)
from negolib.games.multi_buyer.scenarios import buyer_id
from negolib.games.multi_buyer.tools import (
    ACCEPT_OFFER,
    BUYER_TOOL_NAMES,
    COUNTER_OFFER,
    DECLINE,
    MAX_PRICE,
    MESSAGE_BUYER,
)

BuyerTool = Literal["accept_offer", "counter_offer", "decline"]
NO_CALL_ERROR = "no message_buyer call: every seller turn must address one buyer"
_BUYER_RE = re.compile(r"buyer_([1-9][0-9]?)")
_short = short

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
            arguments, end = DECODER.raw_decode(body)
        except (ValueError, RecursionError):
            raise ValueError(f"{name}: malformed JSON arguments") from None
        if body[end:].strip():
            raise ValueError(f"{name}: text after the JSON arguments")
    if type(arguments) is DuplicateKeys:
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


def _call(candidate: tuple[Any, Any] | Malformed) -> tuple[Any, Any]:
    if isinstance(candidate, Malformed):
        raise ValueError(str(candidate))
    return candidate


def parse_seller_turn(turn: str | StructuredTurn, n_buyers: int) -> ParsedTurn:
    """Parse a seller turn of a market of ``n_buyers``; never raises (see the module docstring)."""
    try:
        message, found, error, raw = extract(turn)
        if error is not None:
            return ParsedTurn(message, None, error, 0, raw)
        if not found:
            return ParsedTurn(message, None, NO_CALL_ERROR, 0, raw)
        if len(found) > 1:
            return ParsedTurn(message, None, f"double tool call: {len(found)} calls in one turn (exactly one "
                              "message_buyer call is allowed)", len(found), raw)
        try:
            return ParsedTurn(message, validate_seller_call(*_call(found[0]), n_buyers), None, 1, raw)
        except ValueError as exc:
            return ParsedTurn(message, None, str(exc), 1, raw)
    except Exception as exc:  # noqa: BLE001 - hostile SDK objects: a bad parse, never a crash
        return ParsedTurn("", None, f"unreadable turn ({type(exc).__name__}: {_short(str(exc))})")


def parse_buyer_turn(turn: str | StructuredTurn) -> ParsedTurn:
    """Parse a buyer's answer; never raises (see the module docstring)."""
    try:
        message, found, error, raw = extract(turn)
        if error is not None:
            return ParsedTurn(message, None, error, 0, raw)
        if not found:
            return ParsedTurn(message, None, None, 0, raw)
        if len(found) > 1:
            return ParsedTurn(message, None, f"double tool call: {len(found)} calls in one turn (at most one is "
                              "allowed)", len(found), raw)
        try:
            return ParsedTurn(message, validate_buyer_call(*_call(found[0])), None, 1, raw)
        except ValueError as exc:
            return ParsedTurn(message, None, str(exc), 1, raw)
    except Exception as exc:  # noqa: BLE001 - hostile SDK objects: a bad parse, never a crash
        return ParsedTurn("", None, f"unreadable turn ({type(exc).__name__}: {_short(str(exc))})")


def format_tool_call(action: SellerAction | BuyerAction) -> str:
    """The Hermes-style text of a call: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""
    return format_call(action.to_dict())
