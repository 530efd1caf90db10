"""The games' sections of a profile (``games.bilateral``, ``games.multi_buyer``, ``games.multi_product``): typed
dataclasses whose field help is the schema, built and checked when the profile loads (:func:`build_games`,
:func:`check_games`, called by :func:`negolib.params.load_params`).

A section's recipes are the game's own classes (its GRPO recipe, the shared or the game's SFT recipe): the profile's
mapping overrides the game's defaults key by key (:func:`override`), a nested recipe over its current value. Every
name a section gives is checked against the game's own lists (its scripted sellers, its buyer agents, its tiers or
markets), and the evaluation's reserved seeds against the tournament's. Every problem is a
:class:`~negolib.core.errors.ValidationError` naming the file and the dotted field
(``games.bilateral.grpo.recipe.max_steps``), so notebooks 10-12 read checked values and check nothing themselves.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_type_hints

from negolib.agent_spec import AgentSpec, check_agent
from negolib.core.errors import ValidationError
from negolib.core.schema import Hook, build, convert
from negolib.games import get_game
from negolib.games.bilateral import scenarios as bilateral_scenarios
from negolib.games.bilateral import training as bilateral_training
from negolib.games.bilateral.training import BilateralGRPOConfig, BilateralSFTConfig
from negolib.games.multi_buyer import scenarios as multi_buyer_scenarios
from negolib.games.multi_buyer import training as multi_buyer_training
from negolib.games.multi_buyer.training import MultiBuyerGRPOConfig
from negolib.games.multi_product import scenarios as multi_product_scenarios
from negolib.games.multi_product import training as multi_product_training
from negolib.games.multi_product.training import MultiProductGRPOConfig
from negolib.games.sft import SFTConfig
from negolib.training.config import TrainConfig

GAME_LM_FORMS = ("hf", "openai", "anthropic")
"""Language-model agent names a game builds: ``<form>:<path or model>``."""
_GAME_AGENT = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


def _help(text: str) -> dict[str, str]:
    return {"help": text}


# ---------------------------------------------------------------------------------------------
# The sections
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GameTournament:
    """A round robin of a game's agents (:func:`negolib.tournament.run_tournament`)."""

    agents: list[str] = field(metadata=_help(
        "The agents: the game's scripted seller strategies, or language-model agents hf:<path>, openai:<model>, "
        "anthropic:<model>; each named once."))
    seeds_per_tier: int = field(default=8, metadata=_help(
        "Seed clusters per stratum of the game's paired scenario set (per price tier for bilateral, per market "
        "for the markets): the first reserved evaluation seeds, kept apart from the language model's."))
    agent_seed: int = field(default=0, metadata=_help("The agents' seed (>= 0)."))


@dataclass(frozen=True)
class GameLM:
    """The language model a game trains and evaluates."""

    base: AgentSpec = field(metadata=_help(
        "An hf agent spec (model or local path, dtype, device, sampling, batch size, prompt cap): the model the game "
        "fine-tunes and evaluates."))
    opponent: str = field(metadata=_help(
        "The fixed opponent it trains and is evaluated against: one of the game's agents (bilateral), or one of the "
        "game's scripted buyer agents (the markets: pool, or a style)."))
    eval_seeds_per_tier: int = field(default=4, metadata=_help(
        "Evaluation seeds (the seed clusters of its intervals) in each stratum: reserved seeds past the "
        "tournament's."))
    eval_tiers: list[str] | None = field(default=None, metadata=_help(
        "The evaluation's strata (price tiers or markets), each named once; null: every one."))


@dataclass(frozen=True)
class GameSFT:
    """Supervised fine-tuning of a game's language model on the tournament's best transcripts."""

    select: Literal["best_deal", "top_seller"] = field(default="best_deal", metadata=_help(
        "Which examples: per scenario the best deal of the scripted sellers (best_deal), or only the top seller's "
        "deals (top_seller)."))
    min_share: float = field(default=0.0, metadata=_help("The least surplus share of an example, in [0, 1]."))
    max_examples: int | None = field(default=None, metadata=_help("The first this many examples (null: all)."))
    config: SFTConfig = field(default_factory=SFTConfig, metadata=_help(
        "Overrides of the shared SFT recipe (negolib.games.sft.SFTConfig; its seed: the profile's)."))


@dataclass(frozen=True)
class BilateralSFT(GameSFT):
    """The bilateral game's SFT part: :class:`GameSFT` with the game's own recipe."""

    config: BilateralSFTConfig = field(default_factory=BilateralSFTConfig, metadata=_help(
        "Overrides of the game's SFT recipe (negolib.games.bilateral.training.BilateralSFTConfig; its seed: the "
        "profile's)."))


