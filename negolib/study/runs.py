"""A profile's training runs: where they write, the arms they produce, and launching them.

* where a run writes: :func:`training_run_dir` (``<out>/training/<run>[/seed-<s>]``), its checkpoints
  under ``checkpoints/checkpoint-<step>`` (:mod:`negolib.training.checkpoints`) and its format warm-up
  under ``warmup/`` (:mod:`negolib.games.multi_issue.warmup`);
* the arms a run produces: :func:`checkpoint_dir` (a ``trained`` arm's weights), :func:`trained_ready`,
  :func:`arm_steps`, :func:`base_arm`;
* agents for a profile's arms and buyers: :func:`build_agent` / :func:`build_agents` build every backend,
  ``trained`` arms from their run's checkpoint and ``fixed_opening`` arms around their inner arm here,
  the rest through :func:`negolib.agents.factory.build_agent`;
* :func:`describe_models`: parameter counts, weight size and the chat-template check of the LM arms;
* :func:`train_run`: train (or resume) one run of a profile.

A run's recipe comes from the profile: :func:`negolib.params.train_config` and
:func:`negolib.params.warmup_config` (re-exported here).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from negolib.agents.base import Agent
from negolib.agents.factory import (
    FixedOpeningAgent,
    ModelCache,
    check_spec,
    local_agent,
    local_folder,
    spec_model_path,
)
from negolib.agents.factory import build_agent as build_spec_agent
from negolib.core.chat_template import assert_roundtrip, derive_turn_tags
from negolib.core.isolate import run_isolated
from negolib.games.multi_issue.training import env_config, paper_task, scenario_items
from negolib.games.multi_issue.warmup import run_format_warmup, warmup_dir, warmup_ready
from negolib.models import resolve_model_path
from negolib.params import AgentSpec, Params, opening_source, train_config, warmup_config
from negolib.training.checkpoints import last_checkpoint
from negolib.training.grpo import TrainResult, train

# ---------------------------------------------------------------------------------------------
# Where a run writes, and the arms it produces
# ---------------------------------------------------------------------------------------------


def training_run_dir(params: Params, run: str, seed: int | None = None) -> Path:
    """The output folder of one training run (and seed) of a profile."""
    seeds = params.training.runs[run].seeds if run in params.training.runs else [0]
    s = seeds[0] if seed is None else seed
    base = params.out / "training" / run
    return base if len(seeds) <= 1 else base / f"seed-{s}"


def checkpoint_dir(params: Params, spec: AgentSpec) -> Path:
    """The checkpoint of a ``trained`` arm: ``<out>/training/<run>[/seed-<s>]/checkpoints/checkpoint-<step>``
    (the last complete checkpoint when ``step`` is unset). ``step: 0`` is the policy GRPO started
    from: the run's format warm-up model if it has one, else its ``init`` weights."""
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
            return Path(arm_weights(params, init))
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


def arm_weights(params: Params, arm: str) -> str:
    """The folder of an LM arm's weights on this machine: a trained arm's checkpoint, else its model
    (a packaged model converted once; a hub id as given)."""
    spec = params.arms[arm]
    if spec.backend == "trained":
        return str(checkpoint_dir(params, spec))
    return local_folder(spec, params)


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


def arm_steps(params: Params, arm: str) -> int | None:
    """Combined optimizer steps of an arm (``steps``, else a trained arm's ``step``, else the step of the
    last checkpoint it was evaluated from; base = 0)."""
    spec = params.arms[arm]
    if spec.steps is not None:
        return spec.steps
    if spec.backend == "trained":
        if spec.step is not None:
            return spec.step
        try:
            return int(checkpoint_dir(params, spec).name.rsplit("-", 1)[1])
        except (FileNotFoundError, ValueError, IndexError):
            return None
    return 0 if spec.backend in ("hf", "vllm") else None


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


# ---------------------------------------------------------------------------------------------
# Agents for a profile's arms and buyers
# ---------------------------------------------------------------------------------------------


def build_agent(name: str, spec: AgentSpec, seed: int = 0, *, params: Params | None = None,
                cache: ModelCache | None = None, role: str | None = None) -> Agent:
    """The agent for any spec of a profile; ``params`` is needed for ``trained`` and ``fixed_opening`` specs.

    A ``trained`` arm loads its run's checkpoint (:func:`checkpoint_dir`), served like its base model; a
    ``fixed_opening`` arm wraps its inner arm (:class:`~negolib.agents.factory.FixedOpeningAgent`); every
    other backend is :func:`negolib.agents.factory.build_agent`'s. ``seed`` seeds the agent's own
    randomness (prose variety, sampling); ``role`` ("seller"/"buyer") is passed to backends that render
    role-specific prompts.
    """
    cache = cache or ModelCache()
    if spec.backend == "trained":
        check_spec(name, spec)
        if params is None:
            raise ValueError(f"agent {name!r}: a 'trained' spec needs params= to find its checkpoint")
        base = base_arm(params, spec.run or "")
        serving = params.arms[base] if base is not None else spec
        return local_agent(name, str(checkpoint_dir(params, spec)), spec, seed, cache, serving)
    if spec.backend == "fixed_opening":
        check_spec(name, spec)
        if params is None:
            raise ValueError(f"agent {name!r}: a 'fixed_opening' spec needs params= to build its inner arm")
        inner = build_agent(spec.inner or "", params.arms[spec.inner or ""], seed, params=params, cache=cache,
                            role=role)
        own = opening_source(spec.opening)
        opener = None if own is None else inner if own == spec.inner else \
            build_agent(own, params.arms[own], seed, params=params, cache=cache, role=role)
        return FixedOpeningAgent(name, inner, spec.opening or "none", seed, opener=opener)
    return build_spec_agent(name, spec, seed, params=params, cache=cache, role=role)


