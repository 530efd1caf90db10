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
agents' own declarations), so the two can never disagree; so is a training run's recipe
(:class:`~negolib.training.config.TrainConfig`, :class:`~negolib.training.config.WarmupConfig`).

Relative paths in a profile (``output_dir``, ``paper_reported``) resolve against the project root,
the nearest ancestor of the profile holding ``pyproject.toml`` (else the profile's folder).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args, get_type_hints

from negolib.agents.api_agent import RetryPolicy
from negolib.errors import ValidationError
from negolib.files import DuplicateKeyError, StrictLoader, load_yaml, load_yaml_extending
from negolib.games.multi_issue.domains import load_domains
from negolib.games.multi_issue.scripted import STRATEGIES, strategy_param_problems
from negolib.sampling import Decoding
from negolib.schema import build, convert, type_name
from negolib.training.config import LessonConfig, TrainConfig, WarmupConfig

Backend = Literal["scripted", "hf", "vllm", "trained", "openai", "anthropic", "fixed_opening"]
BACKENDS: tuple[str, ...] = get_args(Backend)
Scaffold = Literal["evaluation", "training"]
PaperSize = Literal["E2B", "E4B", "12B", "31B"]
NOTEBOOKS: tuple[str, ...] = (
    "01_environment", "02_setup", "03_training", "04_evaluation", "05_results", "06_appendix_b_c",
    "07_appendix_d_e", "08_appendix_g_k", "09_beyond", "10_bilateral_trade",
    "11_multi_buyer", "12_multi_product",
)
"""The book's notebooks in order (:mod:`negolib.book` runs them; a profile's ``budgets.notebooks`` names them)."""
OPENINGS = ("none", "best")
"""The named openings of a ``fixed_opening`` arm (else ``own:<arm>`` or a utility in [0, 1] as a string)."""
OWN_OPENING = "own:"
"""Prefix of a ``fixed_opening`` arm's ``opening`` that names another arm: ``own:<arm>`` is the first turn that
arm writes on the same scenario against the same buyer (App. A: does the trained arm's own opening carry the gain?)."""
DTYPES = ("float32", "float16", "bfloat16")
"""Weight dtypes a local model loads in (``torch.<dtype>``)."""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECRET_KEYS = {"api_key", "apikey", "key", "token", "secret", "password", "authorization"}


# ---------------------------------------------------------------------------------------------
# Dataclasses of a profile
# ---------------------------------------------------------------------------------------------

Sampling = Decoding  # an arm's decoding settings: one schema, :class:`negolib.sampling.Decoding`


@dataclass(frozen=True)
class AgentSpec:
    """One party: a seller arm or a buyer. Which keys are allowed depends on ``backend``.

    * ``scripted``: ``strategy`` (see :data:`negolib.games.multi_issue.scripted.STRATEGIES`), ``params``;
    * ``hf`` / ``vllm``: ``model`` (registry name, hub id or path), optional ``path`` /
      ``path_env`` (a local directory overriding the hub id), ``sampling``, ``scaffold``;
    * ``trained``: ``run`` (a training run of the profile), ``step`` (checkpoint; none = last) and
      ``train_seed`` (which of the run's seeds; default its first);
    * ``openai`` / ``anthropic``: ``model``, ``base_url``, ``api_key_env`` (never the key);
    * ``fixed_opening``: ``inner`` (an arm name) whose first turn is replaced by ``opening``.
    """

    backend: Backend
    label: str = ""
    paper_ref: str | None = None
    steps: int | None = None
    notes: str = ""
    strategy: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    path: str | None = None
    path_env: str | None = None
    dtype: str | None = None
    device: str | None = None
    batch_size: int | None = None
    prompt_cap: int | None = None
    chat_template: str | None = None
    sampling: Sampling = field(default_factory=Sampling)
    scaffold: Scaffold = "evaluation"
    tensor_parallel: int | None = None
    gpu_memory_utilization: float | None = None
    run: str | None = None
    step: int | None = None
    train_seed: int | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    max_concurrency: int | None = None
    timeout_s: float | None = None
    max_retries: int | None = None
    inner: str | None = None
    opening: str | None = None

    @property
    def is_lm(self) -> bool:
        """True for language-model parties (they play the declared LM subset of scenarios)."""
        return self.backend not in ("scripted", "fixed_opening")

    @property
    def display(self) -> str:
        return self.label or (self.strategy or self.model or self.run or self.backend)


_COMMON_KEYS = {"backend", "label", "paper_ref", "steps", "notes"}
_LM_KEYS = {"model", "path", "path_env", "dtype", "device", "batch_size", "prompt_cap", "chat_template",
            "sampling", "scaffold"}
BACKEND_KEYS: dict[str, set[str]] = {
    "scripted": {"strategy", "params"},
    "hf": set(_LM_KEYS),
    "vllm": _LM_KEYS | {"tensor_parallel", "gpu_memory_utilization"},
    "trained": {"run", "step", "train_seed", "sampling", "scaffold", "dtype", "device", "batch_size",
                "prompt_cap"},
    "openai": {"model", "base_url", "api_key_env", "sampling", "scaffold", "max_concurrency", "timeout_s",
               "max_retries"},
    "anthropic": {"model", "base_url", "api_key_env", "sampling", "scaffold", "max_concurrency",
                  "timeout_s", "max_retries"},
    "fixed_opening": {"inner", "opening"},
}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "scripted": ("strategy",), "hf": ("model",), "vllm": ("model",), "trained": ("run",),
    "openai": ("model", "api_key_env"), "anthropic": ("model", "api_key_env"),
    "fixed_opening": ("inner", "opening"),
}


