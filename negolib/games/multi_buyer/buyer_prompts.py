"""Prompts for a language-model buyer in the multi-buyer market, and the chat history the buyer agents send.

Contract: everything here is a pure function of one :class:`~.env.BuyerView`: the buyer's private budget and its
own thread with the seller, never another buyer's words, budget or offers (buyers never see each other's
messages). :func:`system_prompt` states the buyer's budget, that paying above it loses money, the privacy of its
thread and the three tools (``accept_offer()``, ``counter_offer(price)``, ``decline()``), exactly one call per
answer; with ``tools_in_prompt`` it embeds the schemas and asks for a ``<tool_call>`` JSON (templates without tool
support). :func:`turn_message` gives one seller message to this buyer (its words as one quoted line,
:func:`negolib.core.crossing.quoted`) and its binding offer, if any.
:func:`chat_messages` is the conversation as the buyer lived it: for each earlier time it was addressed, the
seller's message, its answer (the call natively, or as ``<tool_call>`` text) and the call's result.
"""

from __future__ import annotations

import json
from typing import Any

from negolib.core.crossing import quoted
from negolib.games.multi_buyer.env import BuyerView, ThreadEntry
from negolib.games.multi_buyer.protocol import BuyerAction, format_tool_call
from negolib.games.multi_buyer.tools import ACCEPT_OFFER, COUNTER_OFFER, DECLINE, buyer_tools
from negolib.games.toolcalls import ToolFormat, money

Chat = list[dict[str, Any]]


def system_prompt(view: BuyerView, tools_in_prompt: bool = False) -> str:
    """The buyer's system prompt (see the module docstring)."""
    lines = [
        f"You are {view.name}, a buyer in a market where one seller sells an item to one of several buyers; prices "
        f"are of the order of {money(view.scale)}.",
        f"Your budget is {money(view.budget)}: the most the item is worth to you. Paying more than your budget "
        "loses you money; the lower the price, the better for you. Your budget is private: the seller does not "
        "know it.",
        "The seller talks to the buyers one at a time. Your conversation with the seller is private: you see only "
        "the seller's messages to you, never another buyer's messages or offers, and no other buyer sees yours.",
        "",
        "Each time the seller writes to you, answer with a short message and exactly one call of your tools:",
        f"- {ACCEPT_OFFER}(): accept the binding offer the seller made in this message; you buy at that price. Only "
        "valid when the seller made an offer this time.",
        f"- {COUNTER_OFFER}(price): name the price in dollars you are willing to pay.",
        f"- {DECLINE}(): decline without naming a price.",
        "Only a call counts: a price written in your message is not an offer. An answer without exactly one valid "
        "call is wasted and read as a decline.",
    ]
    if tools_in_prompt:
        schema = json.dumps([t["function"] for t in buyer_tools()], indent=1)
        lines += [
            "",
            "You may call these tools, described as JSON schemas:",
            f"<tools>\n{schema}\n</tools>",
            "To call one, end your answer with the call as a JSON object inside <tool_call></tool_call> tags:",
            format_tool_call(BuyerAction(COUNTER_OFFER, 123.45)),
            "or, to accept the offer made this time:",
            format_tool_call(BuyerAction(ACCEPT_OFFER)),
        ]
    return "\n".join(lines)


def turn_message(entry: ThreadEntry, k: int) -> str:
    """The user message of the seller's ``k``-th message to this buyer (1-based; not the seller's turn number,
    which would tell how often it wrote to the others): its words and its binding offer."""
    said = (f"The seller writes to you: {quoted(entry.message)}" if entry.message
            else "The seller writes to you (no words).")
    offer = (f"The seller makes a binding offer: {money(entry.price)}. You may accept it with {ACCEPT_OFFER}()."
             if entry.price is not None else
             f"The seller makes no binding offer this time: {ACCEPT_OFFER} is not available.")
    return f"Message {k} from the seller.\n{said}\n{offer}\nAnswer with one call."


def past_answers(view: BuyerView) -> list[tuple[ThreadEntry, ThreadEntry]]:
    """Every earlier exchange of this buyer's thread, in order: (the seller's entry, this buyer's answer)."""
    thread = view.thread[:-1] if view.thread and view.thread[-1].role == "seller" else view.thread
    return [(s, a) for s, a in zip(thread[::2], thread[1::2]) if s.role == "seller" and a.role == "buyer"]


def _action(answer: ThreadEntry) -> BuyerAction | None:
    if answer.action == COUNTER_OFFER:
        return BuyerAction(COUNTER_OFFER, answer.price)
    if answer.action in (ACCEPT_OFFER, DECLINE):
        return BuyerAction(answer.action)  # type: ignore[arg-type]
    return None


def tool_result(answer: ThreadEntry) -> str:
    """What the call of an earlier answer returned."""
    if answer.action == ACCEPT_OFFER:
        return f"You bought the item at {money(answer.price or 0.0)}."
    if answer.action == COUNTER_OFFER:
        return f"Your counter of {money(answer.price or 0.0)} was sent to the seller."
    return "Your decline was sent to the seller."


def chat_messages(view: BuyerView, tool_format: ToolFormat = "native", drop: int = 0) -> Chat:
    """The conversation that asks the buyer for its answer to this seller turn, leaving out the ``drop`` oldest
    own answers (to fit a prompt cap). OpenAI-style dicts; a ``native`` call is ``{"id", "type": "function",
    "function": {"name", "arguments": dict}}`` (the agents convert per provider)."""
    if tool_format not in ("native", "text"):
        raise ValueError(f"tool_format must be 'native' or 'text', got {tool_format!r}")
    if drop < 0:
        raise ValueError(f"drop must be >= 0, got {drop}")
    if not view.thread or view.thread[-1].role != "seller":
        raise ValueError(f"{view.name}: the thread must end with the seller's message to answer")
    msgs: Chat = [{"role": "system", "content": system_prompt(view, tools_in_prompt=tool_format == "text")}]
    carried = ""
    past = past_answers(view)
    for k, (asked, answer) in enumerate(past[drop:], start=drop + 1):
        msgs.append({"role": "user", "content": carried + turn_message(asked, k)})
        carried = ""
        action = _action(answer)
        if action is None:
            msgs.append({"role": "assistant", "content": answer.message})
        elif tool_format == "text":
            call = format_tool_call(action)
            msgs.append({"role": "assistant", "content": f"{answer.message}\n{call}" if answer.message else call})
            carried = f"Result of your {action.tool} call: {tool_result(answer)}\n"
        else:
            cid = f"call_answer{k}"  # not the seller's turn number (see turn_message)
            msgs.append({"role": "assistant", "content": answer.message, "tool_calls": [
                {"id": cid, "type": "function", "function": action.to_dict()}]})
            msgs.append({"role": "tool", "tool_call_id": cid, "name": action.tool, "content": tool_result(answer)})
    msgs.append({"role": "user", "content": carried + turn_message(view.thread[-1], len(past) + 1)})
    return msgs


__all__ = ["chat_messages", "past_answers", "system_prompt", "tool_result", "turn_message"]
