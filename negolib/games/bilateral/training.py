"""Training a bilateral bargainer: SFT on a tournament's best transcripts, then GRPO through the shared trainer.

Contract: :func:`sft_dataset` picks, per scenario, the best deal of the scripted sellers in a tournament's
``matches.jsonl`` (the highest seller surplus share) and replays it into the seller's chat in the local model
agent's text tool-call format (:func:`.prompts.chat_messages` ``"text"``); :func:`run_sft` fine-tunes on it with
TRL's ``SFTTrainer`` (loss on the assistant turns only) and saves an ``hf:<path>`` model; :func:`run_grpo` trains
that model through :func:`negolib.training.grpo.train` with :class:`TrainingEpisode`, this game's adapter of
:class:`negolib.training.rollout.TrainableEpisode`, against one fixed opponent; :func:`evaluate_stages` plays the
stages against the same opponents on the same paired scenarios and returns a tidy frame with seed-cluster intervals.

Measured once with SmolLM2-135M on 2 shared CPU cores (a 5-agent scripted tournament at 8 seeds; 25 best deals; SFT
2 epochs, 14 steps, assistant loss 1.12 -> 0.24; GRPO 3 steps of 2 x 4 episodes against the conceder; 16 paired
episodes per stage vs conceder and Boulware): deal rate 0 -> 0.81 -> 0.88, surplus share (none) -> 0.34 -> 0.13,
IR violations 0 -> 5 -> 8; the SFT model writes valid calls but names prices it does not ground in its cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from negolib.core.sampling import SamplingConfig
from negolib.games import training as shared
from negolib.games.bilateral.env import BilateralConfig, Episode, Role
from negolib.games.bilateral.game import BilateralGame
from negolib.games.bilateral.metrics import outcomes_frame
from negolib.games.bilateral.prompts import chat_messages
from negolib.games.bilateral.protocol import StructuredTurn
from negolib.games.bilateral.scenarios import (
    SEEDS,
    TIERS,
    BilateralScenario,
    scenario_set,
    train_seeds,
    validation_seeds,
)
from negolib.games.bilateral.scripted import make_scripted
from negolib.games.sft import (
    SFTConfig,
    SFTResult,
    encode_conversation,
    masked_loss,
    read_matches,
    run_sft,
)
from negolib.games.sft import select_best as select_best_deals
from negolib.training.config import TrainConfig
from negolib.training.data import ScenarioItem
from negolib.training.grpo import TrainingTask, TrainResult
from negolib.training.rollout import EpisodeFactory

Chat = list[dict[str, str]]
EVAL_OFFSET = shared.EVAL_OFFSET
TrainingOutcome = shared.TrainingOutcome
scenario_items = shared.scenario_items


# ---------------------------------------------------------------------------------------------
# Reward and the episode adapter
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RewardConfig(shared.Penalties):
    """The training reward of the policy's role (ours, the paper's Eq. 1 carried over to this game).

    ``r = payoff - no_deal_penalty [no deal and a zone] - ir(deal) - format_penalty bad/turns``, ``payoff`` being the
    game's (:meth:`BilateralGame.payoffs`: the seller's surplus share on a deal with a zone, clipped to [0, 1]; 0
    otherwise). A no deal costs ``lambda`` only where a zone of agreement existed (a missed trade): with no zone no
    deal is the efficient outcome, and penalising it would pay the seller to sell below cost. A deal past the
    policy's own reservation (a sale below cost) costs ``ir(deal) = lambda + ir_penalty * min(1, shortfall /
    reservation)``: always worse than no deal, the more so the further past (graded, so that a group of loss-making
    deals still carries a gradient towards the reservation). There is no length penalty: the game's deadline
    bounds an episode. An episode the driver cuts (turn or context cap) gets ``-lambda``."""

    no_deal_penalty: float = 0.3  # lambda: a no deal with a non-empty zone; the driver's floor; the base IR cost
    ir_penalty: float = 0.3  # the extra cost of a deal past the own reservation, at 100% of it (graded linearly)
    format_penalty: float = 0.05  # times the fraction of the policy's turns that were bad parses


def role_payoff(record: Mapping[str, Any], role: Role) -> float:
    """The game's payoff of ``role`` in a finished episode record (:meth:`BilateralGame.payoffs`)."""
    p = BilateralGame().payoffs(dict(record))
    return p.seller if role == "seller" else p.buyer