@dataclass(frozen=True)
class EvaluationParams:
    """The paired scenario set [paper §4]: seeds x domains x buyers, and the LM-arm subset.

    ``domains`` / ``lm_domains`` / ``arms``: omitted (null) means all; an empty list is an error.
    ``held_out_domain`` names the held-out domain of the analysis; it is required only when more
    than one evaluated domain is flagged ``held_out`` in its file. ``held_out_extension``: run App. C's
    prespecified extension (double the held-out panel on the next block of evaluation seeds) when its trigger
    fires on the main evaluation (:func:`negolib.evaluation.run_held_out_extension`); it needs a held-out domain.
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
    """Bootstrap settings [SPEC 8] and the prespecified primary family (pairs ``[arm, base]``)."""

    n_resamples: int = 10_000
    seed: int = 0
    alpha: float = 0.05
    primary: list[list[str]] = field(default_factory=list)
    refine: bool = True
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
    evaluation panel) played by ``extra_buyer_arms``, and ``accept_terms`` (sellers replayed with the terms attached
    to an accept applied, as in training: App. A)."""

    buyer_opens: list[str] = field(default_factory=list)
    fixed_openings: list[str] = field(default_factory=list)
    efficiency: bool = True
    extra_buyers: list[str] = field(default_factory=list)
    extra_buyer_arms: list[str] = field(default_factory=list)
    accept_terms: list[str] = field(default_factory=list)


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
class GameTournament:
    """A round robin of a game's agents in both roles (:func:`negolib.tournament.run_tournament`).

    ``agents``: the game's scripted strategy names, or language-model agents ``hf:<path>``,
    ``openai:<model>``, ``anthropic:<model>`` (which names a game knows is checked when the notebook
    makes its agents: :func:`check_game_agents`); ``seeds_per_tier``: seed clusters per stratum of the
    game's paired scenario set (per price tier for ``bilateral``); ``agent_seed``: the agents' seed.
    """

    agents: list[str]
    seeds_per_tier: int = 8
    agent_seed: int = 0


@dataclass(frozen=True)
class GameLM:
    """The language model a game trains and evaluates: ``base`` (an ``hf`` agent spec: model or local
    path, dtype, device, sampling, batch size, prompt cap), the fixed ``opponent`` it trains and is
    evaluated against (one of the game's agents) and the evaluation's scenarios: ``eval_seeds_per_tier``
    seeds (the seed clusters of its intervals) in each of ``eval_tiers`` (null: every tier)."""

    base: AgentSpec
    opponent: str
    eval_seeds_per_tier: int = 4
    eval_tiers: list[str] | None = None


