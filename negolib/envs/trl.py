"""Every game as a TRL ``environment_factory`` (TRL 1.16's ``GRPOTrainer`` and ``AsyncGRPOTrainer``).

Contract: :func:`environment_factory` ``(game, opponent, **options)`` returns a class TRL instantiates with no
arguments (one instance per concurrent rollout, reused across batches). Its ``reset(**row)`` rebuilds the episode of
the row's ``scenario_key`` (rows of :func:`dataset`), lets the opponent open when it moves first and returns the
policy's briefing: its chat's messages joined into one text (TRL appends it to the row's last message, an empty user
turn, so the ``prompt`` column is in chat form) and a note on the tools. The public methods are the game's tools
(:mod:`negolib.envs.trl_games`): each plays the policy's turn through the game's own parser, then the opponent's
turns until the policy is to move again, and returns what the policy sees next (its chat's new user message), or,
once the episode is over, that it is over and how it ended; a call after the end changes nothing. ``get_reward()`` is
the game's training reward of the finished episode (Eq. 1 for the paper's game), the driver's floor ``-lambda`` for
an episode the policy left unfinished (no further call), as :mod:`negolib.training.rollout` scores a cut one, and NaN
(TRL's "no reward") for an episode whose opponent or environment failed.

Written once against the shared episode protocol: the game's training adapter (its episode factory and render, the
ones :class:`negolib.training.grpo.TrainingTask` carries) drives every game; the opponent is the game's agent by name
(:meth:`negolib.games.base.Game.make_agent`: scripted, or a local or API model), built once per instance with the
factory's seed. :func:`dataset` gives scenario rows of a split (train, validation and test use the game's disjoint
seed blocks; test adds held-out strata).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from negolib.agents.base import Agent, act_contained, error_text, reply_problem
from negolib.envs.trl_games import SPLITS, GameBinding, binding
from negolib.games import get_game
from negolib.games.toolcalls import StructuredTurn
from negolib.training.data import ScenarioItem
from negolib.training.rollout import TrainableEpisode, other_role

OVER = "The negotiation is over"
ROW_PROMPT: tuple[dict[str, str], ...] = ({"role": "user", "content": ""},)
"""The ``prompt`` of every dataset row: one empty user turn, which TRL fills with ``reset()``'s briefing."""


def _after_last_assistant(messages: Sequence[Mapping[str, Any]]) -> str:
    """The contents of the messages after the last assistant message (all of them when there is none), joined."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    return "\n\n".join(str(m["content"]) for m in messages[last + 1:])


class NegotiationEnvironment:
    """One policy seat in one game, one episode at a time (see the module docstring). :func:`environment_factory`
    subclasses it with the game's tool mixin and sets the class attributes; TRL calls ``reset``, the tools and
    ``get_reward``. Read-only properties (never tools): :attr:`episode` (the trainable episode), :attr:`record`."""

    game_name: ClassVar[str]
    opponent_name: ClassVar[str]
    role: ClassVar[str]
    seed: ClassVar[int]
    _binding: ClassVar[GameBinding]
    _game: ClassVar[Any]
    _factory: ClassVar[Any]
    _render: ClassVar[Any]
    _opponent_agent: ClassVar[Any] = None  # an opponent handed over as an agent (shared by every instance)

    def __init__(self) -> None:
        self._episode: TrainableEpisode | None = None
        self._opponent: Any = None
        self._error: str | None = None
        self._resets = 0

    # -- TRL's protocol ------------------------------------------------------------------------------------
    def reset(self, **row: Any) -> str:
        """Start the episode of ``row["scenario_key"]`` (a :func:`dataset` row); returns the policy's briefing."""
        game = row.get("game", self.game_name)
        if game != self.game_name:
            raise ValueError(f"a {game!r} row given to the {self.game_name!r} environment")
        key = row.get("scenario_key")
        if not isinstance(key, str):
            raise KeyError("the row needs a 'scenario_key' (rows of negolib.envs.trl.dataset)")
        stratum, _, seed = key.rpartition("|")
        if not stratum or not seed.isdigit():
            raise ValueError(f"not a scenario key of {self.game_name!r}: {key!r}")
        item = ScenarioItem(self._binding.make(stratum, int(seed)), self.opponent_name, key=key)
        self._resets += 1
        self._episode, self._error = self._factory(item, f"{key}|trl{self._resets}"), None
        if self._opponent is None:
            self._opponent = self._opponent_agent or self._game.make_agent(self.opponent_name, other_role(self.role),
                                                                          self.seed)
        self._play_opponent()
        if self._error is not None or self._episode.done:
            return self._observation()
        briefing = _after_last_assistant(self._render(self._episode.view(self.role), "training"))
        return f"{briefing}\n\n{self._binding.note}"

    def get_reward(self) -> float:
        """The game's training reward of the episode (see the module docstring)."""
        ep = self._episode
        if ep is None:
            raise RuntimeError("get_reward before reset")
        if self._error is not None:
            return math.nan
        if ep.outcome is None:
            return float(ep.no_deal_floor)
        return float(ep.outcome.reward)

    # -- read-only state (properties are not tools) ---------------------------------------------------------
    @property
    def episode(self) -> TrainableEpisode | None:
        """The running or finished episode (None before the first reset)."""
        return self._episode

    @property
    def record(self) -> dict[str, Any]:
        """The game's JSON-ready record of the episode (with ``status`` "error" and the error when one failed)."""
        if self._episode is None:
            raise RuntimeError("no episode before reset")
        rec = self._episode.record()
        if self._error is not None:
            rec["status"], rec["error"] = "error", self._error
        return rec

    # -- playing --------------------------------------------------------------------------------------------
    def _structured(self, message: str, calls: list[dict[str, Any]]) -> str:
        return self._move(StructuredTurn(message, calls))

    def _move(self, turn: Any) -> str:
        """Play the policy's ``turn``, then the opponent until the policy moves again; what the policy sees next."""
        ep = self._episode
        if ep is None:
            raise RuntimeError("call reset() before a tool")
        if self._error is not None or ep.done:
            return self._observation()
        if ep.to_move != self.role:  # cannot happen after _play_opponent; a broken game would loop otherwise
            raise RuntimeError(f"the {ep.to_move} is to move, not the policy's {self.role}")
        try:
            ep.step(turn)
        except Exception as exc:  # noqa: BLE001 - the environment failed: the episode ends as an error
            self._error = error_text(exc, f"turn {len(ep.turns) + 1} ({self.role})")
        self._play_opponent()
        return self._observation()

    def _play_opponent(self) -> None:
        ep = self._episode
        opponent = other_role(self.role)
        while ep is not None and self._error is None and not ep.done and ep.to_move == opponent:
            where = f"turn {len(ep.turns) + 1} ({opponent})"
            try:
                (reply,) = act_contained(self._opponent, [ep.view(opponent)])
                problem = reply_problem(reply)
                if problem is not None:
                    self._error = f"{where}: {problem}"
                    return
                ep.step(ep.opponent_turn(reply), reply.input_tokens, reply.output_tokens, reply.latency_s)
            except Exception as exc:  # noqa: BLE001 - view, parser or environment: the episode ends as an error
                self._error = error_text(exc, where)

    def _observation(self) -> str:
        ep = self._episode
        assert ep is not None
        if self._error is not None:
            return f"{OVER}: it failed ({self._error}); no reward is given."
        if not ep.done:
            return _after_last_assistant(self._render(ep.view(self.role), "training"))
        out = ep.outcome
        assert out is not None
        return f"{OVER}: {'a deal' if out.deal else 'no deal'} after {out.turns} turns. Your reward: {out.reward:.4f}."


