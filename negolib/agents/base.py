"""The one agent protocol: a batch of party views in, one reply per view out.

The rollout engine gathers every live episode's pending turn for an agent into one call of
:meth:`Agent.act_batch`, so local models batch generation and API agents run the batch as one
concurrent wave. An agent never raises for a single failing episode: it returns a reply with
``error`` set, and the engine writes that episode as an error row that a re-run completes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from negolib.env import PartyView


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
    def act_batch(self, views: Sequence[PartyView]) -> list[AgentReply]:
        """Return one reply per view, in order."""

    def act(self, view: PartyView) -> AgentReply:
        """One turn (a batch of one)."""
        return self.act_batch([view])[0]

    def settings(self) -> dict[str, Any]:
        """The settings this agent actually uses (sampling, strategy), recorded per arm."""
        return {"backend": self.backend, "name": self.name}
