"""Build agents from specs: one entry point for every backend a spec describes by itself.

:func:`build_agent` turns an :class:`~negolib.params.AgentSpec` of a ``scripted``, ``hf``, ``vllm``,
``openai`` or ``anthropic`` party into an :class:`Agent`; :func:`local_agent` builds a local model's
agent from a folder of weights. Heavy backends import their libraries only when an agent is built
(torch/transformers for ``hf``, vllm, the openai and anthropic SDKs), so a profile of scripted agents
never touches them. Loaded local models are shared through a :class:`ModelCache` when several
parties use the same weights.

A profile's ``trained`` arms (a training run's checkpoint) and ``fixed_opening`` arms (another arm
whose first turn is replaced) are built by :func:`negolib.study.runs.build_agent`, which knows where
runs write and hands the weights to :func:`local_agent` here. Beyond the paper, :class:`FixedOpeningAgent`
replaces an agent's first turn with a fixed opening (name nothing, name the seller's best contract, or a
contract at a set utility), the test App. A asks for: does the opening cause the trained sellers' gain?
Which values a spec may hold is checked by :func:`negolib.params.spec_problems`, at load and here.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from negolib.agents.anthropic_agent import AnthropicAgent
from negolib.agents.base import Agent, AgentReply
from negolib.agents.hf_agent import HFAgent
from negolib.agents.openai_agent import OpenAIAgent
from negolib.agents.vllm_agent import VLLMAgent  # vllm itself is imported when an agent is built
from negolib.core.sampling import SamplingConfig
from negolib.games.multi_issue.env import PartyView
from negolib.games.multi_issue.prompts import render_messages
from negolib.games.multi_issue.scripted import concession_bid, make_scripted
from negolib.games.multi_issue.utility import best_contract
from negolib.models import load_causal_lm, resolve_model_path, tiny_causal_lm
from negolib.params import DTYPES, OPENINGS, AgentSpec, Params, check_opening, opening_source, spec_problems

PROFILE_BACKENDS = ("trained", "fixed_opening")
"""Backends built from a whole profile (a run's checkpoint, another arm): :func:`negolib.study.runs.build_agent`."""


def check_spec(name: str, spec: AgentSpec) -> None:
    """Raise ``ValueError`` naming agent ``name`` and the first field :func:`negolib.params.spec_problems`
    rejects."""
    problems = spec_problems(spec)
    if problems:
        key, why = problems[0]
        raise ValueError(f"agent {name!r}: {key} {why}")


@dataclass
class ModelCache:
    """(model, tokenizer) pairs by (path, dtype, device), loaded once per process, and the one set of decode
    buffers (:class:`negolib.agents.decode.KVPool`) the ``hf`` agents built through it share: they decode one at
    a time, so one batch's buffers serve them all (a pool per agent held one batch's keys/values per arm)."""

    models: dict[tuple[str, str, str], tuple[Any, Any]] = field(default_factory=dict)
    pool: Any = None

    def kv_pool(self) -> Any:
        """The shared :class:`~negolib.agents.decode.KVPool` (made on first use; imports torch)."""
        if self.pool is None:
            from negolib.agents.decode import KVPool

            self.pool = KVPool()
        return self.pool

    def get(self, path: str, dtype: str = "float32", device: str = "cpu") -> tuple[Any, Any]:
        key = (str(path), dtype, device)
        if key not in self.models:
            self.models[key] = load_causal_lm(path, dtype=dtype, device=device)
        return self.models[key]


TINY = "tiny"
"""Model name of a randomly initialised 2-layer Llama (``negolib.models.tiny_causal_lm``, seed 0),
materialised once as a checkpoint folder so that evaluation and training load the same weights."""


def tiny_model_dir(folder: str | Path) -> Path:
    """Save the tiny test model (and its byte-level tokenizer) to ``folder`` once; return it."""
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        model, tok = tiny_causal_lm(seed=0)
        folder.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
    return folder


def spec_model_path(spec: AgentSpec, params: Params | None = None) -> str:
    """Where an ``hf``/``vllm`` spec's model is: ``path_env`` (if set in the environment), then ``path``,
    then ``model`` (a packaged local model name, a hub id, or ``tiny``, saved under the profile's
    ``models/`` folder)."""
    if spec.path_env and os.environ.get(spec.path_env):
        return os.environ[spec.path_env]
    if spec.path:
        return spec.path
    assert spec.model is not None
    if spec.model == TINY:
        root = params.out if params is not None else Path.cwd() / "outputs"
        return str(tiny_model_dir(root / "models" / TINY))
    return spec.model


def local_folder(spec: AgentSpec, params: Params | None = None) -> str:
    """The folder of an ``hf``/``vllm`` spec's weights on this machine (a packaged model converted once;
    a hub id is returned as given)."""
    return resolve_model_path(spec_model_path(spec, params))


def sampling_config(spec: AgentSpec, seed: int = 0) -> SamplingConfig:
    """The :class:`negolib.core.sampling.SamplingConfig` an LM backend sends for ``spec``."""
    return SamplingConfig.seeded(spec.sampling, seed)


def local_agent(name: str, path: str, spec: AgentSpec, seed: int = 0, cache: ModelCache | None = None,
                serving: AgentSpec | None = None) -> Agent:
    """The agent of a local model whose weights are at ``path``, decoding as ``spec`` says; served by vLLM
    when ``serving`` (default ``spec``) is a ``vllm`` spec (its tensor parallelism and memory share), else
    by transformers through ``cache``."""
    serving = serving or spec
    # The prompt cap is the spec's when it sets one, else the arm's context length (the agent reads it from
    # the model or engine, at most EVAL_CONTEXT_TOKENS): never the training driver's 2,048 (App. H vs K).
    kw: dict[str, Any] = {"prompt_cap": spec.prompt_cap or None}
    if serving.backend == "vllm":
        return VLLMAgent(path, sampling=sampling_config(spec, seed), scaffold=spec.scaffold, name=name,
                         render=render_messages, tensor_parallel_size=serving.tensor_parallel or 1,
                         gpu_memory_utilization=serving.gpu_memory_utilization or 0.9, **kw)
    cache = cache or ModelCache()
    model, tok = cache.get(path, spec.dtype or "float32", spec.device or "cpu")
    return HFAgent(model, tok, sampling_config(spec, seed), scaffold=spec.scaffold, name=name,
                   max_batch=spec.batch_size or 16, model_name=spec.model or path, render=render_messages,
                   kv_pool=cache.kv_pool(), **kw)


def build_agent(name: str, spec: AgentSpec, seed: int = 0, *, params: Params | None = None,
                cache: ModelCache | None = None, role: str | None = None) -> Agent:
    """The agent for a ``scripted``, ``hf``, ``vllm``, ``openai`` or ``anthropic`` spec (``params`` only
    places the ``tiny`` model under the profile's outputs).

    ``seed`` seeds the agent's own randomness (prose variety, sampling); ``role`` ("seller"/
    "buyer") is passed to backends that render role-specific prompts. ``trained`` and ``fixed_opening``
    specs are a profile's: :func:`negolib.study.runs.build_agent` builds them.
    """
    check_spec(name, spec)
    b = spec.backend
    if b == "scripted":
        return make_scripted(spec.strategy or "", name=name, seed=seed, **spec.params)
    if b in ("hf", "vllm"):
        return local_agent(name, spec_model_path(spec, params), spec, seed, cache)
    if b in ("openai", "anthropic"):
        return _api_agent(name, spec, seed, role)
    if b in PROFILE_BACKENDS:
        raise ValueError(f"agent {name!r}: a {b!r} spec is built from its profile by "
                         "negolib.study.runs.build_agent")
    raise ValueError(f"agent {name!r}: unknown backend {b!r}")


def _api_agent(name: str, spec: AgentSpec, seed: int, role: str | None) -> Agent:
    """OpenAI-compatible or Anthropic agent; the key is read from ``api_key_env`` before any call."""
    cls = OpenAIAgent if spec.backend == "openai" else AnthropicAgent
    kwargs: dict[str, Any] = {"api_key_env": spec.api_key_env, "base_url": spec.base_url,
                              "sampling": sampling_config(spec, seed), "scaffold": spec.scaffold, "seed": seed,
                              "role": role, "render": render_messages}
    for key in ("max_concurrency", "timeout_s", "max_retries"):
        if getattr(spec, key) is not None:
            kwargs[key] = getattr(spec, key)
    agent = cls(name, spec.model or "", **kwargs)  # reads the key from the environment before any call
    # Scrub the key from whatever the run logs: the root logger's handlers (a notebook kernel's, a CLI's)
    # and logging's last-resort handler; a handler added later takes ``agent.log_filter()`` itself.
    flt = agent.log_filter()
    for handler in [*logging.getLogger().handlers, logging.lastResort]:
        if handler is not None and flt not in handler.filters:  # equal filters scrub the same keys
            handler.addFilter(flt)
    return agent


class FixedOpeningAgent(Agent):
    """Plays ``inner`` except for its first turn, which is a fixed opening.

    ``opening``: ``"none"`` (a conversational turn naming no term), ``"best"`` (the party's best
    contract), a number in [0, 1] as a string (a contract worth that U~ to the party) or ``"own:<arm>"``:
    the first turn the agent ``opener`` (that arm's seller) writes on the same view, i.e. on the same
    scenario against the same buyer (a draw from that arm's own opening policy, scenario by scenario).
    """

    backend = "fixed_opening"

    def __init__(self, name: str, inner: Agent, opening: str = "none", seed: int = 0,
                 opener: Agent | None = None) -> None:
        try:
            check_opening(opening)
        except ValueError as exc:
            raise ValueError(f"opening {exc}") from None
        if (opening_source(opening) is None) != (opener is None):
            raise ValueError(f"agent {name!r}: opening {opening!r} " + ("needs the named arm's agent as opener="
                             if opener is None else "takes no opener= (only an 'own:<arm>' opening does)"))
        self.name, self.inner, self.opening, self.seed, self.opener = name, inner, opening, seed, opener

    def _opening_text(self, view: PartyView) -> str:
        if self.opening == "none":
            prose = (f"Thanks for meeting with me about the {view.domain.title.lower()}. Before we get into "
                     "numbers, I'd like to hear what matters most to you.")
            return prose + "\n" + json.dumps({"action": "COUNTER", "terms": []})
        bid = best_contract(view.domain, view.prefs) if self.opening == "best" else \
            concession_bid(view.domain, view.prefs, float(self.opening))
        prose = "Thanks for meeting with me. Here is a complete proposal to start from; every term is listed."
        return prose + "\n" + json.dumps({"action": "COUNTER",
                                          "terms": [{"name": k, "value": v} for k, v in bid.items()]})

    def act_batch(self, views: Sequence[PartyView]) -> list[AgentReply]:
        first = [i for i, v in enumerate(views) if not any(h.role == v.role for h in v.history)]
        rest = [i for i in range(len(views)) if i not in set(first)]
        out: list[AgentReply | None] = [None] * len(views)
        if self.opener is not None and first:
            for i, rep in zip(first, self.opener.act_batch([views[i] for i in first])):
                out[i] = rep
        else:
            for i in first:
                out[i] = AgentReply(self._opening_text(views[i]))
        if rest:
            for i, rep in zip(rest, self.inner.act_batch([views[i] for i in rest])):
                out[i] = rep
        return [r for r in out if r is not None]

    def settings(self) -> dict[str, Any]:
        out = {"backend": self.backend, "name": self.name, "opening": self.opening, "inner": self.inner.settings()}
        if self.opener is not None:
            out["opener"] = self.opener.settings()
        return out


__all__ = ["DTYPES", "ModelCache", "FixedOpeningAgent", "OPENINGS", "PROFILE_BACKENDS", "TINY", "build_agent",
           "check_opening", "check_spec", "local_agent", "local_folder", "sampling_config", "spec_model_path",
           "spec_problems", "tiny_model_dir"]
