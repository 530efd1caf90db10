"""Prompts for a language-model seller in the multi-buyer market, and the chat history the seller agents send.

Contract: :func:`system_prompt` states the market (the buyers, the items, the price scale), the seller's private
cost, its turn budget shared across buyers, the privacy of each buyer's thread and the ``message_buyer`` protocol;
with ``tools_in_prompt`` it embeds the tool schema and asks for a ``<tool_call>`` JSON (templates without tool
support). :func:`turn_message` asks for one turn: the turns and items left, each buyer's standing (its latest
answer, in prices, never its words) and why the last turn had no effect. :func:`chat_messages` is the conversation
as the seller lived it, one own past turn after another: the user message it was asked with, its reply (the call
natively, or as ``<tool_call>`` text) and the addressed buyer's answer as the call's result. All are pure functions
of a :class:`~.env.SellerView`; a buyer's words arrive as one quoted line (:func:`negolib.core.crossing.quoted`), each
only in the result of a call to that buyer.
"""

from __future__ import annotations

import json
from typing import Any

from negolib.core.crossing import quoted
from negolib.games.multi_buyer.env import Refused, SellerView, ThreadEntry
from negolib.games.multi_buyer.protocol import SellerAction, format_tool_call
from negolib.games.multi_buyer.scenarios import buyer_id
from negolib.games.multi_buyer.tools import ACCEPT_OFFER, COUNTER_OFFER, DECLINE, MESSAGE_BUYER, seller_tools
from negolib.games.toolcalls import ToolFormat, money

Chat = list[dict[str, Any]]


def _items(n: int) -> str:
    return "one item" if n == 1 else f"{n} identical items (at most one per buyer)"


def system_prompt(view: SellerView, tools_in_prompt: bool = False) -> str:
    """The seller's system prompt for this market (see the module docstring)."""
    n, last = view.n_buyers, buyer_id(view.n_buyers - 1)
    lines = [
        f"You are the seller of {_items(view.n_items)} in a market with {n} buyers, buyer_1 .. {last}; prices are "
        f"of the order of {money(view.scale)}.",
        f"Your cost is {money(view.cost)} per item. Selling below your cost loses you money; the higher the price "
        "above your cost, the better for you. Your cost is private: no buyer knows it. Each buyer has a private "
        "budget that you do not know.",
        f"You have {view.turn_budget} turns in all, shared across the buyers. The market ends when "
        f"{'the item is' if view.n_items == 1 else 'every item is'} sold or your turns are spent; an unsold item "
        "earns you nothing.",
        "",
        f"Each turn, write a message to one buyer and make exactly one call of {MESSAGE_BUYER}:",
        f"- {MESSAGE_BUYER}(to, offer): your message goes to buyer `to` (buyer_1 .. {last}); "
        "`offer`, optional, is a binding price in dollars that this buyer may accept at once.",
        "The buyer answers at once: it accepts your offer (the item is sold to it at that price), counters with a "
        "price of its own, or declines. A buyer who has bought cannot be addressed again.",
        "Each buyer's thread is private: a buyer sees only your messages to it, never another buyer's messages or "
        "offers. You see every thread.",
        f"Only the offer argument is binding: a price written in the message is not an offer. A turn without "
        f"exactly one valid {MESSAGE_BUYER} call reaches nobody and is wasted (it still costs a turn).",
    ]
    if tools_in_prompt:
        schema = json.dumps([t["function"] for t in seller_tools(n)], indent=1)
        lines += [
            "",
            "You may call this tool, described as a JSON schema:",
            f"<tools>\n{schema}\n</tools>",
            "To call it, end your turn with the call as a JSON object inside <tool_call></tool_call> tags:",
            format_tool_call(SellerAction(0, 123.45)),
            "and a message without an offer:",
            format_tool_call(SellerAction(n - 1)),
        ]
    return "\n".join(lines)


def _answer(entry: ThreadEntry) -> str:
    """A buyer's answer in words: its decision (a sale, a counter price, a decline or no decision)."""
    if entry.action == ACCEPT_OFFER:
        return f"accepted your offer of {money(entry.price or 0.0)}: sold."
    if entry.action == COUNTER_OFFER:
        return f"countered at {money(entry.price or 0.0)}."
    if entry.action == DECLINE:
        return "declined."
    return "made no decision (read as a decline)."


def _standing(view: SellerView, k: int) -> str:
    """Buyer ``k``'s standing as the seller sees it: how often it was asked and its answers, in prices only."""
    thread = view.threads[k]
    asked = sum(e.role == "seller" for e in thread)
    if not asked:
        return f"{buyer_id(k)} not asked yet"
    answers = [e for e in thread if e.role == "buyer"]
    if answers and answers[-1].action == ACCEPT_OFFER:
        return f"{buyer_id(k)} bought at {money(answers[-1].price or 0.0)}"
    counters = [float(e.price) for e in answers if e.action == COUNTER_OFFER and e.price is not None]
    last = "none" if not answers else _answer(answers[-1]).rstrip(".").replace(" (read as a decline)", "")
    higher = counters and (answers[-1].action != COUNTER_OFFER or max(counters) > counters[-1])
    best = f", highest counter {money(max(counters))}" if higher else ""
    return f"{buyer_id(k)} asked {'once' if asked == 1 else f'{asked} times'}, last answer: {last}{best}"


