"""Language-model and API sellers of the markets (this one and the multi-product market), on the shared tool agents.

Contract: a :class:`Speech` says how a market's seller speaks (its chat, its tools or None for a text protocol, its
turn accounting). :class:`HFSeller` is the shared local tool-calling agent (batched seeded sampling, a prompt cap
dropping the oldest own turns, tools through the chat template or as ``<tool_call>`` text) speaking a market;
:class:`OpenAISeller` / :class:`AnthropicSeller` are the shared API agents with native tool calls (in
``extra["tool_calls"]``) or plain text, a failed request that episode's error reply. :class:`SellerAgents` builds
``hf:<path>``, ``openai:<model>`` and ``anthropic:<model>`` sellers; :data:`SPEECH` is ``message_buyer``'s speech.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from negolib.agents.anthropic_agent import AnthropicAgent
from negolib.agents.api_agent import Completion
from negolib.agents.base import AgentReply
from negolib.agents.openai_agent import OpenAIAgent
from negolib.core.sampling import SamplingConfig
from negolib.games.multi_buyer.env import SellerView, already_bought_error
from negolib.games.multi_buyer.prompts import chat_messages
from negolib.games.multi_buyer.protocol import NO_CALL_ERROR, SellerAction, parse_seller_turn
from negolib.games.multi_buyer.tools import anthropic_tools, seller_tools
from negolib.games.toolagents import (
    LM_FORMS,
    Chat,
    HFToolAgent,
    LMAgents,
    LMOptions,
    ToolChat,
    ToolWave,
    TurnStats,
    anthropic_tool_request,
    openai_tool_request,
    split_name,
)
from negolib.games.toolcalls import reply_turn


@dataclass(frozen=True)
class Speech:
    """How a market's seller speaks: ``chat(view, tool_format, drop)`` its conversation, ``tools(view)`` the
    OpenAI-style schemas of the view's market (None: a text protocol, text on every backend), ``stats()`` a fresh
    :class:`TurnStats`; ``game`` and ``protocol`` name them in the agents' settings."""

    game: str
    protocol: str
    chat: Callable[[Any, Any, int], Chat]
    stats: Callable[[], TurnStats]
    tools: Callable[[Any], list[dict[str, Any]]] | None = None


@dataclass
class SellerTurnStats(TurnStats):
    """How a ``message_buyer`` seller's turns parsed (a call to a buyer who has bought is a bad parse)."""

    calls: int = 0
    no_calls: int = 0
    double_calls: int = 0
    invalid_addresses: int = 0

    def count(self, view: SellerView, reply: AgentReply) -> str | None:
        parsed = parse_seller_turn(reply_turn(reply), view.n_buyers)
        error, action = parsed.error, parsed.action
        self.double_calls += parsed.n_calls > 1
        self.no_calls += error == NO_CALL_ERROR
        if isinstance(action, SellerAction) and view.bought[action.to]:
            self.invalid_addresses += 1
            error = already_bought_error(action.to)
        self.calls += error is None
        return error


SPEECH = Speech("multi_buyer", "message_buyer tool calls", chat_messages, SellerTurnStats,
                lambda view: seller_tools(view.n_buyers))
"""The multi-buyer seller: ``message_buyer(to, offer?)``, natively or as ``<tool_call>`` text."""


# -- local models -----------------------------------------------------------------------------------------------
class _Own(NamedTuple):
    role: str


class _OwnTurns(NamedTuple):
    """A market view as :meth:`HFToolAgent.prompt_ids` reads one (its id, turn, role and one entry per own past
    turn), so the shared prompt cap (the oldest own turns dropped first, with its warnings) serves the markets."""

    view: Any
    episode_id: str
    turn: int
    role: str
    history: tuple[_Own, ...]

    @classmethod
    def of(cls, view: Any) -> _OwnTurns:
        return cls(view, view.episode_id, view.turn, "seller", (_Own("seller"),) * (view.turn - 1))


