"""Training the multi-product seller: GRPO through the shared trainer, and the paired evaluation of its stages.

Contract: :class:`TrainingEpisode` is this game's adapter of :class:`negolib.training.rollout.TrainableEpisode`
(the policy sells; the scripted buyers answer); its reward is :func:`reward_of`: the game's seller payoff (the
seller's surplus over the welfare-optimal allocation's, in [0, 1]: the source paper's verifiable reward) minus a
small penalty per refused message. :func:`run_grpo` trains a model through :func:`negolib.training.grpo.train`
against a fixed buyer agent (``pool`` by default); :func:`evaluate_stages` plays the stages (e.g. the base model
and its GRPO checkpoint, or scripted sellers) on the same reserved evaluation scenarios and returns a tidy frame
per market with seed-cluster bootstrap intervals and paired stage differences (:mod:`negolib.stats`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from negolib.agents.base import AgentReply
from negolib.core.sampling import SamplingConfig
from negolib.games import sft
from negolib.games import training as shared
from negolib.games.multi_product.env import Episode, SellerView
from negolib.games.multi_product.game import MultiProductGame
from negolib.games.multi_product.metrics import outcomes_frame
from negolib.games.multi_product.prompts import chat_messages
from negolib.games.multi_product.scenarios import (
    MARKETS,
    SEEDS,
    TRAIN_MARKETS,
    MarketConfig,
    make_scenario,
    scenario_set,
    train_seeds,
    validation_seeds,
)
from negolib.games.multi_product.sellers import SELLERS, make_seller
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
    """The seller's training reward (ours): ``r = payoff - refusal_penalty * refused / messages``, ``payoff`` the
    game's (:meth:`MultiProductGame.payoffs`: seller surplus / optimal welfare, clipped to [0, 1]; 0 without a sale)
    and ``refused`` the messages that had no effect (bad parses of the four-part protocol and offers breaking a
    market rule). A sale can never be below cost (the environment refuses such an offer), so no loss term is needed.
    An episode the driver cuts (turn or context cap) gets ``-cut_penalty``."""

    refusal_penalty: float = 0.05
    cut_penalty: float = 0.1


def seller_payoff(record: Mapping[str, Any]) -> float:
    """The game's payoff of the seller in a finished record (:meth:`MultiProductGame.payoffs`)."""
    return float(MultiProductGame().payoffs(dict(record)).seller)


def refused_messages(record: Mapping[str, Any]) -> tuple[int, int]:
    """(refused, all) seller messages of a finished record: bad parses plus constraint-breaking offers."""
    out = record["outcome"]
    return int(out["bad_parses"]) + sum(int(v) for v in out["violations"].values()), int(out["seller_turns"])


def reward_of(record: Mapping[str, Any], config: RewardConfig | None = None) -> float:
    """The training reward of the seller in a finished episode record (see :class:`RewardConfig`)."""
    c = config or RewardConfig()
    refused, messages = refused_messages(record)
    return float(seller_payoff(record) - (c.refusal_penalty * refused / messages if messages else 0.0))


class TrainingEpisode(shared.GameTrainingEpisode):
    """A multi-product :class:`~.env.Episode` as a :class:`negolib.training.rollout.TrainableEpisode`: the policy
    sells, the reward is :func:`reward_of`, the score the game's payoff; a bad parse is a seller message without
    effect (a protocol bad parse, or an offer the environment refused for breaking a market rule)."""

    def __init__(self, episode: Episode, reward: RewardConfig | None = None) -> None:
        super().__init__(episode, reward or RewardConfig())

    def training_outcome(self, record: dict[str, Any]) -> TrainingOutcome:
        return TrainingOutcome(bool(record["outcome"]["sales"]), reward_of(record, self.reward_config),
                               seller_payoff(record), int(record["outcome"]["seller_turns"]))

    def opponent_turn(self, reply: AgentReply) -> str:
        return reply.text  # the buyers answer in text (ACCEPT/DECLINE)

    def bad_parses(self, role: str) -> tuple[int, int]:
        mine = [t for t in self.episode.turns if t["role"] == role]
        bad = sum(t["parse_error"] is not None or t["violation"] is not None for t in mine)
        return bad, len(mine)


def render(view: SellerView, scaffold: str = "training") -> Chat:
    """The seller's chat (:func:`.prompts.chat_messages`, text; the paper game's scaffold does not apply)."""
    return chat_messages(view, "text")


def episode_factory(reward: RewardConfig | None = None) -> EpisodeFactory:
    """Builds a :class:`TrainingEpisode` of an item's scenario."""
    return shared.episode_factory(TrainingEpisode, Episode, reward)


