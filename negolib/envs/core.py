"""The text-episode core the ecosystem adapters share (OpenEnv, PettingZoo, Gymnasium): any registered game, played
from raw text.

Contract: :func:`game_kit` gathers what the adapters need of one game under its options, built on the game's own
modules (its scenario sets, its :class:`negolib.training.rollout.TrainableEpisode` adapter, its prompts) and the
shared :class:`negolib.games.base.Game` (agents, payoffs, records); it is the only place that names a game.
:class:`TextEpisode` is one episode of a kit: each role's rendered chat (:func:`chat_text` makes it one string), a
turn of raw text for the party to move, parsed by the game's own strict parser (a text it cannot read is a bad turn,
as in every other path of the project), in-process agents for the other party, the game's record, its payoffs and
the training reward. A failure of the environment or of an in-process agent ends the episode as an error (its
``error`` says where); it never escapes a step. Pure Python: no optional package is imported here.

Scenarios are named by a stratum (the multi-issue game's domain, the bilateral game's price tier, a market) and a
seed, as the games' scenario sets name them; :func:`pick_scenario` draws both when they are not given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from negolib.agents.base import act_contained, error_text, reply_problem
from negolib.games import get_game
from negolib.games.base import ROLES, Game, Payoffs

Chat = list[dict[str, str]]
MAX_DRAWN_SEED = 1_000_000
"""Drawn scenario seeds lie in [0, this): the games' training block, below their reserved evaluation seeds."""


@dataclass(frozen=True)
class GameKit:
    """One game as the adapters see it: the game object, its strata, and how to build a scenario, a trainable
    episode (``(scenario, episode_id, role)``, ``role`` the policy's, for its reward) and a role's chat."""

    name: str
    game: Game
    strata: tuple[str, ...]
    scenario: Callable[[str, int], Any]
    episode: Callable[[Any, str, str], Any]
    render: Callable[[Any, str], Chat]  # (view, role) -> chat messages
    reward_roles: tuple[str, ...] = ("seller",)  # the roles whose training reward the game defines
    options: Mapping[str, Any] = field(default_factory=dict)


def _config(cls: type, options: Mapping[str, Any], game: str) -> Any:
    try:
        return cls(**options)
    except TypeError as exc:
        raise ValueError(f"game {game!r}: bad options {dict(options)} ({exc})") from None


def _no_options(options: Mapping[str, Any], game: str) -> None:
    if options:
        raise ValueError(f"game {game!r} takes no options; got {sorted(options)}")


def _multi_issue(options: Mapping[str, Any]) -> GameKit:
    from negolib.games.multi_issue.domains import load_domains
    from negolib.games.multi_issue.env import EnvConfig
    from negolib.games.multi_issue.game import MultiIssueGame
    from negolib.games.multi_issue.prompts import render_messages
    from negolib.games.multi_issue.scenarios import scenario_set
    from negolib.games.multi_issue.training import PaperEpisode

    config = _config(EnvConfig, options, "multi_issue")
    return GameKit("multi_issue", MultiIssueGame(config), tuple(load_domains()),
                   lambda d, s: scenario_set([s], [d])[0],
                   lambda sc, eid, role: PaperEpisode(sc, config, eid),
                   lambda view, role: render_messages(view, "training"), ("seller",), dict(options))


def _bilateral(options: Mapping[str, Any]) -> GameKit:
    from negolib.games.bilateral.env import BilateralConfig, Episode
    from negolib.games.bilateral.game import BilateralGame
    from negolib.games.bilateral.prompts import chat_messages
    from negolib.games.bilateral.scenarios import TIERS, scenario_set
    from negolib.games.bilateral.training import TrainingEpisode

    config = _config(BilateralConfig, options, "bilateral")
    return GameKit("bilateral", BilateralGame(config), tuple(TIERS), lambda d, s: scenario_set([s], [d])[0],
                   lambda sc, eid, role: TrainingEpisode(Episode(sc, config, eid), role),  # type: ignore[arg-type]
                   lambda view, role: chat_messages(view, "text"), ROLES, dict(options))


def _multi_buyer(options: Mapping[str, Any]) -> GameKit:
    from negolib.games.multi_buyer import buyer_prompts, prompts
    from negolib.games.multi_buyer.env import Episode
    from negolib.games.multi_buyer.game import MultiBuyerGame
    from negolib.games.multi_buyer.training import TrainingEpisode

    _no_options(options, "multi_buyer")
    game = MultiBuyerGame()

    def render(view: Any, role: str) -> Chat:
        return (prompts if role == "seller" else buyer_prompts).chat_messages(view, "text")

    return GameKit("multi_buyer", game, tuple(game.markets),
                   lambda d, s: game.scenario_sets.scenario_set([s], [d])[0],
                   lambda sc, eid, role: TrainingEpisode(Episode(sc, eid)), render)