def reward_of(record: Mapping[str, Any], role: Role = "seller", config: RewardConfig | None = None) -> float:
    """The training reward of ``role`` in a finished episode record (see :class:`RewardConfig`)."""
    c = config or RewardConfig()
    out = record["outcome"]
    cost, value = float(record["cost"]), float(record["value"])
    r = role_payoff(record, role)
    if out["deal"]:
        price = float(out["price"])
        shortfall = cost - price if role == "seller" else price - value
        if shortfall > 0:
            r -= c.no_deal_penalty + c.ir_penalty * min(1.0, shortfall / (cost if role == "seller" else value))
    elif value > cost:
        r -= c.no_deal_penalty
    turns = int(out[f"{role}_turns"])
    if turns:
        r -= c.format_penalty * int(out[f"{role}_bad_parses"]) / turns
    return float(r)


class TrainingEpisode(shared.GameTrainingEpisode):
    """A bilateral :class:`~.env.Episode` as a :class:`negolib.training.rollout.TrainableEpisode`: the policy plays
    ``role``; the reward is :func:`reward_of`, the score the game's payoff; a bad parse is a turn whose call had
    no effect (the protocol's bad parses and invalid accepts; a prose-only turn is not one)."""

    floor_penalty = "no_deal_penalty"

    def __init__(self, episode: Episode, role: Role = "seller", reward: RewardConfig | None = None) -> None:
        super().__init__(episode, reward or RewardConfig())
        self.role = role

    def training_outcome(self, record: dict[str, Any]) -> TrainingOutcome:
        return TrainingOutcome(bool(record["outcome"]["deal"]), reward_of(record, self.role, self.reward_config),
                               role_payoff(record, self.role), int(record["outcome"]["turns"]))

    def view(self, role: str) -> Any:
        return self.episode.view(role)  # type: ignore[arg-type]

    def bad_parses(self, role: str) -> tuple[int, int]:
        mine = [t for t in self.episode.turns if t.role == role]
        return sum(t.parse_error is not None for t in mine), len(mine)


def render(view: Any, scaffold: str = "training") -> Chat:
    """The policy's chat in the local agent's text tool-call format (the scaffold is the paper game's: unused)."""
    return chat_messages(view, "text")


def episode_factory(config: BilateralConfig | None = None, role: Role = "seller",
                    reward: RewardConfig | None = None) -> EpisodeFactory:
    """Builds a :class:`TrainingEpisode` of an item's scenario under ``config``."""
    cfg = config or BilateralConfig()

    def make(item: ScenarioItem, episode_id: str) -> TrainingEpisode:
        return TrainingEpisode(Episode(item.scenario, cfg, episode_id), role, reward)

    return make


def roundtrip_chat(config: BilateralConfig | None = None, role: Role = "seller", turns: int = 5) -> Chat:
    """A multi-turn chat of ``role`` (scripted play, text format) for the shared trainer's tag round-trip check."""
    ep = Episode(scenario_set([0], ["1k"])[0], config or BilateralConfig(), "roundtrip")
    agents = {"seller": make_scripted("linear", "seller", 0, surface="text"),
              "buyer": make_scripted("boulware", "buyer", 0, surface="text")}
    while not ep.done and len(ep.turns) < turns:
        ep.step(agents[ep.to_move].act(ep.view()).text)
    return chat_messages(ep.view(role), "text")


def training_task(items: Sequence[ScenarioItem], validation_items: Sequence[ScenarioItem] = (),
                  config: BilateralConfig | None = None, role: Role = "seller",
                  reward: RewardConfig | None = None) -> TrainingTask:
    """The shared trainer's :class:`~negolib.training.grpo.TrainingTask` for this game."""
    return TrainingTask(episode_factory(config, role, reward), render, tuple(items), tuple(validation_items), role,
                        tuple(roundtrip_chat(config, role)))