def roundtrip_chat(market: str = "small", turns: int = 3) -> Chat:
    """A multi-turn seller chat (the greedy seller against the pool) for the shared trainer's tag round-trip."""
    from negolib.games.multi_product.buyers import ScriptedBuyers

    ep = Episode(scenario_set([0], [market])[0], "roundtrip")
    agents = {"seller": make_seller("greedy"), "buyer": ScriptedBuyers()}
    while not ep.done and (ep.seller_turns < turns or ep.to_move != "seller"):
        ep.step(agents[ep.to_move].reply(ep.view()).text)  # type: ignore[attr-defined]
    return chat_messages(ep.view(), "text")  # type: ignore[arg-type]


def training_task(items: Sequence[ScenarioItem], validation_items: Sequence[ScenarioItem] = (),
                  reward: RewardConfig | None = None) -> TrainingTask:
    """The shared trainer's :class:`~negolib.training.grpo.TrainingTask` for this game (the policy sells)."""
    return TrainingTask(episode_factory(reward), render, tuple(items), tuple(validation_items), "seller",
                        tuple(roundtrip_chat()))


# ---------------------------------------------------------------------------------------------
# GRPO against a fixed buyer agent
# ---------------------------------------------------------------------------------------------


def default_recipe() -> TrainConfig:
    """The shared GRPO recipe sized for this game on CPU (ours): 4 markets x 4 rollouts a step, 8 steps, a message
    of at most 64 new tokens, up to 10 seller messages (the training market's budget), no validation."""
    return TrainConfig(
        scenarios_per_step=4, rollouts_per_scenario=4, micro_batch_size=4, max_steps=8, learning_rate=1e-5,
        warmup_steps=1, max_new_tokens=64, max_prompt_tokens=2048, max_context_tokens=4096, max_rollout_turns=10,
        validate_every=0, save_every=8, buyer_mixture={"pool": 1.0},
    )


@dataclass(frozen=True)
class MultiProductGRPOConfig:
    """GRPO of the seller in this game through the shared trainer (ours). The recipe's ``max_rollout_turns`` must
    cover every training market's turn budget (else the driver would cut every episode)."""

    markets: tuple[str, ...] = TRAIN_MARKETS  # markets of the training scenarios (names of MARKETS)
    train_seeds_per_market: int = 8  # training scenarios: these many seeds (the low block) in every market
    train_seed_offset: int = 0  # first training seed
    validation_seeds_per_market: int = 1  # validation scenarios per market (used when recipe.validate_every > 0)
    reward: RewardConfig = field(default_factory=RewardConfig)
    recipe: TrainConfig = field(default_factory=default_recipe)  # the shared recipe; the opponent is run_grpo's

    def __post_init__(self) -> None:
        unknown = [m for m in self.markets if m not in MARKETS]
        if not self.markets or unknown:
            raise ValueError(f"MultiProductGRPOConfig.markets unknown {unknown}; known: {list(MARKETS)}")
        if self.train_seeds_per_market < 1:
            raise ValueError(f"MultiProductGRPOConfig.train_seeds_per_market must be >= 1, got "
                             f"{self.train_seeds_per_market}")
        if self.validation_seeds_per_market < 0 or self.train_seed_offset < 0:
            raise ValueError("MultiProductGRPOConfig.validation_seeds_per_market must be >= 0 (and the seed "
                             "offset too)")
        budget = max(MARKETS[m].turn_budget for m in self.markets)
        if self.recipe.max_rollout_turns < budget:
            raise ValueError(f"MultiProductGRPOConfig.recipe max_rollout_turns ({self.recipe.max_rollout_turns}) is "
                             f"below the training markets' turn budget ({budget}): every episode would be cut")


def run_grpo(start_dir: str | Path, out_dir: str | Path, config: MultiProductGRPOConfig | None = None,
             opponent: str = "pool", progress: bool = False, resume: bool = True,
             callbacks: Sequence[Any] = ()) -> TrainResult:
    """GRPO of the seller from ``start_dir`` against the buyer agent ``opponent`` (``pool`` or ``picky``) into
    ``out_dir`` through :func:`negolib.training.grpo.train` (checkpoints, logs and transcripts as there; the final
    checkpoint loads as ``hf:<checkpoint>``)."""
    c = config or MultiProductGRPOConfig()
    return shared.run_game_grpo(start_dir, out_dir, c.recipe, opponent, lambda seeds: scenario_set(seeds, c.markets),
                         train_seeds(c.train_seeds_per_market, c.train_seed_offset), validation_seeds,
                         c.validation_seeds_per_market,
                         lambda name, seed: MultiProductGame().make_agent(name, "buyer", seed),
                         lambda items, validation: training_task(items, validation, c.reward),
                         progress, resume, callbacks)


# ---------------------------------------------------------------------------------------------
# Evaluating the stages
# ---------------------------------------------------------------------------------------------

