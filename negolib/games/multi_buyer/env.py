"""The episode of the multi-buyer market: the seller's shared turn budget, one buyer answering per turn, the record.

Contract: :class:`Episode` alternates a seller turn (one ``message_buyer`` call: a message to one buyer, optionally
a binding offer) and the addressed buyer's answer (accept the offer, counter with a price, decline). Every seller
turn spends one unit of the budget, a bad parse included (nobody is addressed then). An accept of the offer made
this turn sells an item at that price (an accept without one is an invalid accept, counted as a bad parse and
read as a decline); a buyer who bought cannot be addressed again. The episode ends when every item is sold or
the budget is spent. A buyer's view holds its own thread only: buyers never see each other's messages; the
seller's view holds every thread and its own refused turns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from negolib.games.multi_buyer.protocol import (
    BuyerAction,
    SellerAction,
    StructuredTurn,
    parse_buyer_turn,
    parse_seller_turn,
)
from negolib.games.multi_buyer.scenarios import MultiBuyerScenario, buyer_id
from negolib.games.multi_buyer.tools import ACCEPT_OFFER, COUNTER_OFFER

Role = Literal["seller", "buyer"]
End = Literal["sold_out", "budget"]
INVALID_ACCEPT_ERROR = "invalid accept_offer: the seller made no offer this turn"


def already_bought_error(index: int) -> str:
    return f"{buyer_id(index)} has already bought: address a buyer who has not"


class ThreadEntry(NamedTuple):
    """One message of a seller-buyer thread: the seller's turn number, who spoke, the cleaned message, the
    binding offer (seller) or counter price (buyer), and the call made (None: no valid call)."""

    turn: int
    role: Role
    message: str
    price: float | None
    action: str | None


class Refused(NamedTuple):
    """A seller turn that had no effect (a bad parse, or a buyer who had bought addressed): its seller turn number,
    the turn's cleaned prose (its calls left out) and why it was refused."""

    turn: int
    message: str
    error: str


class SellerView(NamedTuple):
    """Everything the seller may see: its cost, the market's size, its budget and every buyer thread."""

    episode_id: str
    market: str
    seed: int
    cost: float  # private
    scale: float
    n_buyers: int
    n_items: int
    items_left: int
    turn: int  # the seller turn about to be played, 1-based
    turn_budget: int
    threads: tuple[tuple[ThreadEntry, ...], ...]  # one per buyer, in buyer order
    bought: tuple[bool, ...]
    last_error: str | None  # why the seller's previous turn had no effect

    role: Role = "seller"
    refused: tuple[Refused, ...] = ()  # every earlier seller turn that had no effect, in order

    @property
    def turns_left(self) -> int:
        """Seller turns left, this one included."""
        return self.turn_budget - self.turn + 1


class BuyerView(NamedTuple):
    """Everything one buyer may see: its budget and style, and its own thread (ending with the seller's message
    of this turn); ``offer`` is the binding offer of this turn, if any."""

    episode_id: str
    market: str
    seed: int
    buyer: int  # 0-based index; its name is buyer_<index + 1>
    budget: float  # private
    style: str  # the scripted style the scenario assigns this buyer (a language-model buyer may ignore it)
    scale: float
    thread: tuple[ThreadEntry, ...]
    offer: float | None
    times_addressed: int  # this turn included

    role: Role = "buyer"

    @property
    def name(self) -> str:
        return buyer_id(self.buyer)


@dataclass
class Outcome:
    """How the episode ended. ``deals`` lists ``{"buyer", "price", "turn", "overshoot"}`` in order."""

    deal: bool
    deals: list[dict[str, Any]]
    end: End
    seller_turns: int
    seller_bad_parses: int
    invalid_addresses: int  # a buyer who had already bought (a subset of the bad parses)
    buyer_turns: int
    buyer_bad_parses: int
    buyer_invalid_accepts: int
    buyer_prose_only: int
    overshoots: int  # accepted prices above the accepting buyer's budget
    addressed: list[int | None]  # the buyer of every seller turn (None: a bad parse)