@dataclass(frozen=True)
class BilateralGameParams:
    """Bilateral price bargaining (notebook 10): the tournament, the language model and its training (the notebook
    runs every part)."""

    tournament: GameTournament = field(metadata=_help("The round robin of the game's agents, in both roles."))
    lm: GameLM = field(metadata=_help("The language model, its opponent and its evaluation."))
    sft: BilateralSFT = field(default_factory=BilateralSFT, metadata=_help("SFT on the tournament's best deals."))
    grpo: BilateralGRPOConfig = field(default_factory=BilateralGRPOConfig, metadata=_help(
        "Overrides of the game's GRPO recipe (negolib.games.bilateral.training.BilateralGRPOConfig; its recipe "
        "key overrides the game's TrainConfig)."))


@dataclass(frozen=True)
class MarketGameParams:
    """What the market games' sections share: the scripted sellers' tournament against the buyer pool, the language
    model, whether GRPO runs, and an optional SFT part (GRPO then starts from the fine-tuned model)."""

    tournament: GameTournament = field(metadata=_help(
        "The scripted sellers (at least one) against the buyer pool, seeds_per_tier seed clusters per market."))
    lm: GameLM = field(metadata=_help("The language model, its buyer opponent and its evaluation markets."))
    train: bool = field(default=True, metadata=_help("false: the notebook evaluates the base model only, no GRPO."))
    sft: GameSFT | None = field(default=None, metadata=_help(
        "Fine-tune the base model on the tournament's best scripted sales first (absent: no SFT)."))


@dataclass(frozen=True)
class MultiBuyerGameParams(MarketGameParams):
    """One seller, several buyers (notebook 11)."""

    grpo: MultiBuyerGRPOConfig = field(default_factory=MultiBuyerGRPOConfig, metadata=_help(
        "Overrides of negolib.games.multi_buyer.training.MultiBuyerGRPOConfig (its turn_budget also sets the "
        "evaluation's; its recipe key overrides the game's TrainConfig, seeded by the profile)."))


@dataclass(frozen=True)
class MultiProductGameParams(MarketGameParams):
    """The multi-product market (notebook 12)."""

    grpo: MultiProductGRPOConfig = field(default_factory=MultiProductGRPOConfig, metadata=_help(
        "Overrides of negolib.games.multi_product.training.MultiProductGRPOConfig (its recipe key overrides the "
        "game's TrainConfig)."))


@dataclass(frozen=True)
class GamesParams:
    """The other games of the harness, by registered name (absent: the profile plays only the paper's game)."""

    bilateral: BilateralGameParams | None = None
    multi_buyer: MultiBuyerGameParams | None = None
    multi_product: MultiProductGameParams | None = None


# ---------------------------------------------------------------------------------------------
# Building: the game's defaults under the profile's overrides
# ---------------------------------------------------------------------------------------------

def override(base: Any, overrides: Any, source: str, where: str) -> Any:
    """``base`` (a dataclass instance: a game's recipe) with the mapping ``overrides`` applied: an unknown key, a
    wrong type or a value the class refuses is a :class:`~negolib.core.errors.ValidationError` naming ``source`` and the
    dotted field under ``where``. A nested dataclass takes nested overrides over its current value; a
    :class:`~negolib.training.config.TrainConfig` goes through its own
    :meth:`~negolib.training.config.TrainConfig.from_params`."""
    cls = type(base)
    if not isinstance(overrides, Mapping):
        raise ValidationError(source, where, f"must be a mapping of {cls.__name__} overrides, got {overrides!r}")
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ValidationError(source, where, f"unknown keys {unknown}; allowed: {sorted(names)}")
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
            kwargs[key] = override(current, value, source, sub)
        else:
            kwargs[key] = convert(value, hints[key], source, sub)
    try:
        return dataclasses.replace(base, **kwargs)
    except ValidationError as exc:  # TrainConfig's own checks name their field
        raise ValidationError(source, f"{where}.{exc.field}", exc.problem) from None
    except (TypeError, ValueError) as exc:  # "<Class>.<field> <problem>" names the field, as in schema.build
        head, _, problem = str(exc).partition(" ")
        owner, _, name = head.rstrip(":").partition(".")
        if owner == cls.__name__ and name in names:
            raise ValidationError(source, f"{where}.{name}", problem) from None
        raise ValidationError(source, where, str(exc)) from None


def _defaults(seed: int) -> dict[type, Callable[[], Any]]:
    """Each recipe class of a section -> its defaults as the notebooks train with them (the profile's ``seed``)."""
    return {
        SFTConfig: lambda: SFTConfig(seed=seed),
        BilateralSFTConfig: lambda: BilateralSFTConfig(seed=seed),
        BilateralGRPOConfig: BilateralGRPOConfig,
        MultiBuyerGRPOConfig: lambda: MultiBuyerGRPOConfig(
            recipe=replace(multi_buyer_training.default_recipe(), seed=seed)),
        MultiProductGRPOConfig: MultiProductGRPOConfig,
    }


