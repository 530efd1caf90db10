"""Prompts for a language-model seller in the multi-product market, and the chat history its agents send.

Contract: :func:`system_prompt` states the catalog (each product's public list price and the seller's private cost),
the buyers, the turn budget, the market's rules, the privacy of each buyer's thread and the four-part protocol
(TO / PRODUCT / PRICE / MESSAGE, one per line) with an example. :func:`turn_message` asks for one message: the
messages left, what is sold, the open products and buyers, and why the last message was refused.
:func:`chat_messages` is the conversation as the seller lived it: per own past message the user message it was
asked with, its four-part text as the assistant's (a refused one as it was written, cleaned), and the addressed
buyer's answer opening the next user message. Text only, for every backend; pure functions of a
:class:`~.env.SellerView`; a buyer's words arrive as one quoted line (:func:`negolib.core.crossing.quoted`), each only
in the answer to a message to that buyer. :func:`buyer_messages` is a buyer's one-turn prompt (its valuations, the list
prices, its thread, the offer and its standing offers; the answer format), for a buyer the game's scripted buyers do
not play (e.g. a policy stepping the buyer role through :mod:`negolib.envs`).
"""

from __future__ import annotations

from typing import Any

from negolib.core.crossing import quoted
from negolib.games.multi_buyer.prompts import check_past_turn, refusals_before, seller_turn_message
from negolib.games.multi_product.env import BuyerView, SellerView, ThreadEntry
from negolib.games.multi_product.protocol import ACCEPT, DECLINE, MAX_MESSAGE_CHARS, Offer, format_message
from negolib.games.multi_product.scenarios import buyer_id, product_id
from negolib.games.toolcalls import money

Chat = list[dict[str, Any]]
NO_MESSAGE = "(no message)"
"""Stands in for a refused message that left no text (providers refuse empty turns)."""
EXAMPLE = format_message(Offer(1, 0, 123.45), "Product 1 would suit you well; it is yours at this price.")


def system_prompt(view: SellerView) -> str:
    """The seller's system prompt for this market (see the module docstring)."""
    cfg = view.config
    catalog = [f"- {product_id(k)}: list price {money(p)}, your cost {money(c)}"
               for k, (p, c) in enumerate(zip(view.list_prices, view.costs))]
    lines = [
        f"You are the seller in a market of {view.n_products} substitutable products and {view.n_buyers} buyers, "
        f"buyer_1 .. {buyer_id(view.n_buyers - 1)}; prices are of the order of {money(cfg.scale)}.",
        "The products, with their public list prices and your private costs (no buyer knows a cost):",
        *catalog,
        "Each buyer buys at most one product and values each product privately; you know no valuation. Your gain "
        "is the sum of price minus cost over your sales.",
        f"You have {view.turn_budget} messages in all. Each message offers one product to one buyer at one price; "
        f"that buyer answers at once {ACCEPT} (the product is sold to it at your price) or {DECLINE}. A declined "
        "offer stands until its product sells or its buyer buys, and a buyer weighs the offers it holds.",
        "Rules: a product sells once, a buyer buys once, and no offer may be below the product's cost. A message "
        "that breaks a rule is refused: it reaches nobody and still costs a message.",
        "Each buyer's thread is private: a buyer sees only your messages to it, never another buyer's messages or "
        "offers. You see every thread. The market ends when nothing is left to sell or your messages are spent.",
        "",
        "Write every message as exactly these four parts, one per line, in this order, and nothing else:",
        "TO: the buyer (buyer_1 .. " + buyer_id(view.n_buyers - 1) + ")",
        "PRODUCT: the product (product_1 .. " + product_id(view.n_products - 1) + ")",
        "PRICE: the price in dollars (digits, at most two decimals, no commas)",
        f"MESSAGE: your words to that buyer (at most {MAX_MESSAGE_CHARS} characters; no line of it may start with "
        "a part's name)",
        "For example:",
        EXAMPLE,
        "A message in any other form is a bad parse: it reaches nobody and still costs a message.",
    ]
    return "\n".join(lines)


def turn_message(view: SellerView) -> str:
    """The user message that asks the seller for its message ``view.turn``."""
    sales = [f"{product_id(k)} to {buyer_id(m)}" for k, m in enumerate(view.sold_to) if m is not None]
    products = [product_id(k) for k, m in enumerate(view.sold_to) if m is None]
    buyers = [buyer_id(m) for m, k in enumerate(view.bought) if k is None]
    return seller_turn_message(view, "message", "was refused", [
        "Sold: " + (", ".join(sales) if sales else "nothing yet") + ".",
        f"Open products: {', '.join(products) or 'none'}. Buyers who have not bought: {', '.join(buyers) or 'none'}."])


