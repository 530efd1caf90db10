"""Parameter profiles: typed, validated YAML files that drive the whole book.

A profile (``params/smoke.yaml``, ``params/default.yaml``, ``params/paper.yaml``) names the arms
(sellers), the buyers, the evaluation scenario set, the training runs, the statistics settings,
the price table and the time budgets. :func:`load_params` validates it against the dataclasses
below: an unknown key or a wrong type is a :class:`~negolib.errors.ValidationError` naming the
file, the dotted field and the allowed keys or types. API keys never appear in a profile: API
agents name the *environment variable* that holds the key (``api_key_env``).

Loading is strict: a key given twice anywhere in the file (:class:`StrictLoader`), two arms or
buyers whose names differ only in case, an empty list where omitting the key means "all"
(``lm_domains: []``), a count or budget that is zero or negative, a budget for a notebook the book
does not have, and two held-out domains without ``evaluation.held_out_domain`` are errors. A value
that an agent would reject when built (sampling, scripted-strategy params, an opening, batch sizes)
is rejected at load by the same check the agent builder runs (:func:`spec_problems`, with the
agents' own declarations, in :mod:`negolib.agent_spec`), so the two can never disagree; so is a training run's
recipe (:class:`~negolib.training.config.TrainConfig`, :class:`~negolib.training.config.WarmupConfig`), and so
is every part of the games' sections (``games.*``: the names each game knows, its recipes, its seeds), typed and
checked by :mod:`negolib.game_params`.

Relative paths in a profile (``output_dir``, ``paper_reported``) resolve against the project root,
the nearest ancestor of the profile holding ``pyproject.toml`` (else the profile's folder).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_type_hints

from negolib.agent_spec import (
    BACKEND_KEYS,
    BACKENDS,
    COMMON_KEYS,
    DTYPES,
    OPENINGS,
    OWN_OPENING,
    AgentSpec,
    Sampling,
    Scaffold,
    check_agent,
    check_opening,
    opening_source,
    spec_problems,
)
from negolib.errors import ValidationError
from negolib.files import DuplicateKeyError, StrictLoader, load_yaml, load_yaml_extending
from negolib.game_params import (
    GAME_LM_FORMS,
    BilateralGameParams,
    GameLM,
    GameSFT,
    GamesParams,
    GameTournament,
    MultiBuyerGameParams,
    MultiProductGameParams,
    build_games,
    check_games,
)
from negolib.games.multi_issue.domains import load_domains
from negolib.games.multi_issue.scripted import STRATEGIES
from negolib.profile_genius import GeniusSource, check_genius, check_genius_names
from negolib.schema import convert, type_name
from negolib.training.config import LessonConfig, TrainConfig, WarmupConfig

PaperSize = Literal["E2B", "E4B", "12B", "31B"]
NOTEBOOKS: tuple[str, ...] = (
    "01_environment", "02_setup", "03_training", "04_evaluation", "05_results", "06_appendix_b_c",
    "07_appendix_d_e", "08_appendix_g_k", "09_beyond", "10_bilateral_trade",
    "11_multi_buyer", "12_multi_product",
)
"""The book's notebooks in order (:mod:`negolib.book` runs them; a profile's ``budgets.notebooks`` names them)."""


# ---------------------------------------------------------------------------------------------
# Dataclasses of a profile (an arm's or a buyer's spec: :mod:`negolib.agent_spec`)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvaluationParams:
    """The paired scenario set [paper §4]: seeds x domains x buyers, and the LM-arm subset.

    ``domains`` / ``lm_domains`` / ``arms``: omitted (null) means all; an empty list is an error.
    ``held_out_domain`` names the held-out domain of the analysis; it is required only when more
    than one evaluated domain is flagged ``held_out`` in its file. ``held_out_extension``: run App. C's
    prespecified extension (double the held-out panel on the next block of evaluation seeds) when its trigger
    fires on the main evaluation (:func:`negolib.evaluation.run_held_out_extension`); it needs a held-out domain.
    ``accept_needs_offer``: the ACCEPT rule of the evaluation and, unless a run's ``config`` sets its own, of
    training. False is the paper's (any ACCEPT closes the deal on the current ledger, §3); True is ours (an ACCEPT
    closes only when the counterpart's last turn parsed as a COUNTER, else it is an invalid action counted as a bad
    parse: :mod:`negolib.games.multi_issue.env`). ``accept_rule_why``: why the profile plays that rule. ``genius``:
    imported (Genius/ANAC) scenarios by name (:mod:`negolib.profile_genius`), which ``domains`` may name.
    """

    buyers: list[str]
    seeds_per_domain: int = 64
    domains: list[str] | None = None
    lm_seeds_per_domain: int | None = None
    lm_domains: list[str] | None = None
    max_rounds: int = 12
    first_mover: Literal["seller", "buyer"] = "seller"
    pilot_episodes: int = 2
    batch_size: int = 64
    arms: list[str] | None = None
    held_out_domain: str | None = None
    held_out_extension: bool = False
    accept_needs_offer: bool = True
    accept_rule_why: str = ""
    genius: dict[str, GeniusSource] | None = None


@dataclass(frozen=True)
class TrainingRun:
    """One GRPO run: the policy's initial weights, its buyer mixture, seeds and TrainConfig overrides.

    ``init`` is an arm name (an ``hf`` arm) or ``run@step`` (a continuation from a checkpoint).
    ``config`` is passed to ``negolib.training.TrainConfig`` as overrides (checked there).
    ``warmup`` (overrides of ``negolib.training.config.WarmupConfig``; absent: none) runs a short
    supervised format warm-up before GRPO; the warmed-up model is then the run's step 0.
    """

    init: str
    buyers: dict[str, float]
    seeds: list[int] = field(default_factory=lambda: [0])
    scaffold: Scaffold = "training"
    config: dict[str, Any] = field(default_factory=dict)
    warmup: dict[str, Any] | None = None
    notes: str = ""


@dataclass(frozen=True)
class TrainingParams:
    """Training runs by name (empty: the profile trains nothing)."""

    runs: dict[str, TrainingRun] = field(default_factory=dict)
    enabled: bool = True


@dataclass(frozen=True)
class StatisticsParams:
    """Bootstrap settings [paper §4, App. K] and the prespecified primary family (pairs ``[arm, base]``).

    ``refine`` (ours, beyond the paper; off by default): re-run at ``refine_resamples`` every design contrast whose
    interval endpoint lies within three Monte Carlo SEs of 0. The paper re-ran only the two App. K contrasts whose
    lower bound sat inside its 10^4 Monte Carlo band; those are re-run at ``refine_resamples`` either way
    (:mod:`negolib.analysis.quoted`)."""

    n_resamples: int = 10_000
    seed: int = 0
    alpha: float = 0.05
    primary: list[list[str]] = field(default_factory=list)
    refine: bool = False
    refine_resamples: int = 100_000


@dataclass(frozen=True)
class SizeGroup:
    """One model size of the study and the arms that play each role in the paper's tables."""

    label: str
    base: str
    paper: PaperSize | None = None
    shared: str | None = None
    shared_early: str | None = None
    lr3: str | None = None
    lr10: str | None = None
    extra: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class DesignParams:
    """How the profile's arms map onto the paper's table rows."""

    sizes: list[SizeGroup] = field(default_factory=list)
    frontier: list[str] = field(default_factory=list)
    buyer_split: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BeyondParams:
    """Beyond-the-paper analyses of notebook 09 (each optional): ``buyer_opens`` (sellers replayed with the buyer
    opening), ``fixed_openings`` (``fixed_opening`` arms), ``efficiency``, ``extra_buyers`` (buyers outside the
    evaluation panel) played by ``extra_buyer_arms``, ``accept_terms`` (sellers replayed with the terms attached
    to an accept applied, as in training: App. A) and ``accept_rule`` (sellers replayed under the other ACCEPT rule
    than ``evaluation.accept_needs_offer``: ours where the profile plays the paper's, and the reverse)."""

    buyer_opens: list[str] = field(default_factory=list)
    fixed_openings: list[str] = field(default_factory=list)
    efficiency: bool = True
    extra_buyers: list[str] = field(default_factory=list)
    extra_buyer_arms: list[str] = field(default_factory=list)
    accept_terms: list[str] = field(default_factory=list)
    accept_rule: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Price:
    """USD per one million input and output tokens (a profile's ``prices.<model>``; the cost table's unit)."""

    input: float
    output: float

    def __post_init__(self) -> None:
        for name in ("input", "output"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
                raise ValueError(f"Price.{name} must be a finite number >= 0, got {v!r}")

    def usd(self, input_tokens: float, output_tokens: float) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1e6


@dataclass(frozen=True)
class Budgets:
    """Wall-clock budgets in seconds: the whole book and, optionally, per notebook."""

    total_s: float = 3600.0
    notebooks: dict[str, float] = field(default_factory=dict)
    cell_timeout_s: float | None = None


@dataclass(frozen=True)
class Params:
    """A validated profile. ``source`` is the file it came from; ``root`` the project root."""

    profile: str
    evaluation: EvaluationParams
    arms: dict[str, AgentSpec]
    buyers: dict[str, AgentSpec]
    description: str = ""
    output_dir: str = ""
    training: TrainingParams = field(default_factory=TrainingParams)
    statistics: StatisticsParams = field(default_factory=StatisticsParams)
    design: DesignParams = field(default_factory=DesignParams)
    beyond: BeyondParams = field(default_factory=BeyondParams)
    prices: dict[str, Price] = field(default_factory=dict)
    budgets: Budgets = field(default_factory=Budgets)
    games: GamesParams = field(default_factory=GamesParams)
    lesson: LessonConfig | None = None  # the matched lesson (notebook 03): see LessonConfig's field help
    paper_reported: str = "params/paper_reported.yaml"
    seed: int = 0
    source: str = field(default="<dict>", compare=False)
    root: str = field(default=".", compare=False)

    # -- resolved paths ----------------------------------------------------------------------
    @property
    def out(self) -> Path:
        """The output folder (``outputs/<profile>`` unless ``output_dir`` says otherwise)."""
        p = Path(self.output_dir or f"outputs/{self.profile}")
        return p if p.is_absolute() else Path(self.root) / p

    @property
    def paper_reported_path(self) -> Path:
        """The paper's numbers: relative to the project root, else to the negobook checkout."""
        p = Path(self.paper_reported)
        if p.is_absolute():
            return p
        local = Path(self.root) / p
        return local if local.exists() else Path(__file__).resolve().parent.parent / p

    def with_output_dir(self, output_dir: str | Path) -> Params:
        """A copy writing under ``output_dir`` (papermill's ``output_dir`` parameter)."""
        return dataclasses.replace(self, output_dir=str(Path(output_dir).resolve()))

    # -- convenience ---------------------------------------------------------------------------
    def is_lm(self, name: str) -> bool:
        """True when arm/buyer ``name`` is (or wraps) a language model."""
        spec = self.agent(name)
        return self.is_lm(spec.inner) if spec.backend == "fixed_opening" and spec.inner else spec.is_lm

    def lm_arms(self) -> list[str]:
        return [a for a in self.arms if self.is_lm(a)]

    def scripted_arms(self) -> list[str]:
        return [a for a in self.arms if not self.is_lm(a)]

    def eval_arms(self) -> list[str]:
        """Arms the evaluation notebook plays (``evaluation.arms`` or every arm)."""
        return list(self.evaluation.arms) if self.evaluation.arms is not None else list(self.arms)

    def agent(self, name: str) -> AgentSpec:
        """The spec of an arm or buyer by name."""
        if name in self.arms:
            return self.arms[name]
        if name in self.buyers:
            return self.buyers[name]
        raise KeyError(f"{self.source}: no arm or buyer named {name!r}; arms: {sorted(self.arms)}, "
                       f"buyers: {sorted(self.buyers)}")

    def game(self, name: str, by: str) -> Any:
        """The section ``games.<name>`` (a game's :mod:`negolib.game_params` section); a
        :class:`~negolib.errors.ValidationError` naming it when the profile has none (``by``: who needs it)."""
        section = getattr(self.games, name, None)
        if section is None:
            raise ValidationError(self.source, f"games.{name}", f"is required by {by} (see params/smoke.yaml)")
        return section

    def hash(self) -> str:
        """Content hash of the profile file (and the paper's numbers), for resume decisions."""
        h = hashlib.sha256()
        for p in (Path(self.source), self.paper_reported_path):
            if p.exists():
                h.update(p.read_bytes())
        h.update(self.output_dir.encode())
        return h.hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# Generic typed construction
# ---------------------------------------------------------------------------------------------

def _convert(value: Any, tp: Any, source: str, where: str) -> Any:
    """:func:`negolib.schema.convert` with a profile's rules: an agent spec anywhere gets the checks of arms and
    buyers (:func:`check_agent`); ``source`` and ``root`` are never read from the file."""
    return convert(value, tp, source, where, hooks=_HOOKS, reserved=_RESERVED)


_RESERVED = {"source", "root"}
_HOOKS = {AgentSpec: check_agent, GeniusSource: check_genius}


# ---------------------------------------------------------------------------------------------
# Cross-field validation
# ---------------------------------------------------------------------------------------------


def _unique(items: list[Any], src: str, where: str) -> None:
    """Raise when ``items`` names something twice."""
    seen: list[Any] = []
    for i, x in enumerate(items):
        if x in seen:
            raise ValidationError(src, f"{where}[{i}]", f"{x!r} is listed twice (first at [{seen.index(x)}])")
        seen.append(x)


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


def _check_budgets(p: Params) -> None:
    b = p.budgets
    _positive(b.total_s, p.source, "budgets.total_s", 0, strict=True)
    _positive(b.cell_timeout_s, p.source, "budgets.cell_timeout_s", 0, strict=True)
    for name, seconds in b.notebooks.items():
        if name not in NOTEBOOKS:
            raise ValidationError(p.source, f"budgets.notebooks.{name}", f"no such notebook; notebooks: "
                                  f"{list(NOTEBOOKS)}")
        _positive(seconds, p.source, f"budgets.notebooks.{name}", 0, strict=True)


def _cross_check(p: Params) -> None:
    src = p.source
    ev = p.evaluation
    check_genius_names(ev.genius, src, "evaluation.genius")
    known_domains = set(load_domains()) | set(ev.genius or {})
    for key in ("domains", "lm_domains", "arms"):
        if getattr(ev, key) == []:
            raise ValidationError(src, f"evaluation.{key}", "is empty; omit the key (or write null) for all "
                                  f"{'arms' if key == 'arms' else 'domains'}, or name at least one")
    for key in ("domains", "lm_domains", "arms", "buyers"):
        _unique(getattr(ev, key) or [], src, f"evaluation.{key}")
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
    _check_budgets(p)
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
        _unique(run.seeds, src, f"training.runs.{rname}.seeds")
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
    _unique([tuple(x) for x in p.statistics.primary], src, "statistics.primary")
    for i, g in enumerate(p.design.sizes):
        for role in ("base", "shared", "shared_early", "lr3", "lr10"):
            arm = getattr(g, role)
            if arm is not None and arm not in p.arms:
                raise ValidationError(src, f"design.sizes[{i}].{role}", f"unknown arm {arm!r}; "
                                      f"allowed: {sorted(p.arms)}")
    _unique(p.design.frontier, src, "design.frontier")
    for arm in p.design.frontier:
        if arm not in p.arms:
            raise ValidationError(src, "design.frontier", f"unknown arm {arm!r}; allowed: {sorted(p.arms)}")
    split = p.design.buyer_split
    if split and (len(split) != 2 or any(b not in ev.buyers for b in split)):
        raise ValidationError(src, "design.buyer_split", f"must be two evaluation buyers [A, B] (split = S vs A "
                              f"minus S vs B), got {split!r}; buyers: {ev.buyers}")
    for key in ("buyer_opens", "fixed_openings", "extra_buyers", "extra_buyer_arms", "accept_terms", "accept_rule"):
        _unique(getattr(p.beyond, key), src, f"beyond.{key}")
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
    if lesson.buyer != "accepting" and lesson.buyer not in STRATEGIES:
        raise ValidationError(p.source, "lesson.buyer",
                              f"must be 'accepting' or a scripted strategy {sorted(STRATEGIES)}, got {lesson.buyer!r}")
    domains = load_domains()
    if lesson.domain not in domains:
        raise ValidationError(p.source, "lesson.domain", f"unknown domain {lesson.domain!r}; known: {sorted(domains)}")
    if domains[lesson.domain].held_out:
        raise ValidationError(p.source, "lesson.domain", f"{lesson.domain!r} is held out: the lesson trains on it")


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------

def project_root(path: str | Path) -> Path:
    """The nearest ancestor of ``path`` holding ``pyproject.toml`` (else the file's folder)."""
    path = Path(path).resolve()
    for parent in [path.parent, *path.parent.parents]:
        if (parent / "pyproject.toml").exists():
            return parent
    return path.parent


def parse_params(data: Any, source: str = "<dict>", root: str | Path = ".") -> Params:
    """Validate a profile mapping (as loaded from YAML) and build :class:`Params`."""
    if not isinstance(data, dict):
        raise ValidationError(source, "<top>", f"must be a mapping, got {type(data).__name__}")
    data = dict(data)
    for section in ("arms", "buyers"):
        raw = data.get(section)
        if not isinstance(raw, dict) or not raw:
            raise ValidationError(source, section, "must be a non-empty mapping of name -> agent spec")
        for name in raw:
            if not isinstance(name, str) or not re.match(r"^[A-Za-z0-9_.-]+$", name):
                raise ValidationError(source, f"{section}.{name}", "names use letters, digits, '_', '.', '-'")
        data[section] = {n: check_agent(s, source, f"{section}.{n}") for n, s in raw.items()}
    hints = get_type_hints(Params)
    fields = {f.name for f in dataclasses.fields(Params)} - _RESERVED
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ValidationError(source, "<top>", f"unknown keys {unknown}; allowed: {sorted(fields)}")
    kwargs: dict[str, Any] = {"source": source, "root": str(root)}
    for f in dataclasses.fields(Params):
        if f.name in _RESERVED or f.name not in data:
            if f.name in ("profile", "evaluation"):
                raise ValidationError(source, f.name, f"is required ({type_name(hints[f.name])})")
            continue
        if f.name != "games":  # built last: its recipes take the profile's seed
            kwargs[f.name] = data[f.name] if f.name in ("arms", "buyers") else \
                _convert(data[f.name], hints[f.name], source, f.name)
    if "games" in data:
        kwargs["games"] = build_games(data["games"], source, kwargs.get("seed", 0))
    p = Params(**kwargs)
    if not re.match(r"^[A-Za-z0-9_.-]+$", p.profile):
        raise ValidationError(source, "profile", f"must use letters, digits, '_', '.', '-', got {p.profile!r}")
    _cross_check(p)
    _check_training(p)
    _check_lesson(p)
    check_games(p.games, p.source)
    return p


def load_params(path: str | Path) -> Params:
    """Load and validate a profile file; errors name the file, the field and what is allowed."""
    path = Path(path)
    if not path.exists():
        raise ValidationError(str(path), "<file>", "does not exist")
    return parse_params(load_yaml_extending(path.resolve()), str(path.resolve()), project_root(path))


def to_dict(obj: Any) -> Any:
    """A plain, YAML-ready view of a params object (for display and the frozen protocol)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if f.name not in _RESERVED}
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [to_dict(v) for v in obj]
    return obj


def spec_dict(spec: AgentSpec) -> dict[str, Any]:
    """Only the keys a backend uses (for arm-matrix tables and the protocol file)."""
    keep = COMMON_KEYS | BACKEND_KEYS[spec.backend]
    d = to_dict(spec)
    return {k: v for k, v in d.items() if k in keep and v not in (None, "", {}, [])}


__all__ = ["AgentSpec", "BilateralGameParams", "DTYPES", "GAME_LM_FORMS", "GameLM", "GameSFT", "GameTournament",
           "GamesParams", "MultiBuyerGameParams", "MultiProductGameParams",
           "NOTEBOOKS", "OPENINGS", "OWN_OPENING", "opening_source", "Sampling",
           "check_opening", "check_agent", "spec_problems",
           "train_config", "warmup_config", "EvaluationParams", "TrainingRun", "TrainingParams", "StatisticsParams",
           "SizeGroup", "DesignParams", "BeyondParams", "Price", "Budgets", "Params", "BACKENDS",
           "BACKEND_KEYS", "DuplicateKeyError", "StrictLoader", "load_params", "load_yaml", "parse_params",
           "project_root", "to_dict", "spec_dict"]