def _recipe_hook(make: Callable[[], Any]) -> Hook:
    return lambda value, source, where: override(make(), value, source, where)


def build_games(raw: Any, source: str, seed: int = 0) -> GamesParams:
    """The ``games`` mapping of a profile as :class:`GamesParams`: every part typed, every recipe the game's defaults
    (seeded by the profile's ``seed``) under the profile's overrides, an absent recipe the defaults."""
    if isinstance(raw, Mapping):
        raw = {name: _with_recipes(name, section) for name, section in raw.items()}
    hooks: dict[type, Hook] = {AgentSpec: check_agent}
    hooks.update({cls: _recipe_hook(make) for cls, make in _defaults(seed).items()})
    return build(GamesParams, raw, source, "games", hooks=hooks)


def _with_recipes(name: str, section: Any) -> Any:
    """``section`` with an empty mapping for each recipe it leaves out (so that its defaults are the seeded ones)."""
    if not isinstance(section, Mapping):
        return section
    out = {"grpo": {}, **section}
    sft = out.get("sft", {} if name == "bilateral" else None)  # the bilateral game always fine-tunes
    if isinstance(sft, Mapping):
        out["sft"] = {"config": {}, **sft}
    return out


# ---------------------------------------------------------------------------------------------
# Checking: what each game knows
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Rules:
    """How the loader checks one game's section: the fewest tournament agents, whether the opponent must be one of
    the game's buyer agents, what its strata are called and are, and its seed blocks."""

    min_agents: int
    buyer_opponent: bool
    strata: str
    eval_strata: tuple[str, ...]
    tournament_seeds: Callable[[int], list[int]]
    stage_seeds: Callable[[int], list[int]]


_RULES: dict[str, _Rules] = {
    "bilateral": _Rules(2, False, "tier", tuple(bilateral_scenarios.TIERS), bilateral_scenarios.eval_seeds,
                        bilateral_training.stage_seeds),
    "multi_buyer": _Rules(1, True, "market", tuple(multi_buyer_scenarios.EVAL_MARKETS),
                          multi_buyer_scenarios.eval_seeds, multi_buyer_training.stage_seeds),
    "multi_product": _Rules(1, True, "market", tuple(multi_product_scenarios.EVAL_MARKETS),
                            multi_product_scenarios.eval_seeds, multi_product_training.stage_seeds),
}


def _form_problem(name: str) -> str | None:
    """Why ``name`` cannot name a game's agent in any game (None when it can): a plain name or ``<form>:<rest>``."""
    form, sep, rest = name.partition(":")
    if sep:
        if form not in GAME_LM_FORMS or not rest.strip():
            return (f"{name!r} is not a language-model agent; forms: "
                    f"{', '.join(f'{f}:<...>' for f in GAME_LM_FORMS)}")
        return None
    if not _GAME_AGENT.match(name):
        return f"{name!r}: a scripted agent's name uses letters, digits, '_', '.', '-'"
    return None


def check_unique(items: Sequence[Any], source: str, where: str) -> None:
    """Raise a :class:`ValidationError` at ``where[i]`` when ``items`` names something twice."""
    seen: list[Any] = []
    for i, x in enumerate(items):
        if x in seen:
            raise ValidationError(source, f"{where}[{i}]", f"{x!r} is listed twice (first at [{seen.index(x)}])")
        seen.append(x)


def check_games(games: GamesParams, source: str) -> None:
    """Check every section of ``games`` (bilateral, then multi_buyer, then multi_product) by :func:`check_game`."""
    for name in _RULES:
        section = getattr(games, name)
        if section is not None:
            check_game(name, section, source)


