"""Scripted bargainers for bilateral price bargaining, in both roles, speaking the game's tool-call protocol.

Contract: every agent answers a batch of :class:`~.env.BargainView` with one ``AgentReply`` each: a short message
plus one tool call, handed over as ``extra["tool_calls"]`` (surface ``"structured"``, as an API agent) or as a
``<tool_call>`` JSON in the text (surface ``"text"``, as a local model). Families as in the paper's game: fixed
price, Faratin time-dependent concession (Boulware, linear, Conceder) from an aspiration to the reservation,
and tit-for-tat. No agent offers or accepts past its reservation; each is deterministic given seed and view.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from negolib.agents.base import Agent, AgentReply
from negolib.games.bilateral.env import BargainView
from negolib.games.bilateral.protocol import Action, format_tool_call
from negolib.games.bilateral.tools import ACCEPT_OFFER, MAKE_OFFER
from negolib.games.toolcalls import money

SURFACES = ("structured", "text")

_OPEN = {"seller": ("Thanks for your interest in the item. ", "Good to hear from you. ", "Happy to talk price. "),
         "buyer": ("I'm interested in the item. ", "Thanks for talking with me. ", "Let's find a price. ")}
_OFFER = {"seller": ("I can let it go for {p}.", "My price is {p}.", "I could do {p}."),
          "buyer": ("I can pay {p}.", "My offer is {p}.", "I could go to {p}.")}
_MOVE = ("I've thought about your offer. ", "I hear you. ", "Let me meet you part of the way. ", "")
_ACCEPT = ("{p} works for me: deal.", "I accept your offer of {p}.", "We have a deal at {p}.")


def _pick(seed: int, view: BargainView, options: Sequence[str]) -> str:
    h = zlib.crc32(f"{seed}|{view.tier}|{view.seed}|{view.turn}|{view.role}".encode())
    return options[h % len(options)]


def _check(name: str, value: float, lo: float, hi: float = math.inf) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and lo <= value <= hi
    if not ok:
        span = f">= {lo:g}" if hi == math.inf else f"in [{lo:g}, {hi:g}]"
        raise ValueError(f"{name} must be a number {span}, got {value!r}")


class ScriptedBargainer(Agent):
    """Base class: subclasses choose the price of this turn (:meth:`price`); this class clamps it to the
    reservation, accepts (AC_next, plus AC_last on the last own turn when ``accept_last``) and speaks."""

    backend = "scripted"
    accept_last = True

    def __init__(self, name: str, seed: int = 0, surface: str = "structured", markup: float = 1.0) -> None:
        if surface not in SURFACES:
            raise ValueError(f"surface must be one of {SURFACES}, got {surface!r}")
        _check("markup", markup, 0.0)
        self.name, self.seed, self.surface, self.markup = name, int(seed), surface, float(markup)

    # -- strategy hook ----------------------------------------------------------------------------
    def price(self, view: BargainView) -> float:
        """The price this agent would offer now (before clamping to the reservation)."""
        raise NotImplementedError

    # -- shared machinery -------------------------------------------------------------------------
    def aspiration(self, view: BargainView) -> float:
        """The opening price: ``(1 + markup)`` times the cost (seller), the value over ``(1 + markup)`` (buyer)."""
        r = view.reservation
        return r * (1 + self.markup) if view.role == "seller" else r / (1 + self.markup)

    def schedule(self, view: BargainView, frac: float) -> float:
        """The price ``frac`` of the way from the aspiration to the reservation."""
        asp = self.aspiration(view)
        return asp + (view.reservation - asp) * min(1.0, max(0.0, frac))

    @staticmethod
    def clamp(view: BargainView, price: float) -> float:
        """``price`` to the cent, on this party's side of its reservation (never past it)."""
        r = view.reservation
        if view.role == "seller":
            return max(r, math.ceil(round(price * 100, 6)) / 100)
        return min(r, math.floor(round(price * 100, 6)) / 100)

    @staticmethod
    def better_or_equal(view: BargainView, a: float, b: float) -> bool:
        """Whether price ``a`` is at least as good as ``b`` for this party."""
        return a >= b if view.role == "seller" else a <= b

    def accepts(self, view: BargainView, next_price: float) -> bool:
        """Accept the counterpart's standing offer when it respects the reservation and is at least as good as
        the next own offer (AC_next), or, with ``accept_last``, on this party's last turn."""
        theirs = view.their_offer
        if theirs is None or not self.better_or_equal(view, theirs, view.reservation):
            return False
        return self.better_or_equal(view, theirs, next_price) or (self.accept_last and view.own_turns_left == 1)

    def decide(self, view: BargainView) -> Action:
        """This turn's tool call."""
        price = self.clamp(view, self.price(view))
        if self.accepts(view, price):
            return Action(ACCEPT_OFFER)
        return Action(MAKE_OFFER, price)

    def message(self, view: BargainView, action: Action) -> str:
        if action.tool == ACCEPT_OFFER:
            return _pick(self.seed, view, _ACCEPT).format(p=money(view.their_offer or 0.0))
        opener = _pick(self.seed, view, _OPEN[view.role] if view.own_turn_index == 0 else _MOVE)
        return opener + _pick(self.seed + 1, view, _OFFER[view.role]).format(p=money(action.price or 0.0))

    def reply(self, view: BargainView) -> AgentReply:
        action = self.decide(view)
        text = self.message(view, action)
        if self.surface == "text":
            return AgentReply(text + "\n" + format_tool_call(action))
        return AgentReply(text, extra={"tool_calls": [action.to_dict()]})

    def act_batch(self, views: Sequence[BargainView]) -> list[AgentReply]:  # type: ignore[override]
        return [self.reply(v) for v in views]

    def settings(self) -> dict[str, Any]:
        return {"backend": self.backend, "name": self.name, "strategy": type(self).__name__, "seed": self.seed,
                "surface": self.surface, "markup": self.markup}


