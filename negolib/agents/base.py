"""The one agent protocol: a batch of party views in, one reply per view out.

The rollout engine gathers every live episode's pending turn for an agent into one call of
:meth:`Agent.act_batch`, so local models batch generation and API agents run the batch as one
concurrent wave. An agent never raises for a single failing episode: it returns a reply with
``error`` set, and the engine writes that episode as an error row that a re-run completes
(:func:`act_contained` asks an agent so that nothing it does raises; :func:`reply_problem` says why a reply
cannot be played).
A view is the game's (the paper's :class:`negolib.games.multi_issue.env.PartyView`, a market's view);
language-model agents turn one into chat messages with the game's :data:`Render` (the paper's:
:func:`negolib.games.multi_issue.prompts.render_messages`), so this layer imports no game.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_ERROR_CHARS = 500
"""An error text (a reply's, an episode's) is cut to this many characters: a message can hold a whole hostile turn."""

View = Any
"""A party's view of an episode, as its game defines it (language-model agents read ``episode_id``, ``turn``
and ``history`` of it to cap prompts)."""
Message = dict[str, str]
Render = Callable[[Any, str], list[Message]]
"""``(view, scaffold) -> chat messages``: how a game puts a view to a language model."""


@dataclass
class AgentReply:
    """One turn's raw text plus accounting. ``extra`` carries backend data (e.g. token ids)."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Agent(ABC):
    """A negotiating party. Subclasses implement :meth:`act_batch`."""

    name: str = "agent"
    backend: str = "base"
    keeps_caches: bool = False  # True: holds memory between calls that :meth:`release_caches` frees

    @abstractmethod
    def act_batch(self, views: Sequence[View]) -> list[AgentReply]:
        """Return one reply per view, in order."""

    def act(self, view: View) -> AgentReply:
        """One turn (a batch of one)."""
        return self.act_batch([view])[0]

    def settings(self) -> dict[str, Any]:
        """The settings this agent actually uses (sampling, strategy), recorded per arm."""
        return {"backend": self.backend, "name": self.name}

    def release_caches(self) -> None:
        """Free what the agent keeps between calls (a local model's prefix cache); a later call recomputes what
        it needs. The default keeps nothing."""
        return None


def require_render(agent: Any) -> Render:
    """``agent.renderer`` (what its ``render=`` argument set), or a ``ValueError`` saying what to pass: a
    language-model agent puts views to its model through its game's prompts and imports none itself."""
    if getattr(agent, "renderer", None) is None:
        raise ValueError(f"{type(agent).__name__} {agent.name!r} has no render: pass render=, the game's "
                         "(view, scaffold) -> chat messages (the paper's game: "
                         "negolib.games.multi_issue.prompts.render_messages)")
    return agent.renderer


def error_text(exc: BaseException, where: str = "") -> str:
    """``"<where>: <Type>: <message>"`` cut to :data:`MAX_ERROR_CHARS` (a message can hold a whole
    hostile turn)."""
    text = f"{where}: " if where else ""
    text += f"{type(exc).__name__}: {exc}"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def act_contained(agent: Agent, views: Sequence[View]) -> list[AgentReply]:
    """``agent.act_batch(views)`` that never raises: if the call raises or answers the wrong number
    of replies, each view is asked alone, and a view that still fails gets an error reply."""
    try:
        replies = agent.act_batch(views)
        if len(replies) == len(views):
            return list(replies)
        problem = f"agent {agent.name!r} returned {len(replies)} replies for {len(views)} views"
    except Exception as exc:  # noqa: BLE001 - contained to the episodes of this call
        problem = error_text(exc, f"agent {agent.name!r}")
    if len(views) == 1:
        return [AgentReply("", error=problem)]
    return [act_contained(agent, [v])[0] for v in views]


def reply_problem(rep: Any) -> str | None:
    """Why an agent's reply cannot be played (None when it can): its error, or a field of the wrong
    type that would make an unreadable transcript record (text not a string, token counts not
    non-negative ints, a latency that is not a finite number)."""
    if not isinstance(rep, AgentReply):
        return f"agent returned {type(rep).__name__}, not an AgentReply"
    if rep.error is not None:
        return str(rep.error)
    if type(rep.text) is not str:
        return f"agent reply text must be a string, got {type(rep.text).__name__}"
    for name in ("input_tokens", "output_tokens"):
        v = getattr(rep, name)
        if type(v) is not int or v < 0:
            return f"agent reply {name} must be a non-negative int, got {v!r}"[:MAX_ERROR_CHARS]
    lat = rep.latency_s
    if type(lat) not in (int, float) or not math.isfinite(lat):
        return f"agent reply latency_s must be a finite number, got {lat!r}"[:MAX_ERROR_CHARS]
    return None
