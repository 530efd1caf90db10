"""Parameter profiles: typed, validated YAML files that drive the whole book.

A profile (``params/smoke.yaml``, ``params/default.yaml``, ``params/paper.yaml``) names the arms
(sellers), the buyers, the evaluation scenario set, the training runs, the statistics settings,
the price table and the time budgets. :func:`load_params` validates it against the dataclasses
below: an unknown key or a wrong type is a :class:`~negolib.core.errors.ValidationError` naming the
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
from negolib.core.errors import ValidationError
from negolib.core.files import DuplicateKeyError, StrictLoader, load_yaml, load_yaml_extending
from negolib.core.schema import convert, type_name
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
)
from negolib.params_checks import check_profile, train_config, warmup_config
from negolib.profile_genius import GeniusSource, check_genius
from negolib.training.config import LessonConfig

PaperSize = Literal["E2B", "E4B", "12B", "31B"]
NOTEBOOKS: tuple[str, ...] = (
    "01_environment", "02_setup", "03_training", "04_evaluation", "05_results", "06_appendix_b_c",
    "07_appendix_d_e", "08_appendix_g_k", "09_beyond", "10_bilateral_trade",
    "11_multi_buyer", "12_multi_product",
)
"""The book's notebooks in order (:mod:`negolib.book.context` runs them; a profile's ``budgets.notebooks`` names
them)."""


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
    fires on the main evaluation (:func:`negolib.study.evaluation.run_held_out_extension`); it needs a held-out domain.
    ``accept_needs_offer``: the ACCEPT rule of the evaluation and, unless a run's ``config`` sets its own, of
    training. False is the paper's (any ACCEPT closes the deal on the current ledger, §3); True is ours (an ACCEPT
    closes only when the counterpart's last turn parsed as a COUNTER, else it is an invalid action counted as a bad
    parse: :mod:`negolib.games.multi_issue.env`). ``accept_rule_why``: why the profile plays that rule. ``genius``:
    imported (Genius/ANAC) scenarios by name (:mod:`negolib.profile_genius`), which ``domains`` may name.
    ``pilot_ahead``: play the pilot gate's ``pilot_episodes`` per arm x buyer cell before the evaluation (true, the
    paper's order) or read the gate from the evaluation's own first episodes of every cell after it (false: nothing
    is played twice, but a failing cell can no longer save the evaluation's budget).
    """

    buyers: list[str]
    seeds_per_domain: int = 64
    domains: list[str] | None = None
    lm_seeds_per_domain: int | None = None
    lm_domains: list[str] | None = None
    max_rounds: int = 12
    first_mover: Literal["seller", "buyer"] = "seller"
    pilot_episodes: int = 2
    pilot_ahead: bool = True
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
    (:mod:`negolib.study.analysis.quoted`)."""

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

    def train_seed(self, arm: str) -> int:
        """The training seed a ``trained`` arm reads: its ``train_seed``, else its run's first seed."""
        spec = self.arms[arm]
        return spec.train_seed if spec.train_seed is not None else self.training.runs[spec.run or ""].seeds[0]

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
        :class:`~negolib.core.errors.ValidationError` naming it when the profile has none (``by``: who needs it)."""
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
    """:func:`negolib.core.schema.convert` with a profile's rules: an agent spec anywhere gets the checks of arms and
    buyers (:func:`check_agent`); ``source`` and ``root`` are never read from the file."""
    return convert(value, tp, source, where, hooks=_HOOKS, reserved=_RESERVED)


_RESERVED = {"source", "root"}
_HOOKS = {AgentSpec: check_agent, GeniusSource: check_genius}


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
    check_profile(p, NOTEBOOKS)
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
