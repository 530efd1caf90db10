"""Prompts for a language-model party in bilateral price bargaining, and the chat history the agents send.

Contract: :func:`system_prompt` states the party's role, private cost or value, price tier, deadline and the three
tools; with ``tools_in_prompt`` it also embeds the tool schemas (:mod:`.tools`) and asks for a Hermes-style
``<tool_call>`` JSON, for chat templates without tool support. :func:`turn_message` is the per-turn user message:
the counterpart's latest message and call, the standing offers, the turns left, and why the party's own last
call had no effect. :func:`chat_messages` is the whole conversation as the party lived it: the system prompt,
then per own past turn the user message it was asked with, its own reply as an assistant message with its tool
call (``tool_calls`` plus a ``tool`` result message, or the ``<tool_call>`` text), and the current turn's user
message. All are pure functions of a :class:`~.env.BargainView`; the counterpart's words are shown as one quoted
line (:func:`negolib.core.crossing.quoted`), so they cannot pass for an offer or standing line.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from negolib.core.crossing import quoted
from negolib.games.bilateral.env import BargainView, HistoryEntry
from negolib.games.bilateral.protocol import Action, format_tool_call
from negolib.games.bilateral.tools import ACCEPT_OFFER, MAKE_OFFER, TOOLS, WALK_AWAY
from negolib.games.toolcalls import ToolFormat, money


def _tier_text(view: BargainView) -> str:
    return f"prices for this kind of item are of the order of {money(view.scale)}"


def system_prompt(view: BargainView, tools_in_prompt: bool = False) -> str:
    """The system prompt of ``view.role`` for this episode (see the module docstring)."""
    me, them = view.role, view.counterpart
    if me == "seller":
        private = (f"Your cost for the item is {money(view.reservation)}. Selling below your cost loses you "
                   "money; the higher the price above your cost, the better for you.")
    else:
        private = (f"The item is worth {money(view.reservation)} to you. Buying above that value loses you "
                   "money; the lower the price below your value, the better for you.")
    n_own = view.config.turns_of(me)
    opens = "You make the first move." if view.config.first_mover == me else f"The {them} makes the first move."
    lines = [
        f"You are the {me} in a negotiation over the price of one item with a {them}; {_tier_text(view)}.",
        private + f" This {view.reservation_name} is private: the {them} does not know it, and you do not know "
        f"the {them}'s {'value' if me == 'seller' else 'cost'}.",
        f"The negotiation lasts at most {view.deadline} turns in all ({n_own} of them yours). {opens} If no "
        "offer is accepted by the deadline, there is no deal and neither side gains anything.",
        "",
        f"Each turn, write a short message to the {them}, then make at most one tool call:",
        f"- {MAKE_OFFER}(price): a binding offer at this price in dollars. It replaces your previous offer and "
        f"stays standing until you make another; the {them} may accept it.",
        f"- {ACCEPT_OFFER}(): accept the {them}'s standing offer; the deal closes at their offered price. It is "
        f"only valid while the {them} has an offer standing.",
        f"- {WALK_AWAY}(): end the negotiation now, without a deal.",
        "A turn with only a message changes no offer. Only tool calls are binding: a price written in a message "
        "is not an offer. More than one tool call in a turn, or a malformed one, has no effect.",
    ]
    if tools_in_prompt:
        schema = json.dumps([t["function"] for t in TOOLS], indent=1)
        lines += [
            "",
            "You may call these tools, described as JSON schemas:",
            f"<tools>\n{schema}\n</tools>",
            "To call a tool, end your turn with the call as a JSON object inside <tool_call></tool_call> tags:",
            f'<tool_call>\n{{"name": "{MAKE_OFFER}", "arguments": {{"price": 123.45}}}}\n</tool_call>',
            f'An accept is <tool_call>\n{{"name": "{ACCEPT_OFFER}", "arguments": {{}}}}\n</tool_call>',
        ]
    return "\n".join(lines)


def _describe_call(action: dict | None, role: str) -> str:
    if action is None:
        return f"The {role} made no offer this turn."
    if action["name"] == MAKE_OFFER:
        return f"The {role} offers {money(float(action['arguments']['price']))}."
    return f"The {role} called {action['name']}."  # accept and walk-away end the episode: not normally seen


def turn_message(view: BargainView) -> str:
    """The user message that asks ``view.role`` for its turn ``view.turn``."""
    them = view.counterpart
    lines = [f"Turn {view.turn} of {view.deadline}: {view.own_turns_left} of your turns left, this one included."]
    own = [h for h in view.history if h.role == view.role]
    if own and own[-1].parse_error is not None:
        lines.append(f"Your last turn changed nothing: {own[-1].parse_error}.")
    theirs = [h for h in view.history if h.role == them]
    last = theirs[-1] if theirs else None
    if last is None:
        lines.append(f"You open the negotiation with the {them}.")
    else:
        lines.append(f"The {them} wrote: {quoted(last.message or '(no message)')}")
        lines.append(_describe_call(last.action, them))
    standing = [f"your offer {money(view.own_offer)}" if view.own_offer is not None else "no offer of yours",
                f"the {them}'s offer {money(view.their_offer)}" if view.their_offer is not None
                else f"no offer of the {them}'s"]
    lines.append(f"Standing: {standing[0]}; {standing[1]}.")
    if view.own_turns_left == 1:
        lines.append("This is your last turn.")
    return "\n".join(lines)


def past_view(view: BargainView, turn: int) -> BargainView:
    """The view ``view.role`` had when asked for its earlier turn ``turn`` (history before it, offers standing then)."""
    if not 1 <= turn <= view.turn:
        raise ValueError(f"turn must be in [1, {view.turn}], got {turn}")
    history = tuple(h for h in view.history if h.turn < turn)

    def last_offer(mine: bool) -> float | None:
        offers = [h.offer for h in history if (h.role == view.role) == mine and h.offer is not None]
        return offers[-1] if offers else None

    return replace(view, turn=turn, history=history, own_offer=last_offer(True), their_offer=last_offer(False))


def call_id(turn: int) -> str:
    """The id of the tool call made on ``turn`` (unique within an episode; valid for OpenAI and Anthropic)."""
    return f"call_turn{turn}"


def own_call(entry: HistoryEntry) -> Action | None:
    """The call an own past turn made, as the party made it: its valid call, or the accept that found no standing
    offer (None: no call, or one the parser refused, whose text the view no longer holds)."""
    if entry.invalid_accept:
        return Action(ACCEPT_OFFER)
    if entry.action is None:
        return None
    name = entry.action["name"]
    return Action(MAKE_OFFER, entry.offer) if name == MAKE_OFFER else Action(name)


def tool_result(entry: HistoryEntry) -> str:
    """What the environment answered to the call of an own past turn (see :func:`own_call`)."""
    if entry.invalid_accept:
        return f"Error: {entry.parse_error}. Nothing changed."
    if entry.offer is not None:
        return f"Your offer of {money(entry.offer)} is standing."
    return "Done."  # accept_offer and walk_away end the episode: not normally seen


def chat_messages(view: BargainView, tool_format: ToolFormat = "native", drop: int = 0) -> list[dict[str, Any]]:
    """The conversation that asks ``view.role`` for turn ``view.turn`` (see the module docstring), leaving out
    the ``drop`` oldest own turns (to fit a prompt cap). Messages are OpenAI-style dicts; a ``native`` call is
    ``{"id", "type": "function", "function": {"name", "arguments": dict}}`` (transformers' shape: OpenAI wants the
    arguments as a JSON string, Anthropic as ``tool_use`` blocks; the agents convert)."""
    if tool_format not in ("native", "text"):
        raise ValueError(f"tool_format must be 'native' or 'text', got {tool_format!r}")
    if drop < 0:
        raise ValueError(f"drop must be >= 0, got {drop}")
    msgs: list[dict[str, Any]] = [{"role": "system",
                                   "content": system_prompt(view, tools_in_prompt=tool_format == "text")}]
    carried = ""  # text format: the last call's result, told in the next user message
    for entry in [h for h in view.history if h.role == view.role][drop:]:
        msgs.append({"role": "user", "content": carried + turn_message(past_view(view, entry.turn))})
        carried = ""
        action = own_call(entry)
        if action is None:
            msgs.append({"role": "assistant", "content": entry.message})
        elif tool_format == "text":
            body = f"{entry.message}\n{format_tool_call(action)}" if entry.message else format_tool_call(action)
            msgs.append({"role": "assistant", "content": body})
            carried = f"Result of your {action.tool} call: {tool_result(entry)}\n"
        else:
            cid = call_id(entry.turn)
            msgs.append({"role": "assistant", "content": entry.message, "tool_calls": [
                {"id": cid, "type": "function", "function": action.to_dict()}]})
            msgs.append({"role": "tool", "tool_call_id": cid, "name": action.tool, "content": tool_result(entry)})
    msgs.append({"role": "user", "content": carried + turn_message(view)})
    return msgs
