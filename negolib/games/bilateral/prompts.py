"""Prompts for a language-model party in bilateral price bargaining (the agents themselves come later).

Contract: :func:`system_prompt` states the party's role, private cost or value, price tier, deadline and the three
tools; with ``tools_in_prompt`` it also embeds the tool schemas (:mod:`.tools`) and asks for a Hermes-style
``<tool_call>`` JSON, for chat templates without tool support. :func:`turn_message` is the per-turn user message:
the counterpart's latest message and call, the standing offers, the turns left, and why the party's own last
call had no effect. Both are pure functions of a :class:`~.env.BargainView`; counterpart text arrives cleaned.
"""

from __future__ import annotations

import json

from negolib.games.bilateral.env import BargainView
from negolib.games.bilateral.tools import ACCEPT_OFFER, MAKE_OFFER, TOOLS, WALK_AWAY


def money(price: float) -> str:
    """``$1,234.50``."""
    return f"${price:,.2f}"


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
        said = last.message or "(no message)"
        lines.append(f'The {them} wrote: "{said}"')
        lines.append(_describe_call(last.action, them))
    standing = [f"your offer {money(view.own_offer)}" if view.own_offer is not None else "no offer of yours",
                f"the {them}'s offer {money(view.their_offer)}" if view.their_offer is not None
                else f"no offer of the {them}'s"]
    lines.append(f"Standing: {standing[0]}; {standing[1]}.")
    if view.own_turns_left == 1:
        lines.append("This is your last turn.")
    return "\n".join(lines)
