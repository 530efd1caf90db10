"""A loaded profile's cross-field checks: what one section says about another (arms and buyers named where they
are used, held-out domains, budgets, training runs and their checkpoints, the lesson, the games' sections), each a
:class:`~negolib.core.errors.ValidationError` naming the profile file and the dotted field. :func:`check_profile` runs
them all; :mod:`negolib.params` calls it after typing the file. Also the two recipes a training run derives from
its profile section (:func:`train_config`, :func:`warmup_config`)."""

from __future__ import annotations

import math
from typing import Any

from negolib.agent_spec import opening_source
from negolib.core.errors import ValidationError
from negolib.game_params import check_games, check_unique
from negolib.games.multi_issue.domains import load_domains
from negolib.games.multi_issue.scenarios import TRAIN_SEED_BLOCK
from negolib.games.multi_issue.scripted import STRATEGIES
from negolib.profile_genius import check_genius_names
from negolib.training.config import OWN_WARMUP_SEED_OFFSET, RULE_BUYERS, TrainConfig, WarmupConfig

Params = Any  # a typed profile (negolib.params.Params, which imports this module)

# ---------------------------------------------------------------------------------------------
# Cross-field validation
# ---------------------------------------------------------------------------------------------


def _positive(value: float | None, src: str, where: str, lo: float = 1, strict: bool = False) -> None:
    """Raise unless ``value`` (when set) is finite and >= ``lo`` (> ``lo`` when ``strict``)."""
    if value is None:
        return
    if not (math.isfinite(value) and (value > lo if strict else value >= lo)):
        raise ValidationError(src, where, f"must be {'> ' if strict else '>= '}{lo:g}, got {value}")


def _check_held_out(p: Params, domains: list[str]) -> None:
    """At most one evaluated domain is flagged held out, unless ``evaluation.held_out_domain`` names it."""
    doms = load_domains()
    held = [d for d in domains if d in doms and doms[d].held_out]  # an imported scenario is never held out
    named = p.evaluation.held_out_domain
    if named is None:
        if len(held) > 1:
            raise ValidationError(p.source, "evaluation.held_out_domain", f"is required: the evaluated domains "
                                  f"hold {len(held)} held-out domains {held}; name the one the analysis holds out")
        return
    if named not in domains:
        raise ValidationError(p.source, "evaluation.held_out_domain", f"must be one of the evaluated domains "
                              f"{domains}, got {named!r}")
    if named not in held:
        raise ValidationError(p.source, "evaluation.held_out_domain", f"{named!r} is not flagged held_out in its "
                              f"domain file (held-out domains: {held})")


def _check_budgets(p: Params, notebooks: tuple[str, ...]) -> None:
    b = p.budgets
    _positive(b.total_s, p.source, "budgets.total_s", 0, strict=True)
    _positive(b.cell_timeout_s, p.source, "budgets.cell_timeout_s", 0, strict=True)
    for name, seconds in b.notebooks.items():
        if name not in notebooks:
            raise ValidationError(p.source, f"budgets.notebooks.{name}", f"no such notebook; notebooks: "
                                  f"{list(notebooks)}")
        _positive(seconds, p.source, f"budgets.notebooks.{name}", 0, strict=True)


