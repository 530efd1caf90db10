"""Language-model and API parties for bilateral price bargaining: binding offers are tool calls on every backend.

Contract: each agent answers a batch of :class:`~.env.BargainView` with one ``AgentReply`` each and never raises for
one episode. :class:`HFBargainer` is the shared local tool-calling agent (:class:`negolib.games.toolagents.HFToolAgent`)
prompted with :func:`.prompts.chat_messages` and the game's tools; its text goes to :func:`.protocol.parse_turn`.
:class:`OpenAIBargainer` / :class:`AnthropicBargainer` are the shared API agents with the providers' native tool
calling; their calls go into ``extra["tool_calls"]`` and a failed request is that episode's error reply.
:class:`BargainerAgents` builds ``hf:<path>``, ``openai:<model>`` and ``anthropic:<model>`` bargainers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from negolib.agents.anthropic_agent import AnthropicAgent
from negolib.agents.api_agent import Completion
from negolib.agents.base import AgentReply
from negolib.agents.openai_agent import OpenAIAgent
from negolib.games.bilateral.env import INVALID_ACCEPT_ERROR, BargainView
from negolib.games.bilateral.play import reply_turn
from negolib.games.bilateral.prompts import chat_messages
from negolib.games.bilateral.protocol import parse_turn
from negolib.games.bilateral.tools import ACCEPT_OFFER, anthropic_tools, openai_tools
from negolib.games.toolagents import (
    Chat,
    HFToolAgent,
    LMAgents,
    ToolChat,
    ToolWave,
    TurnStats,
    anthropic_tool_request,
    openai_tool_request,
)


# -- bad-parse accounting ---------------------------------------------------------------------------------------
@dataclass
class ToolCallStats(TurnStats):
    """How a bargainer's turns parsed, counted as the episode counts them (an accept with no standing offer is a
    bad parse): ``calls`` (valid), ``prose_only``, ``invalid_accepts``, ``double_calls``."""

    calls: int = 0
    prose_only: int = 0
    invalid_accepts: int = 0
    double_calls: int = 0

    def count(self, view: BargainView, reply: AgentReply) -> str | None:
        parsed = parse_turn(reply_turn(reply))
        self.double_calls += parsed.n_calls > 1
        error = parsed.error
        if parsed.action is not None and parsed.action.tool == ACCEPT_OFFER and view.their_offer is None:
            self.invalid_accepts += 1
            error = INVALID_ACCEPT_ERROR
        if error is None and parsed.action is None:
            self.prose_only += 1
        elif error is None:
            self.calls += 1
        return error


# -- local models -----------------------------------------------------------------------------------------------
class HFBargainer(HFToolAgent):
    """A local transformers model as a bargainer (see the module docstring); ``tool_format`` as for
    :class:`~negolib.games.toolagents.HFToolAgent`."""

    game = "bilateral"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, tools=openai_tools(), stats=ToolCallStats(), **kw)

    def messages(self, view: BargainView, drop: int = 0) -> Chat:
        """The chat of ``view`` in this agent's tool format."""
        return chat_messages(view, self.tool_format, drop)


# -- API agents -------------------------------------------------------------------------------------------------
class _ToolCalling(ToolWave):
    """The bargaining side of an API agent: renders views as tool chats and hands the calls over."""

    tool_stats: ToolCallStats

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.tool_stats = ToolCallStats()

    def tool_chat(self, view: BargainView) -> ToolChat:
        return ToolChat(chat_messages(view, "native"))

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "game": "bilateral", "tools": "native"}  # type: ignore[misc]


class OpenAIBargainer(_ToolCalling, OpenAIAgent):
    """A bargainer behind any OpenAI-compatible chat-completions endpoint, with ``tools=`` (function tools)."""

    async def request(self, client: Any, messages: Any, params: dict[str, Any]) -> Completion:
        return await openai_tool_request(self, client, messages, params, openai_tools())


class AnthropicBargainer(_ToolCalling, AnthropicAgent):
    """A bargainer behind the Anthropic Messages API, with ``tools=`` (``tool_use`` blocks)."""

    async def request(self, client: Any, messages: Any, params: dict[str, Any]) -> Completion:
        return await anthropic_tool_request(self, client, messages, params, anthropic_tools())


# -- agents by name ---------------------------------------------------------------------------------------------
class BargainerAgents(LMAgents):
    """Builds ``hf:<path>``, ``openai:<model>`` and ``anthropic:<model>`` bargainers named ``<name>@<role>`` (either
    role); local weights are loaded once per path."""

    hf_cls = HFBargainer
    openai_cls = OpenAIBargainer
    anthropic_cls = AnthropicBargainer


__all__ = ["AnthropicBargainer", "BargainerAgents", "HFBargainer", "OpenAIBargainer", "ToolCallStats"]
