"""What the games' training modules share: the episode adapter, GRPO against a fixed opponent, the paired stages.

Contract: a game's ``training`` module keeps what is particular to it (its reward, the episode adapter's reward and
view rules, its recipe and GRPO config, its stage metrics) and builds on these pieces: :class:`Penalties` (a reward
config of finite non-negative penalties), :class:`TrainingOutcome` and :class:`GameTrainingEpisode` (a game episode
as a :class:`negolib.training.rollout.TrainableEpisode`), :func:`scenario_items` and :func:`run_game_grpo` (GRPO of
the seller through :func:`negolib.training.grpo.train` against one fixed buyer agent), and the stage evaluation:
:func:`stage_seeds` (reserved evaluation seeds), :func:`play_stage_episodes` (every stage's seller against every
opponent on the same scenarios) and :func:`stage_table` (a tidy frame of seed-cluster intervals and paired stage
differences, all from one :class:`negolib.stats.ClusterResampler`).

The stage contract, one for every game: :func:`run_stages` takes a :class:`StageSpec` (the base model, an optional
:class:`SFTStage`, an optional GRPO config, the fixed opponent and a :class:`StageEvaluation`) and a game's
:class:`GameStages` adapter (its ``study`` module's), and returns :class:`StageResults`, plain data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from negolib.agents.base import AgentReply
from negolib.core.sampling import SamplingConfig
from negolib.games.seeds import SeedBlocks
from negolib.games.sft import SFTConfig, SFTResult, run_sft
from negolib.games.toolagents import LMOptions
from negolib.games.toolcalls import StructuredTurn, reply_turn
from negolib.stats import ClusterResampler, RatioStat, resample_stats, summarize
from negolib.training.config import TrainConfig
from negolib.training.data import ScenarioItem
from negolib.training.grpo import TrainingTask, TrainResult, train
from negolib.training.rollout import EpisodeFactory

Chat = list[dict[str, str]]
Terms = dict[str, tuple[np.ndarray, np.ndarray]]

EVAL_OFFSET = 500
"""Stage evaluations use the reserved evaluation seeds from 5,000,500 on: a tournament (whose best transcripts
may be SFT data) plays the block's first seeds, so up to 500 tournament seeds never meet an evaluation scenario."""


