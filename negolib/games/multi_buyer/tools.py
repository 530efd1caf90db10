"""The tools of the multi-buyer market, as JSON schemas: one for the seller, three for a buyer.

Contract: the seller's only tool is ``message_buyer(to, offer?)``: the turn's prose goes to buyer ``to`` (one of
``buyer_1`` .. ``buyer_N``, an enum fixed per market) with, optionally, a binding offer that buyer may accept in
its answer. A buyer answers with ``accept_offer()``, ``counter_offer(price)`` or ``decline()``. Schemas are
OpenAI-style (``{"type": "function", "function": {...}}``); :func:`anthropic_tools` gives Anthropic's shape.
"""

from __future__ import annotations

import copy
from typing import Any

from negolib.games.multi_buyer.scenarios import buyer_id
from negolib.games.toolcalls import function_tool

MESSAGE_BUYER = "message_buyer"
ACCEPT_OFFER = "accept_offer"
COUNTER_OFFER = "counter_offer"
DECLINE = "decline"
SELLER_TOOL_NAMES: tuple[str] = (MESSAGE_BUYER,)
BUYER_TOOL_NAMES: tuple[str, str, str] = (ACCEPT_OFFER, COUNTER_OFFER, DECLINE)

MAX_PRICE = 100_000_000.0
"""Prices above this are absurd: a bad parse."""


def _price(description: str) -> dict[str, Any]:
    return {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_PRICE, "description": description}


def seller_tools(n_buyers: int) -> list[dict[str, Any]]:
    """The seller's tool for a market of ``n_buyers`` buyers (a fresh copy)."""
    return [function_tool(
        MESSAGE_BUYER,
        "Send your message (the text of this turn) to one buyer, optionally with a binding offer to sell at a "
        "price; that buyer answers at once (accept, counter or decline). Each call spends one turn of your budget.",
        {"to": {"type": "string", "enum": [buyer_id(i) for i in range(n_buyers)],
                "description": "The buyer this turn is addressed to."},
         "offer": {**_price("Optional: a binding offer in dollars the buyer may accept now."),
                   "type": ["number", "null"]}},
        ["to"])]


BUYER_TOOLS: tuple[dict[str, Any], ...] = (
    function_tool(ACCEPT_OFFER, "Accept the seller's offer made this turn: the deal closes at that price. Only valid "
              "when the seller made an offer this turn.", {}, []),
    function_tool(COUNTER_OFFER, "Answer with the price you are willing to pay (in dollars).",
              {"price": _price("Your counter price in dollars, a positive number.")}, ["price"]),
    function_tool(DECLINE, "Decline without naming a price.", {}, []),
)
"""A buyer's three tools (treat as read-only; the accessors copy)."""


def buyer_tools() -> list[dict[str, Any]]:
    """A fresh copy of :data:`BUYER_TOOLS`."""
    return copy.deepcopy(list(BUYER_TOOLS))


def anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``tools`` in Anthropic's shape: ``{"name", "description", "input_schema"}``."""
    return [{"name": t["function"]["name"], "description": t["function"]["description"],
             "input_schema": copy.deepcopy(t["function"]["parameters"])} for t in tools]
