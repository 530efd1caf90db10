"""The paper's game behind the plug-in interface: multi-issue contract bargaining.

Contract: :class:`MultiIssueGame` plays the paper's environment (:mod:`.env`, evaluation rules: 12 rounds, seller
first, an ACCEPT closes on the counterpart's standing offer) through the game's rollout engine
(:func:`.rollout.run_episodes`). Scenarios are the reserved evaluation seeds of all nine domains; a
payoff is the party's normalised utility U~ of the deal (0 without one); clusters are seeds, as in the paper.
Records read back are checked by :mod:`.records`; the settings a tournament resumes under are the environment config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from negolib.games.base import Game, Payoffs, UnknownAgent
from negolib.games.multi_issue.env import EnvConfig
from negolib.games.multi_issue.records import check_record
from negolib.games.multi_issue.rollout import EpisodeSpec, run_episodes
from negolib.games.multi_issue.scenarios import Scenario, evaluation_set
from negolib.games.multi_issue.scripted import STRATEGIES, make_scripted


class MultiIssueGame(Game):
    """The paper's game: a seller and a buyer bargain over a multi-issue contract."""

    name = "multi_issue"
    title = "Multi-issue contract bargaining (the paper's game)"
    summary = ("the paper's game: seller and buyer trade COUNTER/ACCEPT over 8-10 terms of a contract, "
               "12 rounds, nine domains; payoff = normalised utility U~")
    payoff_label = "normalised utility U~"

    def __init__(self, config: EnvConfig | None = None, scenarios: Sequence[Scenario] | None = None) -> None:
        """``scenarios``: fixed scenarios to play instead of the evaluation seeds (e.g. an imported Genius
        scenario, :func:`negolib.games.multi_issue.imported.load_imported`)."""
        self.config = config or EnvConfig()
        self.fixed = tuple(scenarios or ())
        self._scenarios: dict[str, Scenario] = {self.scenario_key(s): s for s in self.fixed}  # for checking records

    def scripted_strategies(self) -> tuple[str, ...]:
        return tuple(sorted(STRATEGIES))

    def make_agent(self, name: str, role: str, seed: int) -> Any:
        if name not in STRATEGIES:
            raise UnknownAgent(self.name, name, self.scripted_strategies())
        return make_scripted(name, name=f"{name}@{role}", seed=seed)

    def tournament_scenarios(self, n_seeds: int) -> list[Scenario]:
        """The evaluation seeds of all nine domains, or the game's fixed scenarios (``n_seeds`` unused)."""
        return list(self.fixed) if self.fixed else evaluation_set(n_seeds)

    def scenario_key(self, scenario: Scenario) -> str:
        return f"{scenario.domain.name}|{scenario.seed}"

    def cluster(self, scenario_key: str) -> str:
        return scenario_key.rsplit("|", 1)[1]

    def play(self, seller: Any, buyer: Any, scenarios: Sequence[Scenario], seed: int,
             progress: bool = False) -> list[dict[str, Any]]:
        del seed  # the agents carry their seeds; the environment is deterministic given the scenario
        specs = [EpisodeSpec("seller", "seller", "buyer", sc, self.config) for sc in scenarios]
        result = run_episodes(specs, {"seller": seller, "buyer": buyer}, progress=progress)
        by_key = {(r["domain"], int(r["seed"])): r for r in result.records}
        return [{**by_key[(sc.domain.name, sc.seed)], "scenario_key": self.scenario_key(sc)} for sc in scenarios]

    def settings(self) -> dict[str, Any]:
        """The environment config."""
        return {"config": asdict(self.config)}

    def check_record(self, record: Any) -> None:
        """The transcript schema and the game's invariants (:func:`.records.check_record`)."""
        check_record(record, self.config, self._scenarios)

    def payoffs(self, record: dict[str, Any]) -> Payoffs:
        outcome = record.get("outcome")
        if record.get("status") == "error" or not outcome:
            return Payoffs(0.0, 0.0, False, valid=False)
        if not outcome["deal"]:
            return Payoffs(0.0, 0.0, False)
        return Payoffs(float(outcome["seller_utility"]), float(outcome["buyer_utility"]), True)
