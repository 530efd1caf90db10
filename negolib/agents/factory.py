"""Build agents from params specs: one entry point for every backend.

:func:`build_agent` turns an :class:`~negolib.params.AgentSpec` into an :class:`Agent`. Heavy
backends import lazily (torch/transformers for ``hf`` and ``trained``, vllm, the openai and
anthropic SDKs), so a profile of scripted agents never touches them. Loaded local models are
shared through a :class:`ModelCache` when several parties use the same weights.

Beyond the paper, ``fixed_opening`` wraps another arm and replaces its first turn with a fixed
opening (name nothing, name the seller's best contract, or a contract at a set utility), the
test App. A asks for: does the opening cause the trained sellers' gain?
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from negolib.agents.base import Agent, AgentReply
from negolib.env import PartyView

if TYPE_CHECKING:
    from negolib.params import AgentSpec, Params

OPENINGS = ("none", "best")
DTYPES = ("float32", "float16", "bfloat16")
"""Weight dtypes a local model loads in (``torch.<dtype>``)."""


def check_opening(opening: str) -> None:
    """Raise ``ValueError`` unless ``opening`` is 'none', 'best' or a utility in [0, 1] as a string."""
    if opening in OPENINGS:
        return
    try:
        u = float(opening)
    except (TypeError, ValueError):
        raise ValueError(f"must be one of {OPENINGS} or a utility in [0, 1] as a string, got {opening!r}") from None
    if not 0 <= u <= 1:
        raise ValueError(f"must be one of {OPENINGS} or a utility in [0, 1] as a string, got {opening!r}")


def _at_least(value: float | None, lo: float, strict: bool = False) -> bool:
    return value is None or (value > lo if strict else value >= lo)


def spec_problems(spec: AgentSpec) -> list[tuple[str, str]]:
    """(field, problem) for every value of ``spec`` that :func:`build_agent` would reject; empty when
    it builds. The params loader reports these at load (naming the profile field), so a profile that
    loads never fails for them when agents are built; :func:`build_agent` checks them too."""
    from negolib.sampling import sampling_problems

    b, out = spec.backend, []
    if b == "scripted":
        from negolib.agents.scripted import strategy_param_problems

        out += [(k if k == "strategy" else f"params.{k}", why)
                for k, why in strategy_param_problems(spec.strategy or "", spec.params)]
    if b == "fixed_opening":
        try:
            check_opening(spec.opening or "")
        except ValueError as exc:
            out.append(("opening", str(exc)))
    if b in ("hf", "vllm", "trained", "openai", "anthropic"):
        s = spec.sampling
        out += [(f"sampling.{k}", why) for k, why in sampling_problems(s.temperature, s.top_p, s.top_k,
                                                                       s.max_new_tokens)]
    if b == "anthropic" and spec.sampling.thinking:
        out.append(("sampling.thinking", "must be false: Anthropic arms run with thinking off (the paper's setting)"))
    for key in ("batch_size", "prompt_cap", "tensor_parallel", "max_concurrency"):
        if not _at_least(getattr(spec, key), 1):
            out.append((key, f"must be >= 1, got {getattr(spec, key)}"))
    if not _at_least(spec.step, 0):
        out.append(("step", f"must be >= 0 (0 = the policy the run starts from), got {spec.step}"))
    if not _at_least(spec.steps, 0):
        out.append(("steps", f"must be >= 0, got {spec.steps}"))
    g = spec.gpu_memory_utilization
    if g is not None and not 0 < g <= 1:
        out.append(("gpu_memory_utilization", f"must be in (0, 1], got {g}"))
    if spec.dtype is not None and spec.dtype not in DTYPES:
        out.append(("dtype", f"must be one of {list(DTYPES)}, got {spec.dtype!r}"))
    if b in ("openai", "anthropic"):
        from negolib.agents.api_agent import RetryPolicy

        for key in ("timeout_s", "max_retries"):
            if getattr(spec, key) is not None:
                try:
                    RetryPolicy(**{key: getattr(spec, key)})
                except ValueError as exc:
                    out.append((key, str(exc).removeprefix(f"{key} ")))
    return out


def check_spec(name: str, spec: AgentSpec) -> None:
    """Raise ``ValueError`` naming agent ``name`` and the first field :func:`spec_problems` rejects."""
    problems = spec_problems(spec)
    if problems:
        key, why = problems[0]
        raise ValueError(f"agent {name!r}: {key} {why}")


@dataclass
class ModelCache:
    """(model, tokenizer) pairs by (path, dtype, device), loaded once per process."""

    models: dict[tuple[str, str, str], tuple[Any, Any]] = field(default_factory=dict)

    def get(self, path: str, dtype: str = "float32", device: str = "cpu") -> tuple[Any, Any]:
        key = (str(path), dtype, device)
        if key not in self.models:
            from negolib.models import load_causal_lm

            self.models[key] = load_causal_lm(path, dtype=dtype, device=device)
        return self.models[key]


TINY = "tiny"
"""Model name of a randomly initialised 2-layer Llama (``negolib.models.tiny_causal_lm``, seed 0),
materialised once as a checkpoint folder so that evaluation and training load the same weights."""


def tiny_model_dir(folder: str | Path) -> Path:
    """Save the tiny test model (and its byte-level tokenizer) to ``folder`` once; return it."""
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        from negolib.models import tiny_causal_lm

        model, tok = tiny_causal_lm(seed=0)
        folder.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
    return folder


def resolve_model_path(spec: AgentSpec, params: Params | None = None) -> str:
    """Where an ``hf``/``vllm`` model's weights are: ``path_env`` (if set in the environment), then
    ``path``, then ``model`` (a packaged local model name, a hub id, or ``tiny``, saved under the
    profile's ``models/`` folder)."""
    if spec.path_env and os.environ.get(spec.path_env):
        return os.environ[spec.path_env]
    if spec.path:
        return spec.path
    assert spec.model is not None
    if spec.model == TINY:
        root = params.out if params is not None else Path.cwd() / "outputs"
        return str(tiny_model_dir(root / "models" / TINY))
    return spec.model


def checkpoint_dir(params: Params, spec: AgentSpec) -> Path:
    """The checkpoint of a ``trained`` arm: ``<out>/training/<run>[/seed-<s>]/checkpoints/checkpoint-<step>``
    (the last complete checkpoint when ``step`` is unset). ``step: 0`` is the policy GRPO started
    from: the run's format warm-up model if it has one, else its ``init`` weights."""
    from negolib.training.checkpoints import last_checkpoint
    from negolib.training.warmup import warmup_dir, warmup_ready

    base_dir = training_run_dir(params, spec.run or "", spec.train_seed)
    run_dir = base_dir / "checkpoints"
    if spec.step == 0:
        r = params.training.runs.get(spec.run or "")
        if r is not None and r.warmup is not None:
            if not warmup_ready(base_dir):
                raise FileNotFoundError(f"{params.source}: run {spec.run!r} has no finished format warm-up under "
                                        f"{base_dir / 'warmup'} (run notebook 03 first)")
            return warmup_dir(base_dir)
        init = (r.init if r is not None else "").split("@")[0]
        if init in params.arms:
            return Path(_local_path(params.arms[init], params))
    if spec.step is not None:
        path = run_dir / f"checkpoint-{spec.step}"
        if not path.is_dir():
            raise FileNotFoundError(f"{params.source}: trained arm of run {spec.run!r} wants step {spec.step}, "
                                    f"but {path} does not exist (run notebook 03 first)")
        return path
    last = last_checkpoint(run_dir)
    if last is None:
        raise FileNotFoundError(f"{params.source}: run {spec.run!r} has no checkpoint under {run_dir} "
                                "(run notebook 03 first)")
    return last


def training_run_dir(params: Params, run: str, seed: int | None = None) -> Path:
    """The output folder of one training run (and seed) of a profile."""
    seeds = params.training.runs[run].seeds if run in params.training.runs else [0]
    s = seeds[0] if seed is None else seed
    base = params.out / "training" / run
    return base if len(seeds) <= 1 else base / f"seed-{s}"


def sampling_config(spec: AgentSpec, seed: int = 0) -> Any:
    """The :class:`negolib.sampling.SamplingConfig` an LM backend sends for ``spec``."""
    from negolib.sampling import SamplingConfig

    s = spec.sampling
    return SamplingConfig(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k,
                          max_new_tokens=s.max_new_tokens, thinking=s.thinking, seed=seed)


def _hf_agent(name: str, path: str, spec: AgentSpec, seed: int, cache: ModelCache) -> Agent:
    from negolib.agents.hf_agent import HFAgent

    model, tok = cache.get(path, spec.dtype or "float32", spec.device or "cpu")
    kw: dict[str, Any] = {"prompt_cap": spec.prompt_cap} if spec.prompt_cap else {}
    return HFAgent(model, tok, sampling_config(spec, seed), scaffold=spec.scaffold, name=name,
                   max_batch=spec.batch_size or 16, model_name=spec.model or path, **kw)


def _vllm_agent(name: str, path: str, spec: AgentSpec, serving: AgentSpec, seed: int) -> Agent:
    from negolib.agents.vllm_agent import VLLMAgent  # GPU extra; not installed on CPU machines

    kw: dict[str, Any] = {"prompt_cap": spec.prompt_cap} if spec.prompt_cap else {}
    return VLLMAgent(path, sampling=sampling_config(spec, seed), scaffold=spec.scaffold, name=name,
                     tensor_parallel_size=serving.tensor_parallel or 1,
                     gpu_memory_utilization=serving.gpu_memory_utilization or 0.9, **kw)


def base_arm(params: Params, run: str) -> str | None:
    """The arm whose weights a training run (or its parent run, for a continuation) started from."""
    seen: set[str] = set()
    while run in params.training.runs and run not in seen:
        seen.add(run)
        init = params.training.runs[run].init.split("@")[0]
        if init in params.arms:
            return init
        run = init
    return None


def build_agent(name: str, spec: AgentSpec, seed: int = 0, *, params: Params | None = None,
                cache: ModelCache | None = None, role: str | None = None) -> Agent:
    """The agent for ``spec``; ``params`` is needed for ``trained`` and ``fixed_opening`` specs.

    ``seed`` seeds the agent's own randomness (prose variety, sampling); ``role`` ("seller"/
    "buyer") is passed to backends that render role-specific prompts.
    """
    cache = cache or ModelCache()
    check_spec(name, spec)
    b = spec.backend
    if b == "scripted":
        from negolib.agents.scripted import make_scripted

        return make_scripted(spec.strategy or "", name=name, seed=seed, **spec.params)
    if b == "hf":
        return _hf_agent(name, resolve_model_path(spec, params), spec, seed, cache)
    if b == "trained":
        if params is None:
            raise ValueError(f"agent {name!r}: a 'trained' spec needs params= to find its checkpoint")
        base = base_arm(params, spec.run or "")
        if base is not None and params.arms[base].backend == "vllm":  # served like its base model
            return _vllm_agent(name, str(checkpoint_dir(params, spec)), spec, params.arms[base], seed)
        return _hf_agent(name, str(checkpoint_dir(params, spec)), spec, seed, cache)
    if b == "vllm":
        return _vllm_agent(name, resolve_model_path(spec, params), spec, spec, seed)
    if b in ("openai", "anthropic"):
        return _api_agent(name, spec, seed, role)
    if b == "fixed_opening":
        if params is None:
            raise ValueError(f"agent {name!r}: a 'fixed_opening' spec needs params= to build its inner arm")
        inner = build_agent(spec.inner or "", params.arms[spec.inner or ""], seed, params=params, cache=cache,
                            role=role)
        return FixedOpeningAgent(name, inner, spec.opening or "none", seed)
    raise ValueError(f"agent {name!r}: unknown backend {b!r}")


def _api_agent(name: str, spec: AgentSpec, seed: int, role: str | None) -> Agent:
    """OpenAI-compatible or Anthropic agent; the key is read from ``api_key_env`` before any call."""
    if spec.backend == "openai":
        from negolib.agents.openai_agent import OpenAIAgent as cls
    else:
        from negolib.agents.anthropic_agent import AnthropicAgent as cls  # type: ignore[assignment]
    kwargs: dict[str, Any] = {"api_key_env": spec.api_key_env, "base_url": spec.base_url,
                              "sampling": sampling_config(spec, seed), "scaffold": spec.scaffold, "seed": seed,
                              "role": role}
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


def build_agents(params: Params, names: Sequence[str], seed: int | None = None,
                 cache: ModelCache | None = None) -> dict[str, Agent]:
    """Agents for arm and buyer ``names`` of a profile (sellers get role 'seller', buyers 'buyer')."""
    cache = cache or ModelCache()
    base = params.seed if seed is None else seed
    out: dict[str, Agent] = {}
    for i, n in enumerate(names):
        role = "seller" if n in params.arms else "buyer"
        out[n] = build_agent(n, params.agent(n), base + i, params=params, cache=cache, role=role)
    return out


def trained_ready(params: Params, arm: str) -> tuple[bool, str]:
    """(True, checkpoint) if a ``trained`` arm's checkpoint exists, else (False, why); other arms: True."""
    spec = params.arms[arm]
    if spec.backend == "fixed_opening" and spec.inner:
        return trained_ready(params, spec.inner)
    if spec.backend != "trained":
        return True, ""
    try:
        return True, str(checkpoint_dir(params, spec))
    except FileNotFoundError as exc:
        return False, str(exc)


def train_run(params: Params, run: str, seed: int | None = None, progress: bool = True, resume: bool = True,
              cache: ModelCache | None = None) -> Any:
    """Train (or resume) one GRPO run of a profile into ``training_run_dir(params, run, seed)``.

    The policy starts from the ``init`` arm's weights (or, for ``run@step``, continues from that
    run's checkpoint under a fresh schedule); the run's buyer mixture names profile buyers, built here.
    Returns :class:`negolib.training.TrainResult`.
    """
    import dataclasses

    from negolib.params import train_config, warmup_config
    from negolib.training import train

    r = params.training.runs[run]
    seed = r.seeds[0] if seed is None else seed
    config = train_config(params, run, seed)
    init_name, _, step = r.init.partition("@")
    if init_name in params.arms:
        init = resolve_model_path(params.arms[init_name], params)
    else:  # a continuation: run@step
        parent = training_run_dir(params, init_name, seed) / "checkpoints" / f"checkpoint-{step}"
        if not parent.is_dir():
            raise FileNotFoundError(f"{params.source}: run {run!r} continues from {parent}, which does not exist")
        init = str(parent)
        config = dataclasses.replace(config, continue_from=init)
    buyers = build_agents(params, list(r.buyers), seed, cache)
    out = training_run_dir(params, run, seed)
    warm = warmup_config(params, run, seed)
    if warm is not None:  # supervised format warm-up first; GRPO (and its KL reference) start from it
        import torch

        from negolib.training.data import env_config, scenario_items
        from negolib.training.warmup import run_format_warmup

        cuda = torch.cuda.is_available()
        init = str(run_format_warmup(_model_folder(init), out, warm, scenario_items(config), buyers,
                                     env_config(config), dtype=config.resolved_dtype(cuda),
                                     device="cuda" if cuda else "cpu", progress=progress))
    return train(config, init, out, buyers=buyers, progress=progress, resume=resume)


def _model_folder(path: str) -> str:
    """A packaged model name resolved to its converted local folder; anything else unchanged."""
    from negolib.models import LOCAL_MODELS, local_model_dir

    return str(local_model_dir(path)) if path in LOCAL_MODELS else path


def _local_path(spec: AgentSpec, params: Params) -> str:
    """The folder of an LM arm's weights on this machine (converting a packaged model once)."""
    if spec.backend == "trained":
        return str(checkpoint_dir(params, spec))
    return _model_folder(resolve_model_path(spec, params))


def describe_models(params: Params, names: Sequence[str] | None = None,
                    cache: ModelCache | None = None) -> list[dict[str, Any]]:
    """Per language-model arm: parameter counts, weight size and the chat-template check [App. J].

    Each row: ``arm``, ``model``, ``params``, ``non_embedding_params``, ``gb`` (weights at the arm's
    dtype), ``device``, ``generation_prompt`` (the tag that opens the assistant turn), its token
    count, and ``roundtrip`` ("ok" or the error). Counts come from the config on the meta device (no
    weights are loaded) and nothing is downloaded: a model not on this machine gets ``error``.
    ``cache`` is accepted for symmetry with :func:`build_agents` and unused.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from negolib.chat_template import assert_roundtrip, derive_turn_tags

    rows: list[dict[str, Any]] = []
    for name in names if names is not None else params.lm_arms():
        spec = params.arms[name]
        if spec.backend not in ("hf", "trained", "vllm"):
            continue
        row: dict[str, Any] = {"arm": name, "model": spec.model or f"run {spec.run}"}
        try:
            path = _local_path(spec, params)
            local = Path(path).is_dir()
            config = AutoConfig.from_pretrained(path, local_files_only=not local)
            tok = AutoTokenizer.from_pretrained(path, local_files_only=not local)
            with torch.device("meta"):
                model = AutoModelForCausalLM.from_config(config)
        except Exception as exc:  # no weights here, no checkpoint yet
            rows.append({**row, "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        n = sum(p.numel() for p in model.parameters())
        emb = model.get_input_embeddings().weight.numel()
        width = torch.finfo(getattr(torch, spec.dtype or "float32")).bits // 8
        row.update(params=n, non_embedding_params=n - emb, gb=n * width / 1e9, device=spec.device or "cpu")
        try:
            tags = derive_turn_tags(tok, spec.sampling.thinking)
            dialogue = [{"role": "system", "content": "You sell."}, {"role": "user", "content": "Hello."},
                        {"role": "assistant", "content": "Hi, let's talk."}, {"role": "user", "content": "Price?"},
                        {"role": "assistant", "content": "40."}]
            assert_roundtrip(tok, tags, dialogue, spec.sampling.thinking)
            row.update(generation_prompt=tags.assistant_open.text,
                       generation_prompt_tokens=len(tags.assistant_open.ids), roundtrip="ok")
        except Exception as exc:
            row.update(roundtrip=f"{type(exc).__name__}: {exc}"[:300])
        rows.append(row)
    return rows


class FixedOpeningAgent(Agent):
    """Plays ``inner`` except for its first turn, which is a fixed opening.

    ``opening``: ``"none"`` (a conversational turn naming no term), ``"best"`` (the party's best
    contract) or a number in [0, 1] as a string (a contract worth that U~ to the party).
    """

    backend = "fixed_opening"

    def __init__(self, name: str, inner: Agent, opening: str = "none", seed: int = 0) -> None:
        try:
            check_opening(opening)
        except ValueError as exc:
            raise ValueError(f"opening {exc}") from None
        self.name, self.inner, self.opening, self.seed = name, inner, opening, seed

    def _opening_text(self, view: PartyView) -> str:
        from negolib.agents.scripted import concession_bid
        from negolib.utility import best_contract

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
        for i in first:
            out[i] = AgentReply(self._opening_text(views[i]))
        if rest:
            for i, rep in zip(rest, self.inner.act_batch([views[i] for i in rest])):
                out[i] = rep
        return [r for r in out if r is not None]

    def settings(self) -> dict[str, Any]:
        return {"backend": self.backend, "name": self.name, "opening": self.opening,
                "inner": self.inner.settings()}


__all__ = ["DTYPES", "ModelCache", "FixedOpeningAgent", "OPENINGS", "TINY", "base_arm", "build_agent", "build_agents",
           "check_opening", "check_spec", "checkpoint_dir", "describe_models", "resolve_model_path",
           "sampling_config", "spec_problems", "tiny_model_dir", "train_run", "trained_ready", "training_run_dir"]
