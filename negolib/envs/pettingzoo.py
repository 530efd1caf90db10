"""Any registered game as a PettingZoo AEC environment: the seller and the buyer are the agents, both play from text.

Contract: :func:`env` returns a :class:`NegotiationAEC` (``options`` the game's environment config fields). The
agents are the roles, ``"seller"`` and ``"buyer"`` (in the markets the buyer agent answers for whichever buyer the
seller addressed, as the games' buyer agents do); ``agent_selection`` is the party to move. An observation is the
agent's chat rendered as one text (its last one while the other moves; empty before its first turn; the end of the
game closes it), a :class:`~negolib.envs.gymnasium.TextObservation` in an
:class:`~negolib.envs.gymnasium.AnyText` space; an action is the agent's raw message, parsed by the game's own strict
parser (an unreadable one is a bad turn). Rewards are 0 until the game ends, then each agent's payoff from
:meth:`negolib.games.base.Game.payoffs`; both agents terminate together; nothing truncates (the games have
deadlines). ``reset(seed=s, options={"domain": d})`` plays scenario ``(d, s)`` as in :mod:`negolib.envs.gymnasium`.

In process, :meth:`NegotiationAEC.view` hands an agent the game's own view, so the project's agents play through the
AEC loop unchanged, and :meth:`NegotiationAEC.record` gives the game's record of the episode.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pettingzoo import AECEnv

from negolib.envs.core import TextEpisode, game_kit, pick_scenario
from negolib.envs.gymnasium import AnyText, TextObservation, action_space, observation_space
from negolib.games.base import ROLES


class NegotiationAEC(AECEnv):
    """One game, both parties as agents (see the module docstring)."""

    metadata: dict[str, Any] = {"render_modes": [], "name": "negobook_v0", "is_parallelizable": False}

    def __init__(self, game: str = "multi_issue", **options: Any) -> None:
        super().__init__()
        self.kit = game_kit(game, **options)
        self.metadata = {**self.metadata, "name": f"negobook_{game}_v0"}
        self.possible_agents = list(ROLES)
        self._observation_spaces = {a: observation_space() for a in ROLES}
        self._action_spaces = {a: action_space() for a in ROLES}
        self._rng = np.random.default_rng()
        self.episode: TextEpisode | None = None

    def observation_space(self, agent: str) -> AnyText:
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> AnyText:
        return self._action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        opts = dict(options or {})
        domain = opts.pop("domain", None)
        domain, scenario_seed = pick_scenario(self.kit, seed, domain, self._rng)
        self.episode = TextEpisode(self.kit, domain, scenario_seed, "seller", opts.pop("episode_id", None))
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self.agent_selection = self.episode.to_move or self.agents[0]
        self._update()

    def observe(self, agent: str) -> TextObservation:
        if self.episode is None:
            raise RuntimeError("call reset() first")
        return TextObservation(self.episode.text(agent))

    def step(self, action: str | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        assert self.episode is not None
        self._cumulative_rewards[agent] = 0.0
        self.episode.step(action)  # type: ignore[arg-type] - a live agent's action is a text
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._update()
        if self.episode.done:
            self.agent_selection = agent
        else:
            self.agent_selection = self.episode.to_move  # type: ignore[assignment]
        self._accumulate_rewards()

    def _update(self) -> None:
        ep = self.episode
        assert ep is not None
        for a in self.agents:
            self.infos[a] = {"turn": ep.turns, "bad_turns": ep.bad_turns(a)}
        if ep.done:
            for a in self.agents:
                self.rewards[a] = ep.payoff(a) if ep.error is None else 0.0
                self.terminations[a] = True
                self.infos[a]["error"] = ep.error

    def view(self, agent: str) -> Any:
        """The game's view of ``agent``, the party to move (for in-process agents)."""
        if self.episode is None:
            raise RuntimeError("call reset() first")
        return self.episode.view(agent)

    def record(self, **extra: Any) -> dict[str, Any]:
        """The game's record of the current episode."""
        if self.episode is None:
            raise RuntimeError("call reset() first")
        return self.episode.record(**extra)

    def render(self) -> None:
        return None

    def close(self) -> None:
        return None


def env(game: str, **options: Any) -> NegotiationAEC:
    """The PettingZoo AEC environment of ``game`` (see the module docstring)."""
    return NegotiationAEC(game, **options)


__all__ = ["NegotiationAEC", "env"]
