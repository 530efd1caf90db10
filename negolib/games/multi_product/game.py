"""The multi-product market behind the plug-in interface (:class:`negolib.games.base.Game`).

Contract: :class:`MultiProductGame` plays :mod:`.env` on the evaluation scenarios of every market of
:data:`~.scenarios.EVAL_MARKETS` (keys ``"market|seed"``, clustered by seed). Agents by name: in the seller role a
scripted seller (``greedy``, ``random``, and the upper bounds ``oracle``, ``oracle_surplus``); in the buyer role
``pool`` (the training buyers), ``picky`` (held out), or a seller name (read as ``pool``, so a round robin of
seller names plays every seller against the pool); ``SELLER+BUYER`` names a pair, one part per role.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from negolib.games.base import Game, Payoffs, UnknownAgent
from negolib.games.multi_product.buyers import RULES, ScriptedBuyers
from negolib.games.multi_product.play import play_episodes
from negolib.games.multi_product.scenarios import EVAL_MARKETS, MultiProductScenario, evaluation_set, parse_key
from negolib.games.multi_product.sellers import SELLERS, make_seller

POOL = "pool"


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def split_name(name: str) -> tuple[str, str]:
    """(seller part, buyer part) of an agent name: ``"a+b"`` -> (a, b); ``"a"`` -> (a, a)."""
    seller, plus, buyer = name.partition("+")
    return (seller, buyer) if plus else (name, name)


class MultiProductGame(Game):
    """K substitutable products, M unit-demand buyers, four-part messages under a turn budget."""

    name = "multi_product"
    title = "A multi-product market with a four-part protocol"
    summary = ("one seller, K products (private costs), M buyers (private valuations, one item each); each turn a "
               "four-part message TO/PRODUCT/PRICE/MESSAGE, 6-14 turns; payoff = surplus / optimal welfare")
    payoff_label = "normalised surplus"

    def __init__(self, markets: Sequence[str] = EVAL_MARKETS) -> None:
        self.markets = tuple(markets)

    def scripted_strategies(self) -> tuple[str, ...]:
        return tuple(sorted(SELLERS))

    def buyer_names(self) -> tuple[str, ...]:
        return tuple(RULES)

    def _known(self) -> list[str]:
        return [*self.scripted_strategies(), f"buyer role: {', '.join(self.buyer_names())}", "SELLER+BUYER"]

    def make_agent(self, name: str, role: str, seed: int) -> Any:
        if role not in ("seller", "buyer"):
            raise ValueError(f"role must be 'seller' or 'buyer', got {role!r}")
        seller_part, buyer_part = split_name(str(name))
        if role == "seller":
            if seller_part not in SELLERS:
                raise UnknownAgent(self.name, name, self._known())
            return make_seller(seller_part, seed)
        if buyer_part in SELLERS:
            buyer_part = POOL
        if buyer_part in RULES:
            return ScriptedBuyers(f"{buyer_part}@buyer", buyer_part, seed)
        raise UnknownAgent(self.name, name, self._known())

    def tournament_scenarios(self, n_seeds: int) -> list[MultiProductScenario]:
        return evaluation_set(n_seeds, self.markets)

    def scenario_key(self, scenario: MultiProductScenario) -> str:
        return scenario.key

    def cluster(self, scenario_key: str) -> str:
        return str(parse_key(scenario_key)[1])

    def play(self, seller: Any, buyer: Any, scenarios: Sequence[MultiProductScenario], seed: int,
             progress: bool = False) -> list[dict[str, Any]]:
        # the agents carry their seeds and the environment is deterministic given the scenario: ``seed`` is
        # recorded, not used
        return play_episodes(seller, buyer, scenarios, progress, play_seed=int(seed))

    def payoffs(self, record: dict[str, Any]) -> Payoffs:
        """The seller's payoff is its surplus (sum of price - cost over its sales) over the welfare of the optimal
        feasible allocation (the most surplus it could extract): the source paper's verifiable reward. The buyers'
        is their surplus (sum of value - price) over the same optimum; the two add up to the allocation quality.
        Both are clipped to [0, 1], 0 without a sale or when no trade creates value."""
        out = record.get("outcome")
        if record.get("status") == "error" or not out:
            return Payoffs(0.0, 0.0, False, valid=False)
        if not out["sales"]:
            return Payoffs(0.0, 0.0, False)
        best = float(record["best_welfare"])
        if best <= 0:
            return Payoffs(0.0, 0.0, True)
        costs, vals = record["costs"], record["valuations"]
        seller = sum(float(s["price"]) - float(costs[s["product"]]) for s in out["sales"])
        buyers = sum(float(vals[s["buyer"]][s["product"]]) - float(s["price"]) for s in out["sales"])
        return Payoffs(_clip(seller / best), _clip(buyers / best), True)