@dataclass(frozen=True)
class GameSFT:
    """Supervised fine-tuning of a game's language model on the tournament's best transcripts: which examples
    (per scenario the best deal of the scripted sellers, ``best_deal``, or only the top seller's deals,
    ``top_seller``; at least ``min_share`` surplus share; the first ``max_examples``) and ``config``, overrides
    of the game's SFT recipe (checked by :func:`recipe` against the game's class when the notebook builds it)."""

    select: Literal["best_deal", "top_seller"] = "best_deal"
    min_share: float = 0.0
    max_examples: int | None = None
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BilateralGameParams:
    """Bilateral price bargaining (notebook 10): the tournament, the language model and its training (all required
    but the recipes' overrides: the notebook runs every part).

    ``sft``: see :class:`GameSFT`; ``grpo``: overrides of the game's GRPO recipe
    (:class:`negolib.games.bilateral.training.BilateralGRPOConfig`; its ``recipe`` key overrides the shared
    :class:`~negolib.training.config.TrainConfig`), checked by :func:`recipe` when the notebook builds it;
    errors name this file and the dotted field (``games.bilateral.grpo.recipe.max_steps``)."""

    tournament: GameTournament
    lm: GameLM
    sft: GameSFT = field(default_factory=GameSFT)
    grpo: dict[str, Any] = field(default_factory=dict)

    # how the loader checks the section (:func:`_check_game`): the fewest tournament agents, the opponent's names
    # (None: any agent the game builds; else its scripted buyers, named in the error), the evaluation's strata
    min_agents: ClassVar[int] = 2
    opponent_buyers: ClassVar[str | None] = None
    strata: ClassVar[str] = "tier"


@dataclass(frozen=True)
class MarketGameParams:
    """What the market games' sections share (see :class:`MultiProductGameParams`, :class:`MultiBuyerGameParams`):
    the scripted sellers' ``tournament``, the language model ``lm``, ``train`` (false: the notebook evaluates the
    base model only, no GRPO) and ``grpo``, overrides of the game's GRPO recipe; at least one seller, the opponent
    one of the game's scripted buyers (``opponent_buyers``: the names an error gives), markets as strata. ``sft``
    (optional, :class:`GameSFT`): fine-tune the base model on the tournament's best scripted sales first (its
    ``config``: overrides of :class:`negolib.games.sft.SFTConfig`); GRPO then starts from the fine-tuned model."""

    tournament: GameTournament
    lm: GameLM
    train: bool = True
    grpo: dict[str, Any] = field(default_factory=dict)
    sft: GameSFT | None = None

    min_agents: ClassVar[int] = 1  # see BilateralGameParams
    opponent_buyers: ClassVar[str | None] = "pool"
    strata: ClassVar[str] = "market"


@dataclass(frozen=True)
class MultiProductGameParams(MarketGameParams):
    """The multi-product market (notebook 12): the scripted sellers' ``tournament`` against the buyer pool
    (``seeds_per_tier``: seed clusters per market), the language model ``lm`` (``opponent``: the buyer agent it
    trains and is evaluated against; ``eval_tiers``: the evaluation's markets, null: every market), ``train``
    (false: the notebook evaluates the base model only, no GRPO) and ``grpo``, overrides of the game's GRPO recipe
    (:class:`negolib.games.multi_product.training.MultiProductGRPOConfig`; its ``recipe`` key overrides the shared
    :class:`~negolib.training.config.TrainConfig`), checked by :func:`recipe` when the notebook builds it."""

    opponent_buyers: ClassVar[str | None] = "pool, picky"


@dataclass(frozen=True)
class MultiBuyerGameParams(MarketGameParams):
    """One seller, several buyers (notebook 11): the scripted sellers' ``tournament`` against the buyer pool
    (``seeds_per_tier``: seed clusters per market arm), the language model ``lm`` (``opponent``: the buyer-role
    agent it trains and is evaluated against, ``pool`` or one style; ``eval_tiers``: the evaluation's markets, null:
    every market), ``train`` (false: the notebook evaluates the base model only, no GRPO) and ``grpo``, overrides
    of :class:`negolib.games.multi_buyer.training.MultiBuyerGRPOConfig` (its ``turn_budget`` also sets the
    evaluation's; its ``recipe`` key overrides the shared TrainConfig), checked by :func:`recipe` when the notebook
    builds it (errors name the dotted field, ``games.multi_buyer.grpo.recipe.max_steps``)."""

    opponent_buyers: ClassVar[str | None] = "pool, or a style"