def environment_factory(game: str, opponent: str | Agent, *, role: str = "seller", seed: int = 0,
                        **options: Any) -> type[NegotiationEnvironment]:
    """A class for TRL's ``environment_factory``: the policy plays ``role`` of ``game`` against the agent named
    ``opponent`` (the game's, seeded with ``seed``, built once per instance; or an agent object, shared by every
    instance); ``options`` are fields of the game's environment and reward configs (the paper's game:
    :class:`~negolib.games.multi_issue.env.EnvConfig`, defaults its training environment). Raises ``KeyError`` for an
    unknown game, ``ValueError`` for a role the game does not train or an unknown opponent and ``TypeError`` for an
    unknown option, here rather than inside TRL."""
    bound = binding(game)
    if role not in bound.roles:
        raise ValueError(f"{game}: the policy plays {' or '.join(bound.roles)}, not {role!r}")
    factory, render = bound.episodes(role, options)
    the_game = get_game(game)
    agent = None if isinstance(opponent, str) else opponent
    if agent is None:
        the_game.make_agent(opponent, other_role(role), seed)  # fail now on an unknown opponent
    opponent_name = str(opponent) if agent is None else str(getattr(agent, "name", type(agent).__name__))
    name = "".join(part.title() for part in game.split("_")) + "Environment"
    attrs = {"game_name": game, "opponent_name": opponent_name, "role": role, "seed": int(seed), "_binding": bound,
             "_game": the_game, "_factory": staticmethod(factory), "_render": staticmethod(render),
             "_opponent_agent": agent,
             "__module__": __name__, "__doc__": f"{bound.tools.__doc__}\n\nAgainst {opponent!r} as the {role}."}
    return type(name, (bound.tools, NegotiationEnvironment), attrs)


def scenario_keys(game: str, n: int, split: str = "train", strata: Sequence[str] | None = None) -> list[str]:
    """The first ``n`` scenario keys of ``split``: seed-major over the split's strata (every stratum once per seed;
    ``strata``: only these of them)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    bound = binding(game)
    known = bound.strata(split)
    if strata is not None and (not strata or set(strata) - set(known)):
        raise ValueError(f"strata {list(strata)} are not among the {split} split's {list(known)}")
    strata = tuple(strata) if strata is not None else known
    seeds = bound.seeds(split, -(-n // len(strata)))
    return [f"{stratum}|{seed}" for seed in seeds for stratum in strata][:n]


def dataset(game: str, n: int, split: str = "train", strata: Sequence[str] | None = None) -> Any:
    """``n`` scenario rows of ``game``'s ``split`` (of ``strata`` only, when given) as a ``datasets.Dataset``:
    ``prompt`` (:data:`ROW_PROMPT`, chat form), ``game``, ``scenario_key`` and ``split``. Train, validation and test
    draw from disjoint seed blocks."""
    from datasets import Dataset

    return Dataset.from_list([{"prompt": [dict(m) for m in ROW_PROMPT], "game": game, "scenario_key": key,
                               "split": split} for key in scenario_keys(game, n, split, strata)])


def tool_schemas(environment: type) -> list[dict[str, Any]]:
    """The JSON schemas TRL renders for ``environment``'s tools (``transformers.utils.get_json_schema`` of each
    public method but ``reset`` and ``get_reward``, in TRL's order)."""
    import inspect

    from transformers.utils import get_json_schema

    return [get_json_schema(fn) for name, fn in inspect.getmembers(environment, predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")]


__all__ = ["OVER", "ROW_PROMPT", "NegotiationEnvironment", "dataset", "environment_factory", "scenario_keys",
           "tool_schemas"]
