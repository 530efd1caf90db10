"""The game plug-in contract: what the shared machinery (tournament, book, CLI) asks of a bargaining game.

Contract: a game is a :class:`Game` object registered by name in :mod:`negolib.games`. It owns its scenarios
(a paired, seeded set; each scenario has a JSON-ready ``key``), its agents (scripted strategies by name, in both
roles; :meth:`Game.default_agents` those a tournament plays when none are named) and its rules: :meth:`Game.play`
plays one seller against one buyer on every scenario and returns one JSON-ready record per scenario;
:meth:`Game.payoffs` reads a record as numbers (each party's payoff in [0, 1], whether there was a deal);
:meth:`Game.check_record` checks a record read back from a file (types, ranges, the game's invariants) and
:meth:`Game.settings` names everything besides agents, scenarios and seed that shapes an episode (a resumed file
must have been played under the same). The shared layers read records only through these methods and import no
game.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from negolib.games.records import RecordProblem, mapping, string

ROLES: tuple[str, str] = ("seller", "buyer")


@dataclass(frozen=True)
class Payoffs:
    """One episode's outcome as numbers: each party's payoff in [0, 1] (0 without a deal) and the deal flag.

    ``valid`` is False for an episode that did not finish (an error row): the tournament leaves it out and
    counts it."""

    seller: float
    buyer: float
    deal: bool
    valid: bool = True


class Game(ABC):
    """A registered bargaining game. Subclasses set the three class attributes and implement the methods."""

    name: str = "game"
    title: str = ""
    summary: str = ""  # one line for ``python -m negolib games``
    payoff_label: str = "payoff"  # what :meth:`payoffs` measures, for table and axis labels

    @abstractmethod
    def scripted_strategies(self) -> tuple[str, ...]:
        """The scripted strategy names :meth:`make_agent` accepts (each plays both roles)."""

    def default_agents(self) -> tuple[str, ...]:
        """The agents a tournament plays when none are named (``negolib tournament`` without ``--agents``):
        by default the scripted strategies; a game whose scripted agents differ by role says how they meet."""
        return self.scripted_strategies()

    @abstractmethod
    def make_agent(self, name: str, role: str, seed: int) -> Any:
        """The agent called ``name`` for ``role`` (``"seller"`` or ``"buyer"``), seeded with ``seed``. Raises
        ``ValueError`` naming the known agents for an unknown name."""

    @abstractmethod
    def tournament_scenarios(self, n_seeds: int) -> list[Any]:
        """The paired scenario set of a tournament: the same list for every match, ``n_seeds`` seeds (seed
        clusters) per stratum of the game (domain, price tier, ...)."""

    @abstractmethod
    def scenario_key(self, scenario: Any) -> str:
        """A stable string naming ``scenario``: records carry it, and resuming matches on it."""

    @abstractmethod
    def cluster(self, scenario_key: str) -> str:
        """The seed cluster of a scenario (for bootstrap intervals): scenarios sharing a seed share it."""

    @abstractmethod
    def play(self, seller: Any, buyer: Any, scenarios: Sequence[Any], seed: int,
             progress: bool = False) -> list[dict[str, Any]]:
        """One episode per scenario, in order; each record is JSON-ready and carries ``scenario_key``."""

    @abstractmethod
    def payoffs(self, record: dict[str, Any]) -> Payoffs:
        """The record's outcome as numbers."""

    def settings(self) -> dict[str, Any]:
        """Everything besides the agents, the scenarios and the seed that shapes this game's episodes (its
        environment config, its markets, how it builds language-model agents), JSON-ready: a tournament resumes
        only a file played under the same. By default nothing."""
        return {}

    def check_record(self, record: Any) -> None:
        """Check one record read back from a file: raise :class:`~negolib.games.records.RecordProblem` naming the
        field of its first problem (a wrong type, a value out of range, a broken invariant of the game). By
        default: a JSON object with a string ``scenario_key``; games check their records' every field."""
        if type(record) is not dict:
            raise RecordProblem("", "the record must be a JSON object")
        string(record, "scenario_key")
        if "outcome" in record:
            mapping(record, "outcome", null=True)


@dataclass(frozen=True)
class StudyTable:
    """A table a game's study module computes for the book (which saves and shows it as a
    :class:`negolib.study.report.booktable.BookTable`): its file name, title, display frame, caption and tidy
    numbers."""

    name: str
    title: str
    frame: Any  # a pandas DataFrame of display values
    caption: str = ""
    data: Any = None  # a pandas DataFrame of the numbers behind it (None: the frame is the data)


class UnknownAgent(ValueError):
    """An agent name the game does not know."""

    def __init__(self, game: str, name: str, known: Sequence[str]) -> None:
        super().__init__(f"game {game!r} has no agent {name!r}; known: {', '.join(known)}")
