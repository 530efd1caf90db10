"""The episode of the multi-product market: four-part seller messages under a turn budget, the market's constraints.

Contract: :class:`Episode` alternates a seller message (:mod:`.protocol`: recipient, product, price, message) and
that buyer's ACCEPT/DECLINE. Every seller message spends one turn of the budget. A bad parse, and a message that
would break a market constraint (a product already sold, a buyer who already bought, a price below the product's
cost), is refused: nobody receives it and it is counted under its kind. An offer stands until its product sells
or its buyer buys; an ACCEPT sells the product offered this turn at its price. The episode ends when the budget is
spent or nothing is left to sell. A buyer's view holds its own thread and valuations only; the seller's holds
every thread and its refused messages (cleaned text and why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, NamedTuple

from negolib.core.crossing import clean_prose
from negolib.games.multi_buyer.env import MarketTurns, Refused
from negolib.games.multi_product.protocol import Offer, parse_answer, parse_message
from negolib.games.multi_product.scenarios import MarketConfig, MultiProductScenario, buyer_id, product_id

Role = Literal["seller", "buyer"]
End = Literal["budget", "sold_out"]
VIOLATIONS: tuple[str, str, str] = ("sold_product", "buyer_bought", "below_cost")
"""The constraint kinds a valid message can still break (the env refuses it)."""


REFUSED_TEXT_CHARS = 2000
"""A refused message is kept (cleaned) up to this length in the seller's view."""


def violation(offer: Offer, sold_to: Sequence[int | None], bought: Sequence[int | None],
              costs: Sequence[float]) -> str | None:
    """The constraint of :data:`VIOLATIONS` that ``offer`` breaks (the first, in that order), or None."""
    if sold_to[offer.product] is not None:
        return "sold_product"
    if bought[offer.buyer] is not None:
        return "buyer_bought"
    return "below_cost" if offer.price < costs[offer.product] else None


def violation_error(kind: str, offer: Offer, cost: float) -> str:
    if kind == "sold_product":
        return f"{product_id(offer.product)} is already sold"
    if kind == "buyer_bought":
        return f"{buyer_id(offer.buyer)} has already bought a product"
    return f"price {offer.price:.2f} is below the cost of {product_id(offer.product)} ({cost:.2f})"


class ThreadEntry(NamedTuple):
    """One message of a seller-buyer thread: the seller's turn number, who spoke, the cleaned message, the product
    and price offered (seller entries), and whether the buyer accepted (buyer entries)."""

    turn: int
    role: Role
    message: str
    product: int | None = None
    price: float | None = None
    accept: bool = False


class SellerView(NamedTuple):
    """Everything the seller may see: public list prices, its private costs, its budget and every buyer thread."""

    episode_id: str
    market: str
    seed: int
    config: MarketConfig  # public: sizes, turn budget, valuation model, scale
    list_prices: tuple[float, ...]
    costs: tuple[float, ...]  # private
    turn: int  # the seller turn about to be played, 1-based
    turn_budget: int
    threads: tuple[tuple[ThreadEntry, ...], ...]  # one per buyer
    sold_to: tuple[int | None, ...]  # per product: the buyer who bought it
    bought: tuple[int | None, ...]  # per buyer: the product it bought
    last_error: str | None

    role: Role = "seller"
    refused: tuple[Refused, ...] = ()  # every earlier refused message (its cleaned text), in order

    @property
    def turns_left(self) -> int:
        return self.turn_budget - self.turn + 1

    @property
    def n_products(self) -> int:
        return len(self.costs)

    @property
    def n_buyers(self) -> int:
        return len(self.bought)


class BuyerView(NamedTuple):
    """Everything one buyer may see: its own valuations, the public list prices, its thread (ending with this
    turn's message), this turn's offer and its other standing offers ({product: price}, unsold products only)."""

    episode_id: str
    market: str
    seed: int
    buyer: int
    valuations: tuple[float, ...]  # private
    list_prices: tuple[float, ...]
    thread: tuple[ThreadEntry, ...]
    offer: Offer
    standing: dict[int, float]

    role: Role = "buyer"


@dataclass
class Outcome:
    """How the episode ended. ``sales`` lists ``{"buyer", "product", "price", "turn", "overshoot"}`` in order;
    ``violations`` counts the refused messages per kind of :data:`VIOLATIONS`."""

    sales: list[dict[str, Any]]
    end: End
    seller_turns: int
    valid_messages: int
    bad_parses: int
    bad_parts: dict[str, int]
    violations: dict[str, int]
    buyer_turns: int
    buyer_bad_parses: int
    overshoots: int  # accepted prices above the buyer's valuation