# ---------------------------------------------------------------------------------------------
# Reward and the episode adapter
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Penalties:
    """A reward config whose every field is a penalty: a finite number >= 0 (else ``ValueError`` naming it)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{type(self).__name__}.{f.name} must be a finite number >= 0, got {value!r}")


@dataclass(frozen=True)
class TrainingOutcome:
    """A finished episode as the update reads it (:class:`negolib.training.rollout.EpisodeOutcome`)."""

    deal: bool  # a deal (in the markets: at least one sale)
    reward: float
    score: float  # the game's payoff of the policy's role
    turns: int  # turns (in the markets: seller turns) used


class GameTrainingEpisode:
    """A game's episode as a :class:`negolib.training.rollout.TrainableEpisode`. A game fills in
    :meth:`training_outcome` (its reward and score of a finished record) and names its driver floor
    (``floor_penalty``: the reward config's field whose negative an episode the driver cuts gets). Defaults: the
    view of the party to move only, an opponent's reply stepped as its tool calls (:func:`.toolcalls.reply_turn`),
    bad parses counted over dict turns."""

    floor_penalty = "cut_penalty"

    def __init__(self, episode: Any, reward: Any) -> None:
        self.episode, self.reward_config = episode, reward
        self.episode_id = episode.episode_id
        self._outcome: TrainingOutcome | None = None

    def training_outcome(self, record: dict[str, Any]) -> TrainingOutcome:
        raise NotImplementedError

    @property
    def to_move(self) -> str:
        return self.episode.to_move

    @property
    def done(self) -> bool:
        return self.episode.done

    @property
    def turns(self) -> Sequence[Any]:
        return self.episode.turns

    @property
    def outcome(self) -> TrainingOutcome | None:
        if self._outcome is None and self.episode.outcome is not None:
            self._outcome = self.training_outcome(self.episode.record())
        return self._outcome

    @property
    def no_deal_floor(self) -> float:
        return -getattr(self.reward_config, self.floor_penalty)

    def view(self, role: str) -> Any:
        """The view of ``role``, which must be the party to move."""
        if role != self.episode.to_move:
            raise ValueError(f"episode {self.episode_id}: the {self.episode.to_move} is to move, not the {role}")
        return self.episode.view()

    def step(self, turn: Any, input_tokens: int = 0, output_tokens: int = 0, latency_s: float = 0.0) -> Any:
        return self.episode.step(turn, input_tokens, output_tokens, latency_s)

    def opponent_turn(self, reply: AgentReply) -> str | StructuredTurn:
        return reply_turn(reply)  # a scripted or API opponent's calls travel in extra["tool_calls"]

    def bad_parses(self, role: str) -> tuple[int, int]:
        mine = [t for t in self.episode.turns if t["role"] == role]
        return sum(t["parse_error"] is not None for t in mine), len(mine)

    def record(self, **key: Any) -> dict[str, Any]:
        return self.episode.record(**key)


def episode_factory(adapter: Callable[[Any, Any], Any], make_episode: Callable[[Any, str], Any],
                    reward: Any = None) -> EpisodeFactory:
    """Builds ``adapter(make_episode(item.scenario, episode_id), reward)``: a game's training episode of an item's
    scenario."""

    def make(item: ScenarioItem, episode_id: str) -> Any:
        return adapter(make_episode(item.scenario, episode_id), reward)

    return make


def scenario_items(scenarios: Iterable[Any], opponent: str) -> tuple[ScenarioItem, ...]:
    """Each scenario played against the agent named ``opponent`` (keys: the scenarios' ``key``)."""
    return tuple(ScenarioItem(sc, opponent, key=sc.key) for sc in scenarios)


# ---------------------------------------------------------------------------------------------
# GRPO against a fixed opponent
# ---------------------------------------------------------------------------------------------


def run_game_grpo(start_dir: str | Path, out_dir: str | Path, recipe: TrainConfig, opponent: str,
                  scenarios: Callable[[list[int]], Sequence[Any]], train_seeds: list[int],
                  validation_seeds: Callable[[int], list[int]], n_validation: int,
                  make_buyer: Callable[[str, int], Any],
                  make_task: Callable[[Sequence[ScenarioItem], Sequence[ScenarioItem]], TrainingTask],
                  progress: bool = False, resume: bool = True, callbacks: Sequence[Any] = ()) -> TrainResult:
    """GRPO of the seller from ``start_dir`` against the fixed buyer agent ``opponent`` (``make_buyer(opponent,
    seed)``; the recipe's buyer mixture becomes that one agent) on ``scenarios(train_seeds)``, validated (when the
    recipe validates and ``n_validation`` > 0) on ``scenarios(validation_seeds(n_validation))``, into ``out_dir``
    through :func:`negolib.training.grpo.train` with ``make_task(items, validation_items)``."""
    recipe = replace(recipe, buyer_mixture={opponent: 1.0})
    items = scenario_items(scenarios(train_seeds), opponent)
    validation: tuple[ScenarioItem, ...] = ()
    if recipe.validate_every and n_validation:
        validation = scenario_items(scenarios(validation_seeds(n_validation)), opponent)
    buyer = make_buyer(opponent, recipe.seed)
    task = make_task(items, validation)
    return train(recipe, start_dir, out_dir, buyers={opponent: buyer}, progress=progress, resume=resume,
                 callbacks=callbacks, task=task)


# ---------------------------------------------------------------------------------------------
# Evaluating the stages
# ---------------------------------------------------------------------------------------------


def stage_columns(group: str) -> tuple[str, ...]:
    """The columns of :func:`stage_table`'s frame, ``group`` naming the per-row part (a tier, a market)."""
    return ("kind", "stage", "baseline", group, "metric", "estimate", "ci_low", "ci_high", "p_value", "n_episodes",
            "n_clusters")


def agent_name(spec: str | Path) -> str:
    """A stage's seller: a model folder becomes ``hf:<folder>``; anything else is an agent name as given."""
    s = str(spec)
    return s if ":" in s or not Path(s).expanduser().is_dir() else f"hf:{s}"


def stage_seeds(n_seeds: int, offset: int, blocks: SeedBlocks) -> list[int]:
    """``n_seeds`` reserved evaluation seeds of ``blocks`` from ``offset`` into the evaluation block."""
    if n_seeds < 1 or offset < 0 or offset + n_seeds > blocks.max_eval:
        raise ValueError(f"need 1 <= n_seeds and offset + n_seeds <= {blocks.max_eval}; got {n_seeds}, {offset}")
    return [blocks.eval_start + offset + i for i in range(n_seeds)]


def stage_lm(sampling: SamplingConfig | None, max_new_tokens: int, seed: int, max_batch: int,
             prompt_cap: int) -> LMOptions:
    """The stages' language-model options: ``sampling`` (default: ``max_new_tokens`` new tokens) with one sampling
    seed for every stage, the text tool-call format the policy was trained in."""
    return LMOptions(sampling=replace(sampling or SamplingConfig(max_new_tokens=max_new_tokens), seed=seed),
                     max_batch=max_batch, prompt_cap=prompt_cap, tool_format="text")


def play_stage_episodes(game: Any, stages: Mapping[str, str | Path], opponents: Sequence[str],
                        scenarios: Sequence[Any], seed: int, progress: bool,
                        frame: Callable[[list[dict[str, Any]], str, str], pd.DataFrame]) -> pd.DataFrame:
    """Every stage's seller (:func:`agent_name` of its spec) against every buyer agent of ``opponents`` on
    ``scenarios``, all with sampling seed ``seed``: the concatenated ``frame(records, stage, opponent)``."""
    frames = []
    for stage, spec in stages.items():
        seller = game.make_agent(agent_name(spec), "seller", seed)
        for opp in opponents:
            records = game.play(seller, game.make_agent(opp, "buyer", seed), scenarios, seed, progress)
            frames.append(frame(records, stage, opp))
    return pd.concat(frames, ignore_index=True)


def stage_table(episodes: pd.DataFrame, terms: Callable[[pd.DataFrame], Terms], metrics: Sequence[str],
                group: str, known: Sequence[str], key: str | list[str], stages: Sequence[str] | None = None,
                n_resamples: int = 10_000, seed: int = 0, alpha: float = 0.05, counts: Sequence[str] = (),
                keep_unknown: bool = True) -> pd.DataFrame:
    """The tidy frame of played stage episodes (columns :func:`stage_columns` of ``group``), per ``group`` value
    (those of ``known`` present in order, then, with ``keep_unknown``, the others sorted) and ``all``.

    ``terms(df)``: per metric, (numerator, denominator) per valid episode row; a metric is the ratio of their sums.
    ``kind="stage"`` rows: each stage's metrics with percentile intervals over seed clusters (``counts``: totals,
    without an interval). ``kind="difference"`` rows: ``stage`` minus ``baseline`` for every later stage against
    every earlier one (in ``stages`` order; None: their order in ``episodes``) on the episodes valid in both
    (paired by ``key``), with paired seed-cluster intervals and a bootstrap p-value; all intervals from one
    :class:`negolib.stats.ClusterResampler`."""
    order = list(stages) if stages is not None else list(dict.fromkeys(episodes["stage"]))
    ok = episodes[episodes["valid"].astype(bool)]
    res = ClusterResampler(np.sort(pd.unique(ok["cluster"].astype(str))), n_resamples, seed)
    present = set(ok[group])
    parts = [g for g in known if g in present]
    if keep_unknown:
        parts += sorted(present - set(parts))
    parts.append("all")
    by_stage = {s: ok[ok["stage"] == s].set_index(key) for s in order}
    one = np.ones(1)
    rows: list[dict[str, Any]] = []
    stats: list[RatioStat | None] = []

    def sums(df: pd.DataFrame) -> Terms:
        pos = res.positions(df["cluster"].astype(str).to_numpy())
        g = res.n_clusters
        return {m: (np.bincount(pos, n, g), np.bincount(pos, d, g)) for m, (n, d) in terms(df).items()}

    def part(df: pd.DataFrame, value: str) -> pd.DataFrame:
        return df if value == "all" else df[df[group] == value]

    for value in parts:
        for s in order:
            df = part(by_stage[s], value)
            for m, (num, den) in sums(df).items():
                stat = RatioStat(num[:, None], den[:, None], one, 1)
                rows.append({"kind": "stage", "stage": s, "baseline": "", group: value, "metric": m,
                             "estimate": float(num.sum()) if m in counts else stat.value(),
                             "n_episodes": len(df), "n_clusters": int(df["cluster"].nunique())})
                stats.append(None if m in counts else stat)
        for j, s in enumerate(order):
            for b in order[:j]:
                common = by_stage[s].index.intersection(by_stage[b].index)
                a_df, b_df = part(by_stage[s].loc[common], value), part(by_stage[b].loc[common], value)
                sa, sb = sums(a_df), sums(b_df)
                for m in metrics:
                    stat = RatioStat(np.stack([sa[m][0], sb[m][0]], 1), np.stack([sa[m][1], sb[m][1]], 1),
                                     np.ones(2), 1)
                    est = float(sa[m][0].sum() - sb[m][0].sum()) if m in counts else stat.value()
                    rows.append({"kind": "difference", "stage": s, "baseline": b, group: value, "metric": m,
                                 "estimate": est, "n_episodes": len(a_df),
                                 "n_clusters": int(a_df["cluster"].nunique())})
                    stats.append(None if m in counts else stat)
    dists = resample_stats(res, [s for s in stats if s is not None])
    k = 0
    for row, stat in zip(rows, stats):
        if stat is None:
            row.update(ci_low=math.nan, ci_high=math.nan, p_value=math.nan)
            continue
        iv = summarize(dists[:, k], alpha)
        k += 1
        p_value = iv.p_value if row["kind"] == "difference" else math.nan
        row.update(ci_low=iv.ci_low, ci_high=iv.ci_high, p_value=p_value)
    return pd.DataFrame(rows, columns=list(stage_columns(group)))


# ---------------------------------------------------------------------------------------------
# The stage contract: base -> SFT -> GRPO -> paired stage evaluation
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SFTStage:
    """The SFT stage: the recipe, and which deals of the tournament at ``tournament`` become its examples."""

    config: SFTConfig
    tournament: Path  # the tournament's folder or matches file: its best scripted deals are the examples
    select: str = "best_deal"  # per scenario the best deal (best_deal), or the top seller's deals (top_seller)
    min_share: float = 0.0  # the least seller payoff of an example
    max_examples: int | None = None  # the first this many examples (None: all)


@dataclass(frozen=True)
class StageEvaluation:
    """Where the stages are measured: every stage's seller against every opponent on the same reserved scenarios
    (``seeds_per_group`` seeds in each of the game's strata ``groups``), one sampling seed for all, and the
    seed-cluster bootstrap of the paired differences."""

    opponents: tuple[str, ...]  # the buyer agents the stages meet
    groups: tuple[str, ...] | None  # the strata played (price tiers, markets); None: the game's evaluation default
    seeds_per_group: int  # reserved evaluation seeds (seed clusters) per stratum
    seed: int  # the sampling seed of every stage's seller
    sampling: SamplingConfig | None = None  # the language models' sampling (None: the game's default)
    max_batch: int = 16  # episodes decoded together
    prompt_cap: int = 2048  # prompt tokens a language-model seller reads at most
    n_resamples: int = 10_000  # bootstrap resamples of the seed clusters
    bootstrap_seed: int = 0
    alpha: float = 0.05  # 1 - the intervals' coverage


class GameStages:
    """What a game hands :func:`run_stages` (its ``study`` module subclasses it): the SFT examples of a tournament,
    GRPO of the seller against a fixed opponent, and the paired evaluation of named stages. SFT itself is the shared
    :func:`negolib.games.sft.run_sft`."""

    name = "game"
    # The game's GRPO runner ``(start_dir, out_dir, config, *, opponent, progress, resume) -> TrainResult`` and its
    # paired stage table ``(episodes, stages, n_resamples, seed, alpha) -> DataFrame``; set as staticmethods.
    run_grpo: Callable[..., TrainResult] | None = None
    stage_table: Callable[..., pd.DataFrame] | None = None

    def sft_examples(self, sft: SFTStage) -> list[Any]:
        """The seller's conversations to fine-tune on (examples with a ``messages`` chat)."""
        raise NotImplementedError

    def fine_tune(self, start_dir: str | Path, examples: Sequence[Any], out_dir: Path, config: SFTConfig,
                  progress: bool) -> SFTResult:
        """SFT of the model at ``start_dir`` on ``examples`` into ``out_dir`` (:func:`negolib.games.sft.run_sft`)."""
        return run_sft(start_dir, examples, out_dir, config, progress=progress)

    def train_grpo(self, start_dir: str | Path, out_dir: Path, config: Any, opponent: str, progress: bool,
                   resume: bool) -> TrainResult:
        """GRPO of the seller from ``start_dir`` against ``opponent`` under the game's GRPO ``config`` (the game's
        :attr:`run_grpo`)."""
        if self.run_grpo is None:
            raise NotImplementedError(f"{self.name}: no GRPO runner")
        return self.run_grpo(start_dir, out_dir, config, opponent=opponent, progress=progress, resume=resume)

    def tabulate(self, episodes: pd.DataFrame, stages: Mapping[str, str | Path],
                 evaluation: StageEvaluation) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(episodes, the game's :attr:`stage_table` of them under ``evaluation``'s bootstrap), stages in order."""
        if self.stage_table is None:
            raise NotImplementedError(f"{self.name}: no stage table")
        e = evaluation
        return episodes, self.stage_table(episodes, list(stages), e.n_resamples, e.bootstrap_seed, e.alpha)

    def evaluate(self, stages: Mapping[str, str | Path], evaluation: StageEvaluation,
                 progress: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(episodes, table): one row per played episode (with ``stage`` and ``cluster``), and the tidy
        :func:`stage_table` of them (stages in ``stages`` order)."""
        raise NotImplementedError


@dataclass(frozen=True)
class StageSpec:
    """One run of the stage contract: everything :func:`run_stages` needs, by name."""

    game: GameStages  # the game's adapter (its study module's)
    base_model: str | Path  # the base stage: a model folder
    training_dir: Path  # SFT writes <training_dir>/sft, GRPO <training_dir>/grpo
    opponent: str  # GRPO's fixed opponent (a buyer agent of the game)
    evaluation: StageEvaluation
    sft: SFTStage | None = None  # None: no SFT stage
    grpo: Any = None  # the game's GRPO config; None: no GRPO stage
    references: Mapping[str, str] = field(default_factory=dict)  # label -> agent name, evaluated after the stages
    progress: bool = False
    resume: bool = False  # GRPO resumes its checkpoints (False: it starts afresh from the stage before it)


@dataclass(frozen=True)
class StageResults:
    """What :func:`run_stages` produced, as plain data."""

    stages: dict[str, str | Path]  # label -> the seller evaluated (a model folder or an agent name), in order
    trained: str | None  # the GRPO stage's label ("SFT+GRPO" or "GRPO"); None without GRPO
    sft_examples: list[Any]  # the SFT conversations (empty without SFT)
    sft: SFTResult | None
    grpo: TrainResult | None
    episodes: pd.DataFrame  # one row per evaluated episode: the game's outcome columns, stage, cluster
    table: pd.DataFrame  # kind, stage, baseline, <tier or market>, metric, estimate, ci_low, ci_high, p_value, ...


def lm_evaluation(lm: Any, statistics: Any, seed: int, sampling: SamplingConfig | None,
                  groups: Sequence[str] | None) -> StageEvaluation:
    """The stage evaluation of a game section's checked ``lm`` part (its opponent, reserved seeds per stratum, the
    base model's batch and prompt cap) under the profile's ``statistics``, playing the strata ``groups``."""
    return StageEvaluation((lm.opponent,), tuple(groups) if groups else None, lm.eval_seeds_per_tier, seed, sampling,
                           lm.base.batch_size or 16, lm.base.prompt_cap or 2048, statistics.n_resamples,
                           statistics.seed, statistics.alpha)


def sft_stage(sft: Any, tournament: Path) -> SFTStage | None:
    """The SFT stage of a game section's checked ``sft`` part on the tournament at ``tournament`` (None: no SFT)."""
    if sft is None:
        return None
    return SFTStage(sft.config, tournament, sft.select, sft.min_share, sft.max_examples)


def run_stages(spec: StageSpec) -> StageResults:
    """Base -> SFT -> GRPO -> paired stage evaluation, the one contract of every game.

    1. ``base``: ``spec.base_model`` as it is.
    2. ``SFT`` (when ``spec.sft``): the game's examples of the tournament, fine-tuned from the base into
       ``<training_dir>/sft``.
    3. ``SFT+GRPO`` (or ``GRPO`` without SFT; when ``spec.grpo``): GRPO from the last stage against
       ``spec.opponent`` into ``<training_dir>/grpo``.
    4. ``spec.references`` (label -> agent name) join the stages, after them.
    5. Every stage plays ``spec.evaluation``'s opponents on the same reserved scenarios with one sampling seed;
       the table holds each stage's metrics and every later stage minus every earlier one, paired by scenario,
       with seed-cluster intervals. Nothing is printed or displayed: the caller reads :class:`StageResults`."""
    stages: dict[str, str | Path] = {"base": spec.base_model}
    start: str | Path = spec.base_model
    examples: list[Any] = []
    sft = grpo = None
    if spec.sft is not None:
        examples = spec.game.sft_examples(spec.sft)
        sft = spec.game.fine_tune(start, examples, spec.training_dir / "sft", spec.sft.config, spec.progress)
        stages["SFT"] = start = sft.model_dir
    trained = None
    if spec.grpo is not None:
        trained = "SFT+GRPO" if sft is not None else "GRPO"
        grpo = spec.game.train_grpo(start, spec.training_dir / "grpo", spec.grpo, spec.opponent, spec.progress,
                                    spec.resume)
        if grpo.checkpoint is None:
            raise ValueError(f"{spec.game.name}: GRPO saved no checkpoint under {spec.training_dir / 'grpo'}")
        stages[trained] = grpo.checkpoint
    stages.update(spec.references)
    episodes, table = spec.game.evaluate(stages, spec.evaluation, spec.progress)
    return StageResults(stages, trained, examples, sft, grpo, episodes, table)


def grpo_line(results: StageResults, opponent: str, game: str, where: str = "") -> str:
    """GRPO's steps against ``opponent`` (``where``: e.g. " on base") and its final checkpoint, or that the profile's
    ``games.<game>`` section did not train."""
    grpo = results.grpo
    if grpo is None or grpo.checkpoint is None:
        return f"GRPO: not run on this profile (games.{game}.train is false): the base model is evaluated alone"
    return f"GRPO: {grpo.steps} steps against {opponent!r}{where}; final checkpoint {grpo.checkpoint.name}"


def grpo_log(results: StageResults,
             columns: Sequence[str] = ("step", "reward", "score", "deal_rate", "kl", "seconds")) -> pd.DataFrame:
    """GRPO's per-step log: ``columns`` where logged, rounded to 3 decimals (empty without GRPO)."""
    log = pd.DataFrame(results.grpo.log if results.grpo is not None else [])
    return log[[c for c in columns if c in log]].round(3)


__all__ = ["EVAL_OFFSET", "GameStages", "GameTrainingEpisode", "Penalties", "SFTStage", "StageEvaluation",
           "StageResults", "StageSpec", "TrainingOutcome", "agent_name", "episode_factory", "grpo_line", "grpo_log",
           "lm_evaluation", "play_stage_episodes", "sft_stage",
           "run_game_grpo", "run_stages", "scenario_items", "stage_columns", "stage_lm", "stage_seeds", "stage_table"]