@dataclass(frozen=True)
class GamesParams:
    """The other games of the harness, by registered name (absent: the profile plays only the paper's game)."""

    bilateral: BilateralGameParams | None = None
    multi_buyer: MultiBuyerGameParams | None = None
    multi_product: MultiProductGameParams | None = None


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
    buyers (:func:`_check_agent`); ``source`` and ``root`` are never read from the file."""
    return convert(value, tp, source, where, hooks={AgentSpec: _check_agent}, reserved=_RESERVED)


def _build(cls: type, data: Any, source: str, where: str) -> Any:
    """:func:`negolib.schema.build` with a profile's rules (see :func:`_convert`)."""
    return build(cls, data, source, where, hooks={AgentSpec: _check_agent}, reserved=_RESERVED)


_RESERVED = {"source", "root"}


# ---------------------------------------------------------------------------------------------
# Cross-field validation
# ---------------------------------------------------------------------------------------------

def opening_source(opening: str | None) -> str | None:
    """The arm named by an ``own:<arm>`` opening, else None."""
    if isinstance(opening, str) and opening.startswith(OWN_OPENING):
        return opening[len(OWN_OPENING):]
    return None


def check_opening(opening: str) -> None:
    """Raise ``ValueError`` unless ``opening`` is 'none', 'best', ``own:<arm>`` (a non-empty arm name; the profile
    checks that the arm exists) or a utility in [0, 1] as a string."""
    allowed = f"one of {OPENINGS}, 'own:<arm>' or a utility in [0, 1] as a string"
    if opening in OPENINGS:
        return
    own = opening_source(opening)
    if own is not None:
        if not own.strip():
            raise ValueError(f"must be {allowed}: 'own:' needs an arm name, got {opening!r}")
        return
    try:
        u = float(opening)
    except (TypeError, ValueError):
        raise ValueError(f"must be {allowed}, got {opening!r}") from None
    if not 0 <= u <= 1:
        raise ValueError(f"must be {allowed}, got {opening!r}")


def _at_least(value: float | None, lo: float, strict: bool = False) -> bool:
    return value is None or (value > lo if strict else value >= lo)


def spec_problems(spec: AgentSpec) -> list[tuple[str, str]]:
    """(field, problem) for every value of ``spec`` that the agent builder
    (:func:`negolib.agents.factory.build_agent`) would reject; empty when it builds. The loader reports
    these at load (naming the profile field), so a profile that loads never fails for them when agents
    are built; the builder checks them too (:func:`negolib.agents.factory.check_spec`). The checks are
    the agents' own: scripted strategies' declared parameters, the sampling bounds, the API retry policy."""
    b, out = spec.backend, []
    if b == "scripted":
        out += [(k if k == "strategy" else f"params.{k}", why)
                for k, why in strategy_param_problems(spec.strategy or "", spec.params)]
    if b == "fixed_opening":
        try:
            check_opening(spec.opening or "")
        except ValueError as exc:
            out.append(("opening", str(exc)))
    # the sampling values are checked when built (negolib.sampling.Decoding names the field)
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
        for key in ("timeout_s", "max_retries"):
            if getattr(spec, key) is not None:
                try:
                    RetryPolicy(**{key: getattr(spec, key)})
                except ValueError as exc:
                    out.append((key, str(exc).removeprefix(f"{key} ")))
    return out


