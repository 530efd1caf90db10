"""Any registered game behind OpenEnv's server API (``python -m negolib serve --game G --host 127.0.0.1 --port P``).

Contract: :class:`NegotiationEnvironment` is an OpenEnv ``Environment`` over the text-episode core
(:mod:`negolib.envs.core`): ``reset(seed=, domain=, opponent=, role=, options=)`` starts scenario ``(domain, seed)``
(none: drawn; the seed names the scenario as the game's scenario sets do) with the game's environment config
``options`` against the built-in agent ``opponent`` (any name the game's ``make_agent`` builds for the other role;
default: a scripted one), the policy playing ``role`` (default ``seller``); ``step`` takes a
:class:`NegotiationAction`, whose one required field ``message`` is the policy's raw message, parsed by the game's own
strict parser (an unreadable or hostile text is a bad turn: the game goes on, ``bad_turns`` counts it), then lets the
opponent play until the policy is to move again. A :class:`NegotiationObservation` carries the policy's chat (as
``messages`` and as one ``text``), the turn, the bad turns and, on the final observation, ``done``, the ``reward``
(the game's training reward of the role where it defines one, Eq. 1 in the paper's game; else its payoff), the
``payoff`` and ``deal``. ``state`` is a :class:`NegotiationState` (the scenario, and the game's record once over).

:func:`make_app` builds OpenEnv's FastAPI app (``/reset``, ``/step``, ``/state``, ``/schema``, ``/metadata``,
``/health``, ``/mcp``, and the ``/ws`` WebSocket session) with ``max_concurrent_envs`` sessions, each with its own
environment (the environment declares concurrent sessions: nothing is shared between instances). OpenEnv's HTTP
``/reset`` and ``/step`` build a fresh environment per request, so a multi-step episode runs over the WebSocket
session (OpenEnv's ``EnvClient`` / ``GenericEnvClient`` use it). :func:`serve` runs the app with uvicorn on
loopback by default.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field

from negolib.envs.core import TextEpisode, check_role, game_kit, other_role, pick_scenario
from negolib.envs.gymnasium import DEFAULT_OPPONENTS, MAX_ACTION_CHARS
from negolib.games import get_game

DEFAULT_MAX_SESSIONS = 64


class NegotiationAction(Action):
    """The policy's turn: its raw message, as a language model wrote it."""

    message: str = Field(..., max_length=MAX_ACTION_CHARS,
                         description="the policy's raw message, parsed by the game's own strict parser")


class NegotiationObservation(Observation):
    """What the policy sees before its turn (or at the end); ``reward`` and ``done`` are OpenEnv's."""

    text: str = Field(default="", description="the policy's chat as one text")
    messages: list[dict[str, str]] = Field(default_factory=list, description="the policy's chat messages")
    role: str = Field(default="seller", description="the policy's role")
    turn: int = Field(default=0, description="turns played so far (both parties)")
    bad_turns: int = Field(default=0, description="the policy's turns the game could not read or refused")
    scenario_key: str = Field(default="", description="the scenario played")
    deal: bool | None = Field(default=None, description="whether there was a deal (final observation)")
    payoff: float | None = Field(default=None, description="the game's payoff of the role (final observation)")
    error: str | None = Field(default=None, description="why the episode ended in an error, or why a call failed")


class NegotiationState(State):
    """The session's episode: game, scenario, roles, and the game's record once it is over."""

    game: str = ""
    role: str = "seller"
    opponent: str = ""
    domain: str | None = None
    seed: int | None = None
    scenario_key: str | None = None
    done: bool = False
    record: dict[str, Any] | None = None