def _cross_check(p: Params, notebooks: tuple[str, ...]) -> None:
    src = p.source
    ev = p.evaluation
    check_genius_names(ev.genius, src, "evaluation.genius")
    known_domains = set(load_domains()) | set(ev.genius or {})
    for key in ("domains", "lm_domains", "arms"):
        if getattr(ev, key) == []:
            raise ValidationError(src, f"evaluation.{key}", "is empty; omit the key (or write null) for all "
                                  f"{'arms' if key == 'arms' else 'domains'}, or name at least one")
    for key in ("domains", "lm_domains", "arms", "buyers"):
        check_unique(getattr(ev, key) or [], src, f"evaluation.{key}")
    for key in ("domains", "lm_domains"):
        doms = getattr(ev, key)
        bad = sorted(set(doms or []) - known_domains)
        if bad:
            raise ValidationError(src, f"evaluation.{key}", f"unknown domains {bad}; allowed: "
                                  f"{sorted(known_domains)}")
    evaluated = list(ev.domains) if ev.domains is not None else sorted(known_domains)
    outside = [d for d in ev.lm_domains or [] if d not in evaluated]
    if outside:
        raise ValidationError(src, "evaluation.lm_domains", f"{outside} are not among evaluation.domains {evaluated}")
    _check_held_out(p, evaluated)
    if ev.held_out_extension and not any(getattr(load_domains().get(d), "held_out", False) for d in evaluated):
        raise ValidationError(src, "evaluation.held_out_extension", f"is true, but none of the evaluated domains "
                              f"{evaluated} is held out: there is no held-out panel to extend")
    _positive(ev.batch_size, src, "evaluation.batch_size")
    _positive(ev.pilot_episodes, src, "evaluation.pilot_episodes")
    _check_budgets(p, notebooks)
    names: dict[str, str] = {}
    for section in ("arms", "buyers"):
        for name in getattr(p, section):
            first = names.setdefault(name.lower(), f"{section}.{name}")
            if first != f"{section}.{name}":
                raise ValidationError(src, f"{section}.{name}", f"names the same agent as {first} (names must "
                                      "differ by more than case: outputs are written per name)")
    if not ev.buyers:
        raise ValidationError(src, "evaluation.buyers", "needs at least one buyer")
    for b in ev.buyers + list(p.beyond.extra_buyers):
        if b not in p.buyers:
            raise ValidationError(src, "evaluation.buyers", f"unknown buyer {b!r}; allowed: {sorted(p.buyers)}")
    if not 1 <= ev.seeds_per_domain <= 1000:
        raise ValidationError(src, "evaluation.seeds_per_domain", f"must be in 1..1000, got {ev.seeds_per_domain}")
    if ev.lm_seeds_per_domain is not None and not 1 <= ev.lm_seeds_per_domain <= ev.seeds_per_domain:
        raise ValidationError(src, "evaluation.lm_seeds_per_domain",
                              f"must be in 1..seeds_per_domain ({ev.seeds_per_domain}), got {ev.lm_seeds_per_domain}")
    if ev.max_rounds < 1:
        raise ValidationError(src, "evaluation.max_rounds", f"must be >= 1, got {ev.max_rounds}")
    overlap = sorted(set(p.arms) & set(p.buyers))
    if overlap:
        raise ValidationError(src, "buyers", f"names {overlap} are also arm names; names must be unique")
    for arm in ev.arms or []:
        if arm not in p.arms:
            raise ValidationError(src, "evaluation.arms", f"unknown arm {arm!r}; allowed: {sorted(p.arms)}")
    openers = sorted(a for a, x in p.arms.items() if x.backend not in ("fixed_opening", "scripted"))  # own:<arm>
    for name, spec in {**p.arms, **p.buyers}.items():
        section = "arms" if name in p.arms else "buyers"
        if spec.backend == "trained" and spec.run not in p.training.runs:
            raise ValidationError(src, f"{section}.{name}.run", f"unknown training run {spec.run!r}; "
                                  f"allowed: {sorted(p.training.runs)}")
        if spec.backend == "trained" and spec.train_seed is not None \
                and spec.train_seed not in p.training.runs[spec.run].seeds:
            raise ValidationError(src, f"{section}.{name}.train_seed", f"must be one of the run's seeds "
                                  f"{p.training.runs[spec.run].seeds}, got {spec.train_seed}")
        if spec.backend == "fixed_opening" and spec.inner not in p.arms:
            raise ValidationError(src, f"{section}.{name}.inner", f"unknown arm {spec.inner!r}; "
                                  f"allowed: {sorted(p.arms)}")
        own = opening_source(spec.opening) if spec.backend == "fixed_opening" else None
        if own is not None and own not in openers:
            raise ValidationError(src, f"{section}.{name}.opening", f"'own:' must name a language-model arm of "
                                  f"this profile (not fixed-opening or scripted), got {own!r}; allowed: {openers}")
    for rname, run in p.training.runs.items():
        init, at, step = run.init.partition("@")
        if (at and (init not in p.training.runs or not step.isdigit() or int(step) < 1)) \
                or (not at and init not in p.arms):
            raise ValidationError(src, f"training.runs.{rname}.init", f"must name an arm or 'run@step' (a run of "
                                  f"this profile, a step >= 1), got {run.init!r}; arms: {sorted(p.arms)}; "
                                  f"runs: {sorted(p.training.runs)}")
        check_unique(run.seeds, src, f"training.runs.{rname}.seeds")
        negative = {b: w for b, w in run.buyers.items() if not (math.isfinite(w) and w >= 0)}
        if negative:
            raise ValidationError(src, f"training.runs.{rname}.buyers", f"mixture weights must be >= 0, got "
                                  f"{negative}")
        for b in run.buyers:
            if b not in p.buyers:
                raise ValidationError(src, f"training.runs.{rname}.buyers", f"unknown buyer {b!r}; "
                                      f"allowed: {sorted(p.buyers)}")
        if run.buyers and abs(sum(run.buyers.values()) - 1.0) > 1e-6:
            raise ValidationError(src, f"training.runs.{rname}.buyers", "mixture weights must sum to 1, "
                                  f"got {sum(run.buyers.values())}")
    for i, pair in enumerate(p.statistics.primary):
        if len(pair) != 2 or any(a not in p.arms for a in pair):
            raise ValidationError(src, f"statistics.primary[{i}]", f"must be [arm, base_arm] of known arms, "
                                  f"got {pair!r}; arms: {sorted(p.arms)}")
    if not 0 < p.statistics.alpha < 1 or p.statistics.n_resamples < 1:
        raise ValidationError(src, "statistics", "needs 0 < alpha < 1 and n_resamples >= 1")
    _positive(p.statistics.refine_resamples, src, "statistics.refine_resamples")
    check_unique([tuple(x) for x in p.statistics.primary], src, "statistics.primary")
    for i, g in enumerate(p.design.sizes):
        for role in ("base", "shared", "shared_early", "lr3", "lr10"):
            arm = getattr(g, role)
            if arm is not None and arm not in p.arms:
                raise ValidationError(src, f"design.sizes[{i}].{role}", f"unknown arm {arm!r}; "
                                      f"allowed: {sorted(p.arms)}")
    check_unique(p.design.frontier, src, "design.frontier")
    for arm in p.design.frontier:
        if arm not in p.arms:
            raise ValidationError(src, "design.frontier", f"unknown arm {arm!r}; allowed: {sorted(p.arms)}")
    split = p.design.buyer_split
    if split and (len(split) != 2 or any(b not in ev.buyers for b in split)):
        raise ValidationError(src, "design.buyer_split", f"must be two evaluation buyers [A, B] (split = S vs A "
                              f"minus S vs B), got {split!r}; buyers: {ev.buyers}")
    for key in ("buyer_opens", "fixed_openings", "extra_buyers", "extra_buyer_arms", "accept_terms", "accept_rule"):
        check_unique(getattr(p.beyond, key), src, f"beyond.{key}")
    for key in ("buyer_opens", "fixed_openings", "extra_buyer_arms", "accept_terms", "accept_rule"):
        for arm in getattr(p.beyond, key):
            if arm not in p.arms:
                raise ValidationError(src, f"beyond.{key}", f"unknown arm {arm!r}; allowed: {sorted(p.arms)}")