def _check_agent(raw: Any, source: str, where: str) -> AgentSpec:
    if not isinstance(raw, dict):
        raise ValidationError(source, where, f"must be a mapping with a 'backend' key, got {raw!r}")
    secrets = sorted(k for k in raw if str(k).lower() in _SECRET_KEYS)
    if secrets:
        raise ValidationError(source, f"{where}.{secrets[0]}", "API keys never go in a params file; "
                              "name the environment variable that holds it with 'api_key_env'")
    backend = raw.get("backend")
    if backend not in BACKENDS:
        raise ValidationError(source, f"{where}.backend", f"must be one of {list(BACKENDS)}, got {backend!r}")
    allowed = _COMMON_KEYS | BACKEND_KEYS[backend]
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ValidationError(source, where, f"unknown keys {unknown} for backend {backend!r}; "
                              f"allowed: {sorted(allowed)}")
    spec = build(AgentSpec, raw, source, where, reserved=_RESERVED)
    for key in _REQUIRED[backend]:
        if getattr(spec, key) in (None, ""):
            raise ValidationError(source, f"{where}.{key}", f"is required for backend {backend!r}")
    for key in ("api_key_env", "path_env"):
        val = getattr(spec, key)
        if val is not None and not _ENV_NAME.match(val):
            raise ValidationError(source, f"{where}.{key}", f"must be an environment variable name "
                                  f"(letters, digits, _), got {val!r}")
    if backend == "scripted" and spec.strategy not in STRATEGIES:
        raise ValidationError(source, f"{where}.strategy", f"must be one of {sorted(STRATEGIES)}, "
                              f"got {spec.strategy!r}")
    for key, problem in spec_problems(spec):
        raise ValidationError(source, f"{where}.{key}", problem)
    return spec


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
    held = [d for d in domains if doms[d].held_out]
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
    known_domains = _domain_names()
    ev = p.evaluation
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
    if ev.held_out_extension and not any(load_domains()[d].held_out for d in evaluated):
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
    for key in ("buyer_opens", "fixed_openings", "extra_buyers", "extra_buyer_arms", "accept_terms"):
        _unique(getattr(p.beyond, key), src, f"beyond.{key}")
    for key in ("buyer_opens", "fixed_openings", "extra_buyer_arms", "accept_terms"):
        for arm in getattr(p.beyond, key):
            if arm not in p.arms:
                raise ValidationError(src, f"beyond.{key}", f"unknown arm {arm!r}; allowed: {sorted(p.arms)}")


GAME_LM_FORMS = ("hf", "openai", "anthropic")
"""Language-model agent names a game builds: ``<form>:<path or model>``."""
_GAME_AGENT = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


def _game_agent_problem(name: str) -> str | None:
    """Why ``name`` cannot name a game's agent (None when it can): a scripted name or ``<form>:<rest>``."""
    form, sep, rest = name.partition(":")
    if sep:
        if form not in GAME_LM_FORMS or not rest.strip():
            return (f"{name!r} is not a language-model agent; forms: "
                    f"{', '.join(f'{f}:<...>' for f in GAME_LM_FORMS)}")
        return None
    if not _GAME_AGENT.match(name):
        return f"{name!r}: a scripted agent's name uses letters, digits, '_', '.', '-'"
    return None


def _check_games(p: Params) -> None:
    """The ``games`` sections, each by :func:`_check_game` (bilateral, then multi_buyer, then multi_product)."""
    for name in ("bilateral", "multi_buyer", "multi_product"):
        section = getattr(p.games, name)
        if section is not None:
            _check_game(p.source, f"games.{name}", section)


