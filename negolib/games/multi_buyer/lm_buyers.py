"""Language-model and API buyers of the multi-buyer market, mirroring the sellers of :mod:`.agents`.

Contract: a buyer agent answers a batch of :class:`~.env.BuyerView` (any buyers of any markets, each view holding
one buyer's budget and its own thread only: buyers never see each other's messages) with one ``AgentReply`` each,
prompted with :func:`.buyer_prompts.chat_messages` and answering with one call of ``accept_offer()``,
``counter_offer(price)`` or ``decline()``, which the episode parses strictly (:func:`.protocol.parse_buyer_turn`).
:class:`HFBuyer` is the local-model seller machinery (:class:`.agents.HFSeller`: batched seeded sampling, the prompt
cap dropping the oldest own answers, tools through the chat template or as ``<tool_call>`` text);
:class:`OpenAIBuyer` / :class:`AnthropicBuyer` are the API sellers' machinery with native tool calls (in
``extra["tool_calls"]``), a failed request that episode's error reply. Sampling seeds derive from the episode and
the seller turn being answered. :class:`BuyerTurnStats` counts every answer: a bad parse, an accept without an
offer (the episode's bad parses) and, stricter than the episode (which reads it as a decline in words), an answer
without any call; accepts above the buyer's budget are counted as overshoots, as the episode counts them.
:class:`BuyerAgents` builds ``hf:<path>``, ``openai:<model>`` and ``anthropic:<model>`` buyers (``<name>@buyer``);
:class:`MixedPool` puts language-model buyers at chosen positions of a scripted pool.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from negolib.agents.base import AgentReply
from negolib.games.multi_buyer.agents import (
    AnthropicSeller,
    HFSeller,
    MarketChat,
    OpenAISeller,
    SellerAgents,
    Speech,
    _Own,
    _OwnTurns,
)
from negolib.games.multi_buyer.buyer_prompts import chat_messages
from negolib.games.multi_buyer.env import INVALID_ACCEPT_ERROR, BuyerView
from negolib.games.multi_buyer.protocol import BuyerAction, parse_buyer_turn
from negolib.games.multi_buyer.tools import ACCEPT_OFFER, buyer_tools
from negolib.games.toolagents import HFToolAgent, LMOptions, TurnStats
from negolib.games.toolcalls import reply_turn

NO_BUYER_CALL_ERROR = "no buyer call: every answer must call accept_offer, counter_offer or decline"
"""Why an answer without any call is a bad parse for a language-model buyer (the episode reads it as a decline)."""


def _inner(view: Any) -> BuyerView:
    return view.view if isinstance(view, _OwnTurns) else view


def buyer_turn(view: BuyerView | _OwnTurns) -> _OwnTurns:
    """``view`` as the local and API machinery reads a view: its episode id, the seller turn being answered (the
    turn of the seeds and warnings), role ``buyer`` and one entry per own earlier answer (dropped first by the cap)."""
    if isinstance(view, _OwnTurns):
        return view
    if not isinstance(view, BuyerView):
        raise TypeError(f"a buyer agent answers BuyerView objects, got {type(view).__name__}")
    turn = view.thread[-1].turn if view.thread else 1
    answers = sum(e.role == "buyer" for e in view.thread)
    return _OwnTurns(view, view.episode_id, turn, "buyer", (_Own("buyer"),) * answers)


@dataclass
class BuyerTurnStats(TurnStats):
    """How a buyer's answers parsed: ``calls`` (valid), ``no_calls`` (no call at all: a bad parse here, a decline in
    words for the episode), ``double_calls``, ``invalid_accepts`` (no offer to accept), ``overshoots`` (valid accepts
    of an offer above the buyer's budget: played and counted, never refused)."""

    calls: int = 0
    no_calls: int = 0
    double_calls: int = 0
    invalid_accepts: int = 0
    overshoots: int = 0

    def count(self, view: Any, reply: AgentReply) -> str | None:
        v = _inner(view)
        parsed = parse_buyer_turn(reply_turn(reply))
        action, error = parsed.action, parsed.error
        self.double_calls += parsed.n_calls > 1
        accept = isinstance(action, BuyerAction) and action.tool == ACCEPT_OFFER
        if error is None and accept and v.offer is None:
            self.invalid_accepts += 1
            error = INVALID_ACCEPT_ERROR
        elif error is None and action is None:
            self.no_calls += 1
            error = NO_BUYER_CALL_ERROR
        elif error is None and accept and v.offer is not None:
            self.overshoots += float(v.offer) > float(v.budget)
        self.calls += error is None
        return error


BUYER_SPEECH = Speech("multi_buyer", "buyer tool calls (accept_offer, counter_offer, decline)",
                      lambda view, fmt, drop: chat_messages(_inner(view), fmt, drop), BuyerTurnStats,
                      lambda view: buyer_tools())
"""The multi-buyer buyer: one call of its three tools, natively or as ``<tool_call>`` text."""


class HFBuyer(HFSeller):
    """A local transformers model as a multi-buyer buyer (see the module docstring); ``tool_format`` as for
    :class:`.agents.HFSeller`."""

    def __init__(self, model: Any, tokenizer: Any, *args: Any, speech: Speech = BUYER_SPEECH, **kw: Any) -> None:
        super().__init__(model, tokenizer, *args, speech=speech, **kw)

    def prompt_ids(self, view: Any) -> tuple[list[int], int]:  # type: ignore[override]
        return HFToolAgent.prompt_ids(self, buyer_turn(view))  # type: ignore[arg-type]

    def act_batch(self, views: Sequence[Any]) -> list[AgentReply]:  # type: ignore[override]
        return super().act_batch([buyer_turn(v) for v in views])  # type: ignore[arg-type]


class _Answering:
    """The buyer side of an API agent: buyer views read with their seller turn, chats of the buyer's thread."""

    speech: Speech

    def __init__(self, *args: Any, speech: Speech = BUYER_SPEECH, **kw: Any) -> None:
        super().__init__(*args, speech=speech, **kw)  # type: ignore[call-arg]

    def tool_chat(self, view: Any) -> MarketChat:
        return MarketChat(self.speech.chat(_inner(view), "native", 0), buyer_tools())

    def act_batch(self, views: Sequence[Any]) -> list[AgentReply]:
        return super().act_batch([buyer_turn(v) for v in views])  # type: ignore[misc]


class OpenAIBuyer(_Answering, OpenAISeller):
    """A multi-buyer buyer behind any OpenAI-compatible chat-completions endpoint (function tools)."""


class AnthropicBuyer(_Answering, AnthropicSeller):
    """A multi-buyer buyer behind the Anthropic Messages API (``tool_use`` blocks)."""


class BuyerAgents(SellerAgents):
    """Builds ``hf:<path>``, ``openai:<model>`` and ``anthropic:<model>`` buyers of the multi-buyer market (named
    ``<name>@buyer``) with the options of :class:`LMOptions`; local weights are loaded once per path. Each agent
    answers for every buyer whose view it is given."""

    def __init__(self, options: LMOptions | None = None, speech: Speech = BUYER_SPEECH) -> None:
        super().__init__(speech, options)

    hf_cls = HFBuyer
    openai_cls = OpenAIBuyer
    anthropic_cls = AnthropicBuyer

    def check_role(self, role: str) -> None:
        if role != "buyer":
            raise ValueError(f"{self.speech.game}: these language-model agents play a buyer, not the {role!r}")


class MixedPool:
    """A buyer pool with language-model buyers at some positions: the views of buyer ``k`` (0-based) go to ``lm``
    when ``k`` is in ``lm_buyers``, the others to ``scripted`` (e.g. :class:`.buyers.ScriptedBuyers`); one
    ``act_batch`` call of each per wave, replies in the order of the views."""

    def __init__(self, lm: Any, scripted: Any, lm_buyers: Iterable[int], name: str | None = None) -> None:
        self.lm, self.scripted, self.lm_buyers = lm, scripted, frozenset(int(k) for k in lm_buyers)
        self.name = name or f"{lm.name}[{','.join(str(k + 1) for k in sorted(self.lm_buyers))}]+{scripted.name}"

    def act_batch(self, views: Sequence[BuyerView]) -> list[AgentReply]:
        out: list[AgentReply | None] = [None] * len(views)
        for agent, wanted in ((self.lm, True), (self.scripted, False)):
            idx = [i for i, v in enumerate(views) if (v.buyer in self.lm_buyers) is wanted]
            if idx:
                for i, rep in zip(idx, agent.act_batch([views[i] for i in idx]), strict=True):
                    out[i] = rep
        return out  # type: ignore[return-value]

    def settings(self) -> dict[str, Any]:
        return {"backend": "mixed", "name": self.name, "lm_buyers": sorted(self.lm_buyers),
                "lm": self.lm.settings(), "scripted": self.scripted.settings()}

__all__ = ["BUYER_SPEECH", "NO_BUYER_CALL_ERROR", "AnthropicBuyer", "BuyerAgents", "BuyerTurnStats", "HFBuyer",
           "MixedPool", "OpenAIBuyer", "buyer_turn"]