def _multi_product(options: Mapping[str, Any]) -> GameKit:
    from negolib.games.multi_product import prompts
    from negolib.games.multi_product.env import Episode
    from negolib.games.multi_product.game import MultiProductGame
    from negolib.games.multi_product.training import TrainingEpisode

    _no_options(options, "multi_product")
    game = MultiProductGame()

    def render(view: Any, role: str) -> Chat:
        return prompts.chat_messages(view, "text") if role == "seller" else prompts.buyer_messages(view)

    return GameKit("multi_product", game, tuple(game.markets),
                   lambda d, s: game.scenario_sets.scenario_set([s], [d])[0],
                   lambda sc, eid, role: TrainingEpisode(Episode(sc, eid)), render)


KITS: dict[str, Callable[[Mapping[str, Any]], GameKit]] = {
    "multi_issue": _multi_issue, "bilateral": _bilateral, "multi_buyer": _multi_buyer,
    "multi_product": _multi_product}
"""Game name -> its kit builder (options: the game's environment config fields; the markets take none)."""


def game_kit(name: str, **options: Any) -> GameKit:
    """The kit of the registered game ``name`` under ``options`` (``KeyError`` naming the games; ``ValueError`` for
    options the game does not take)."""
    if name not in KITS:
        get_game(name)  # a registered game without a kit, or no such game: say which
        raise KeyError(f"game {name!r} has no text-episode kit; kits: {', '.join(sorted(KITS))}")
    return KITS[name](options)


def pick_scenario(kit: GameKit, seed: int | None, domain: str | None,
                  rng: np.random.Generator) -> tuple[str, int]:
    """The scenario ``(stratum, seed)``: ``seed`` (None: drawn from ``rng`` in [0, :data:`MAX_DRAWN_SEED`)) and
    ``domain`` (None: the stratum the seed picks in turn). ``ValueError`` for an unknown stratum or a negative seed."""
    if seed is None:
        seed = int(rng.integers(0, MAX_DRAWN_SEED))
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if domain is None:
        domain = kit.strata[int(seed) % len(kit.strata)]
    if domain not in kit.strata:
        raise ValueError(f"game {kit.name!r} has no domain {domain!r}; known: {', '.join(kit.strata)}")
    return domain, int(seed)


def chat_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """A chat as one text: each message under its role in brackets, blank lines between."""
    return "\n\n".join(f"[{m['role']}]\n{m.get('content') or ''}" for m in messages)


def other_role(role: str) -> str:
    """The other party's role."""
    return "buyer" if role == "seller" else "seller"


def check_role(role: str) -> str:
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    return role