def check_game(name: str, g: Any, source: str) -> None:
    """One section: tournament agents named once each, each a scripted seller of the game or a language-model agent
    (a buyer's name is not a seller); seed counts in range, the evaluation's reserved seeds apart from the
    tournament's; an ``sft`` part in range; a local ``hf`` base model; the opponent an agent the game builds (the
    markets: one of its buyer agents); evaluation strata the game's, named once each."""
    rules, game, where = _RULES[name], get_game(name), f"games.{name}"
    sellers = tuple(game.scripted_strategies())
    buyers = tuple(game.buyer_names()) if rules.buyer_opponent else ()
    lm_forms = ", ".join(f"{f}:<...>" for f in GAME_LM_FORMS)
    t = g.tournament
    if len(t.agents) < rules.min_agents:
        raise ValidationError(source, f"{where}.tournament.agents", "needs at least one seller"
                              if rules.min_agents == 1 else f"needs at least two agents, got {t.agents}")
    check_unique(t.agents, source, f"{where}.tournament.agents")
    for i, agent in enumerate(t.agents):
        problem = _form_problem(agent)
        if problem is None and ":" not in agent and agent not in sellers:
            problem = (f"{agent!r} is a buyer; sellers: {', '.join(sellers)} or a language model" if agent in buyers
                       else f"game {name!r} has no agent {agent!r}; scripted: {', '.join(sellers)}; or {lm_forms}")
        if problem:
            raise ValidationError(source, f"{where}.tournament.agents[{i}]", problem)
    if not 1 <= t.seeds_per_tier <= 1000:
        raise ValidationError(source, f"{where}.tournament.seeds_per_tier",
                              f"must be in 1..1000, got {t.seeds_per_tier}")
    if t.agent_seed < 0:
        raise ValidationError(source, f"{where}.tournament.agent_seed", f"must be >= 0, got {t.agent_seed}")
    _check_sft(g.sft, source, f"{where}.sft")
    _check_lm(name, g.lm, rules, sellers, buyers, source, f"{where}.lm")
    _check_seeds(rules, t.seeds_per_tier, g.lm.eval_seeds_per_tier, source, where)


def _check_sft(sft: GameSFT | None, source: str, where: str) -> None:
    if sft is None:
        return
    if sft.max_examples is not None and sft.max_examples < 1:
        raise ValidationError(source, f"{where}.max_examples", f"must be >= 1 (or null: all), got {sft.max_examples}")
    if not (math.isfinite(sft.min_share) and 0 <= sft.min_share <= 1):
        raise ValidationError(source, f"{where}.min_share", f"must be in [0, 1], got {sft.min_share}")


def _check_lm(name: str, lm: GameLM, rules: _Rules, sellers: Sequence[str], buyers: Sequence[str], source: str,
              where: str) -> None:
    if lm.base.backend != "hf":
        raise ValidationError(source, f"{where}.base.backend", f"must be 'hf' (a local model the game trains), "
                              f"got {lm.base.backend!r}")
    opp = lm.opponent
    if rules.buyer_opponent:
        if opp not in buyers:
            raise ValidationError(source, f"{where}.opponent", f"must name one of the game's scripted buyers; game "
                                  f"{name!r} has no buyer agent {opp!r}; known: {', '.join(buyers)}")
    else:
        problem = _form_problem(opp)
        if problem is None and ":" not in opp and opp not in sellers:
            problem = (f"game {name!r} has no agent {opp!r}; scripted: {', '.join(sellers)}; or "
                       f"{', '.join(f'{f}:<...>' for f in GAME_LM_FORMS)}")
        if problem:
            raise ValidationError(source, f"{where}.opponent", problem)
    if not 1 <= lm.eval_seeds_per_tier <= 1000:
        raise ValidationError(source, f"{where}.eval_seeds_per_tier",
                              f"must be in 1..1000, got {lm.eval_seeds_per_tier}")
    if lm.eval_tiers == []:
        raise ValidationError(source, f"{where}.eval_tiers",
                              f"is empty; omit the key (or write null) for every {rules.strata}")
    check_unique(lm.eval_tiers or [], source, f"{where}.eval_tiers")
    for i, stratum in enumerate(lm.eval_tiers or []):
        if stratum not in rules.eval_strata:
            raise ValidationError(source, f"{where}.eval_tiers[{i}]", f"unknown {rules.strata} {stratum!r}; "
                                  f"{rules.strata}s: {list(rules.eval_strata)}")


def _check_seeds(rules: _Rules, tournament: int, evaluation: int, source: str, where: str) -> None:
    """The evaluation's reserved seeds exist and were not played in the tournament (SFT learns from its deals)."""
    try:
        stage = rules.stage_seeds(evaluation)
    except ValueError as exc:
        raise ValidationError(source, f"{where}.lm.eval_seeds_per_tier", f"too many reserved evaluation seeds "
                              f"({exc})") from None
    seen = sorted(set(rules.tournament_seeds(tournament)) & set(stage))
    if seen:
        raise ValidationError(source, f"{where}.lm.eval_seeds_per_tier", f"evaluation seeds {seen[0]}..{seen[-1]} "
                              f"were played in the tournament (lower {where}.tournament.seeds_per_tier)")


__all__ = ["BilateralGameParams", "BilateralSFT", "GAME_LM_FORMS", "GameLM", "GameSFT", "GameTournament",
           "GamesParams", "MarketGameParams", "MultiBuyerGameParams", "MultiProductGameParams", "build_games",
           "check_game", "check_games", "check_unique", "override"]
