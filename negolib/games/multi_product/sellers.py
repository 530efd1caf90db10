"""Scripted sellers of the multi-product market, writing four-part messages (:mod:`.protocol`).

Contract: each seller is deterministic given its seed and :class:`~.env.SellerView` and never breaks a market
constraint (it offers only unsold products to buyers who have not bought, at or above cost). ``greedy`` walks the
buyers in order, offering each the best open product by public list price at a descending high ask; ``oracle``
KNOWS EVERY VALUATION (it regenerates the scenario from the view's config and seed) and sells the revenue-optimal
allocation at full value: an upper bound, not a baseline an agent can reach (``oracle_surplus``: the
surplus-optimal one); ``random`` offers a random open pair at a random price above cost.
"""

from __future__ import annotations

import math
import zlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from negolib.agents.base import Agent, AgentReply
from negolib.games.multi_buyer.sellers import ceil_cent
from negolib.games.multi_product.env import SellerView
from negolib.games.multi_product.protocol import Offer, format_message
from negolib.games.multi_product.scenarios import MultiProductScenario, make_scenario, product_id


def open_buyers(view: SellerView) -> list[int]:
    return [m for m, k in enumerate(view.bought) if k is None]


def open_products(view: SellerView) -> list[int]:
    return [k for k, m in enumerate(view.sold_to) if m is None]


def offers_made(view: SellerView, buyer: int, product: int | None = None) -> int:
    """Offers the seller made to ``buyer`` (of ``product`` only, when given)."""
    return sum(1 for e in view.threads[buyer] if e.role == "seller" and (product is None or e.product == product))


class ScriptedSeller(Agent):
    """Base class: subclasses choose the offer (:meth:`decide`); this class writes the four-part message."""

    backend = "scripted"

    def __init__(self, name: str, seed: int = 0, margin: float = 0.05) -> None:
        if not margin >= 0:
            raise ValueError(f"margin must be >= 0, got {margin!r}")
        self.name, self.seed, self.margin = name, int(seed), float(margin)

    def floor(self, view: SellerView, product: int) -> float:
        """The lowest price offered for ``product``: its cost times ``1 + margin``, to the cent above."""
        return ceil_cent(view.costs[product] * (1 + self.margin))

    def decide(self, view: SellerView) -> Offer:
        raise NotImplementedError

    def reply(self, view: SellerView) -> AgentReply:
        offer = self.decide(view)
        h = zlib.crc32(f"{self.seed}|{view.market}|{view.seed}|{view.turn}".encode()) % 3
        text = ("{p} is yours for ${x:,.2f}.", "I can offer you {p} at ${x:,.2f}.",
                "How about {p} for ${x:,.2f}?")[h].format(p=product_id(offer.product), x=offer.price)
        return AgentReply(format_message(offer, text))

    def act_batch(self, views: Sequence[SellerView]) -> list[AgentReply]:  # type: ignore[override]
        return [self.reply(v) for v in views]

    def settings(self) -> dict[str, Any]:
        return {"backend": self.backend, "name": self.name, "strategy": type(self).__name__, "seed": self.seed,
                "margin": self.margin}


class GreedyMatcher(ScriptedSeller):
    """Public information only: takes the buyers in order, offering the current one the open product with the
    highest list price at a high ask that descends through ``asks`` (times the list price, never below the floor);
    after ``len(asks)`` declines it moves to the next buyer, and when every buyer has had its tries it offers the
    least recently asked buyer that product at the floor."""

    def __init__(self, name: str, seed: int = 0, margin: float = 0.05,
                 asks: tuple[float, ...] = (1.3, 1.1, 0.95)) -> None:
        super().__init__(name, seed, margin)
        self.asks = tuple(float(a) for a in asks)

    def decide(self, view: SellerView) -> Offer:
        product = max(open_products(view), key=lambda k: (view.list_prices[k], -k))
        buyers = open_buyers(view)
        counts = {m: offers_made(view, m) for m in buyers}
        fresh = [m for m in buyers if counts[m] < len(self.asks)]
        if fresh:
            m = fresh[0]
            ask = self.asks[min(offers_made(view, m, product), len(self.asks) - 1)]
            return Offer(m, product, max(self.floor(view, product), ceil_cent(view.list_prices[product] * ask)))
        last = {m: max((e.turn for e in view.threads[m] if e.role == "seller"), default=0) for m in buyers}
        m = min(buyers, key=lambda b: (last[b], b))
        return Offer(m, product, self.floor(view, product))

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "asks": list(self.asks)}


