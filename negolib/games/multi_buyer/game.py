"""The multi-buyer market behind the plug-in interface (:class:`negolib.games.base.Game`), and the market shell.

Contract: :class:`MarketGame` is what the two markets share (the multi-product market subclasses it): agents by
name, in the seller role a scripted seller or a language-model seller (``hf:<path>``, ``openai:<model>``,
``anthropic:<model>``, :mod:`.agents`); in the buyer role the buyer pool ``pool``, a buyer style or rule name, or a
seller name (read as ``pool``, so a round robin of seller names plays every seller against the pool); ``SELLER+BUYER``
names a pair, one part per role (in the multi-buyer market an explicit ``+hf:<path>``, ``+openai:<model>`` or
``+anthropic:<model>`` buyer part is a language-model buyer answering for every buyer, :mod:`.lm_buyers`).
Its tournament default is every scripted seller against the pool; scenarios are
each market's reserved evaluation seeds (keys ``"market|seed"``, clustered by seed). :class:`MultiBuyerGame` plays
:mod:`.env` on :data:`~.scenarios.EVAL_MARKETS`; payoffs: see :meth:`MultiBuyerGame.payoffs`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from negolib.games.base import Game, Payoffs, UnknownAgent
from negolib.games.multi_buyer.agents import LM_FORMS, SPEECH, LMOptions, SellerAgents, Speech
from negolib.games.multi_buyer.agents import split_name as split_lm_name
from negolib.games.multi_buyer.buyers import STYLES, ScriptedBuyers
from negolib.games.multi_buyer.env import Episode
from negolib.games.multi_buyer.lm_buyers import BuyerAgents
from negolib.games.multi_buyer.metrics import best_surplus
from negolib.games.multi_buyer.play import play_episodes
from negolib.games.multi_buyer.records import check_outcome
from negolib.games.multi_buyer.scenarios import SETS
from negolib.games.multi_buyer.sellers import SELLERS
from negolib.games.records import RecordProblem, check_episode, check_scenario
from negolib.games.seeds import ScenarioSets

POOL = "pool"


def clip(x: float) -> float:
    """``x`` clipped to [0, 1]."""
    return min(1.0, max(0.0, x))


def split_name(name: str) -> tuple[str, str]:
    """(seller part, buyer part) of an agent name: ``"a+b"`` -> (a, b); ``"a"`` -> (a, a)."""
    seller, plus, buyer = name.partition("+")
    return (seller, buyer) if plus else (name, name)


class MarketGame(Game):
    """A market: one seller (scripted or a language model) against a scripted buyer pool (see the module
    docstring). Subclasses set the class attributes and implement :meth:`buyer_names`, :meth:`make_buyer` and
    :meth:`payoffs`."""

    sellers: Mapping[str, Callable[..., Any]] = {}
    """Scripted seller name -> factory ``(name, seed)``."""
    speech: Speech
    """How a language-model seller speaks the market's protocol."""
    scenario_sets: ScenarioSets[Any]
    """The market's scenarios (its evaluation markets are a game object's default)."""
    play_episodes: Callable[..., list[dict[str, Any]]]
    """``(seller, buyer, scenarios, progress, **extra)`` -> one record per scenario (a staticmethod)."""
    episode: Callable[[Any, str], Any]
    """The market's episode class ``(scenario, episode_id)``: its ``record()`` before play gives a scenario's fields."""
    check_outcome: Callable[[dict[str, Any], dict[str, Any]], None]
    """``(record, outcome)``: the market's checks of a finished episode's outcome (a staticmethod)."""

    def __init__(self, markets: Sequence[str] | None = None, lm: LMOptions | None = None) -> None:
        self.markets = tuple(markets) if markets is not None else self.scenario_sets.strata
        self.lm_agents = SellerAgents(self.speech, lm)  # local weights are loaded once per game object
        self._fields: dict[str, dict[str, Any]] = {}  # scenario fields by key, for checking records

    def make_seller(self, strategy: str, seed: int) -> Any:
        """The scripted seller ``strategy`` (one of :attr:`sellers`), named ``strategy@seller``."""
        return self.sellers[strategy](f"{strategy}@seller", seed)

    def buyer_names(self) -> tuple[str, ...]:
        """The buyer-role names (``pool`` among them)."""
        raise NotImplementedError

    def make_buyer(self, name: str, seed: int) -> Any:
        """The scripted buyers called ``name`` (one of :meth:`buyer_names`), answering for every buyer."""
        raise NotImplementedError

    def scripted_strategies(self) -> tuple[str, ...]:
        return tuple(sorted(self.sellers))

    def default_agents(self) -> tuple[str, ...]:
        """Every scripted seller: in the buyer role each name reads as ``pool``, so the round robin plays every
        scripted seller against the scripted buyer pool."""
        return self.scripted_strategies()

    def _known(self) -> list[str]:
        return [*self.scripted_strategies(), *LM_FORMS, f"buyer role: {', '.join(self.buyer_names())}",
                "SELLER+BUYER"]

    def make_agent(self, name: str, role: str, seed: int) -> Any:
        """The agent ``name`` for ``role`` (see the module docstring); language-model sellers take their keys from
        the environment (see :class:`LMOptions`)."""
        if role not in ("seller", "buyer"):
            raise ValueError(f"role must be 'seller' or 'buyer', got {role!r}")
        seller_part, buyer_part = split_name(str(name))
        if role == "seller":
            if seller_part in self.sellers:
                return self.make_seller(seller_part, seed)
            if split_lm_name(seller_part) is not None:
                return self.lm_agents.make(seller_part, "seller", seed)
            raise UnknownAgent(self.name, name, self._known())
        if buyer_part in self.sellers or split_lm_name(buyer_part) is not None:
            buyer_part = POOL
        if buyer_part in self.buyer_names():
            return self.make_buyer(buyer_part, seed)
        raise UnknownAgent(self.name, name, self._known())

    def tournament_scenarios(self, n_seeds: int) -> list[Any]:
        return self.scenario_sets.evaluation_set(n_seeds, self.markets)

    def scenario_key(self, scenario: Any) -> str:
        return scenario.key

    def cluster(self, scenario_key: str) -> str:
        return str(self.scenario_sets.parse_key(scenario_key)[1])

    def play(self, seller: Any, buyer: Any, scenarios: Sequence[Any], seed: int,
             progress: bool = False) -> list[dict[str, Any]]:
        # the agents carry their seeds and the environment is deterministic given the scenario: ``seed`` is
        # recorded, not used
        return self.play_episodes(seller, buyer, scenarios, progress, play_seed=int(seed))

    def settings(self) -> dict[str, Any]:
        """The markets played and how language-model agents are built (:meth:`LMOptions.settings`)."""
        return {"markets": list(self.markets), "lm": self.lm_agents.options.settings()}

    def scenario_fields(self, key: str) -> dict[str, Any]:
        """The fields a record of scenario ``key`` carries before play (market, seed, draws, config), as JSON
        values; :class:`RecordProblem` for a key naming no scenario of the game's markets."""
        if key not in self._fields:
            try:
                market, seed = self.scenario_sets.parse_key(key)
            except ValueError as exc:
                raise RecordProblem("scenario_key", f"names no scenario of the game ({exc})") from None
            if market not in self.markets:
                raise RecordProblem("scenario_key", f"market {market!r} is not one of {list(self.markets)}")
            rec = self.episode(self.scenario_sets.scenario_set([seed], [market])[0], "check").record()
            drop = ("game", "scenario_key", "status", "turns", "outcome")
            self._fields[key] = json.loads(json.dumps({k: v for k, v in rec.items() if k not in drop}))
        return self._fields[key]

    def check_record(self, record: Any) -> None:
        """The shared envelope (:func:`~negolib.games.records.check_episode`), the fields of the scenario the key
        names, and the market's outcome checks (:attr:`check_outcome`)."""
        out = check_episode(record, self.name)
        check_scenario(record, self.scenario_fields(record["scenario_key"]))
        if out is not None:
            self.check_outcome(record, out)