def build_agents(params: Params, names: Sequence[str], seed: int | None = None,
                 cache: ModelCache | None = None) -> dict[str, Agent]:
    """Agents for arm and buyer ``names`` of a profile (sellers get role 'seller', buyers 'buyer'); the agent of
    ``names[i]`` is seeded ``seed + i`` (``seed`` defaults to the profile's)."""
    agents = LazyAgents(params, names, seed, cache)
    return {n: agents[n] for n in names}


class LazyAgents(Mapping[str, Agent]):
    """The agents :func:`build_agents` builds for ``names`` (the same seeds), each built on first use.

    Iterating or testing membership builds nothing, so a notebook can hold the whole mapping while some arms
    play in other processes (:func:`negolib.study.evaluation.evaluate_arms_apart`): their weights are never
    loaded here. :meth:`built` says which agents exist.
    """

    def __init__(self, params: Params, names: Sequence[str], seed: int | None = None,
                 cache: ModelCache | None = None) -> None:
        base = params.seed if seed is None else seed
        self.params = params
        # each name's seed, in the order of first appearance (a repeated name keeps its last position's seed)
        self.seeds: dict[str, int] = {n: base + i for i, n in enumerate(names)}
        self.cache = cache or ModelCache()
        self._agents: dict[str, Agent] = {}

    @classmethod
    def from_seeds(cls, params: Params, seeds: Mapping[str, int], cache: ModelCache | None = None) -> LazyAgents:
        """The mapping whose agents get exactly ``seeds`` (another process's :attr:`seeds`): the same agents."""
        agents = cls(params, [], cache=cache)
        agents.seeds = dict(seeds)
        return agents

    def __getitem__(self, name: str) -> Agent:
        if name not in self._agents:
            if name not in self.seeds:
                raise KeyError(name)
            role = "seller" if name in self.params.arms else "buyer"
            self._agents[name] = build_agent(name, self.params.agent(name), self.seeds[name], params=self.params,
                                             cache=self.cache, role=role)
        return self._agents[name]

    def __contains__(self, name: object) -> bool:
        return name in self.seeds  # Mapping's own would build the agent

    def __iter__(self) -> Iterator[str]:
        return iter(self.seeds)

    def __len__(self) -> int:
        return len(self.seeds)

    def built(self, name: str) -> bool:
        """True once ``name``'s agent exists in this process."""
        return name in self._agents


def local_weights(params: Params, name: str) -> bool:
    """True when arm ``name`` decodes with weights loaded into this process (an ``hf`` or ``trained`` arm, or a
    ``fixed_opening`` arm around one); a ``vllm``, API or scripted arm is False."""
    spec = params.agent(name)
    if spec.backend == "fixed_opening" and spec.inner:
        return local_weights(params, spec.inner)
    return spec.backend in ("hf", "trained")


def describe_models(params: Params, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Per language-model arm: parameter counts, weight size and the chat-template check [App. J].

    Each row: ``arm``, ``model``, ``params``, ``non_embedding_params``, ``gb`` (weights at the arm's
    dtype), ``device``, ``generation_prompt`` (the tag that opens the assistant turn), its token
    count, and ``roundtrip`` ("ok" or the error). Counts come from the config on the meta device (no
    weights are loaded) and nothing is downloaded: a model not on this machine gets ``error``.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    rows: list[dict[str, Any]] = []
    for name in names if names is not None else params.lm_arms():
        spec = params.arms[name]
        if spec.backend not in ("hf", "trained", "vllm"):
            continue
        row: dict[str, Any] = {"arm": name, "model": spec.model or f"run {spec.run}"}
        try:
            path = arm_weights(params, name)
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


# ---------------------------------------------------------------------------------------------
# Launching a run
# ---------------------------------------------------------------------------------------------


def train_run(params: Params, run: str, seed: int | None = None, progress: bool = True, resume: bool = True,
              cache: ModelCache | None = None, isolate: bool = False) -> TrainResult:
    """Train (or resume) one GRPO run of a profile into ``training_run_dir(params, run, seed)``.

    The policy starts from the ``init`` arm's weights (or, for ``run@step``, continues from that
    run's checkpoint under a fresh schedule); the run's buyer mixture names profile buyers, built here.
    A run with a ``warmup`` is first fine-tuned on scripted sellers' turns (with ``isolate``, in a child process,
    :func:`negolib.core.isolate.run_isolated`, so its memory is returned before GRPO starts; a script that sets it
    needs an ``if __name__ == "__main__":`` guard); GRPO (and its KL reference) start from the warmed-up model.
    """
    r = params.training.runs[run]
    seed = r.seeds[0] if seed is None else seed
    config = train_config(params, run, seed)
    init_name, _, step = r.init.partition("@")
    if init_name in params.arms:
        init = spec_model_path(params.arms[init_name], params)
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

        cuda = torch.cuda.is_available()
        warm_up = functools.partial(run_format_warmup, resolve_model_path(init), out, warm, scenario_items(config),
                                    buyers, env_config(config), dtype=config.resolved_dtype(cuda),
                                    device="cuda" if cuda else "cpu", progress=progress)
        # isolate: in its own process, so the warm-up's model and optimizer memory is not under GRPO's peak
        init = str(run_isolated(warm_up) if isolate and not warmup_ready(out) else warm_up())
    return train(config, init, out, buyers=buyers, progress=progress, resume=resume, task=paper_task(config))


__all__ = ["LazyAgents", "arm_steps", "arm_weights", "base_arm", "build_agent", "build_agents", "checkpoint_dir",
           "describe_models", "local_weights", "train_config", "train_run", "trained_ready", "training_run_dir",
           "warmup_config"]
