"""The multi-product market behind the plug-in interface (:class:`negolib.games.base.Game`).

Contract: :class:`MultiProductGame` is a :class:`~negolib.games.multi_buyer.game.MarketGame` playing :mod:`.env` on
the evaluation scenarios of every market of :data:`~.scenarios.EVAL_MARKETS` (keys ``"market|seed"``, clustered by
seed). Agents by name: in the seller role a scripted seller (``greedy``, ``random``, and the upper bounds
``oracle``, ``oracle_surplus``) or a language-model seller writing four-part text (``hf:<path>``, ``openai:<model>``,
``anthropic:<model>``, :mod:`.agents`); in the buyer role ``pool`` (the training buyers), ``picky`` (held out), or a
seller name (read as ``pool``); ``SELLER+BUYER`` names a pair, one part per role. The tournament default is every
scripted seller against the pool.
"""

from __future__ import annotations

from typing import Any

from negolib.games.base import Payoffs
from negolib.games.multi_buyer.game import MarketGame, clip
from negolib.games.multi_product.agents import SPEECH
from negolib.games.multi_product.buyers import RULES, ScriptedBuyers
from negolib.games.multi_product.env import Episode
from negolib.games.multi_product.play import play_episodes
from negolib.games.multi_product.records import check_outcome
from negolib.games.multi_product.scenarios import SETS
from negolib.games.multi_product.sellers import SELLERS


class MultiProductGame(MarketGame):
    """K substitutable products, M unit-demand buyers, four-part messages under a turn budget."""

    name = "multi_product"
    title = "A multi-product market with a four-part protocol"
    summary = ("one seller, K products (private costs), M buyers (private valuations, one item each); each turn a "
               "four-part message TO/PRODUCT/PRICE/MESSAGE, 6-14 turns; payoff = surplus / optimal welfare")
    payoff_label = "normalised surplus"
    sellers = SELLERS
    speech = SPEECH
    scenario_sets = SETS
    play_episodes = staticmethod(play_episodes)
    episode = Episode
    check_outcome = staticmethod(check_outcome)

    def buyer_names(self) -> tuple[str, ...]:
        """The buyer-role names: ``pool`` (the training buyers) and ``picky`` (held out)."""
        return tuple(RULES)

    def make_buyer(self, name: str, seed: int) -> ScriptedBuyers:
        return ScriptedBuyers(f"{name}@buyer", name, seed)

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
        return Payoffs(clip(seller / best), clip(buyers / best), True)