class NegotiationEnvironment(Environment[NegotiationAction, NegotiationObservation, NegotiationState]):
    """One session's game (see the module docstring). ``options``: the game's environment config fields."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, game: str = "multi_issue", role: str = "seller", opponent: str | None = None,
                 **options: Any) -> None:
        super().__init__()
        self.game, self.options = game, dict(options)
        self.kit = game_kit(game, **options)
        self.role = check_role(role)
        self.opponent = opponent
        self.episode: TextEpisode | None = None
        self.episode_id: str | None = None
        self._agent: Any = None
        self._opponent_name = ""

    def reset(self, seed: int | None = None, episode_id: str | None = None, domain: str | None = None,
              opponent: str | None = None, role: str | None = None, options: dict[str, Any] | None = None,
              **kwargs: Any) -> NegotiationObservation:
        if kwargs:
            raise ValueError(f"unknown reset fields {sorted(kwargs)}; known: seed, episode_id, domain, opponent, "
                             "role, options")
        if options is not None and dict(options) != self.options:
            self.kit, self.options = game_kit(self.game, **options), dict(options)
        self.role = check_role(role or self.role)
        name = opponent or self.opponent or DEFAULT_OPPONENTS[self.game][other_role(self.role)]
        domain, scenario_seed = pick_scenario(self.kit, seed, domain, np.random.default_rng(seed))
        self._agent = self.kit.game.make_agent(name, other_role(self.role), scenario_seed)
        self._opponent_name = name
        self.episode = TextEpisode(self.kit, domain, scenario_seed, self.role)
        self.episode_id = episode_id or self.episode.key
        self.episode.advance(self._agent, self.role)
        return self._observation()

    def step(self, action: NegotiationAction, timeout_s: float | None = None,
             **kwargs: Any) -> NegotiationObservation:
        ep = self.episode
        if ep is None:
            raise RuntimeError("no episode: reset first (a multi-step episode runs over the WebSocket session)")
        if ep.done:
            return self._observation("the episode is over: reset to play another")
        ep.step(action.message)
        ep.advance(self._agent, self.role)
        return self._observation()

    def _observation(self, error: str | None = None) -> NegotiationObservation:
        ep = self.episode
        assert ep is not None
        info = ep.info()
        return NegotiationObservation(
            done=ep.done, reward=ep.reward() if ep.done else None, text=ep.text(self.role),
            messages=[{"role": str(m["role"]), "content": str(m.get("content") or "")} for m in ep.chats[self.role]],
            role=self.role, turn=ep.turns, bad_turns=info["bad_turns"], scenario_key=ep.key,
            deal=info.get("deal"), payoff=info.get("payoff"), error=error or ep.error)

    @property
    def state(self) -> NegotiationState:
        ep = self.episode
        if ep is None:
            return NegotiationState(game=self.game, role=self.role)
        return NegotiationState(episode_id=self.episode_id, step_count=ep.turns, game=self.game, role=self.role,
                                opponent=self._opponent_name, domain=ep.domain, seed=ep.seed, scenario_key=ep.key,
                                done=ep.done, record=ep.record() if ep.done else None)

    def get_metadata(self) -> EnvironmentMetadata:
        game = get_game(self.game)
        return EnvironmentMetadata(name=f"negobook-{self.game}", description=game.summary or game.title,
                                   version="0.1.0", author="negobook")


def make_app(game: str = "multi_issue", max_sessions: int = DEFAULT_MAX_SESSIONS, opponent: str | None = None,
             **options: Any) -> Any:
    """OpenEnv's FastAPI app serving ``game`` (see the module docstring)."""
    game_kit(game, **options)  # unknown games and options fail here, not in a session
    factory = functools.partial(NegotiationEnvironment, game, "seller", opponent, **options)
    return create_app(factory, NegotiationAction, NegotiationObservation, env_name=f"negobook-{game}",
                      max_concurrent_envs=max_sessions)


def serve(game: str, host: str = "127.0.0.1", port: int = 8000, max_sessions: int = DEFAULT_MAX_SESSIONS,
          opponent: str | None = None, log_level: str = "warning") -> None:
    """Serve ``game`` with uvicorn until interrupted."""
    import uvicorn

    uvicorn.run(make_app(game, max_sessions, opponent), host=host, port=port, log_level=log_level)


__all__ = ["DEFAULT_MAX_SESSIONS", "NegotiationAction", "NegotiationEnvironment", "NegotiationObservation",
           "NegotiationState", "make_app", "serve"]
