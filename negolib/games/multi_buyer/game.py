"""The multi-buyer market behind the plug-in interface (:class:`negolib.games.base.Game`).

Contract: :class:`MultiBuyerGame` plays :mod:`.env` on the evaluation scenarios of every market of
:data:`~.scenarios.EVAL_MARKETS` (keys ``"market|seed"``, clustered by seed). Agents by name: in the seller role a
scripted seller (``greedy``, ``probe_all``, ``auctioneer``, ``fixed_price``); in the buyer role the buyer pool:
``pool`` (each buyer in the style its scenario assigns), a style name (every buyer in that style), or a seller name
(read as ``pool``, so a round robin of seller names plays every seller against the pool); ``SELLER+BUYER`` names a
pair, one part per role. Payoffs: see :meth:`MultiBuyerGame.payoffs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from negolib.games.base import Game, Payoffs, UnknownAgent
from negolib.games.multi_buyer.buyers import STYLES, ScriptedBuyers
from negolib.games.multi_buyer.metrics import best_surplus
from negolib.games.multi_buyer.play import play_episodes
from negolib.games.multi_buyer.scenarios import EVAL_MARKETS, MultiBuyerScenario, evaluation_set, parse_key
from negolib.games.multi_buyer.sellers import SELLERS, make_seller

POOL = "pool"


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def split_name(name: str) -> tuple[str, str]:
    """(seller part, buyer part) of an agent name: ``"a+b"`` -> (a, b); ``"a"`` -> (a, a)."""
    seller, plus, buyer = name.partition("+")
    return (seller, buyer) if plus else (name, name)


class MultiBuyerGame(Game):
    """One seller, N buyers with private budgets, one shared turn budget (after the source paper's market)."""

    name = "multi_buyer"
    title = "One seller, several buyers, a turn budget"
    summary = ("one seller (private cost) addresses one of 3-6 buyers (private budgets) per turn via message_buyer("
               "to, offer), 12-16 turns shared; buyer pool styles held out; payoff = normalised seller surplus")
    payoff_label = "normalised surplus"

    def __init__(self, markets: Sequence[str] = EVAL_MARKETS) -> None:
        self.markets = tuple(markets)

    def scripted_strategies(self) -> tuple[str, ...]:
        return tuple(sorted(SELLERS))

    def buyer_names(self) -> tuple[str, ...]:
        """The buyer-role names: ``pool`` and every style."""
        return (POOL, *STYLES)

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
        if buyer_part in SELLERS or buyer_part == POOL:
            return ScriptedBuyers(f"{POOL}@buyer", None, seed)
        if buyer_part in STYLES:
            return ScriptedBuyers(f"{buyer_part}@buyer", buyer_part, seed)
        raise UnknownAgent(self.name, name, self._known())

    def tournament_scenarios(self, n_seeds: int) -> list[MultiBuyerScenario]:
        return evaluation_set(n_seeds, self.markets)

    def scenario_key(self, scenario: MultiBuyerScenario) -> str:
        return scenario.key

    def cluster(self, scenario_key: str) -> str:
        return str(parse_key(scenario_key)[1])

    def play(self, seller: Any, buyer: Any, scenarios: Sequence[MultiBuyerScenario], seed: int,
             progress: bool = False) -> list[dict[str, Any]]:
        # the agents carry their seeds and the environment is deterministic given the scenario: ``seed`` is
        # recorded, not used
        return play_episodes(seller, buyer, scenarios, progress, play_seed=int(seed))

    def payoffs(self, record: dict[str, Any]) -> Payoffs:
        """The seller's payoff is its surplus (sum of price - cost) over the best achievable (the top ``n_items``
        budgets minus cost): the source paper's verifiable reward. The buyer side's is the winners' surplus (sum
        of budget - price) over the same best; the two add up to the share of the best gains realised. Both are
        clipped to [0, 1], 0 without a deal or when no budget exceeds the cost."""
        out = record.get("outcome")
        if record.get("status") == "error" or not out:
            return Payoffs(0.0, 0.0, False, valid=False)
        if not out["deals"]:
            return Payoffs(0.0, 0.0, False)
        budgets, cost = [float(b) for b in record["budgets"]], float(record["cost"])
        best = best_surplus(budgets, cost, int(record["config"]["n_items"]))
        if best <= 0:
            return Payoffs(0.0, 0.0, True)
        seller = sum(float(d["price"]) - cost for d in out["deals"])
        buyers = sum(budgets[d["buyer"]] - float(d["price"]) for d in out["deals"])
        return Payoffs(_clip(seller / best), _clip(buyers / best), True)
