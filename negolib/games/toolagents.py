"""Language-model and API agents of the tool-calling games (bilateral trade, the markets); imports no game.

Contract: a game's local-model agent subclasses :class:`HFToolAgent` (batched seeded sampling through
:class:`~negolib.agents.hf_agent.HFAgent`; its chat, from :meth:`~HFToolAgent.messages`, rendered with the game's tool
schemas when the chat template renders tools and past calls, else as ``<tool_call>`` text; the prompt capped by
dropping the oldest own turns; tool-call tags kept). A game's API agent mixes :class:`ToolWave` (tool chats, calls in
``extra["tool_calls"]``) into the shared OpenAI / Anthropic agents. Every agent counts its turns in a
:class:`TurnStats` subclass, the game's parse; :class:`LMAgents` builds a game's three classes by name.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Literal

from negolib.agents.anthropic_agent import OPENING_USER_TEXT, AnthropicAgent
from negolib.agents.api_agent import ChatJob, Completion, RetryPolicy
from negolib.agents.base import Agent, AgentReply
from negolib.agents.hf_agent import DEFAULT_PROMPT_CAP, HFAgent, PromptTruncationWarning
from negolib.agents.openai_agent import OpenAIAgent
from negolib.core.chat_template import encode_text, special_token_texts, strip_template_tags
from negolib.core.sampling import SamplingConfig, derive_seed
from negolib.games.toolcalls import CLOSE_TAG, OPEN_TAG, ToolFormat, function_tool
from negolib.models import LOCAL_MODELS, load_causal_lm

LM_BACKENDS = ("hf", "openai", "anthropic")
LM_FORMS = ("hf:<path>", "openai:<model>", "anthropic:<model>")
"""The agent-name forms :class:`LMAgents` builds (besides a game's scripted names)."""
NO_MESSAGE = "(no message)"
"""Stands in for an empty assistant message where a provider refuses empty content."""
Chat = list[dict[str, Any]]
PROBE_TOOL = "negobook_probe"
"""The tool :func:`template_supports_tools` renders to see whether a chat template renders tools."""


@dataclass(frozen=True)
class LMOptions:
    """How a tool-calling game builds its language-model agents (its :class:`LMAgents`): sampling (its seed is the
    agent's), local-model batch, prompt cap, dtype, device and tool format; for API agents the key variables (keys
    are read from the environment only, when an agent is built), endpoints (None: the SDK's default or its
    ``*_BASE_URL`` variable), concurrency and retries."""

    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    max_batch: int = 16
    prompt_cap: int = DEFAULT_PROMPT_CAP
    dtype: str = "float32"
    device: str = "cpu"
    tool_format: Literal["auto", "native", "text"] = "auto"
    openai_key_env: str = "OPENAI_API_KEY"
    anthropic_key_env: str = "ANTHROPIC_API_KEY"
    openai_base_url: str | None = None
    anthropic_base_url: str | None = None
    max_concurrency: int = 8
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def settings(self) -> dict[str, Any]:
        """The options that shape what the agents say (sampling, prompt cap, dtype, tool format, endpoints), for a
        game's :meth:`~negolib.games.base.Game.settings`; not the key variables, batch size, device, concurrency or
        retries, which change how fast or where, not what."""
        return {"sampling": asdict(self.sampling), "prompt_cap": self.prompt_cap, "dtype": self.dtype,
                "tool_format": self.tool_format, "openai_base_url": self.openai_base_url,
                "anthropic_base_url": self.anthropic_base_url}


# -- bad-parse accounting ---------------------------------------------------------------------------------------
@dataclass
class TurnStats:
    """An agent's turn accounting, counted as the episode counts turns: ``turns`` played, ``bad_parses`` among them
    (turns without effect), ``failed`` replies (an error: not played), prompts over the cap. Subclasses count
    the rest in :meth:`count`."""

    turns: int = 0
    bad_parses: int = 0
    failed: int = 0
    prompts_capped: int = 0

    def add(self, view: Any, reply: AgentReply) -> str | None:
        """Count ``reply`` to ``view``; returns why it had no effect (None: a valid turn, or a failed reply)."""
        if reply.error is not None:
            self.failed += 1
            return None
        self.turns += 1
        error = self.count(view, reply)
        self.bad_parses += error is not None
        return error

    def count(self, view: Any, reply: AgentReply) -> str | None:
        """Count a played reply's kind; why it had no effect (None: it had)."""
        raise NotImplementedError


# -- local models -----------------------------------------------------------------------------------------------
def render_prompt(tokenizer: Any, messages: Chat, tool_format: ToolFormat, thinking: bool = False,
                  tools: list[dict[str, Any]] | None = None) -> str:
    """The chat template's text for ``messages`` plus the generation prompt; ``native`` passes ``tools`` (the
    OpenAI-style schemas) to the template."""
    kw = {"tools": tools or []} if tool_format == "native" else {}
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                         enable_thinking=thinking, **kw)