class MultiBuyerGame(MarketGame):
    """One seller, N buyers with private budgets, one shared turn budget (after the source paper's market)."""

    name = "multi_buyer"
    title = "One seller, several buyers, a turn budget"
    summary = ("one seller (private cost) addresses one of 3-6 buyers (private budgets) per turn via message_buyer("
               "to, offer), 12-16 turns shared; buyer pool styles held out; payoff = normalised seller surplus")
    payoff_label = "normalised surplus"
    sellers = SELLERS
    speech = SPEECH
    scenario_sets = SETS
    play_episodes = staticmethod(play_episodes)
    episode = Episode
    check_outcome = staticmethod(check_outcome)

    def buyer_names(self) -> tuple[str, ...]:
        """The buyer-role names: ``pool`` (each buyer in the style its scenario assigns) and every style."""
        return (POOL, *STYLES)

    def make_buyer(self, name: str, seed: int) -> ScriptedBuyers:
        return ScriptedBuyers(f"{name}@buyer", None if name == POOL else name, seed)

    @property
    def lm_buyers(self) -> BuyerAgents:
        """The game's language-model buyers (:mod:`.lm_buyers`), sharing the sellers' options and loaded weights."""
        if getattr(self, "_lm_buyers", None) is None:
            self._lm_buyers = BuyerAgents(self.lm_agents.options)
            self._lm_buyers.models = self.lm_agents.models
        return self._lm_buyers

    def _known(self) -> list[str]:
        return [*super()._known(), *(f"SELLER+{form} (a language-model buyer)" for form in LM_FORMS)]

    def make_agent(self, name: str, role: str, seed: int) -> Any:
        """As :meth:`MarketGame.make_agent`; besides, in the buyer role an explicit language-model buyer part
        (``SELLER+hf:<path>``, ``SELLER+openai:<model>``, ``SELLER+anthropic:<model>``) is a language-model buyer
        answering for every buyer (a bare language-model name still reads as the pool)."""
        _, plus, buyer_part = str(name).partition("+")
        if role == "buyer" and plus and split_lm_name(buyer_part) is not None:
            return self.lm_buyers.make(buyer_part, "buyer", seed)
        return super().make_agent(name, role, seed)

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
        return Payoffs(clip(seller / best), clip(buyers / best), True)
