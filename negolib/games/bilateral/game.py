"""Bilateral price bargaining behind the plug-in interface (:class:`negolib.games.base.Game`).

Contract: :class:`BilateralGame` plays :mod:`.env` (10 turns, seller first by default) with the scripted agents of
:mod:`.scripted` and the language-model agents of :mod:`.agents` (``hf:<path>``, ``openai:<model>``,
``anthropic:<model>``) over the evaluation scenarios of every price tier (keys ``"tier|seed"``, clustered by seed).
A payoff is the seller's surplus share (price - cost) / (value - cost) of a deal with a zone, the buyer's is one
minus it, both clipped to [0, 1]; 0 each without a deal or without a zone; error rows are not valid. Records read
back are checked by :mod:`.records`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from negolib.games.base import Game, Payoffs, UnknownAgent
from negolib.games.bilateral.agents import BargainerAgents
from negolib.games.bilateral.env import BilateralConfig
from negolib.games.bilateral.play import play_episodes
from negolib.games.bilateral.records import check_record
from negolib.games.bilateral.scenarios import BilateralScenario, evaluation_set, parse_key
from negolib.games.bilateral.scripted import STRATEGIES, make_scripted
from negolib.games.toolagents import LM_FORMS, LMOptions, split_name


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


class BilateralGame(Game):
    """One item, one price: a seller with a private cost and a buyer with a private value (after Bergemann et al.)."""

    name = "bilateral"
    title = "Bilateral price bargaining (after Bergemann et al.)"
    summary = ("one item, one price: seller (private cost) and buyer (private value) trade make_offer/"
               "accept_offer/walk_away tool calls, 10 turns, five price tiers $10-$100k; payoff = surplus share")
    payoff_label = "surplus share"

    def __init__(self, config: BilateralConfig | None = None, lm: LMOptions | None = None) -> None:
        self.config = config or BilateralConfig()
        self.lm_agents = BargainerAgents(lm or LMOptions())  # local weights are loaded once per game object

    def scripted_strategies(self) -> tuple[str, ...]:
        return tuple(sorted(STRATEGIES))

    def make_agent(self, name: str, role: str, seed: int) -> Any:
        """A scripted strategy by name, or a language-model agent ``hf:<path>`` (a local model folder or a packaged
        model name), ``openai:<model>`` or ``anthropic:<model>`` (keys from the environment; see :class:`LMOptions`)."""
        if name in STRATEGIES:
            return make_scripted(name, role, seed)
        if split_name(name) is not None:
            return self.lm_agents.make(name, role, seed)
        raise UnknownAgent(self.name, name, (*self.scripted_strategies(), *LM_FORMS))

    def tournament_scenarios(self, n_seeds: int) -> list[BilateralScenario]:
        return evaluation_set(n_seeds)

    def scenario_key(self, scenario: BilateralScenario) -> str:
        return scenario.key

    def cluster(self, scenario_key: str) -> str:
        return str(parse_key(scenario_key)[1])

    def play(self, seller: Any, buyer: Any, scenarios: Sequence[BilateralScenario], seed: int,
             progress: bool = False) -> list[dict[str, Any]]:
        # the agents carry their seeds and the environment is deterministic given the scenario: ``seed`` is
        # recorded, not used
        return play_episodes(seller, buyer, scenarios, self.config, progress, play_seed=int(seed))

    def settings(self) -> dict[str, Any]:
        """The environment config and how language-model agents are built (:meth:`LMOptions.settings`)."""
        return {"config": asdict(self.config), "lm": self.lm_agents.options.settings()}

    def check_record(self, record: Any) -> None:
        """Types, ranges and the game's invariants (:func:`.records.check_record`)."""
        check_record(record, self.config)

    def payoffs(self, record: dict[str, Any]) -> Payoffs:
        out = record.get("outcome")
        if record.get("status") == "error" or not out:
            return Payoffs(0.0, 0.0, False, valid=False)
        if not out["deal"]:
            return Payoffs(0.0, 0.0, False)
        zone = float(record["value"]) - float(record["cost"])
        if zone <= 0:
            return Payoffs(0.0, 0.0, True)
        share = (float(out["price"]) - float(record["cost"])) / zone
        return Payoffs(_clip(share), _clip(1.0 - share), True)