class OracleSeller(ScriptedSeller):
    """UPPER BOUND, NOT A BASELINE: knows every buyer's valuations (regenerated from the view's market config and
    seed) and offers each buyer of the optimal feasible allocation (``objective`` ``"revenue"`` or ``"surplus"``)
    its product at exactly its valuation, one message per sale; after a decline it asks 10% of the value less
    (never below cost). Leftover turns go to the best open pair by the objective."""

    def __init__(self, name: str, seed: int = 0, margin: float = 0.0, objective: str = "revenue",
                 cache_size: int = 4096) -> None:
        super().__init__(name, seed, margin)
        if objective not in ("revenue", "surplus"):
            raise ValueError(f"objective must be 'revenue' or 'surplus', got {objective!r}")
        self.objective = objective
        self._scenarios: OrderedDict[tuple[Any, ...], MultiProductScenario] = OrderedDict()
        self._cache_size = int(cache_size)

    def scenario(self, view: SellerView) -> MultiProductScenario:
        """The scenario behind ``view``, regenerated from its config and seed (kept in a small LRU cache)."""
        key = (view.config, view.seed, view.market)
        sc = self._scenarios.get(key)
        if sc is None:
            sc = self._scenarios[key] = make_scenario(view.config, view.seed, view.market)
            if len(self._scenarios) > self._cache_size:
                self._scenarios.popitem(last=False)
        else:
            self._scenarios.move_to_end(key)
        return sc

    def decide(self, view: SellerView) -> Offer:
        sc = self.scenario(view)
        if sc.costs != view.costs or sc.list_prices != view.list_prices:
            raise ValueError(f"the oracle cannot regenerate scenario {view.market}|{view.seed} from its view")
        plan = sc.best_revenue if self.objective == "revenue" else sc.best_welfare
        pairs = [(m, k) for m, k in plan.pairs if view.bought[m] is None and view.sold_to[k] is None]
        if not pairs:
            v, c = np.asarray(sc.valuations), np.asarray(sc.costs)
            score = v if self.objective == "revenue" else v - c[None, :]
            pairs = [max(((m, k) for m in open_buyers(view) for k in open_products(view)),
                         key=lambda p: (v[p] >= c[p[1]], score[p], -p[0], -p[1]))]
        m, k = pairs[0]
        value = sc.valuations[m][k]
        tries = offers_made(view, m, k)
        price = math.floor(round(value * (1 - 0.1 * tries) * 100, 6)) / 100
        return Offer(m, k, max(self.floor(view, k), price))

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "objective": self.objective, "upper_bound": True}


class RandomSeller(ScriptedSeller):
    """A random open (buyer, product) pair at a price uniform between the floor and 1.5 times the list price;
    seeded by (seed, market, scenario seed, turn), so a scenario plays the same in any batch."""

    def decide(self, view: SellerView) -> Offer:
        rng = np.random.default_rng([self.seed, zlib.crc32(view.market.encode()), view.seed, view.turn])
        buyers, products = open_buyers(view), open_products(view)
        m, k = buyers[int(rng.integers(len(buyers)))], products[int(rng.integers(len(products)))]
        lo = self.floor(view, k)
        hi = max(lo, view.list_prices[k] * 1.5)
        return Offer(m, k, max(lo, round(float(rng.uniform(lo, hi)), 2)))


SELLERS: dict[str, Callable[..., ScriptedSeller]] = {
    "greedy": GreedyMatcher,
    "oracle": OracleSeller,
    "oracle_surplus": lambda name, seed, **kw: OracleSeller(name, seed, **{"objective": "surplus", **kw}),
    "random": RandomSeller,
}
"""Seller strategy name -> factory ``(name, seed, **params)``; ``oracle*`` are upper bounds (they read valuations)."""


def make_seller(strategy: str, seed: int = 0, **params: Any) -> ScriptedSeller:
    """The scripted seller ``strategy`` named ``strategy@seller``; ``KeyError`` for an unknown strategy."""
    if strategy not in SELLERS:
        raise KeyError(strategy)
    return SELLERS[strategy](f"{strategy}@seller", seed, **params)
