"""The one agent protocol: a batch of party views in, one reply per view out.

The rollout engine gathers every live episode's pending turn for an agent into one call of
:meth:`Agent.act_batch`, so local models batch generation and API agents run the batch as one
concurrent wave. An agent never raises for a single failing episode: it returns a reply with
``error`` set, and the engine writes that episode as an error row that a re-run completes.
A view is the game's (the paper's :class:`negolib.env.PartyView`, a market's view); language-model agents
turn one into chat messages with the game's :data:`Render` (the paper's: :func:`negolib.prompts.render_messages`),
so this layer imports no game.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

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

    @abstractmethod
    def act_batch(self, views: Sequence[View]) -> list[AgentReply]:
        """Return one reply per view, in order."""

    def act(self, view: View) -> AgentReply:
        """One turn (a batch of one)."""
        return self.act_batch([view])[0]

    def settings(self) -> dict[str, Any]:
        """The settings this agent actually uses (sampling, strategy), recorded per arm."""
        return {"backend": self.backend, "name": self.name}


def require_render(agent: Any) -> Render:
    """``agent.renderer`` (what its ``render=`` argument set), or a ``ValueError`` saying what to pass: a
    language-model agent puts views to its model through its game's prompts and imports none itself."""
    if getattr(agent, "renderer", None) is None:
        raise ValueError(f"{type(agent).__name__} {agent.name!r} has no render: pass render=, the game's "
                         "(view, scaffold) -> chat messages (the paper's game: negolib.prompts.render_messages)")
    return agent.renderer