STAGE_COLUMNS = shared.stage_columns("market")
METRICS = ("normalised_surplus", "revenue_ratio", "allocation_quality", "constraint_adherence", "deal_rate")
"""``normalised_surplus`` (the reward's payoff, unclipped), ``revenue_ratio`` (revenue over the best feasible
revenue), ``allocation_quality`` (realised welfare over the optimal assignment's): means over episodes whose
denominator is positive; ``constraint_adherence``: valid messages over all messages (pooled); ``deal_rate``: the
share of episodes with a sale."""


def stage_seeds(n_seeds: int, offset: int = EVAL_OFFSET) -> list[int]:
    """``n_seeds`` reserved evaluation seeds from ``offset`` into the block."""
    return shared.stage_seeds(n_seeds, offset, SEEDS)


def episodes_frame(records: Sequence[Mapping[str, Any]], stage: str, buyer: str) -> pd.DataFrame:
    """:func:`.metrics.outcomes_frame` of ``records`` plus ``stage``, ``buyer`` and ``cluster`` (the seed)."""
    df = outcomes_frame(records)
    return df.assign(stage=stage, buyer=buyer, cluster=df["seed"].astype(str))


def play_stages(stages: Mapping[str, str | Path], buyers: Sequence[str] = ("pool",), n_seeds: int = 8,
                markets: Sequence[str] | None = None, seed: int = 0, sampling: SamplingConfig | None = None,
                max_batch: int = 16, prompt_cap: int = 2048, progress: bool = False,
                seed_offset: int = EVAL_OFFSET) -> pd.DataFrame:
    """Every stage's seller (a model folder or an agent name) against every buyer agent on the same evaluation
    scenarios (:func:`stage_seeds` in every market; None: every evaluation market), all sellers with one sampling
    seed: one row per episode (:func:`episodes_frame`)."""
    if not stages:
        raise ValueError("play_stages: no stages")
    game = MultiProductGame(markets, shared.stage_lm(sampling, 64, seed, max_batch, prompt_cap))
    scenarios = scenario_set(stage_seeds(n_seeds, seed_offset), game.markets)
    return shared.play_stage_episodes(game, stages, buyers, scenarios, seed, progress, episodes_frame)