def train_config(params: Params, run: str, seed: int | None = None) -> TrainConfig:
    """The :class:`~negolib.training.config.TrainConfig` of one run: its ``config`` overrides plus the run's buyer
    mixture, scaffold, seed and the evaluation's turn order and ACCEPT rule (a run's ``config`` may set its own)."""
    r = params.training.runs[run]
    merged: dict[str, Any] = {"scaffold": r.scaffold, "seed": r.seeds[0] if seed is None else seed,
                              "first_mover": params.evaluation.first_mover,
                              "accept_needs_offer": params.evaluation.accept_needs_offer, **r.config}
    if r.buyers:
        merged["buyer_mixture"] = dict(r.buyers)
    return TrainConfig.from_params(merged, source=f"{params.source}: training.runs.{run}.config")


def warmup_config(params: Params, run: str, seed: int | None = None) -> WarmupConfig | None:
    """The run's :class:`~negolib.training.config.WarmupConfig` (seeded by the run seed), or None."""
    r = params.training.runs[run]
    if r.warmup is None:
        return None
    merged = {"seed": r.seeds[0] if seed is None else seed, **r.warmup}
    return WarmupConfig.from_params(merged, source=f"{params.source}: training.runs.{run}.warmup")


def _check_training(p: Params) -> None:
    configs = {run: train_config(p, run) for run in p.training.runs}
    for run in p.training.runs:
        warmup_config(p, run)

    def saved(run: str, step: int, where: str) -> None:
        """``step`` must be a checkpoint run ``run`` writes (every ``save_every`` steps and the last)."""
        c = configs[run]
        every = c.save_every or c.max_steps
        if step > c.max_steps or (step % every and step != c.max_steps):
            raise ValidationError(p.source, where, f"run {run!r} saves checkpoints every {every} steps up to "
                                  f"max_steps {c.max_steps}; step {step} is never written")

    for rname, r in p.training.runs.items():
        parent, at, step = r.init.partition("@")
        if at:
            saved(parent, int(step), f"training.runs.{rname}.init")
    for section in ("arms", "buyers"):
        for name, spec in getattr(p, section).items():
            if spec.backend == "trained" and spec.step:
                saved(spec.run or "", spec.step, f"{section}.{name}.step")