class FixedPriceAgent(ScriptedBargainer):
    """Names one price every turn (``margin`` above cost, or the value over ``1 + margin``) and accepts only an
    offer at least that good (no last-turn acceptance)."""

    accept_last = False

    def __init__(self, name: str = "fixed_price", seed: int = 0, surface: str = "structured",
                 margin: float = 0.25) -> None:
        super().__init__(name, seed, surface)
        _check("margin", margin, 0.0)
        self.margin = float(margin)

    def price(self, view: BargainView) -> float:
        r = view.reservation
        return r * (1 + self.margin) if view.role == "seller" else r / (1 + self.margin)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "margin": self.margin}


class TimeDependentAgent(ScriptedBargainer):
    """Faratin et al. (1998): the price ``f(t)`` of the way from aspiration to reservation,
    ``f(t) = k + (1 - k) t^(1/e)`` with ``t`` the own-turn time in [0, 1] (0 on the first own turn, 1 on the
    last). Boulware e < 1, linear e = 1, Conceder e > 1."""

    def __init__(self, name: str, seed: int = 0, surface: str = "structured", markup: float = 1.0,
                 e: float = 1.0, k: float = 0.0) -> None:
        super().__init__(name, seed, surface, markup)
        _check("e", e, 1e-6)
        _check("k", k, 0.0, 1.0)
        self.e, self.k = float(e), float(k)

    def concession(self, t: float) -> float:
        return self.k + (1 - self.k) * min(1.0, max(0.0, t)) ** (1.0 / self.e)

    def price(self, view: BargainView) -> float:
        n = view.config.turns_of(view.role)
        t = view.own_turn_index / (n - 1) if n > 1 else 1.0
        return self.schedule(view, self.concession(t))

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "e": self.e, "k": self.k}


class TitForTatAgent(ScriptedBargainer):
    """Opens at the aspiration, then concedes in dollars what the counterpart conceded between its last two
    offers, at least ``min_concession`` of the own aspiration-to-reservation range per turn."""

    def __init__(self, name: str = "tit_for_tat", seed: int = 0, surface: str = "structured",
                 markup: float = 1.0, min_concession: float = 0.1) -> None:
        super().__init__(name, seed, surface, markup)
        _check("min_concession", min_concession, 0.0, 1.0)
        self.min_concession = float(min_concession)

    def price(self, view: BargainView) -> float:
        if view.own_offer is None:
            return self.aspiration(view)
        theirs = [h.offer for h in view.history if h.role != view.role and h.offer is not None]
        gain = 0.0
        if len(theirs) >= 2:  # how far their offer moved towards this party
            gain = theirs[-1] - theirs[-2] if view.role == "seller" else theirs[-2] - theirs[-1]
        step = max(gain, self.min_concession * abs(self.aspiration(view) - view.reservation))
        return view.own_offer - step if view.role == "seller" else view.own_offer + step

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "min_concession": self.min_concession}


STRATEGIES: dict[str, Callable[..., ScriptedBargainer]] = {
    "fixed_price": lambda name, seed, **kw: FixedPriceAgent(name, seed, **kw),
    "boulware": lambda name, seed, **kw: TimeDependentAgent(name, seed, **{"e": 0.2, **kw}),
    "linear": lambda name, seed, **kw: TimeDependentAgent(name, seed, **{"e": 1.0, **kw}),
    "conceder": lambda name, seed, **kw: TimeDependentAgent(name, seed, **{"e": 2.0, **kw}),
    "tit_for_tat": lambda name, seed, **kw: TitForTatAgent(name, seed, **kw),
}
"""Strategy name -> factory ``(name, seed, **params)``."""


def make_scripted(strategy: str, role: str, seed: int = 0, **params: Any) -> ScriptedBargainer:
    """The scripted agent ``strategy`` named ``strategy@role``; ``KeyError`` for an unknown strategy, and
    ``ValueError`` for a bad role or parameter."""
    if strategy not in STRATEGIES:
        raise KeyError(strategy)
    if role not in ("seller", "buyer"):
        raise ValueError(f"role must be 'seller' or 'buyer', got {role!r}")
    return STRATEGIES[strategy](f"{strategy}@{role}", seed, **params)
