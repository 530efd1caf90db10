"""The three tools of bilateral price bargaining, as JSON schemas, in one place.

Contract: :data:`TOOLS` holds the OpenAI-style function schemas (``{"type": "function", "function": {name,
description, parameters}}``) of ``make_offer(price)``, ``accept_offer()`` and ``walk_away()``. The same dicts
go to OpenAI ``tools=`` and transformers ``apply_chat_template(tools=...)``; :func:`anthropic_tools` gives the
Anthropic ``tool_use`` shape. The parser (:mod:`.protocol`) validates arguments against these schemas only.
"""

from __future__ import annotations

import copy
from typing import Any

from negolib.games.toolcalls import function_tool

MAKE_OFFER = "make_offer"
ACCEPT_OFFER = "accept_offer"
WALK_AWAY = "walk_away"
TOOL_NAMES: tuple[str, str, str] = (MAKE_OFFER, ACCEPT_OFFER, WALK_AWAY)

MAX_PRICE = 100_000_000.0
"""Prices above this (500 times the top of the highest tier's draws) are absurd: a bad parse."""


TOOLS: tuple[dict[str, Any], ...] = (
    function_tool(MAKE_OFFER,
              "Make a binding offer to trade the item at this price (in dollars). It replaces your previous "
              "offer and stands until you make another; the other party may accept it.",
              {"price": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_PRICE,
                         "description": "The price in dollars, a positive number."}},
              ["price"]),
    function_tool(ACCEPT_OFFER,
              "Accept the other party's standing offer: the deal closes at their offered price. Only valid "
              "when the other party has an offer standing.",
              {}, []),
    function_tool(WALK_AWAY,
              "End the negotiation now without a deal.",
              {}, []),
)
"""OpenAI-style function schemas, in :data:`TOOL_NAMES` order (treat as read-only; the accessors copy)."""


def openai_tools() -> list[dict[str, Any]]:
    """A fresh copy of :data:`TOOLS` for OpenAI ``tools=`` or ``apply_chat_template(tools=...)``."""
    return copy.deepcopy(list(TOOLS))


def anthropic_tools() -> list[dict[str, Any]]:
    """The tools in Anthropic's shape: ``{"name", "description", "input_schema"}``."""
    return [{"name": t["function"]["name"], "description": t["function"]["description"],
             "input_schema": copy.deepcopy(t["function"]["parameters"])} for t in TOOLS]


def tool_schema(name: str) -> dict[str, Any]:
    """The ``parameters`` JSON schema of tool ``name`` (``KeyError`` for an unknown name)."""
    for t in TOOLS:
        if t["function"]["name"] == name:
            return t["function"]["parameters"]
    raise KeyError(name)