class HFSeller(HFToolAgent):
    """A local transformers model as a market seller (see the module docstring). ``tool_format`` as for
    :class:`~negolib.games.toolagents.HFToolAgent` (``"auto"``, ``"native"``, ``"text"``); a text protocol is
    always ``"text"``."""

    def __init__(self, model: Any, tokenizer: Any, sampling: SamplingConfig | None = None, *, speech: Speech,
                 tool_format: Literal["auto", "native", "text"] = "auto", **kw: Any) -> None:
        super().__init__(model, tokenizer, sampling, tool_format=tool_format if speech.tools else "text",
                         stats=speech.stats(), **kw)
        self.speech = speech
        self.game = speech.game

    def messages(self, view: Any, drop: int = 0) -> Chat:  # type: ignore[override]
        """The chat of ``view`` in this agent's tool format."""
        return self.speech.chat(view.view if isinstance(view, _OwnTurns) else view, self.tool_format, drop)

    def tools_for(self, view: Any) -> list[dict[str, Any]] | None:
        """The tool schemas of ``view``'s market (None for a text protocol)."""
        inner = view.view if isinstance(view, _OwnTurns) else view
        return self.speech.tools(inner) if self.speech.tools is not None and self.tool_format == "native" else None

    def prompt_ids(self, view: Any) -> tuple[list[int], int]:  # type: ignore[override]
        return super().prompt_ids(_OwnTurns.of(view))  # type: ignore[arg-type]

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "game": self.speech.game, "protocol": self.speech.protocol}


# -- API agents -------------------------------------------------------------------------------------------------
class MarketChat(ToolChat):
    """One request's chat plus its market's tools (None: a text protocol); the provider's calls land in ``calls``."""

    def __init__(self, messages: Chat, tools: list[dict[str, Any]] | None = None) -> None:
        super().__init__(messages)
        self.tools = tools
        self.with_tools = bool(tools)


class _Speaking(ToolWave):
    """The market side of an API agent: renders seller views in the game's speech and hands the calls over."""

    speech: Speech
    tool_stats: TurnStats

    def __init__(self, *args: Any, speech: Speech, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.speech = speech
        self.tool_stats = speech.stats()

    def tool_chat(self, view: Any) -> MarketChat:
        tools = self.speech.tools(view) if self.speech.tools is not None else None
        return MarketChat(self.speech.chat(view, "native" if tools else "text", 0), tools)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "game": self.speech.game, "protocol": self.speech.protocol,  # type: ignore[misc]
                "tools": "native" if self.speech.tools is not None else "none"}


def _tools_of(messages: Any) -> list[dict[str, Any]] | None:
    return messages.tools if isinstance(messages, MarketChat) else None


class OpenAISeller(_Speaking, OpenAIAgent):
    """A market seller behind any OpenAI-compatible chat-completions endpoint (function tools, or plain text)."""

    async def request(self, client: Any, messages: Any, params: dict[str, Any]) -> Completion:
        tools = _tools_of(messages)
        if not tools:
            return await super().request(client, list(messages), params)
        return await openai_tool_request(self, client, messages, params, tools)


class AnthropicSeller(_Speaking, AnthropicAgent):
    """A market seller behind the Anthropic Messages API (``tool_use`` blocks, or plain text)."""

    async def request(self, client: Any, messages: Any, params: dict[str, Any]) -> Completion:
        tools = _tools_of(messages)
        if not tools:
            return await super().request(client, list(messages), params)
        return await anthropic_tool_request(self, client, messages, params, anthropic_tools(tools))


# -- sellers by name --------------------------------------------------------------------------------------------
class SellerAgents(LMAgents):
    """Builds ``hf:<path>``, ``openai:<model>`` and ``anthropic:<model>`` sellers of a market (named
    ``<name>@seller``) with the options of :class:`LMOptions`; local weights are loaded once per path."""

    def __init__(self, speech: Speech, options: LMOptions | None = None) -> None:
        super().__init__(options or LMOptions())
        self.speech = speech

    hf_cls = HFSeller
    openai_cls = OpenAISeller
    anthropic_cls = AnthropicSeller

    def check_role(self, role: str) -> None:
        if role != "seller":
            raise ValueError(f"{self.speech.game}: language-model agents play the seller, not the {role!r}")

    def agent_kw(self) -> dict[str, Any]:
        return {"speech": self.speech}


__all__ = ["LM_FORMS", "SPEECH", "AnthropicSeller", "HFSeller", "LMOptions", "MarketChat", "OpenAISeller",
           "SellerAgents", "SellerTurnStats", "Speech", "TurnStats", "split_name"]
