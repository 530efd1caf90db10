"""Scripted sellers of the multi-buyer market (baselines), speaking the ``message_buyer`` protocol.

Contract: each seller reads only its :class:`~.env.SellerView` (cost, budget, every thread) and is deterministic
given it: ``greedy`` sells to the first acceptable bid, ``probe_all`` probes every buyer then commits to the
highest bidder with a descending ask, ``auctioneer`` runs ascending bid rounds and closes with the leader,
``fixed_price`` posts one price to everyone in turn. None offers below ``cost * (1 + margin)`` (its reserve).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from negolib.agents.base import Agent, AgentReply
from negolib.games.multi_buyer.buyers import SURFACES
from negolib.games.multi_buyer.env import SellerView
from negolib.games.multi_buyer.protocol import SellerAction, format_tool_call
from negolib.games.multi_buyer.scenarios import buyer_id
from negolib.games.multi_buyer.tools import COUNTER_OFFER, DECLINE
from negolib.games.toolcalls import money


@dataclass(frozen=True)
class Threads:
    """What a seller reads off its threads, per buyer in buyer order (one pass over the view)."""

    counters: list[list[float]]  # every counter price, in order
    bid_turn: list[int]  # the seller turn of the latest counter (0: none)
    last_addressed: list[int]  # the seller turn the buyer was last addressed on (0: never)
    last_answer: list[str | None]  # the latest answer's call (None: no answer yet, or no valid call)
    offers: list[int]  # binding offers made to the buyer

    @property
    def bids(self) -> list[float | None]:
        """Each buyer's latest counter price (None: it never named one)."""
        return [c[-1] if c else None for c in self.counters]


def read_threads(view: SellerView) -> Threads:
    """The :class:`Threads` of ``view``."""
    n = view.n_buyers
    counters: list[list[float]] = [[] for _ in range(n)]
    bid_turn, last, offers = [0] * n, [0] * n, [0] * n
    answer: list[str | None] = [None] * n
    for k, thread in enumerate(view.threads):
        for e in thread:
            if e.role == "seller":
                last[k] = e.turn
                offers[k] += e.price is not None
            else:
                answer[k] = e.action
                if e.action == COUNTER_OFFER:
                    counters[k].append(e.price)  # type: ignore[arg-type]
                    bid_turn[k] = e.turn
    return Threads(counters, bid_turn, last, answer, offers)


def latest_bids(view: SellerView) -> list[float | None]:
    """Each buyer's latest counter price (None: it never named one)."""
    return read_threads(view).bids


def least_recent(view: SellerView, threads: Threads, among: Sequence[int] | None = None) -> int:
    """The open buyer (not yet bought; within ``among`` when given) addressed least recently, lowest index first."""
    last = threads.last_addressed
    pool = [k for k in (range(view.n_buyers) if among is None else among) if not view.bought[k]]
    if not pool:
        pool = [k for k in range(view.n_buyers) if not view.bought[k]]
    return min(pool, key=lambda k: (last[k], k))


def ceil_cent(x: float) -> float:
    """``x`` rounded up to the cent (shared with the multi-product market)."""
    return math.ceil(round(x * 100, 6)) / 100


class ScriptedSeller(Agent):
    """Base class: subclasses choose the call (:meth:`decide`); this class speaks it on its surface."""

    backend = "scripted"

    def __init__(self, name: str, seed: int = 0, surface: str = "structured", margin: float = 0.05) -> None:
        if surface not in SURFACES:
            raise ValueError(f"surface must be one of {SURFACES}, got {surface!r}")
        if not margin >= 0:
            raise ValueError(f"margin must be >= 0, got {margin!r}")
        self.name, self.seed, self.surface, self.margin = name, int(seed), surface, float(margin)

    def reserve(self, view: SellerView) -> float:
        """The lowest price this seller offers: its cost times ``1 + margin``."""
        return ceil_cent(view.cost * (1 + self.margin))

    def decide(self, view: SellerView, threads: Threads) -> SellerAction:
        """This turn's call, from the view and what its threads say."""
        raise NotImplementedError

    def probe(self, k: int) -> SellerAction:
        return SellerAction(k)

    def offer(self, view: SellerView, k: int, price: float) -> SellerAction:
        return SellerAction(k, max(self.reserve(view), ceil_cent(price)))

    def message(self, view: SellerView, threads: Threads, action: SellerAction) -> str:
        h = zlib.crc32(f"{self.seed}|{view.market}|{view.seed}|{view.turn}".encode()) % 2
        who = buyer_id(action.to)
        if action.offer is None:
            return ("Hello {w}, what would you pay for the item?", "{w}, what is your best price for it?")[h].format(
                w=who)
        return ("I can sell it to you for {p}, {w}.", "{w}, my price for you is {p}.")[h].format(
            w=who, p=money(action.offer))

    def reply(self, view: SellerView) -> AgentReply:
        threads = read_threads(view)
        action = self.decide(view, threads)
        text = self.message(view, threads, action)
        if self.surface == "text":
            return AgentReply(text + "\n" + format_tool_call(action))
        return AgentReply(text, extra={"tool_calls": [action.to_dict()]})

    def act_batch(self, views: Sequence[SellerView]) -> list[AgentReply]:  # type: ignore[override]
        return [self.reply(v) for v in views]

    def settings(self) -> dict[str, Any]:
        return {"backend": self.backend, "name": self.name, "strategy": type(self).__name__, "seed": self.seed,
                "surface": self.surface, "margin": self.margin}


