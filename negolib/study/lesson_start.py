"""Where the matched lesson starts: the start run's format warm-up, or the same warm-up built on the lesson's task.

Contract::

    start = lesson_start(params, lesson, root)   # a model folder; built (and cached under ``root``) when needed

``lesson.start`` chooses (:class:`~negolib.training.config.LessonConfig`):

- ``"run_warmup"``: step 0 of ``lesson.start_run`` (its format warm-up on that run's domains and buyers), which
  notebook 03 has already built;
- ``"own_warmup"``: the same warm-up recipe (``training.runs.<start_run>.warmup``) from the same initial model, on
  the lesson's own task: ``start_warmup_scenarios`` training seeds of its domain (a block that GRPO's seeds never
  reach), its buyer, rules, horizon and scaffold. A start warmed up on eight domains names other domains' terms in
  its counters; one warmed up on the lesson's task names the task's terms, so GRPO's groups differ in how firmly
  the seller bargains rather than in whether it parsed.

The own warm-up is written under ``root/start_<key>/warmup/model``, where ``key`` hashes everything it depends on;
a finished one is read back, not redone.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from negolib.agents.factory import spec_model_path
from negolib.core.isolate import run_isolated
from negolib.games.multi_issue.training import scenario_items
from negolib.games.multi_issue.warmup import run_format_warmup, warmup_dir, warmup_ready
from negolib.models import resolve_model_path
from negolib.params import Params, warmup_config
from negolib.study.lesson import buyer_name, lesson_buyer, lesson_env, train_config
from negolib.study.runs import training_run_dir
from negolib.training.config import OWN_WARMUP_SEED_OFFSET, LessonConfig, WarmupConfig

__all__ = ["lesson_start", "own_warmup_dir", "own_warmup_items", "own_warmup_plan"]


def own_warmup_plan(params: Params, lesson: LessonConfig) -> tuple[str, WarmupConfig]:
    """``(initial model path, warm-up config)`` of the lesson's own warm-up: the start run's initial model and
    warm-up recipe (seeded by that run's first seed), its scaffolds replaced by the lesson's, and its scripted
    sellers by ``start_warmup_strategies`` where the lesson names them."""
    run = params.training.runs[lesson.start_run]
    init = spec_model_path(params.arms[run.init], params)  # an arm: the profile loader refuses a continuation
    warm = warmup_config(params, lesson.start_run)  # seeded by the run's first seed
    if warm is None:  # the profile loader refuses this; a hand-built Params may not have been checked
        raise ValueError(f"run {lesson.start_run!r} has no warm-up recipe for the lesson's own warm-up")
    strategies = tuple(lesson.start_warmup_strategies) or warm.strategies
    return init, dataclasses.replace(warm, scaffolds=(lesson.scaffold,), strategies=strategies)


def own_warmup_items(lesson: LessonConfig, seed: int = 0) -> list[Any]:
    """The own warm-up's scenarios: ``start_warmup_scenarios`` training seeds of the lesson's domain from
    :data:`OWN_WARMUP_SEED_OFFSET` (GRPO plays seeds ``0 .. steps x scenarios_per_step - 1``; evaluation its
    reserved evaluation seeds), each against the lesson's buyer."""
    config = dataclasses.replace(train_config(lesson, seed), train_seeds_per_domain=lesson.start_warmup_scenarios,
                                 train_seed_offset=OWN_WARMUP_SEED_OFFSET)
    return scenario_items(config)


def own_warmup_dir(params: Params, lesson: LessonConfig, root: str | Path) -> Path:
    """The run folder of the lesson's own warm-up: ``root/start_<key>``, ``key`` a hash of the task fields, the
    recipe and the initial model (another task or recipe: another folder, never a stale model)."""
    return _own_dir(lesson, *own_warmup_plan(params, lesson), root)


def _own_dir(lesson: LessonConfig, init: str, warm: WarmupConfig, root: str | Path) -> Path:
    task = {name: getattr(lesson, name) for name in ("domain", "buyer", "min_valid_terms", "rounds", "scaffold",
                                                      "accept_applies_terms", "start_warmup_scenarios")}
    blob = json.dumps([task, dataclasses.asdict(warm), str(init)], sort_keys=True, default=str)
    return Path(root) / f"start_{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def lesson_start(params: Params, lesson: LessonConfig, root: str | Path, isolate: bool = True,
                 progress: bool = False) -> Path:
    """The model folder the lesson starts from (see the module docstring); the own warm-up is built when it is
    missing (with ``isolate``, in a child process, so its memory is returned before GRPO starts)."""
    if lesson.start == "run_warmup":
        path = warmup_dir(training_run_dir(params, lesson.start_run))  # the run's first seed
        if not path.is_dir():
            raise FileNotFoundError(f"the lesson starts from {path}, the warm-up of run {lesson.start_run!r}, "
                                    "which is not built yet (notebook 03 trains that run first)")
        return path
    init, warm = own_warmup_plan(params, lesson)
    out = _own_dir(lesson, init, warm, root)
    if warmup_ready(out) and warmup_dir(out).is_dir():
        return warmup_dir(out)
    import torch

    seed = params.training.runs[lesson.start_run].seeds[0]  # the buyer's and the scenarios' seed, as the run's
    cuda = torch.cuda.is_available()
    build = functools.partial(run_format_warmup, resolve_model_path(init), out, warm, own_warmup_items(lesson, seed),
                              {buyer_name(lesson): lesson_buyer(lesson, seed)}, lesson_env(lesson),
                              dtype=train_config(lesson, seed).resolved_dtype(cuda), device="cuda" if cuda else "cpu",
                              progress=progress)
    return Path(run_isolated(build) if isolate else build())
