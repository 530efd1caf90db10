"""Any registered game as a single-agent ``gymnasium.Env``: the policy plays one role from text, a built-in agent
of the game the other.

Contract: :func:`env` returns a :class:`NegotiationEnv` (``role`` the policy's, ``opponent`` any agent name the
game's :meth:`~negolib.games.base.Game.make_agent` builds for the other role, ``options`` the game's environment
config fields). An observation is the policy's chat rendered as one text (:func:`negolib.envs.core.chat_text`);
an action is the policy's raw message, parsed by the game's own strict parser (an unreadable one is a bad turn and
the game goes on). The opponent plays between the policy's turns. The reward is 0 until the last step, whose reward
is the game's training reward of the role where it defines one (Eq. 1 in the paper's game) and its payoff
otherwise; ``info`` carries the scenario, the turn, the policy's bad turns and, at the end, the deal and payoff.
``reset(seed=s, options={"domain": d, "opponent": o})`` plays scenario ``(d, s)`` (the seed names the scenario as
the game's scenario sets do; none: one is drawn from the environment's generator; no domain: the seed picks one).

Spaces: :class:`AnyText` is a ``gymnasium.spaces.Text`` that contains every string of an allowed length (games
write any Unicode; sampling draws printable ASCII); an observation is a :class:`TextObservation`, a ``str`` that
also states its dtype, because PettingZoo's ``api_test`` compares an observation's dtype with its space's and a
plain ``str`` has none. ``import negolib.envs`` registers ``negobook/<Game>-v0`` (:data:`negolib.envs.GYM_IDS`, e.g.
``negobook/MultiIssue-v0``) for ``gymnasium.make``; ``gymnasium.make("negolib.envs:negobook/Bilateral-v0")`` imports
it first.
"""

from __future__ import annotations

import string
from typing import Any

import gymnasium
import numpy as np

from negolib.envs import GYM_IDS
from negolib.envs.core import TextEpisode, check_role, game_kit, other_role, pick_scenario

MAX_OBSERVATION_CHARS = 1_000_000
MAX_ACTION_CHARS = 16_000
DEFAULT_OPPONENTS: dict[str, dict[str, str]] = {
    "multi_issue": {"seller": "linear", "buyer": "boulware"},
    "bilateral": {"seller": "linear", "buyer": "boulware"},
    "multi_buyer": {"seller": "probe_all", "buyer": "pool"},
    "multi_product": {"seller": "greedy", "buyer": "pool"},
}
"""Game name -> role -> the scripted agent that plays that role by default."""


class TextObservation(str):
    """A text observation that states its dtype, ``np.dtype(str)`` as a Text space's (see the module docstring)."""

    __slots__ = ()
    dtype = np.dtype(str)


class AnyText(gymnasium.spaces.Text):
    """A Text space of any characters (see the module docstring)."""

    def __init__(self, max_length: int, min_length: int = 0, seed: int | None = None) -> None:
        super().__init__(max_length, min_length=min_length, charset=string.printable, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length})"


def observation_space() -> AnyText:
    return AnyText(MAX_OBSERVATION_CHARS)


def action_space() -> AnyText:
    return AnyText(MAX_ACTION_CHARS)


def default_opponent(game: str, role: str) -> str:
    """The scripted agent that plays ``role`` of ``game`` when none is named."""
    return DEFAULT_OPPONENTS[game][role]


class NegotiationEnv(gymnasium.Env):
    """One game from the policy's side (see the module docstring)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, game: str = "multi_issue", role: str = "seller", opponent: str | None = None,
                 **options: Any) -> None:
        self.kit = game_kit(game, **options)
        self.role = check_role(role)
        self.opponent = opponent or default_opponent(game, other_role(role))
        self.kit.game.make_agent(self.opponent, other_role(role), 0)  # an unknown name fails here, not at reset
        self.observation_space = observation_space()
        self.action_space = action_space()
        self.episode: TextEpisode | None = None

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[TextObservation, dict[str, Any]]:
        super().reset(seed=seed)
        opts = dict(options or {})
        opponent = opts.pop("opponent", self.opponent)
        domain = opts.pop("domain", None)
        if opts:
            raise ValueError(f"unknown reset options {sorted(opts)}; known: domain, opponent")
        domain, scenario_seed = pick_scenario(self.kit, seed, domain, self.np_random)
        self.episode = TextEpisode(self.kit, domain, scenario_seed, self.role)
        self._agent = self.kit.game.make_agent(opponent, other_role(self.role), scenario_seed)
        self.episode.advance(self._agent, self.role)
        return TextObservation(self.episode.text(self.role)), self.episode.info()

    def step(self, action: str) -> tuple[TextObservation, float, bool, bool, dict[str, Any]]:
        ep = self.episode
        if ep is None:
            raise RuntimeError("call reset() before step()")
        if ep.done:
            raise RuntimeError("the episode is over: call reset()")
        ep.step(action)
        ep.advance(self._agent, self.role)
        reward = ep.reward() if ep.done else 0.0
        return TextObservation(ep.text(self.role)), float(reward), ep.done, False, ep.info()

    def record(self, **extra: Any) -> dict[str, Any]:
        """The game's record of the current episode."""
        if self.episode is None:
            raise RuntimeError("call reset() first")
        return self.episode.record(**extra)


def env(game: str, role: str = "seller", opponent: str | None = None, **options: Any) -> NegotiationEnv:
    """The Gymnasium environment of ``game`` (see the module docstring)."""
    return NegotiationEnv(game, role, opponent, **options)


__all__ = ["DEFAULT_OPPONENTS", "GYM_IDS", "AnyText", "NegotiationEnv", "TextObservation", "action_space",
           "default_opponent", "env", "observation_space"]