def _terms(df: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per metric, (numerator, denominator) per episode row (valid rows only)."""
    one = np.ones(len(df))

    def mean_of(col: str, best: str) -> tuple[np.ndarray, np.ndarray]:
        has = (df[best].to_numpy(float) > 0) * 1.0
        return np.nan_to_num(df[col].to_numpy(float)) * has, has

    return {"normalised_surplus": mean_of("normalised_surplus", "best_welfare"),
            "revenue_ratio": mean_of("revenue_ratio", "best_revenue"),
            "allocation_quality": mean_of("allocation_quality", "best_welfare"),
            "constraint_adherence": (df["valid_messages"].to_numpy(float), df["messages"].to_numpy(float)),
            "deal_rate": (df["deal"].astype(bool).to_numpy() * 1.0, one)}


def stage_table(episodes: pd.DataFrame, stages: Sequence[str] | None = None, n_resamples: int = 10_000,
                seed: int = 0, alpha: float = 0.05) -> pd.DataFrame:
    """The tidy frame of :func:`play_stages`' episodes (columns :data:`STAGE_COLUMNS`), per market and ``all``.

    ``kind="stage"`` rows: each stage's :data:`METRICS` with percentile intervals over seed clusters.
    ``kind="difference"`` rows: ``stage`` minus ``baseline`` for every later stage against every earlier one (in
    ``stages`` order) on the episodes valid in both (paired by buyer and scenario), with paired seed-cluster
    intervals and a bootstrap p-value; all intervals from one :class:`negolib.stats.ClusterResampler`."""
    ok = episodes[episodes["valid"].astype(bool)]
    if ok.empty:
        raise ValueError("stage_table: no valid episode")
    return shared.stage_table(episodes, _terms, METRICS, "market", MARKETS, ["buyer", "scenario_key"], stages,
                              n_resamples, seed, alpha)


def evaluate_stages(stages: Mapping[str, str | Path], buyers: Sequence[str] = ("pool",), n_seeds: int = 8,
                    markets: Sequence[str] | None = None, seed: int = 0, sampling: SamplingConfig | None = None,
                    n_resamples: int = 10_000, alpha: float = 0.05, max_batch: int = 16, prompt_cap: int = 2048,
                    progress: bool = False, seed_offset: int = EVAL_OFFSET) -> pd.DataFrame:
    """:func:`stage_table` of :func:`play_stages` (e.g. ``{"base": <model dir>, "GRPO": <checkpoint>}``)."""
    episodes = play_stages(stages, buyers, n_seeds, markets, seed, sampling, max_batch, prompt_cap, progress,
                           seed_offset)
    return stage_table(episodes, list(stages), n_resamples, seed, alpha)




def format_stage_table(table: pd.DataFrame, market: str = "all", metrics: Sequence[str] = METRICS,
                       digits: int = 3) -> pd.DataFrame:
    """One row per stage, then per difference (``"a - b"``), of :func:`stage_table`'s ``market``: each metric as
    ``estimate [low, high]`` (differences signed), and the episodes and seed clusters behind it."""
    from negolib.core.formatting import fmt_ci

    part = table[table["market"] == market]
    keys = list(dict.fromkeys(zip(part["kind"], part["stage"], part["baseline"])))
    idx = part.set_index(["kind", "stage", "baseline", "metric"])
    rows, names = [], []
    for kind, stage, baseline in keys:
        signed = kind == "difference"
        row = {m: fmt_ci(*idx.loc[(kind, stage, baseline, m), ["estimate", "ci_low", "ci_high"]], digits,
                         signed=signed) for m in metrics}
        first = idx.loc[(kind, stage, baseline, metrics[0])]
        row.update(episodes=int(first["n_episodes"]), clusters=int(first["n_clusters"]))
        rows.append(row)
        names.append(f"{stage} - {baseline}" if signed else stage)
    return pd.DataFrame(rows, index=pd.Index(names, name="seller"))


# ---------------------------------------------------------------------------------------------
# SFT data: the tournament's best scripted sales as the seller's chats (the shared negolib.games.sft)
# ---------------------------------------------------------------------------------------------

UPPER_BOUNDS = tuple(name for name in SELLERS if name.startswith("oracle"))
"""Scripted sellers that read the buyers' valuations (upper bounds): never demonstrations by default."""


def replay(record: Mapping[str, Any]) -> Episode:
    """The episode of a multi-product record, rebuilt from its market and seed and replayed turn by turn;
    ValueError when the scenario or the sales differ from the record's."""
    sc = make_scenario(MarketConfig(**dict(record["config"])), int(record["seed"]), str(record["market"]))
    if list(sc.costs) != list(record["costs"]) or [list(v) for v in sc.valuations] != \
            [list(v) for v in record["valuations"]]:
        raise ValueError(f"record {record.get('scenario_key')}: market {record['market']!r} seed {record['seed']} "
                         "does not rebuild its scenario (costs or valuations differ)")
    ep = Episode(sc, str(record.get("scenario_key", sc.key)))
    for t in record["turns"]:
        ep.step(t["raw"])
    want, got = (record.get("outcome") or {}).get("sales"), ep.outcome.sales if ep.outcome else None
    if want != got:
        raise ValueError(f"record {sc.key} does not replay to its sales ({want} vs {got})")
    return ep


def seller_chat(record: Mapping[str, Any]) -> Chat:
    """The seller's conversation of a finished record, ending on its last message, as the local agent is prompted
    (:func:`.prompts.chat_messages`: the four-part protocol as text, each answer in the next user message)."""
    view = replay(record).view()
    return chat_messages(view, "text")[:-1]  # the last user message asks for a message after the end


def _clean_sale(record: Mapping[str, Any]) -> bool:
    """At least one sale, no overshoot, and every message valid and within the market's rules."""
    out = record["outcome"]
    return bool(out["sales"]) and not out["overshoots"] and not out["bad_parses"] and \
        not any(out["violations"].values())


def sft_dataset(source: str | Path | Iterable[Any], sellers: Sequence[str] | None = None,
                opponents: Sequence[str] | None = None, select: str = "best_deal", min_share: float = 0.0,
                max_examples: int | None = None) -> list[sft.GameSFTExample]:
    """The SFT conversations of a multi-product tournament: per scenario, the best clean sale (the highest seller
    payoff, :func:`seller_payoff`) among ``sellers`` (None: every scripted seller but the upper bounds,
    :data:`UPPER_BOUNDS`, which read the valuations) as the seller's chat (:func:`seller_chat`); see
    :func:`negolib.games.sft.sft_examples`."""
    return sft.sft_examples(source, seller_payoff, seller_chat, game="multi_product", deal_ok=_clean_sale,
                            sellers=sellers, opponents=opponents, select=select,  # type: ignore[arg-type]
                            min_share=min_share, max_examples=max_examples, exclude=UPPER_BOUNDS)


__all__ = ["EVAL_OFFSET", "METRICS", "MultiProductGRPOConfig", "RewardConfig", "STAGE_COLUMNS", "TrainingEpisode",
           "TrainingOutcome", "default_recipe", "episode_factory", "episodes_frame", "evaluate_stages",
           "format_stage_table", "play_stages", "refused_messages", "render", "replay", "reward_of", "roundtrip_chat",
           "run_grpo", "scenario_items", "seller_chat", "seller_payoff", "sft_dataset", "stage_seeds", "stage_table",
           "training_task", "UPPER_BOUNDS"]