def seller_turn_message(view: Any, unit: str, no_effect: str, body: list[str]) -> str:
    """A market seller's turn message: the turn count in ``unit`` (turn, message), why the last one had no effect
    (``no_effect``: "had no effect", "was refused"), the market's ``body`` lines, and a last-turn warning."""
    lines = [f"Turn {view.turn} of {view.turn_budget}: {view.turns_left} of your {unit}s left, this one included."]
    if view.last_error is not None:
        lines.append(f"Your last {unit} {no_effect}: {view.last_error}.")
    lines += body
    if view.turns_left == 1:
        lines.append(f"This is your last {unit}.")
    return "\n".join(lines)


def check_past_turn(view: Any, turn: int) -> None:
    """``ValueError`` unless ``turn`` is one of the view's turns so far (1 .. ``view.turn``)."""
    if not 1 <= turn <= view.turn:
        raise ValueError(f"turn must be in [1, {view.turn}], got {turn}")


def turn_message(view: SellerView) -> str:
    """The user message that asks the seller for its turn ``view.turn``."""
    items = [f"Items left: {view.items_left} of {view.n_items}."] if view.n_items > 1 else []
    return seller_turn_message(view, "turn", "had no effect", [
        *items, "Buyers: " + "; ".join(_standing(view, k) for k in range(view.n_buyers)) + "."])


def past_view(view: SellerView, turn: int) -> SellerView:
    """The view the seller had when asked for its earlier turn ``turn`` (threads, sales and refusals before it)."""
    check_past_turn(view, turn)
    threads = tuple(tuple(e for e in t if e.turn < turn) for t in view.threads)
    bought = tuple(any(e.role == "buyer" and e.action == ACCEPT_OFFER for e in t) for t in threads)
    refused, last = refusals_before(view.refused, turn)
    return view._replace(turn=turn, threads=threads, bought=bought, items_left=view.n_items - sum(bought),
                         last_error=last, refused=refused)


def refusals_before(refused: tuple[Refused, ...], turn: int) -> tuple[tuple[Refused, ...], str | None]:
    """The refused seller turns before ``turn`` and why the one just before it was refused (None: it was not);
    shared with the multi-product market."""
    before = tuple(r for r in refused if r.turn < turn)
    return before, before[-1].error if before and before[-1].turn == turn - 1 else None


def call_id(turn: int) -> str:
    """The id of the call made on seller turn ``turn`` (unique within an episode; valid for OpenAI and Anthropic)."""
    return f"call_turn{turn}"


def own_turns(view: SellerView) -> list[tuple[int, str, SellerAction | None, ThreadEntry | None]]:
    """Every earlier seller turn, in order: (turn, its message, its call or None when refused, the answer)."""
    turns: dict[int, tuple[int, str, SellerAction | None, ThreadEntry | None]] = {
        r.turn: (r.turn, r.message, None, None) for r in view.refused}
    for k, thread in enumerate(view.threads):
        for i, e in enumerate(thread):
            if e.role == "seller":
                answer = thread[i + 1] if i + 1 < len(thread) else None
                turns[e.turn] = (e.turn, e.message, SellerAction(k, e.price), answer)
    return [turns[t] for t in sorted(turns)]


def tool_result(action: SellerAction, answer: ThreadEntry | None) -> str:
    """What the call of an own past turn returned: the addressed buyer's answer, its words quoted."""
    who = buyer_id(action.to)
    if answer is None:
        return f"{who} has not answered."
    said = f"{who} wrote: {quoted(answer.message)}" if answer.message else f"{who} wrote nothing"
    return f"{said} and {_answer(answer)}"


def chat_messages(view: SellerView, tool_format: ToolFormat = "native", drop: int = 0) -> Chat:
    """The conversation that asks the seller for turn ``view.turn`` (see the module docstring), leaving out the
    ``drop`` oldest own turns (to fit a prompt cap). Messages are OpenAI-style dicts; a ``native`` call is
    ``{"id", "type": "function", "function": {"name", "arguments": dict}}`` (the agents convert per provider)."""
    if tool_format not in ("native", "text"):
        raise ValueError(f"tool_format must be 'native' or 'text', got {tool_format!r}")
    if drop < 0:
        raise ValueError(f"drop must be >= 0, got {drop}")
    msgs: Chat = [{"role": "system", "content": system_prompt(view, tools_in_prompt=tool_format == "text")}]
    carried = ""  # text format: the last call's result, told in the next user message
    for turn, message, action, answer in own_turns(view)[drop:]:
        msgs.append({"role": "user", "content": carried + turn_message(past_view(view, turn))})
        carried = ""
        if action is None:
            msgs.append({"role": "assistant", "content": message})
        elif tool_format == "text":
            body = f"{message}\n{format_tool_call(action)}" if message else format_tool_call(action)
            msgs.append({"role": "assistant", "content": body})
            carried = f"Result of your {MESSAGE_BUYER} call: {tool_result(action, answer)}\n"
        else:
            cid = call_id(turn)
            msgs.append({"role": "assistant", "content": message, "tool_calls": [
                {"id": cid, "type": "function", "function": action.to_dict()}]})
            msgs.append({"role": "tool", "tool_call_id": cid, "name": MESSAGE_BUYER,
                         "content": tool_result(action, answer)})
    msgs.append({"role": "user", "content": carried + turn_message(view)})
    return msgs


__all__ = ["call_id", "chat_messages", "own_turns", "past_view", "refusals_before", "system_prompt", "tool_result",
           "turn_message"]