class Episode(MarketTurns):
    """One multi-product market: a seller with ``turn_budget`` messages, K products and M buyers."""

    def __init__(self, scenario: MultiProductScenario, episode_id: str = "") -> None:
        self.scenario = scenario
        self.episode_id = episode_id or scenario.key
        m, k = scenario.n_buyers, scenario.n_products
        self.turn_budget = scenario.config.turn_budget
        self.turns: list[dict[str, Any]] = []
        self.threads: list[tuple[ThreadEntry, ...]] = [()] * m
        self.standing: list[dict[int, float]] = [{} for _ in range(m)]
        self.sold_to: list[int | None] = [None] * k
        self.bought: list[int | None] = [None] * m
        self.sales: list[dict[str, Any]] = []
        self.seller_turns = 0
        self.pending: Offer | None = None
        self.outcome: Outcome | None = None
        self._last_error: str | None = None
        self.refused: list[Refused] = []
        self._bad_parts: dict[str, int] = {}
        self._violations = dict.fromkeys(VIOLATIONS, 0)
        self._counts = {"valid": 0, "bad": 0, "buyer_turns": 0, "buyer_bad": 0}

    def view(self) -> SellerView | BuyerView:
        """The view of the party to move (the seller, or the buyer addressed this turn)."""
        s = self.scenario
        if self.pending is None:
            return SellerView(self.episode_id, s.market, s.seed, s.config, s.list_prices, s.costs,
                              self.seller_turns + 1, self.turn_budget, tuple(self.threads), tuple(self.sold_to),
                              tuple(self.bought), self._last_error, refused=tuple(self.refused))
        b = self.pending.buyer
        return BuyerView(self.episode_id, s.market, s.seed, b, s.valuations[b], s.list_prices, self.threads[b],
                         self.pending, dict(self.standing[b]))

    def step(self, text: Any, input_tokens: int = 0, output_tokens: int = 0, latency_s: float = 0.0) -> dict[str, Any]:
        """Play the party to move's turn (its text); returns its transcript entry. ``RuntimeError`` once over."""
        if self.done:
            raise RuntimeError(f"episode {self.episode_id} is over")
        rec: dict[str, Any] = {"turn": self.seller_turns + (self.pending is None), "role": self.to_move,
                               "raw": text if isinstance(text, str) else "", "message": "", "offer": None,
                               "parse_error": None, "part": None, "violation": None, "accept": None, "sale": None,
                               "input_tokens": input_tokens, "output_tokens": output_tokens, "latency_s": latency_s}
        if self.pending is None:
            self._seller_step(text, rec)
        else:
            self._buyer_step(text, rec)
        self.turns.append(rec)
        if self.pending is None and (self.seller_turns >= self.turn_budget or self._nothing_left()):
            self._close()
        return rec

    def _nothing_left(self) -> bool:
        return all(p is not None for p in self.sold_to) or all(b is not None for b in self.bought)

    def _seller_step(self, text: Any, rec: dict[str, Any]) -> None:
        s = self.scenario
        self.seller_turns += 1
        parsed = parse_message(text, s.n_buyers, s.n_products)
        rec["message"], rec["parse_error"], rec["part"] = parsed.message, parsed.error, parsed.part
        offer = parsed.offer
        if offer is None:
            self._counts["bad"] += 1
            self._bad_parts[parsed.part or "format"] = self._bad_parts.get(parsed.part or "format", 0) + 1
            self._refuse(text, str(parsed.error))
            return
        rec["offer"] = offer.to_dict()
        kind = violation(offer, self.sold_to, self.bought, s.costs)
        if kind is not None:
            self._violations[kind] += 1
            rec["violation"] = kind
            self._refuse(text, violation_error(kind, offer, s.costs[offer.product]))
            return
        self._counts["valid"] += 1
        self._last_error = None
        self.threads[offer.buyer] += (ThreadEntry(self.seller_turns, "seller", parsed.message, offer.product,
                                                  offer.price),)
        self.pending = offer

    def _refuse(self, text: Any, error: str) -> None:
        self._last_error = error
        kept = clean_prose(text[:REFUSED_TEXT_CHARS]) if isinstance(text, str) else ""
        self.refused.append(Refused(self.seller_turns, kept, error))

    def _buyer_step(self, text: Any, rec: dict[str, Any]) -> None:
        offer = self.pending
        assert offer is not None
        b, k = offer.buyer, offer.product
        parsed = parse_answer(text)
        self._counts["buyer_turns"] += 1
        self._counts["buyer_bad"] += parsed.error is not None
        rec.update(message=parsed.message, parse_error=parsed.error, accept=parsed.accept, offer=offer.to_dict())
        self.threads[b] += (ThreadEntry(self.seller_turns, "buyer", parsed.message, k, offer.price, parsed.accept),)
        if parsed.accept:
            sale = {"buyer": b, "product": k, "price": offer.price, "turn": self.seller_turns,
                    "overshoot": offer.price > self.scenario.valuations[b][k]}
            self.sales.append(sale)
            rec["sale"] = sale
            self.sold_to[k], self.bought[b] = b, k
            self.standing[b].clear()
            for other in self.standing:
                other.pop(k, None)
        else:
            self.standing[b][k] = offer.price
        self.pending = None

    def _close(self) -> None:
        c = self._counts
        self.outcome = Outcome(
            sales=[dict(x) for x in self.sales], end="sold_out" if self._nothing_left() else "budget",
            seller_turns=self.seller_turns, valid_messages=c["valid"], bad_parses=c["bad"],
            bad_parts=dict(self._bad_parts), violations=dict(self._violations), buyer_turns=c["buyer_turns"],
            buyer_bad_parses=c["buyer_bad"], overshoots=sum(x["overshoot"] for x in self.sales))

    def record(self, **extra: Any) -> dict[str, Any]:
        """The JSON-ready record: scenario (with the optimal allocations' values), status, config, turns, outcome."""
        s, out = self.scenario, self.outcome
        status = "running" if out is None else ("deal" if out.sales else "no_deal")
        return {"game": "multi_product", "scenario_key": s.key, "market": s.market, "seed": s.seed,
                "list_prices": list(s.list_prices), "costs": list(s.costs),
                "valuations": [list(row) for row in s.valuations],
                "best_welfare": s.best_welfare.value, "best_revenue": s.best_revenue.value,
                **extra, "status": status, "config": asdict(s.config), "turns": self.turns,
                "outcome": None if out is None else asdict(out)}