# ---------------------------------------------------------------------------------------------
# SFT data: the tournament's best transcripts
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SFTExample:
    """One seller conversation: ``messages`` ends on the seller's last turn; the rest says where it came from."""

    messages: tuple[dict[str, str], ...]
    scenario_key: str
    seller: str
    buyer: str
    price: float
    surplus_share: float  # the game's payoff of the seller


def replay(record: Mapping[str, Any]) -> Episode:
    """The episode of a bilateral record, replayed turn by turn (its outcome must match the record's)."""
    sc = BilateralScenario(str(record["tier"]), int(record["seed"]), float(record["cost"]), float(record["value"]))
    ep = Episode(sc, BilateralConfig(**record["config"]), str(record.get("scenario_key", sc.key)))
    for t in record["turns"]:
        calls = t.get("raw_tool_calls")
        ep.step(StructuredTurn(t["raw"], calls) if calls is not None else t["raw"])
    want, got = record.get("outcome"), ep.outcome
    if want is None or got is None or bool(want["deal"]) != got.deal or want["price"] != got.price:
        raise ValueError(f"record {sc.key} does not replay to its outcome ({want} vs {got})")
    return ep


def seller_chat(record: Mapping[str, Any]) -> Chat:
    """The seller's conversation of a finished record, ending on its last turn, as the local agent is prompted
    (:func:`.prompts.chat_messages` in text format: each prefix ending on a user message is that turn's prompt)."""
    ep = replay(record)
    msgs = chat_messages(ep.view("seller"), "text")
    return msgs[:-1]  # the last user message asks for a turn after the end


def _deal_in_zone(rec: Mapping[str, Any]) -> bool:
    """A deal at a price between the seller's cost and the buyer's value (no individual-rationality violation)."""
    out = rec["outcome"]
    price = out.get("price")
    return bool(out["deal"]) and price is not None and float(rec["cost"]) <= float(price) <= float(rec["value"])


def select_best(matches: Iterable[Any], sellers: Sequence[str] | None = None,
                opponents: Sequence[str] | None = None,
                select: Literal["best_deal", "top_seller"] = "best_deal") -> list[dict[str, Any]]:
    """Per scenario, the best deal among the candidate matches (one per scenario key, in key order): the shared
    :func:`negolib.games.sft.select_best` with the seller's surplus share as the payoff and a deal inside the zone
    (no individual-rationality violation) as a valid one; ties to fewer turns, then seller and buyer name."""
    return select_best_deals(matches, lambda rec: role_payoff(rec, "seller"), game="bilateral", deal_ok=_deal_in_zone,
                             sellers=sellers, opponents=opponents, select=select,
                             n_turns=lambda rec: int(rec["outcome"]["turns"]))


def sft_dataset(source: str | Path | Iterable[Any], sellers: Sequence[str] | None = None,
                opponents: Sequence[str] | None = None, select: Literal["best_deal", "top_seller"] = "best_deal",
                min_share: float = 0.0, max_examples: int | None = None) -> list[SFTExample]:
    """The SFT conversations of a tournament (its directory, its ``matches.jsonl`` or its match records): the
    seller's chat of each scenario's best deal (:func:`select_best`) with a surplus share of at least
    ``min_share``, in scenario-key order (the first ``max_examples``)."""
    matches = read_matches(source) if isinstance(source, (str, Path)) else list(source)
    out = []
    for r in select_best(matches, sellers, opponents, select):
        share = role_payoff(r["record"], "seller")
        if share < min_share:
            continue
        out.append(SFTExample(tuple(seller_chat(r["record"])), r["scenario_key"], r["seller"], r["buyer"],
                              float(r["record"]["outcome"]["price"]), share))
    return out[:max_examples] if max_examples is not None else out


# ---------------------------------------------------------------------------------------------
# SFT (the shared :mod:`negolib.games.sft`, with this game's recipe defaults)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BilateralSFTConfig(SFTConfig):
    """Supervised fine-tuning with TRL's ``SFTTrainer`` on the assistant turns (ours; the shared fields)."""


# ---------------------------------------------------------------------------------------------
# GRPO against a fixed opponent
# ---------------------------------------------------------------------------------------------


