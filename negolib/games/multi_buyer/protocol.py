"""The turn protocol of the multi-buyer market and its strict parsers (seller turns and buyer answers).

Contract: a turn is a message plus tool calls, read on the surfaces of the shared extraction
(:mod:`negolib.games.toolcalls`: a :class:`StructuredTurn` of SDK calls, or text with a JSON call bare or in
``<tool_call>`` tags); argument names are checked against the tool schemas of :mod:`.tools`.
:func:`parse_seller_turn`: exactly one valid ``message_buyer`` call, else a bad parse (no call, two calls, unknown
tool or recipient, a bad offer, extra keys). :func:`parse_buyer_turn`: at most one call of the buyer's three; no
call is a decline in words, not an error. Both never raise.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from negolib.games.multi_buyer.scenarios import buyer_id
from negolib.games.multi_buyer.tools import (
    ACCEPT_OFFER,
    BUYER_TOOL_NAMES,
    BUYER_TOOLS,
    COUNTER_OFFER,
    DECLINE,
    MAX_PRICE,
    MESSAGE_BUYER,
    SELLER_TOOL_NAMES,
    seller_tools,
)
from negolib.games.toolcalls import (
    StructuredTurn,
    ToolCall,
    call_arguments,
    candidate_call,
    extract,
    format_call,
    positive_number,
    schema_keys,
    short,
    tool_name,
)

BuyerTool = Literal["accept_offer", "counter_offer", "decline"]
NO_CALL_ERROR = "no message_buyer call: every seller turn must address one buyer"
_BUYER_RE = re.compile(r"buyer_([1-9][0-9]?)")
_SELLER_KEYS = schema_keys(seller_tools(3)[0])  # the argument names do not depend on the market's size
_BUYER_KEYS = {t["function"]["name"]: schema_keys(t) for t in BUYER_TOOLS}

__all__ = ["BuyerAction", "ParsedTurn", "SellerAction", "StructuredTurn", "ToolCall", "format_tool_call",
           "parse_buyer_turn", "parse_seller_turn"]


class SellerAction(NamedTuple):
    """A valid seller call: the addressed buyer (0-based index) and the binding offer, if any."""

    to: int
    offer: float | None = None

    @property
    def buyer(self) -> int:
        """The addressed buyer (0-based), named as in the multi-product market's offers."""
        return self.to

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


def validate_seller_call(name: Any, arguments: Any, n_buyers: int) -> SellerAction:
    """The :class:`SellerAction` of one call in a market of ``n_buyers``, or ``ValueError`` saying why not."""
    tool_name(name, SELLER_TOOL_NAMES, f"the seller's tool is {MESSAGE_BUYER}")
    args = call_arguments(name, arguments, _SELLER_KEYS)
    to = args["to"]
    m = _BUYER_RE.fullmatch(to) if isinstance(to, str) else None
    if m is None or not 1 <= int(m.group(1)) <= n_buyers:
        raise ValueError(f"{name}: unknown recipient {short(to)}; buyers are buyer_1 .. buyer_{n_buyers}")
    offer = args.get("offer")
    price = None if offer is None else positive_number(name, "offer", offer, MAX_PRICE)
    return SellerAction(int(m.group(1)) - 1, price)


def validate_buyer_call(name: Any, arguments: Any) -> BuyerAction:
    """The :class:`BuyerAction` of one call, or ``ValueError`` saying why not."""
    args = call_arguments(tool_name(name, BUYER_TOOL_NAMES), arguments, _BUYER_KEYS[name])
    if name == COUNTER_OFFER:
        return BuyerAction(COUNTER_OFFER, positive_number(name, "price", args["price"], MAX_PRICE))
    return BuyerAction(ACCEPT_OFFER if name == ACCEPT_OFFER else DECLINE)


def _parse(turn: str | StructuredTurn, validate: Callable[[Any, Any], SellerAction | BuyerAction],
           no_call: str | None, allowed: str) -> ParsedTurn:
    """One turn through the shared extraction: ``no_call`` is the error of a turn without a call (None: not an
    error), ``allowed`` what a double call breaks; never raises."""
    try:
        message, found, error, raw = extract(turn)
        if error is not None:
            return ParsedTurn(message, None, error, 0, raw)
        if not found:
            return ParsedTurn(message, None, no_call, 0, raw)
        if len(found) > 1:
            return ParsedTurn(message, None, f"double tool call: {len(found)} calls in one turn ({allowed})",
                              len(found), raw)
        try:
            return ParsedTurn(message, validate(*candidate_call(found[0])), None, 1, raw)
        except ValueError as exc:
            return ParsedTurn(message, None, str(exc), 1, raw)
    except Exception as exc:  # noqa: BLE001 - hostile SDK objects: a bad parse, never a crash
        return ParsedTurn("", None, f"unreadable turn ({type(exc).__name__}: {short(str(exc))})")


def parse_seller_turn(turn: str | StructuredTurn, n_buyers: int) -> ParsedTurn:
    """Parse a seller turn of a market of ``n_buyers``; never raises (see the module docstring)."""
    return _parse(turn, lambda name, args: validate_seller_call(name, args, n_buyers), NO_CALL_ERROR,
                  "exactly one message_buyer call is allowed")


def parse_buyer_turn(turn: str | StructuredTurn) -> ParsedTurn:
    """Parse a buyer's answer; never raises (see the module docstring)."""
    return _parse(turn, validate_buyer_call, None, "at most one is allowed")


def format_tool_call(action: SellerAction | BuyerAction) -> str:
    """The Hermes-style text of a call: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""
    return format_call(action.to_dict())