class TextEpisode:
    """One episode of a kit's game played from text (see the module docstring). ``role`` is the policy's (its
    training reward is :meth:`reward`'s); both parties' turns go through :meth:`step` or :meth:`play_agent`."""

    def __init__(self, kit: GameKit, domain: str, seed: int, role: str = "seller",
                 episode_id: str | None = None) -> None:
        self.kit, self.domain, self.seed, self.role = kit, domain, int(seed), check_role(role)
        self.scenario = kit.scenario(domain, self.seed)
        self.key = kit.game.scenario_key(self.scenario)
        self.episode = kit.episode(self.scenario, episode_id or f"{self.key}|0", role)
        self.error: str | None = None
        self.chats: dict[str, Chat] = {r: [] for r in ROLES}
        self._refresh()

    @property
    def done(self) -> bool:
        return self.error is not None or self.episode.done

    @property
    def to_move(self) -> str | None:
        """The role to move (None once over)."""
        return None if self.done else self.episode.to_move

    @property
    def turns(self) -> int:
        return len(self.episode.turns)

    def view(self, role: str) -> Any:
        """The game's view of ``role``, which must be the party to move (for in-process agents)."""
        if role != self.to_move:
            raise ValueError(f"the {self.to_move or 'nobody'} is to move, not the {role}")
        return self.episode.view(role)

    def text(self, role: str) -> str:
        """What ``role`` sees: its chat as one text (its last one while another party moves; empty before any)."""
        return chat_text(self.chats[role])

    def bad_turns(self, role: str) -> int:
        return int(self.episode.bad_parses(role)[0])

    def step(self, text: str) -> None:
        """Play the raw ``text`` of the party to move (a text the game cannot read is a bad turn)."""
        if not isinstance(text, str):
            raise TypeError(f"a turn is a text (str), got {type(text).__name__}")
        self._play(text)

    def play_agent(self, agent: Any) -> None:
        """One turn of the party to move by the in-process ``agent`` (acting on the game's view); a failing agent
        ends the episode as an error."""
        role = self.to_move
        if role is None:
            raise RuntimeError(f"episode {self.key} is over")
        reply = act_contained(agent, [self.episode.view(role)])[0]
        problem = reply_problem(reply)
        if problem is not None:
            self._fail(f"turn {self.turns + 1} ({role}): {problem}")
            return
        self._play(self.episode.opponent_turn(reply), reply.input_tokens, reply.output_tokens, reply.latency_s)

    def advance(self, agent: Any, until: str) -> None:
        """Let ``agent`` play every turn until ``until`` is to move or the episode is over."""
        while not self.done and self.to_move != until:
            self.play_agent(agent)

    def _play(self, turn: Any, *accounting: Any) -> None:
        if self.done:
            raise RuntimeError(f"episode {self.key} is over")
        role = self.to_move
        try:
            self.episode.step(turn, *accounting)
        except Exception as exc:  # noqa: BLE001 - the environment's failure ends this episode only
            self._fail(error_text(exc, f"turn {self.turns + 1} ({role})"))
            return
        self._refresh()

    def _fail(self, error: str) -> None:
        self.error = error
        self._refresh()

    def _refresh(self) -> None:
        if not self.done:
            mover = self.episode.to_move
            try:
                self.chats[mover] = self.kit.render(self.episode.view(mover), mover)
            except Exception as exc:  # noqa: BLE001 - a view that cannot be rendered ends this episode only
                self._fail(error_text(exc, f"turn {self.turns + 1} ({mover}) view"))
            return
        for role in ROLES:
            self.chats[role] = [*self.chats[role], {"role": "user", "content": self.closing(role)}]

    def record(self, **extra: Any) -> dict[str, Any]:
        """The game's JSON-ready record (``extra`` in it); an error episode has status ``error`` and ``error``."""
        rec = self.episode.record(**extra)
        if self.error is not None:
            rec["status"], rec["error"] = "error", self.error
        return rec

    def payoffs(self) -> Payoffs:
        """The game's payoffs of the record (:meth:`negolib.games.base.Game.payoffs`)."""
        return self.kit.game.payoffs(self.record())

    def payoff(self, role: str) -> float:
        p = self.payoffs()
        return float(p.seller if role == "seller" else p.buyer)

    def reward(self, role: str | None = None) -> float:
        """The finished episode's reward of ``role`` (default: the policy's): the game's training reward where it
        defines one for the role (Eq. 1 in the paper's game), else the game's payoff; 0.0 for an error episode."""
        role = role or self.role
        if not self.done:
            raise RuntimeError(f"episode {self.key} is still running")
        if self.error is not None:
            return 0.0
        if role == self.role and role in self.kit.reward_roles:
            return float(self.episode.outcome.reward)
        return self.payoff(role)

    def closing(self, role: str) -> str:
        """The message that ends ``role``'s chat."""
        if self.error is not None:
            return f"The negotiation ended in an error: {self.error}"
        p = self.payoffs()
        value = p.seller if role == "seller" else p.buyer
        shown = "n/a" if not math.isfinite(value) else f"{value:.3f}"
        return (f"The negotiation is over: {'a deal' if p.deal else 'no deal'}. "
                f"Your {self.kit.game.payoff_label}: {shown}.")

    def info(self) -> dict[str, Any]:
        """JSON-ready facts of the episode for an observation's metadata or a step's info."""
        out: dict[str, Any] = {"game": self.kit.name, "domain": self.domain, "seed": self.seed,
                               "scenario_key": self.key, "turn": self.turns, "to_move": self.to_move,
                               "bad_turns": self.bad_turns(self.role)}
        if self.done:
            p = self.payoffs()
            out.update(deal=bool(p.deal), payoff=self.payoff(self.role), error=self.error)
        return out


__all__ = ["KITS", "MAX_DRAWN_SEED", "GameKit", "TextEpisode", "chat_text", "check_role", "game_kit", "other_role",
           "pick_scenario"]