def template_supports_tools(tokenizer: Any) -> bool:
    """Whether ``tokenizer``'s chat template renders tool schemas (its text changes when tools are passed and names
    them) and a past assistant tool call with its result; a template that fails on either does not."""
    if getattr(tokenizer, "chat_template", None) is None:
        return False
    tools = [function_tool(PROBE_TOOL, "Probe the chat template.", {"price": {"type": "number"}}, ["price"])]
    probe: Chat = [{"role": "system", "content": "negobookSYSTEM"}, {"role": "user", "content": "negobookUSER"}]
    past: Chat = [*probe, {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_probe", "type": "function", "function": {"name": PROBE_TOOL, "arguments": {"price": 4321.5}}}]},
        {"role": "tool", "tool_call_id": "call_probe", "name": PROBE_TOOL, "content": "negobookRESULT"},
        {"role": "user", "content": "negobookUSER2"}]
    try:
        plain = render_prompt(tokenizer, probe, "text")
        with_tools = render_prompt(tokenizer, probe, "native", tools=tools)
        history = render_prompt(tokenizer, past, "native", tools=tools)
    except Exception:  # noqa: BLE001 - e.g. a template that refuses a "tool" role: no tool support
        return False
    return (with_tools != plain and PROBE_TOOL in with_tools and PROBE_TOOL not in plain
            and "4321.5" in history and "negobookRESULT" in history)


class HFToolAgent(HFAgent):
    """A local transformers model in a tool-calling game (see the module docstring). ``tool_format``: ``"auto"``
    (native when :func:`template_supports_tools`), ``"native"`` (an error without support) or ``"text"``; ``tools``:
    the schemas a native prompt carries; ``stats``: the game's turn accounting. A game names itself in ``game``
    and its chat in :meth:`messages`; views carry ``episode_id``, ``turn``, ``role`` and ``history`` (entries with a
    ``role``), which the prompt cap reads."""

    backend = "hf"
    game: str = ""

    def __init__(self, model: Any, tokenizer: Any, sampling: SamplingConfig | None = None, name: str = "hf",
                 max_batch: int = 16, prompt_cap: int = DEFAULT_PROMPT_CAP, model_name: str | None = None,
                 tool_format: Literal["auto", "native", "text"] = "auto", *,
                 tools: list[dict[str, Any]] | None = None, stats: TurnStats, **kw: Any) -> None:
        super().__init__(model, tokenizer, sampling, "evaluation", name, max_batch, prompt_cap, None, model_name, **kw)
        supported = template_supports_tools(tokenizer)
        if tool_format not in ("auto", "native", "text"):
            raise ValueError(f"tool_format must be 'auto', 'native' or 'text', got {tool_format!r}")
        if tool_format == "native" and not supported:
            raise ValueError(f"{name}: the chat template renders no tools or tool calls; use tool_format='text'")
        self.tool_format: ToolFormat = ("native" if supported else "text") if tool_format == "auto" else tool_format
        self.tool_stats = stats
        self._tools = tools
        # tool-call tags that the tokenizer marks special would be stripped from the decoded text: keep them
        self._kept_tags = [t for t in (OPEN_TAG, CLOSE_TAG) if t in special_token_texts(tokenizer)]

    @classmethod
    def load(cls, path: str, sampling: SamplingConfig | None = None, dtype: str = "float32", device: str = "cpu",
             **kw: Any) -> HFToolAgent:
        """Load a local model folder or a packaged model name (:func:`negolib.models.load_causal_lm`)."""
        model, tok = load_causal_lm(path, dtype=dtype, device=device)
        return cls(model, tok, sampling, model_name=str(path), **kw)

    def messages(self, view: Any, drop: int = 0) -> Chat:
        """The chat of ``view`` (without the ``drop`` oldest own turns) in this agent's tool format: the game's."""
        raise NotImplementedError

    def tools_for(self, view: Any) -> list[dict[str, Any]] | None:
        """The tool schemas a native prompt of ``view`` carries (here the agent's ``tools``; a game whose tools
        depend on the view overrides this)."""
        return self._tools

    def render(self, view: Any, drop: int = 0) -> str:
        """The prompt text of ``view`` (without the ``drop`` oldest own turns)."""
        return render_prompt(self.tokenizer, self.messages(view, drop), self.tool_format, self.sampling.thinking,
                             self.tools_for(view))

    def prompt_ids(self, view: Any) -> tuple[list[int], int]:  # type: ignore[override]
        """(prompt ids, own past turns dropped): the oldest own turns go, one at a time, until the prompt fits the
        cap (a warning says so); a prompt still too long with no history left keeps its last ``prompt_cap``
        tokens (another warning)."""
        n_own = sum(h.role == view.role for h in view.history)
        drop = 0
        while True:
            ids = encode_text(self.tokenizer, self.render(view, drop))
            if len(ids) <= self.prompt_cap or drop >= n_own:
                break
            drop += 1
        if drop or len(ids) > self.prompt_cap:
            self.tool_stats.prompts_capped += 1
        if drop:
            warnings.warn(f"{self.name}: prompt for episode {view.episode_id!r} turn {view.turn} exceeds "
                          f"{self.prompt_cap} tokens; dropped the {drop} oldest of its {n_own} own past turns",
                          PromptTruncationWarning, stacklevel=2)
        if len(ids) > self.prompt_cap:
            warnings.warn(f"{self.name}: prompt for episode {view.episode_id!r} turn {view.turn} is {len(ids)} "
                          f"tokens with no history left; keeping its last {self.prompt_cap} tokens",
                          PromptTruncationWarning, stacklevel=2)
            ids = ids[-self.prompt_cap:]
        return ids, drop

    def _reply_text(self, reply: AgentReply) -> str:
        """The reply's text with tool-call tags kept where the tokenizer marks them special."""
        if not self._kept_tags:
            return reply.text
        comp = reply.extra["completion_ids"]
        body = comp[:-1] if reply.extra.get("finish_reason") == "stop" else comp
        text = self.tokenizer.decode(list(body), skip_special_tokens=False, clean_up_tokenization_spaces=False)
        marks = {tag: chr(0xE000 + i) for i, tag in enumerate(self._kept_tags)}  # private-use stand-ins
        for tag, mark in marks.items():
            text = text.replace(tag, mark)
        text = strip_template_tags(text, self.tokenizer, self.tags)
        for tag, mark in marks.items():
            text = text.replace(mark, tag)
        return text

    def act_batch(self, views: Sequence[Any]) -> list[AgentReply]:  # type: ignore[override]
        replies = super().act_batch(views)  # type: ignore[arg-type]
        for view, rep in zip(views, replies):
            rep.text = self._reply_text(rep)
            rep.extra["tool_format"] = self.tool_format
            rep.extra["parse_error"] = self.tool_stats.add(view, rep)
        return replies

    def settings(self) -> dict[str, Any]:
        out = {**super().settings(), "game": self.game, "tool_format": self.tool_format}
        out.pop("scaffold", None)  # the paper game's prompt scaffold: not used here
        return out


# -- API agents -------------------------------------------------------------------------------------------------
class ToolChat(list):  # type: ignore[type-arg]
    """One request's chat (the game's, native format), plus where the provider's answer leaves
    its tool calls: the shared API machinery hands the chat, not the job, to ``request``."""

    calls: list[dict[str, Any]]
    with_tools = True  # the reply carries the calls in ``extra["tool_calls"]``

    def __init__(self, messages: Chat) -> None:
        super().__init__(messages)
        self.calls = []


def openai_messages(chat: Chat) -> Chat:
    """The chat for OpenAI chat completions: call arguments as JSON strings, ``tool`` results by call id."""
    out: Chat = []
    for m in chat:
        role = m["role"]
        if role == "assistant" and m.get("tool_calls"):
            calls = [{"id": c["id"], "type": "function",
                      "function": {"name": c["function"]["name"], "arguments": json.dumps(c["function"]["arguments"])}}
                     for c in m["tool_calls"]]
            out.append({"role": "assistant", "content": m["content"] or None, "tool_calls": calls})
        elif role == "assistant":
            out.append({"role": "assistant", "content": m["content"] or NO_MESSAGE})
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
        else:
            out.append({"role": role, "content": m["content"]})
    return out


def anthropic_messages(chat: Chat) -> tuple[str | None, Chat]:
    """(system, messages) for the Anthropic Messages API: calls as ``tool_use`` blocks, results as ``tool_result``
    blocks opening the next user turn, same-role turns merged, no empty text."""
    system = "\n\n".join(m["content"] for m in chat if m["role"] == "system") or None
    turns: Chat = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": list(blocks)})

    for m in chat:
        if m["role"] == "user":
            add("user", [{"type": "text", "text": m["content"] or NO_MESSAGE}])
        elif m["role"] == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}])
        elif m["role"] == "assistant":
            blocks = [{"type": "text", "text": m["content"]}] if m["content"] else []
            blocks += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                        "input": c["function"]["arguments"]} for c in m.get("tool_calls") or ()]
            add("assistant", blocks or [{"type": "text", "text": NO_MESSAGE}])
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": OPENING_USER_TEXT}]})
    return system, turns