def _check_lesson(p: Params) -> None:
    """The lesson's own rules (:meth:`LessonConfig.problems`), then what it names: a training run of the profile
    with a format warm-up (its step 0 is the lesson's start) and a shipped domain that is not held out."""
    lesson = p.lesson
    if lesson is None:
        return
    for name, problem in lesson.problems():
        raise ValidationError(p.source, f"lesson.{name}", problem)
    run = p.training.runs.get(lesson.start_run)
    if run is None:
        raise ValidationError(p.source, "lesson.start_run",
                              f"no training run {lesson.start_run!r}; runs: {sorted(p.training.runs)}")
    if run.warmup is None:
        raise ValidationError(p.source, "lesson.start_run",
                              f"run {lesson.start_run!r} has no format warm-up: its step 0 would be the raw model")
    room = len(TRAIN_SEED_BLOCK) - OWN_WARMUP_SEED_OFFSET  # training seeds the own warm-up may take
    if lesson.start == "own_warmup" and lesson.start_warmup_scenarios > room:
        raise ValidationError(p.source, "lesson.start_warmup_scenarios",
                              f"training seeds end at {TRAIN_SEED_BLOCK[-1]}: at most {room}")
    if lesson.start == "own_warmup" and run.init not in p.arms:
        raise ValidationError(p.source, "lesson.start",
                              f"own_warmup rebuilds run {lesson.start_run!r}'s warm-up from its initial model, but the "
                              f"run continues another ({run.init!r}): start it from an arm, or use run_warmup")
    if lesson.buyer not in RULE_BUYERS and lesson.buyer not in STRATEGIES:
        raise ValidationError(p.source, "lesson.buyer", f"must be one of {list(RULE_BUYERS)} or a scripted strategy "
                                                        f"{sorted(STRATEGIES)}, got {lesson.buyer!r}")
    unknown = sorted(set(lesson.start_warmup_strategies) - set(STRATEGIES))
    if unknown:
        raise ValidationError(p.source, "lesson.start_warmup_strategies",
                              f"unknown scripted strategies {unknown}; known: {sorted(STRATEGIES)}")
    if lesson.start_warmup_strategies and lesson.start != "own_warmup":
        raise ValidationError(p.source, "lesson.start_warmup_strategies",
                              "only the own warm-up (start: own_warmup) is built from them")
    domains = load_domains()
    if lesson.domain not in domains:
        raise ValidationError(p.source, "lesson.domain", f"unknown domain {lesson.domain!r}; known: {sorted(domains)}")
    if domains[lesson.domain].held_out:
        raise ValidationError(p.source, "lesson.domain", f"{lesson.domain!r} is held out: the lesson trains on it")




def check_profile(p: Params, notebooks: tuple[str, ...]) -> None:
    """Every cross-field check of a typed profile (``notebooks``: the book's notebooks, which budgets may name), in
    order; the first problem raises."""
    _cross_check(p, notebooks)
    _check_training(p)
    _check_lesson(p)
    check_games(p.games, p.source)


__all__ = ["check_profile", "train_config", "warmup_config"]