def default_recipe() -> TrainConfig:
    """The shared GRPO recipe sized for this game on CPU (ours): 4 scenarios x 4 rollouts a step, 8 steps, a seller
    turn of at most 96 new tokens, 5 seller turns (+1 for the driver), no validation."""
    return TrainConfig(
        scenarios_per_step=4, rollouts_per_scenario=4, micro_batch_size=4, max_steps=8, learning_rate=1e-5,
        warmup_steps=1, max_new_tokens=96, max_prompt_tokens=1536, max_context_tokens=4096, max_rollout_turns=6,
        validate_every=0, save_every=8, buyer_mixture={"conceder": 1.0},
    )


@dataclass(frozen=True)
class BilateralGRPOConfig:
    """GRPO of the seller in this game through the shared trainer (ours)."""

    tiers: tuple[str, ...] = tuple(TIERS)  # price tiers of the training scenarios
    train_seeds_per_tier: int = 8  # training scenarios: these many seeds (the low block) in every tier
    train_seed_offset: int = 0  # first training seed
    validation_seeds_per_tier: int = 1  # validation scenarios per tier (used when recipe.validate_every > 0)
    game: BilateralConfig = field(default_factory=BilateralConfig)  # deadline and first mover
    reward: RewardConfig = field(default_factory=RewardConfig)  # see RewardConfig
    recipe: TrainConfig = field(default_factory=default_recipe)  # the shared recipe; its buyer mixture is the opponent

    def __post_init__(self) -> None:
        unknown = [t for t in self.tiers if t not in TIERS]
        if not self.tiers or unknown:
            raise ValueError(f"BilateralGRPOConfig.tiers: unknown {unknown}; known: {list(TIERS)}")
        if self.train_seeds_per_tier < 1 or self.validation_seeds_per_tier < 0:
            raise ValueError("BilateralGRPOConfig: train_seeds_per_tier >= 1, validation_seeds_per_tier >= 0")


def run_grpo(start_dir: str | Path, out_dir: str | Path, config: BilateralGRPOConfig | None = None,
             opponent: str = "conceder", progress: bool = False, resume: bool = True,
             callbacks: Sequence[Any] = ()) -> TrainResult:
    """GRPO of the seller from ``start_dir`` (e.g. the SFT model) against the fixed ``opponent`` (a scripted
    strategy or any agent name :meth:`BilateralGame.make_agent` builds, as the buyer) into ``out_dir``, through
    :func:`negolib.training.grpo.train` (checkpoints, logs and transcripts as there; the final checkpoint loads as
    ``hf:<checkpoint>``)."""
    c = config or BilateralGRPOConfig()
    game = BilateralGame(c.game)
    return shared.run_game_grpo(start_dir, out_dir, c.recipe, opponent, lambda seeds: scenario_set(seeds, c.tiers),
                         train_seeds(c.train_seeds_per_tier, c.train_seed_offset), validation_seeds,
                         c.validation_seeds_per_tier, lambda name, seed: game.make_agent(name, "buyer", seed),
                         lambda items, validation: training_task(items, validation, c.game, "seller", c.reward),
                         progress, resume, callbacks)


# ---------------------------------------------------------------------------------------------
# Evaluating the stages
# ---------------------------------------------------------------------------------------------

STAGE_COLUMNS = shared.stage_columns("tier")
METRICS = ("deal_rate", "surplus_share", "ir_violation_rate", "ir_violations")
COUNTS = ("ir_violations",)  # totals, without an interval


def stage_seeds(n_seeds: int, offset: int = EVAL_OFFSET) -> list[int]:
    """``n_seeds`` reserved evaluation seeds from ``offset`` into the block."""
    return shared.stage_seeds(n_seeds, offset, SEEDS)


