"""The turn protocol of bilateral price bargaining: a message plus at most one tool call, and its strict parser.

Contract: :func:`parse_turn` turns one turn into a :class:`ParsedTurn` (the counterpart-visible message, an
:class:`Action` or None, a parse error or None) and never raises. Surfaces (read by the shared extraction,
:mod:`negolib.games.toolcalls`): a :class:`StructuredTurn` (message plus SDK tool calls: OpenAI dicts or objects,
Anthropic ``tool_use`` blocks, :class:`ToolCall`), or text holding a JSON tool call bare or in ``<tool_call>`` tags
(Hermes/Qwen/SmolLM). Bad parses (the turn is a no-op): malformed JSON, unknown tool, missing/extra/ill-typed
arguments, a bad price, two or more calls. No call is not an error: the turn is a message only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from negolib.games.bilateral.tools import MAKE_OFFER, MAX_PRICE, TOOL_NAMES, TOOLS
from negolib.games.toolcalls import (
    CLOSE_TAG,
    MAX_TEXT_CHARS,
    OPEN_TAG,
    StructuredTurn,
    ToolCall,
    call_arguments,
    candidate_call,
    extract,
    format_call,
    from_anthropic_content,
    from_openai_message,
    positive_number,
    raw_calls,
    schema_keys,
    short,
    tool_name,
)

ToolName = Literal["make_offer", "accept_offer", "walk_away"]
_KEYS = {t["function"]["name"]: schema_keys(t) for t in TOOLS}

__all__ = ["CLOSE_TAG", "MAX_TEXT_CHARS", "OPEN_TAG", "Action", "ParsedTurn", "StructuredTurn", "ToolCall",
           "format_tool_call", "from_anthropic_content", "from_openai_message", "parse_turn", "raw_calls",
           "validate_call"]


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


def validate_call(name: Any, arguments: Any) -> Action:
    """The :class:`Action` of one call, or ``ValueError`` saying why it is not a valid call of the schema."""
    args = call_arguments(tool_name(name, TOOL_NAMES), arguments, _KEYS[name])
    if name == MAKE_OFFER:
        return Action(MAKE_OFFER, positive_number(name, "price", args["price"], MAX_PRICE))
    return Action(name)  # type: ignore[arg-type]


def parse_turn(turn: str | StructuredTurn) -> ParsedTurn:
    """Parse one turn (text or :class:`StructuredTurn`); never raises (see the module docstring)."""
    try:
        return _parse(turn)
    except Exception as exc:  # noqa: BLE001 - hostile SDK objects: a bad parse, never a crash
        return ParsedTurn("", None, f"unreadable turn ({type(exc).__name__}: {short(str(exc))})")


def _parse(turn: str | StructuredTurn) -> ParsedTurn:
    message, found, error, _ = extract(turn)
    if error is not None:
        return ParsedTurn(message, None, error)
    n = len(found)
    if n == 0:
        return ParsedTurn(message, None)
    if n > 1:
        return ParsedTurn(message, None, f"double tool call: {n} tool calls in one turn (at most one is allowed)", n)
    try:
        action = validate_call(*candidate_call(found[0]))
    except ValueError as exc:
        return ParsedTurn(message, None, str(exc), 1)
    return ParsedTurn(message, action, None, 1)


def format_tool_call(action: Action) -> str:
    """The Hermes-style text of a call: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""
    return format_call(action.to_dict())