class GreedySeller(ScriptedSeller):
    """Sells to the first acceptable bid: probes the buyers in turn and offers a buyer its own bid as soon as a
    latest bid reaches the reserve (the earliest such bid first). After a round without one, its probes carry a
    binding offer at the reserve, so the first buyer willing to pay it gets the item."""

    def decide(self, view: SellerView, threads: Threads) -> SellerAction:
        reserve = self.reserve(view)
        bids = threads.bids
        # (turn the latest bid came on, buyer) for open buyers with an acceptable latest bid
        firsts = [(threads.bid_turn[k], k) for k, b in enumerate(bids)
                  if b is not None and b >= reserve and not view.bought[k]]
        if firsts:
            k = min(firsts)[1]
            return self.offer(view, k, bids[k])  # type: ignore[arg-type]
        k = least_recent(view, threads)
        probed_all = all(view.bought[j] or threads.last_addressed[j] for j in range(view.n_buyers))
        return self.offer(view, k, reserve) if probed_all else self.probe(k)


class ProbeAllSeller(ScriptedSeller):
    """Probes every buyer once (no offer), then commits to the highest latest bid: a binding ask that descends
    linearly from ``1 + premium`` times that bid (at least the reserve) to the bid itself on its last turn."""

    def __init__(self, name: str, seed: int = 0, surface: str = "structured", margin: float = 0.05,
                 premium: float = 0.25) -> None:
        super().__init__(name, seed, surface, margin)
        self.premium = float(premium)

    def decide(self, view: SellerView, threads: Threads) -> SellerAction:
        unprobed = [k for k in range(view.n_buyers) if not view.bought[k] and not threads.last_addressed[k]]
        if unprobed:
            return self.probe(unprobed[0])
        bids = threads.bids
        open_ = [k for k in range(view.n_buyers) if not view.bought[k]]
        target = max(open_, key=lambda k: (bids[k] if bids[k] is not None else -1.0, -k))
        floor = max(self.reserve(view), bids[target] or 0.0)
        asked = threads.offers[target]
        span = view.turns_left + asked - 1  # constant over the commit phase
        frac = (view.turns_left - 1) / span if span > 0 else 0.0
        return self.offer(view, target, floor * (1 + self.premium * frac))

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "premium": self.premium}


class Auctioneer(ScriptedSeller):
    """An ascending-bid auction: rounds asking the active buyers (least recently asked first) to beat the best
    bid; a buyer leaves when it declines or its bid stops rising. It closes with a binding offer to the leader at
    the leader's bid (at least the reserve) when one active buyer is left or on its last turn."""

    def decide(self, view: SellerView, threads: Threads) -> SellerAction:
        bids = threads.bids
        active = []
        for k, counters in enumerate(threads.counters):
            if view.bought[k] or threads.last_answer[k] == DECLINE:
                continue
            if len(counters) >= 2 and counters[-1] <= counters[-2]:
                continue
            active.append(k)
        bidders = [k for k in range(view.n_buyers) if not view.bought[k] and bids[k] is not None]
        everyone_asked = all(view.bought[k] or threads.last_addressed[k] for k in range(view.n_buyers))
        if bidders and (view.turns_left == 1 or (everyone_asked and len(active) <= 1)):
            leader = max(bidders, key=lambda k: (bids[k], -k))
            return self.offer(view, leader, bids[leader])  # type: ignore[arg-type]
        if not active:  # nobody bids: offer the reserve around
            return self.offer(view, least_recent(view, threads), self.reserve(view))
        return self.probe(least_recent(view, threads, active))

    def message(self, view: SellerView, threads: Threads, action: SellerAction) -> str:
        bids = [b for b in threads.bids if b is not None]
        if action.offer is None and bids:
            return f"Hello {buyer_id(action.to)}. The best bid so far is {money(max(bids))}. Can you beat it?"
        return super().message(view, threads, action)


class FixedPriceSeller(ScriptedSeller):
    """Posts one price, ``cost * (1 + markup)``, as a binding offer to each buyer in turn; never haggles."""

    def __init__(self, name: str, seed: int = 0, surface: str = "structured", margin: float = 0.05,
                 markup: float = 0.6) -> None:
        super().__init__(name, seed, surface, margin)
        self.markup = float(markup)

    def decide(self, view: SellerView, threads: Threads) -> SellerAction:
        return self.offer(view, least_recent(view, threads), view.cost * (1 + self.markup))

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "markup": self.markup}


SELLERS: dict[str, Callable[..., ScriptedSeller]] = {
    "greedy": GreedySeller,
    "probe_all": ProbeAllSeller,
    "auctioneer": Auctioneer,
    "fixed_price": FixedPriceSeller,
}
"""Seller strategy name -> class ``(name, seed, **params)``."""


def make_seller(strategy: str, seed: int = 0, **params: Any) -> ScriptedSeller:
    """The scripted seller ``strategy`` named ``strategy@seller``; ``KeyError`` for an unknown strategy."""
    if strategy not in SELLERS:
        raise KeyError(strategy)
    return SELLERS[strategy](f"{strategy}@seller", seed, **params)