def past_view(view: SellerView, turn: int) -> SellerView:
    """The view the seller had when asked for its earlier message ``turn`` (threads, sales, refusals before it)."""
    check_past_turn(view, turn)
    threads = tuple(tuple(e for e in t if e.turn < turn) for t in view.threads)
    sold_to: list[int | None] = [None] * view.n_products
    bought: list[int | None] = [None] * view.n_buyers
    for m, thread in enumerate(threads):
        for e in thread:
            if e.role == "buyer" and e.accept and e.product is not None:
                sold_to[e.product], bought[m] = m, e.product
    refused, last = refusals_before(view.refused, turn)
    return view._replace(turn=turn, threads=threads, sold_to=tuple(sold_to), bought=tuple(bought),
                         last_error=last, refused=refused)


def answer_text(buyer: int, entry: ThreadEntry | None) -> str:
    """A buyer's answer to an own past message, its words quoted."""
    who = buyer_id(buyer)
    if entry is None:
        return f"{who} has not answered."
    said = f" and wrote: {quoted(entry.message)}" if entry.message else ""
    return f"{who} answered {ACCEPT if entry.accept else DECLINE}{said}" + (" (sold)." if entry.accept else ".")


def own_turns(view: SellerView) -> list[tuple[int, str, int | None, ThreadEntry | None]]:
    """Every earlier seller message, in order: (turn, its text as written, the buyer it reached or None when it was
    refused, that buyer's answer)."""
    turns: dict[int, tuple[int, str, int | None, ThreadEntry | None]] = {
        r.turn: (r.turn, r.message, None, None) for r in view.refused}
    for m, thread in enumerate(view.threads):
        for i, e in enumerate(thread):
            if e.role == "seller" and e.product is not None and e.price is not None:
                answer = thread[i + 1] if i + 1 < len(thread) else None
                turns[e.turn] = (e.turn, format_message(Offer(m, e.product, e.price), e.message), m, answer)
    return [turns[t] for t in sorted(turns)]


def chat_messages(view: SellerView, tool_format: str = "text", drop: int = 0) -> Chat:
    """The conversation that asks the seller for message ``view.turn`` (see the module docstring), leaving out the
    ``drop`` oldest own messages (to fit a prompt cap). ``tool_format`` is accepted for the agents' sake and must be
    ``"text"``: the four-part protocol is text on every backend."""
    if tool_format != "text":
        raise ValueError(f"the four-part protocol is text only; tool_format must be 'text', got {tool_format!r}")
    if drop < 0:
        raise ValueError(f"drop must be >= 0, got {drop}")
    msgs: Chat = [{"role": "system", "content": system_prompt(view)}]
    carried = ""  # the answer to the last message, told in the next user message
    for turn, text, buyer, answer in own_turns(view)[drop:]:
        msgs.append({"role": "user", "content": carried + turn_message(past_view(view, turn))})
        msgs.append({"role": "assistant", "content": text or NO_MESSAGE})
        carried = "" if buyer is None else answer_text(buyer, answer) + "\n"
    msgs.append({"role": "user", "content": carried + turn_message(view)})
    return msgs


def buyer_messages(view: BuyerView) -> Chat:
    """A buyer's prompt for its answer to this turn's offer (see the module docstring); the seller's words arrive
    quoted."""
    me = buyer_id(view.buyer)
    catalog = [f"- {product_id(k)}: list price {money(p)}, your value {money(v)}"
               for k, (p, v) in enumerate(zip(view.list_prices, view.valuations))]
    system = "\n".join([
        f"You are {me}, a buyer in a market of {len(view.list_prices)} substitutable products; you buy at most one.",
        "The products, with their public list prices and your private values (the seller knows no value):",
        *catalog,
        "Your gain is your value of the product you buy minus its price. An offer you decline stands until its product "
        "sells or you buy.",
        f"Answer each offer with {ACCEPT} or {DECLINE} alone on the first line, then, optionally, a short message.",
    ])
    said = [f"turn {e.turn}: the seller offered {product_id(e.product)} at {money(e.price)}"
            + (f" and wrote: {quoted(e.message)}" if e.message else "") if e.role == "seller" else
            f"turn {e.turn}: you answered {ACCEPT if e.accept else DECLINE}" for e in view.thread[:-1]
            if e.product is not None or e.role == "buyer"]
    standing = [f"{product_id(k)} at {money(p)}" for k, p in sorted(view.standing.items())]
    offer, last = view.offer, view.thread[-1] if view.thread else None
    words = f" The seller wrote: {quoted(last.message)}" if last is not None and last.message else ""
    user = "\n".join([*(["Your thread so far:", *said] if said else []),
                      f"Offers you hold: {', '.join(standing) or 'none'}.",
                      f"The seller offers you {product_id(offer.product)} at {money(offer.price)}.{words}",
                      f"Answer {ACCEPT} or {DECLINE} on the first line."])
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


__all__ = ["EXAMPLE", "answer_text", "buyer_messages", "chat_messages", "own_turns", "past_view", "system_prompt",
           "turn_message"]
