"""Language-model and API sellers of the multi-product market: the four-part text protocol on every backend.

Contract: :data:`SPEECH` is the market's seller speech for the shared market agents
(:mod:`negolib.games.multi_buyer.agents`: :class:`~negolib.games.multi_buyer.agents.HFSeller`, the OpenAI and
Anthropic sellers, :class:`~negolib.games.multi_buyer.agents.SellerAgents` building ``hf:<path>``,
``openai:<model>`` and ``anthropic:<model>``): the chat of :mod:`.prompts`, no tools (each reply's text is the
message), and :class:`MessageStats`, which counts a reply as the episode does (a bad parse by the part that failed,
a refused offer by the constraint it breaks: both are turns without effect).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from negolib.agents.base import AgentReply
from negolib.games.multi_buyer.agents import Speech, TurnStats
from negolib.games.multi_product.env import VIOLATIONS, SellerView, violation, violation_error
from negolib.games.multi_product.prompts import chat_messages
from negolib.games.multi_product.protocol import parse_message


@dataclass
class MessageStats(TurnStats):
    """How a seller's messages parsed: ``valid`` offers, ``bad_parts`` per failing part of a bad parse,
    ``violations`` per broken constraint (both among the bad parses: the message had no effect)."""

    valid: int = 0
    bad_parts: dict[str, int] = field(default_factory=dict)
    violations: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VIOLATIONS, 0))

    def count(self, view: SellerView, reply: AgentReply) -> str | None:
        parsed = parse_message(reply.text, view.n_buyers, view.n_products)
        offer = parsed.offer
        if offer is None:
            part = parsed.part or "format"
            self.bad_parts[part] = self.bad_parts.get(part, 0) + 1
            return parsed.error
        kind = violation(offer, view.sold_to, view.bought, view.costs)
        if kind is not None:
            self.violations[kind] += 1
            return violation_error(kind, offer, view.costs[offer.product])
        self.valid += 1
        return None


SPEECH = Speech("multi_product", "four-part text (TO/PRODUCT/PRICE/MESSAGE)", chat_messages, MessageStats)
"""The multi-product seller: four-part text messages, no tools."""

__all__ = ["SPEECH", "MessageStats"]
