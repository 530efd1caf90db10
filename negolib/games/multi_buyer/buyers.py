"""Scripted buyers of the multi-buyer market: the styles of the buyer pool, one agent answering for every buyer.

Contract: a :class:`BuyerStyle` bids a rising fraction of its private budget each time it is addressed (or, the
``splitter``, moves halfway towards the seller's offer) and accepts an offer iff it is at most its next bid times
``1 + tolerance`` AND at most its budget: :meth:`BuyerStyle.accepts` holds that guard, so a scripted buyer never
accepts a price above its budget, and its counters never exceed it. :class:`ScriptedBuyers` answers a batch of
:class:`~.env.BuyerView` (each buyer in the style the scenario assigns it, or in one forced style).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from negolib.agents.base import Agent, AgentReply
from negolib.games.multi_buyer.env import BuyerView
from negolib.games.multi_buyer.protocol import BuyerAction, format_tool_call
from negolib.games.multi_buyer.scenarios import ALL_STYLES, HELDOUT_STYLES, TRAIN_STYLES
from negolib.games.multi_buyer.tools import ACCEPT_OFFER, COUNTER_OFFER, DECLINE
from negolib.games.toolcalls import money

SURFACES = ("structured", "text")


@dataclass(frozen=True)
class BuyerStyle:
    """A scripted buyer's rule, in fractions of its budget: the first bid ``open``, ``step`` more each time it is
    addressed up to ``cap`` (< 1: it never reveals its budget); ``tolerance`` over its next bid it still accepts.
    ``counters`` False: it declines instead of naming a price. ``split``: after an offer, its next bid is halfway
    between its last bid and the offer (capped), instead of the stepped schedule."""

    name: str
    open: float
    step: float
    cap: float
    tolerance: float = 0.0
    counters: bool = True
    split: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.open <= self.cap <= 1 or self.step < 0 or self.tolerance < 0:
            raise ValueError(f"bad buyer style {self!r}: need 0 < open <= cap <= 1, step >= 0, tolerance >= 0")

    def next_bid(self, view: BuyerView) -> float:
        """The price this buyer would bid now (to the cent, at most ``cap`` times its budget)."""
        b = view.budget
        top = self.cap * b
        if self.split:
            last = next((e.price for e in reversed(view.thread) if e.role == "buyer" and e.action == COUNTER_OFFER),
                        None)
            base = self.open * b if last is None else last
            if view.offer is not None:
                bid = max(base, (base + view.offer) / 2)
            else:
                bid = base if last is None else base + self.step * b
        else:
            bid = b * (self.open + self.step * (view.times_addressed - 1))
        return math.floor(round(min(top, bid) * 100, 6)) / 100

    def accepts(self, view: BuyerView, bid: float) -> bool:
        """Whether to accept this turn's offer given the next bid: never an offer above the budget."""
        offer = view.offer
        return offer is not None and offer <= view.budget and offer <= bid * (1 + self.tolerance)

    def decide(self, view: BuyerView) -> BuyerAction:
        """This buyer's answer: accept, counter at its next bid, or decline (a quiet style)."""
        bid = self.next_bid(view)
        if self.accepts(view, bid):
            return BuyerAction(ACCEPT_OFFER)
        if not self.counters:
            return BuyerAction(DECLINE)
        return BuyerAction(COUNTER_OFFER, min(bid, view.budget))


STYLES: dict[str, BuyerStyle] = {s.name: s for s in (
    BuyerStyle("eager", open=0.75, step=0.08, cap=0.97, tolerance=0.05),
    BuyerStyle("steady", open=0.60, step=0.08, cap=0.92, tolerance=0.02),
    BuyerStyle("tough", open=0.45, step=0.06, cap=0.85),
    BuyerStyle("quiet", open=0.70, step=0.05, cap=0.90, counters=False),
    BuyerStyle("splitter", open=0.50, step=0.05, cap=0.90, tolerance=0.05, split=True),
)}
"""Style name -> rule: ``eager``, ``steady`` and ``tough`` form the training pool; ``quiet`` (never names a price)
and ``splitter`` (splits the difference with the offer) are held out."""
assert tuple(STYLES) == ALL_STYLES and set(TRAIN_STYLES) | set(HELDOUT_STYLES) == set(STYLES)

_TEXT = {
    ACCEPT_OFFER: ("Deal at {p}.", "I accept {p}.", "{p} works for me."),
    COUNTER_OFFER: ("I can pay {p}.", "My best offer right now is {p}.", "How about {p}?"),
    DECLINE: ("That's more than I want to pay.", "No, thank you.", "I'll pass for now."),
}


class ScriptedBuyers(Agent):
    """Answers for every buyer of a market: each in the style its scenario assigns (``style=None``, the buyer pool)
    or all in ``style``; structured tool calls (``surface="structured"``) or a ``<tool_call>`` in the text."""

    backend = "scripted"

    def __init__(self, name: str = "pool@buyer", style: str | None = None, seed: int = 0,
                 surface: str = "structured") -> None:
        if style is not None and style not in STYLES:
            raise ValueError(f"unknown buyer style {style!r}; known: {', '.join(STYLES)}")
        if surface not in SURFACES:
            raise ValueError(f"surface must be one of {SURFACES}, got {surface!r}")
        self.name, self.style, self.seed, self.surface = name, style, int(seed), surface

    def rule(self, view: BuyerView) -> BuyerStyle:
        return STYLES[self.style or view.style]

    def reply(self, view: BuyerView) -> AgentReply:
        action = self.rule(view).decide(view)
        options = _TEXT[action.tool]
        h = zlib.crc32(f"{self.seed}|{view.market}|{view.seed}|{view.buyer}|{view.times_addressed}".encode())
        text = options[h % len(options)].format(p=money(action.price if action.price is not None else
                                                         view.offer or 0.0))
        if self.surface == "text":
            return AgentReply(text + "\n" + format_tool_call(action))
        return AgentReply(text, extra={"tool_calls": [action.to_dict()]})

    def act_batch(self, views: Sequence[BuyerView]) -> list[AgentReply]:  # type: ignore[override]
        return [self.reply(v) for v in views]

    def settings(self) -> dict[str, Any]:
        return {"backend": self.backend, "name": self.name, "style": self.style or "scenario", "seed": self.seed,
                "surface": self.surface}