def play_stages(stages: Mapping[str, str | Path], opponents: Sequence[str] = ("conceder",), n_seeds: int = 8,
                tiers: Sequence[str] | None = None, seed: int = 0, sampling: SamplingConfig | None = None,
                config: BilateralConfig | None = None, max_batch: int = 16, prompt_cap: int = 2048,
                progress: bool = False, seed_offset: int = EVAL_OFFSET) -> pd.DataFrame:
    """Every stage's seller (a model folder or an agent name) against every opponent (as buyer) on the same
    evaluation scenarios (:func:`stage_seeds` in every tier), all sellers with the same sampling seed: one row per
    episode, :func:`.metrics.outcomes_frame`'s columns plus ``stage``, ``opponent`` and ``cluster`` (the seed)."""
    if not stages:
        raise ValueError("play_stages: no stages")
    game = BilateralGame(config, shared.stage_lm(sampling, 128, seed, max_batch, prompt_cap))
    scenarios = scenario_set(stage_seeds(n_seeds, seed_offset), tiers)

    def frame(records: list[dict[str, Any]], stage: str, opp: str) -> pd.DataFrame:
        df = outcomes_frame(records)
        return df.assign(stage=stage, opponent=opp, cluster=df["seed"].astype(str))

    return shared.play_stage_episodes(game, stages, opponents, scenarios, seed, progress, frame)


def _terms(df: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per metric, (numerator, denominator) per episode row (valid rows only)."""
    deal = df["deal"].astype(bool).to_numpy()
    zone = df["has_zone"].astype(bool).to_numpy()
    share = np.nan_to_num(df["surplus_share"].to_numpy(float))
    viol = df["ir_violation"].fillna(False).astype(bool).to_numpy()
    one = np.ones(len(df))
    return {"deal_rate": (deal * 1.0, one), "surplus_share": (share * (deal & zone), (deal & zone) * 1.0),
            "ir_violation_rate": ((viol & deal) * 1.0, deal * 1.0), "ir_violations": ((viol & deal) * 1.0, one)}


def stage_table(episodes: pd.DataFrame, stages: Sequence[str] | None = None, n_resamples: int = 10_000,
                seed: int = 0, alpha: float = 0.05) -> pd.DataFrame:
    """The tidy frame of :func:`play_stages`' episodes (columns :data:`STAGE_COLUMNS`), per price tier and ``all``.

    ``kind="stage"`` rows: each stage's ``deal_rate``, ``surplus_share`` (mean over deals with a zone),
    ``ir_violation_rate`` (a fraction of deals) and ``ir_violations`` (a count; no interval), with percentile
    intervals over seed clusters. ``kind="difference"`` rows: ``stage`` minus ``baseline`` for every later stage
    against every earlier one (in ``stages`` order), on the episodes valid in both (paired by opponent and
    scenario), with paired seed-cluster intervals; all intervals from one :class:`negolib.stats.ClusterResampler`."""
    return shared.stage_table(episodes, _terms, METRICS, "tier", TIERS, ["opponent", "scenario_key"], stages,
                              n_resamples, seed, alpha, COUNTS, keep_unknown=False)


def evaluate_stages(stages: Mapping[str, str | Path], opponents: Sequence[str] = ("conceder",), n_seeds: int = 8,
                    tiers: Sequence[str] | None = None, seed: int = 0, sampling: SamplingConfig | None = None,
                    config: BilateralConfig | None = None, n_resamples: int = 10_000, alpha: float = 0.05,
                    max_batch: int = 16, prompt_cap: int = 2048, progress: bool = False,
                    seed_offset: int = EVAL_OFFSET) -> pd.DataFrame:
    """:func:`stage_table` of :func:`play_stages` (e.g. ``{"base": ..., "sft": ..., "grpo": ...}``)."""
    episodes = play_stages(stages, opponents, n_seeds, tiers, seed, sampling, config, max_batch, prompt_cap, progress,
                           seed_offset)
    return stage_table(episodes, list(stages), n_resamples, seed, alpha)


__all__ = ["COUNTS", "BilateralGRPOConfig", "BilateralSFTConfig", "EVAL_OFFSET", "METRICS", "RewardConfig",
           "SFTExample", "SFTResult", "STAGE_COLUMNS", "TrainingEpisode", "TrainingOutcome", "default_recipe",
           "encode_conversation", "episode_factory", "evaluate_stages", "masked_loss", "play_stages", "read_matches",
           "render", "replay", "reward_of", "role_payoff", "roundtrip_chat", "run_grpo", "run_sft", "scenario_items",
           "select_best", "seller_chat", "sft_dataset", "stage_seeds", "stage_table", "training_task"]