class MarketTurns:
    """The turn order the markets' episodes share (the multi-product market's too): a seller turn, then, after a
    valid one, the answer of the buyer it addressed (``pending.buyer``); the episode is done once it has an
    outcome."""

    scenario: Any
    outcome: Any
    pending: Any
    seller_turns: int

    @property
    def done(self) -> bool:
        return self.outcome is not None

    @property
    def to_move(self) -> Role:
        return "seller" if self.pending is None else "buyer"

    def where(self) -> str:
        """``"market|seed turn T (who)"``, naming the turn to play in an error."""
        who = "seller" if self.pending is None else buyer_id(self.pending.buyer)
        return f"{self.scenario.key} turn {self.seller_turns + (self.pending is None)} ({who})"


class Episode(MarketTurns):
    """One market: a seller with ``turn_budget`` turns facing ``n_buyers`` buyers for ``n_items`` items."""

    def __init__(self, scenario: MultiBuyerScenario, episode_id: str = "") -> None:
        self.scenario = scenario
        self.episode_id = episode_id or scenario.key
        cfg = scenario.config
        self.turn_budget, self.n_items = cfg.turn_budget, cfg.n_items
        self.turns: list[dict[str, Any]] = []
        self.threads: list[tuple[ThreadEntry, ...]] = [()] * scenario.n_buyers
        self.times_addressed = [0] * scenario.n_buyers
        self.bought = [False] * scenario.n_buyers
        self.deals: list[dict[str, Any]] = []
        self.addressed: list[int | None] = []  # the buyer of every seller turn so far (None: a bad parse)
        self.refused: list[Refused] = []
        self.seller_turns = 0
        self.pending: SellerAction | None = None  # the seller's call the addressed buyer must answer
        self.outcome: Outcome | None = None
        self._last_error: str | None = None
        self._counts = {"seller_bad": 0, "invalid_address": 0, "buyer_turns": 0, "buyer_bad": 0,
                        "invalid_accept": 0, "prose": 0}

    def view(self) -> SellerView | BuyerView:
        """The view of the party to move (the seller, or the buyer addressed this turn)."""
        s = self.scenario
        if self.pending is None:
            return SellerView(self.episode_id, s.market, s.seed, s.cost, s.config.scale, s.n_buyers, self.n_items,
                              self.n_items - len(self.deals), self.seller_turns + 1, self.turn_budget,
                              tuple(self.threads), tuple(self.bought), self._last_error,
                              refused=tuple(self.refused))
        k = self.pending.to
        return BuyerView(self.episode_id, s.market, s.seed, k, s.budgets[k], s.styles[k], s.config.scale,
                         self.threads[k], self.pending.offer, self.times_addressed[k])

    def step(self, turn: str | StructuredTurn, input_tokens: int = 0, output_tokens: int = 0,
             latency_s: float = 0.0) -> dict[str, Any]:
        """Play the party to move's turn; returns its transcript entry. ``RuntimeError`` once the episode is over."""
        if self.done:
            raise RuntimeError(f"episode {self.episode_id} is over")
        raw = turn.message if isinstance(turn, StructuredTurn) else turn
        rec: dict[str, Any] = {"turn": self.seller_turns + (self.pending is None), "role": self.to_move,
                               "buyer": None, "raw": raw if isinstance(raw, str) else "",
                               "raw_tool_calls": None, "message": "", "action": None, "parse_error": None,
                               "invalid_accept": False, "sale": None, "input_tokens": input_tokens,
                               "output_tokens": output_tokens, "latency_s": latency_s}
        if self.pending is None:
            self.seller_turns += 1
            self._seller_step(turn, rec)
        else:
            self._buyer_step(turn, rec)
        self.turns.append(rec)
        if self.pending is None and (len(self.deals) >= self.n_items or self.seller_turns >= self.turn_budget):
            self._close()
        return rec

    def _seller_step(self, turn: str | StructuredTurn, rec: dict[str, Any]) -> None:
        parsed = parse_seller_turn(turn, self.scenario.n_buyers)
        action, error = parsed.action, parsed.error
        rec["raw_tool_calls"] = parsed.raw_calls
        if isinstance(action, SellerAction) and self.bought[action.to]:
            action, error = None, already_bought_error(action.to)
            self._counts["invalid_address"] += 1
        rec["message"], rec["parse_error"] = parsed.message, error
        if not isinstance(action, SellerAction):
            self._counts["seller_bad"] += 1
            self.addressed.append(None)
            self._last_error = error
            self.refused.append(Refused(self.seller_turns, parsed.message, str(error)))
            return
        self._last_error = None
        self.addressed.append(action.to)
        rec["buyer"], rec["action"] = action.to, action.to_dict()
        self.threads[action.to] += (ThreadEntry(self.seller_turns, "seller", parsed.message, action.offer,
                                                rec["action"]["name"]),)
        self.times_addressed[action.to] += 1
        self.pending = action

    def _buyer_step(self, turn: str | StructuredTurn, rec: dict[str, Any]) -> None:
        pending = self.pending
        assert pending is not None
        k = pending.to
        parsed = parse_buyer_turn(turn)
        action, error = parsed.action, parsed.error
        rec["raw_tool_calls"] = parsed.raw_calls
        self._counts["buyer_turns"] += 1
        if isinstance(action, BuyerAction) and action.tool == ACCEPT_OFFER and pending.offer is None:
            action, error, rec["invalid_accept"] = None, INVALID_ACCEPT_ERROR, True
            self._counts["invalid_accept"] += 1
        if error is not None:
            self._counts["buyer_bad"] += 1
        elif action is None:
            self._counts["prose"] += 1
        rec.update(buyer=k, message=parsed.message, parse_error=error,
                   action=action.to_dict() if isinstance(action, BuyerAction) else None)
        tool = action.tool if isinstance(action, BuyerAction) else None
        price = action.price if tool == COUNTER_OFFER else (pending.offer if tool == ACCEPT_OFFER else None)
        self.threads[k] += (ThreadEntry(self.seller_turns, "buyer", parsed.message, price, tool),)
        if tool == ACCEPT_OFFER:
            offer = float(pending.offer)  # type: ignore[arg-type]
            sale = {"buyer": k, "price": offer, "turn": self.seller_turns,
                    "overshoot": offer > self.scenario.budgets[k]}
            self.deals.append(sale)
            self.bought[k] = True
            rec["sale"] = sale
        self.pending = None

    def _close(self) -> None:
        c = self._counts
        self.outcome = Outcome(
            deal=bool(self.deals), deals=[dict(d) for d in self.deals],
            end="sold_out" if len(self.deals) >= self.n_items else "budget",
            seller_turns=self.seller_turns, seller_bad_parses=c["seller_bad"], invalid_addresses=c["invalid_address"],
            buyer_turns=c["buyer_turns"], buyer_bad_parses=c["buyer_bad"], buyer_invalid_accepts=c["invalid_accept"],
            buyer_prose_only=c["prose"], overshoots=sum(d["overshoot"] for d in self.deals),
            addressed=list(self.addressed))

    def record(self, **extra: Any) -> dict[str, Any]:
        """The JSON-ready record: scenario, status (``running``, ``deal``, ``no_deal``), config, turns, outcome."""
        s, out = self.scenario, self.outcome
        cfg = s.config
        status = "running" if out is None else ("deal" if out.deal else "no_deal")
        return {"game": "multi_buyer", "scenario_key": s.key, "market": s.market, "seed": s.seed,
                "scale": cfg.scale, "cost": s.cost, "budgets": list(s.budgets), "styles": list(s.styles),
                **extra, "status": status,
                "config": {"n_buyers": cfg.n_buyers, "n_items": cfg.n_items, "turn_budget": cfg.turn_budget,
                           "budgets": cfg.budgets, "styles": list(cfg.styles), "scale": cfg.scale},
                "turns": self.turns, "outcome": None if out is None else _outcome_dict(out)}


def _outcome_dict(out: Outcome) -> dict[str, Any]:
    return {"deal": out.deal, "deals": out.deals, "end": out.end, "seller_turns": out.seller_turns,
            "seller_bad_parses": out.seller_bad_parses, "invalid_addresses": out.invalid_addresses,
            "buyer_turns": out.buyer_turns, "buyer_bad_parses": out.buyer_bad_parses,
            "buyer_invalid_accepts": out.buyer_invalid_accepts, "buyer_prose_only": out.buyer_prose_only,
            "overshoots": out.overshoots, "addressed": out.addressed}


__all__ = ["BuyerView", "Episode", "INVALID_ACCEPT_ERROR", "MarketTurns", "Outcome", "Refused", "SellerView",
           "ThreadEntry", "already_bought_error"]