def _check_game(src: str, where: str, g: Any) -> None:
    """One ``games`` section, by its dataclass's class-level rules (``min_agents``, ``opponent_buyers``,
    ``strata``): tournament agents named once each, in a form a game builds; seed counts in range; an ``sft`` part
    (where the section has one) in range; a local ``hf`` base model for the game's language-model training; the
    opponent in the allowed form; evaluation strata named once each."""
    t = g.tournament
    if len(t.agents) < g.min_agents:
        raise ValidationError(src, f"{where}.tournament.agents", "needs at least one seller" if g.min_agents == 1
                              else f"needs at least two agents, got {t.agents}")
    _unique(t.agents, src, f"{where}.tournament.agents")
    for i, name in enumerate(t.agents):
        problem = _game_agent_problem(name)
        if problem:
            raise ValidationError(src, f"{where}.tournament.agents[{i}]", problem)
    if not 1 <= t.seeds_per_tier <= 1000:
        raise ValidationError(src, f"{where}.tournament.seeds_per_tier", f"must be in 1..1000, got {t.seeds_per_tier}")
    _positive(t.agent_seed, src, f"{where}.tournament.agent_seed", 0)
    sft = getattr(g, "sft", None)
    if sft is not None and sft.max_examples is not None and sft.max_examples < 1:
        raise ValidationError(src, f"{where}.sft.max_examples", f"must be >= 1 (or null: all), got {sft.max_examples}")
    if sft is not None and not (math.isfinite(sft.min_share) and 0 <= sft.min_share <= 1):
        raise ValidationError(src, f"{where}.sft.min_share", f"must be in [0, 1], got {sft.min_share}")
    if g.lm.base.backend != "hf":
        raise ValidationError(src, f"{where}.lm.base.backend", f"must be 'hf' (a local model the game trains), "
                              f"got {g.lm.base.backend!r}")
    if g.opponent_buyers is None:
        problem = _game_agent_problem(g.lm.opponent)
        if problem:
            raise ValidationError(src, f"{where}.lm.opponent", problem)
    elif ":" in g.lm.opponent or _game_agent_problem(g.lm.opponent):
        raise ValidationError(src, f"{where}.lm.opponent", f"must name the game's scripted buyers "
                              f"({g.opponent_buyers}), got {g.lm.opponent!r}")
    if not 1 <= g.lm.eval_seeds_per_tier <= 1000:
        raise ValidationError(src, f"{where}.lm.eval_seeds_per_tier",
                              f"must be in 1..1000, got {g.lm.eval_seeds_per_tier}")
    if g.lm.eval_tiers == []:
        raise ValidationError(src, f"{where}.lm.eval_tiers",
                              f"is empty; omit the key (or write null) for every {g.strata}")
    _unique(g.lm.eval_tiers or [], src, f"{where}.lm.eval_tiers")


def recipe(params: Params, where: str, base: Any, overrides: Mapping[str, Any] | None = None) -> Any:
    """``base`` (a dataclass instance: a game's recipe, built by the caller, which may import the game) with the
    profile's ``overrides`` applied (default: the mapping at the dotted path ``where`` of the profile). Checked by
    this module's mechanism: an unknown key, a wrong type or a value the class rejects is a
    :class:`~negolib.errors.ValidationError` naming the profile and the dotted field. A nested recipe (a dataclass
    field) takes nested overrides over its current value; a :class:`~negolib.training.config.TrainConfig` field
    goes through :meth:`~negolib.training.config.TrainConfig.from_params`."""
    if overrides is None:
        overrides = _at(params, where)
    return _override(base, overrides, params.source, where)


def _at(params: Params, where: str) -> Any:
    obj: Any = params
    for part in where.split("."):
        obj = obj.get(part) if isinstance(obj, Mapping) else getattr(obj, part, None)
        if obj is None:
            return {}
    return obj


def _override(base: Any, overrides: Any, source: str, where: str) -> Any:
    cls = type(base)
    if not isinstance(overrides, Mapping):
        raise ValidationError(source, where, f"must be a mapping of {cls.__name__} overrides, got {overrides!r}")
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValidationError(source, where, f"unknown keys {unknown}; allowed: {sorted(fields)}")
    hints = get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, value in overrides.items():
        sub, current = f"{where}.{key}", getattr(base, key)
        if isinstance(current, TrainConfig):
            if not isinstance(value, Mapping):
                raise ValidationError(source, sub, f"must be a mapping of TrainConfig overrides, got {value!r}")
            try:
                kwargs[key] = TrainConfig.from_params({**current.to_dict(), **value}, source="TrainConfig")
            except ValidationError as exc:
                raise ValidationError(source, f"{sub}.{exc.field}", exc.problem) from None
        elif dataclasses.is_dataclass(current) and not isinstance(current, type):
            kwargs[key] = _override(current, value, source, sub)
        else:
            kwargs[key] = _convert(value, hints[key], source, sub)
    try:
        return dataclasses.replace(base, **kwargs)
    except ValidationError as exc:  # TrainConfig's own checks name their field
        raise ValidationError(source, f"{where}.{exc.field}", exc.problem) from None
    except (TypeError, ValueError) as exc:  # "<Class>.<field> <problem>" names the field, as in _build
        head, _, problem = str(exc).partition(" ")
        owner, _, name = head.rstrip(":").partition(".")
        if owner == cls.__name__ and name in fields:
            raise ValidationError(source, f"{where}.{name}", problem) from None
        raise ValidationError(source, where, str(exc)) from None