def _field(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def openai_call(call: Any) -> dict[str, Any]:
    """An OpenAI tool call (SDK object or dict) as a JSON-ready dict of the same shape; arguments as sent."""
    fn = _field(call, "function")
    out: dict[str, Any] = {"id": _field(call, "id"), "type": _field(call, "type") or "function"}
    if fn is not None:
        out["function"] = {"name": _field(fn, "name"), "arguments": _field(fn, "arguments")}
    return out


def anthropic_call(block: Any) -> dict[str, Any]:
    """An Anthropic ``tool_use`` block (SDK object or dict) as a JSON-ready dict."""
    return {"type": "tool_use", "id": _field(block, "id"), "name": _field(block, "name"),
            "input": _field(block, "input")}


async def openai_tool_request(agent: OpenAIAgent, client: Any, messages: Any, params: dict[str, Any],
                              tools: list[dict[str, Any]]) -> Completion:
    """One OpenAI request of a tool chat with ``tools`` (function tools); its calls land in ``messages.calls``."""
    resp, choice, msg = await agent.send(client, openai_messages(messages), params, tools=tools)
    if isinstance(messages, ToolChat):
        messages.calls = [openai_call(c) for c in (getattr(msg, "tool_calls", None) or ())]
    return agent.completion(resp, choice, msg)


async def anthropic_tool_request(agent: AnthropicAgent, client: Any, messages: Any, params: dict[str, Any],
                                 tools: list[dict[str, Any]]) -> Completion:
    """One Anthropic request of a tool chat with ``tools``; its ``tool_use`` blocks land in ``messages.calls``."""
    resp, blocks = await agent.send(client, *anthropic_messages(messages), params, tools=tools)
    text = "\n".join(_field(b, "text") or "" for b in blocks if _field(b, "type") == "text")
    if isinstance(messages, ToolChat):
        messages.calls = [anthropic_call(b) for b in blocks if _field(b, "type") == "tool_use"]
    return agent.completion(resp, text)


class ToolWave:
    """The game side of an API agent: renders each view as a :class:`ToolChat` (:meth:`tool_chat`), plays a wave
    and hands the calls over, counting every reply in ``tool_stats``."""

    tool_stats: TurnStats

    def tool_chat(self, view: Any) -> ToolChat:
        raise NotImplementedError

    def act_batch(self, views: Sequence[Any]) -> list[AgentReply]:
        """One concurrent wave (the shared machinery: retries, rejected parameters, redaction); with tools, each
        successful reply carries ``extra["tool_calls"]`` (possibly empty: a prose-only turn)."""
        agent: Any = self
        chats: list[ToolChat | None] = []
        batch: list[ChatJob | BaseException] = []
        for v in views:
            try:
                chat = self.tool_chat(v)
            except Exception as exc:  # noqa: BLE001 - one bad view must not sink the wave
                chats.append(None)
                batch.append(exc)
                continue
            chats.append(chat)
            seed = derive_seed(int(agent.sampling.seed or 0), [v.episode_id], [v.turn]) % 2**31
            batch.append(ChatJob(chat, {"seed": seed}))
        replies: list[AgentReply] = agent.complete_batch(batch)
        for view, chat, rep in zip(views, chats, replies):
            if rep.error is None and chat is not None and chat.with_tools:
                rep.extra["tool_calls"] = list(chat.calls)
            rep.extra["parse_error"] = self.tool_stats.add(view, rep)
        return replies


# -- agents by name ---------------------------------------------------------------------------------------------
def split_name(name: str) -> tuple[str, str] | None:
    """``("hf" | "openai" | "anthropic", rest)`` of a language-model agent name, None for any other name."""
    backend, sep, rest = name.partition(":")
    return (backend, rest) if sep and rest.strip() and backend in LM_BACKENDS else None


@dataclass
class LMAgents:
    """Builds ``hf:<path>``, ``openai:<model>`` and ``anthropic:<model>`` agents named ``<name>@<role>`` of a game's
    three classes (``hf_cls``, ``openai_cls``, ``anthropic_cls``: set by the game's subclass); local weights are
    loaded once per path and shared by the agents built here."""

    options: LMOptions = field(default_factory=LMOptions)
    models: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    hf_cls: ClassVar[type]
    openai_cls: ClassVar[type]
    anthropic_cls: ClassVar[type]

    def check_role(self, role: str) -> None:
        """``ValueError`` for a role these agents do not play."""
        if role not in ("seller", "buyer"):
            raise ValueError(f"role must be 'seller' or 'buyer', got {role!r}")

    def agent_kw(self) -> dict[str, Any]:
        """More keyword arguments of every agent built here."""
        return {}

    def make(self, name: str, role: str, seed: int) -> Agent:
        """The agent ``name`` for ``role``; ``ValueError`` for a name of another form, a role it does not play or a
        missing model folder."""
        missing = [c for c in ("hf_cls", "openai_cls", "anthropic_cls") if not hasattr(self, c)]
        if missing:
            raise TypeError(f"{type(self).__name__} names no {', '.join(missing)}: build agents through a game's "
                            "LMAgents subclass (e.g. negolib.games.bilateral.agents.BargainerAgents)")
        parsed = split_name(name)
        if parsed is None:
            raise ValueError(f"{name!r} is not a language-model agent; forms: {', '.join(LM_FORMS)}")
        self.check_role(role)
        backend, arg = parsed
        o = self.options
        sampling = replace(o.sampling, seed=int(seed))
        label = f"{name}@{role}"
        if backend == "hf":
            model, tok = self._local(arg)
            return self.hf_cls(model, tok, sampling, name=label, max_batch=o.max_batch, prompt_cap=o.prompt_cap,
                               model_name=arg, tool_format=o.tool_format, **self.agent_kw())
        api = dict(sampling=sampling, max_concurrency=o.max_concurrency, retry=o.retry, seed=seed, arm=name,
                   role=role, **self.agent_kw())
        if backend == "openai":
            return self.openai_cls(label, arg, api_key_env=o.openai_key_env, base_url=o.openai_base_url, **api)
        return self.anthropic_cls(label, arg, api_key_env=o.anthropic_key_env, base_url=o.anthropic_base_url, **api)

    def _local(self, path: str) -> tuple[Any, Any]:
        if path not in self.models:
            if path not in LOCAL_MODELS and not Path(path).expanduser().is_dir():
                raise ValueError(f"hf:{path}: no model folder at {Path(path).expanduser()} (and not a packaged "
                                 f"model: {', '.join(sorted(LOCAL_MODELS))})")
            self.models[path] = load_causal_lm(path, dtype=self.options.dtype, device=self.options.device)
        return self.models[path]


__all__ = ["LM_BACKENDS", "LM_FORMS", "NO_MESSAGE", "PROBE_TOOL", "Chat", "HFToolAgent", "LMAgents", "LMOptions",
           "ToolChat", "ToolFormat", "ToolWave", "TurnStats", "anthropic_call", "anthropic_messages",
           "anthropic_tool_request", "openai_call", "openai_messages", "openai_tool_request", "render_prompt",
           "split_name", "template_supports_tools"]