def check_game_agents(params: Params, game: str, scripted: Sequence[str],
                      opponents: Sequence[str] | None = None) -> None:
    """Raise :class:`~negolib.errors.ValidationError` naming the profile and the field
    (``games.<game>.tournament.agents[i]``, ``games.<game>.lm.opponent``) for a plain agent name that is not
    one of the game's ``scripted`` strategies (the game's own list, passed in: this layer imports no game).
    With ``opponents``, ``lm.opponent`` must be exactly one of those names instead (no language-model form)."""
    g = getattr(params.games, game, None)
    if g is None:
        raise ValidationError(params.source, f"games.{game}", "is not in this profile")
    named = [(f"games.{game}.tournament.agents[{i}]", a) for i, a in enumerate(g.tournament.agents)]
    if opponents is None:
        named.append((f"games.{game}.lm.opponent", g.lm.opponent))
    for where, name in named:
        if ":" not in name and name not in scripted:
            raise ValidationError(params.source, where, f"game {game!r} has no agent {name!r}; scripted: "
                                  f"{', '.join(scripted)}; or {', '.join(f'{f}:<...>' for f in GAME_LM_FORMS)}")
    if opponents is not None and g.lm.opponent not in opponents:
        raise ValidationError(params.source, f"games.{game}.lm.opponent", f"game {game!r} has no buyer agent "
                              f"{g.lm.opponent!r}; known: {', '.join(opponents)}")


def train_config(params: Params, run: str, seed: int | None = None) -> TrainConfig:
    """The :class:`~negolib.training.config.TrainConfig` of one run: its ``config`` overrides plus the run's buyer
    mixture, scaffold, seed and the evaluation's turn order."""
    r = params.training.runs[run]
    merged: dict[str, Any] = {"scaffold": r.scaffold, "seed": r.seeds[0] if seed is None else seed,
                              "first_mover": params.evaluation.first_mover, **r.config}
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


def _domain_names() -> set[str]:
    return set(load_domains())


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
        data[section] = {n: _check_agent(s, source, f"{section}.{n}") for n, s in raw.items()}
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
        kwargs[f.name] = data[f.name] if f.name in ("arms", "buyers") else \
            _convert(data[f.name], hints[f.name], source, f.name)
    p = Params(**kwargs)
    if not re.match(r"^[A-Za-z0-9_.-]+$", p.profile):
        raise ValidationError(source, "profile", f"must use letters, digits, '_', '.', '-', got {p.profile!r}")
    _cross_check(p)
    _check_training(p)
    _check_lesson(p)
    _check_games(p)
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
    keep = _COMMON_KEYS | BACKEND_KEYS[spec.backend]
    d = to_dict(spec)
    return {k: v for k, v in d.items() if k in keep and v not in (None, "", {}, [])}


__all__ = ["AgentSpec", "BilateralGameParams", "DTYPES", "GAME_LM_FORMS", "GameLM", "GameSFT", "GameTournament",
           "GamesParams", "MultiBuyerGameParams", "MultiProductGameParams",
           "check_game_agents", "recipe", "NOTEBOOKS", "OPENINGS", "OWN_OPENING", "opening_source", "Sampling",
           "check_opening", "spec_problems",
           "train_config", "warmup_config", "EvaluationParams", "TrainingRun", "TrainingParams", "StatisticsParams",
           "SizeGroup", "DesignParams", "BeyondParams", "Price", "Budgets", "Params", "BACKENDS",
           "BACKEND_KEYS", "DuplicateKeyError", "StrictLoader", "load_params", "load_yaml", "parse_params",
           "project_root", "to_dict", "spec_dict"]
