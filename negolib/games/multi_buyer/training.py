"""Training the multi-buyer seller: GRPO through the shared trainer, the episode's normalised surplus as the reward.

Contract: :class:`TrainingEpisode` is this game's adapter of :class:`negolib.training.rollout.TrainableEpisode` (the
policy sells; the scripted buyer pool, or one style, answers for every buyer); :func:`reward_of` is the source
paper's verifiable reward, the seller's surplus over the best achievable (:meth:`MultiBuyerGame.payoffs`), with the
penalties of :class:`RewardConfig`; :func:`render` is the local agent's prompt in the text tool-call format
(:func:`.prompts.chat_messages`), so the trained model plays as ``hf:<checkpoint>`` exactly as it was trained.
:func:`run_grpo` trains through :func:`negolib.training.grpo.train` (the bilateral game's path, without its SFT
stage); :func:`evaluate_stages` plays the stages (base, GRPO, or scripted sellers as references) on the same reserved
evaluation scenarios of every market arm and returns a tidy frame with seed-cluster intervals and paired
differences (:func:`stage_table`).

Measured so far only with tiny random models built from a config (the tests, the smoke profile: one GRPO step of
2 x 2 two-turn markets in about 5 s on 2 CPU cores); the default profile's SmolLM2 sizes are estimates, not timings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from negolib.core.sampling import SamplingConfig
from negolib.games import sft
from negolib.games import training as shared
from negolib.games.multi_buyer.buyers import ScriptedBuyers
from negolib.games.multi_buyer.env import Episode
from negolib.games.multi_buyer.game import MultiBuyerGame
from negolib.games.multi_buyer.metrics import outcomes_frame
from negolib.games.multi_buyer.prompts import chat_messages
from negolib.games.multi_buyer.scenarios import (
    MARKETS,
    SEEDS,
    TRAIN_MARKETS,
    MarketConfig,
    MultiBuyerScenario,
    make_scenario,
    train_seeds,
    validation_seeds,
)
from negolib.games.multi_buyer.sellers import make_seller
from negolib.games.toolcalls import StructuredTurn, reply_turn
from negolib.training.config import TrainConfig
from negolib.training.data import ScenarioItem
from negolib.training.grpo import TrainingTask, TrainResult
from negolib.training.rollout import EpisodeFactory

Chat = list[dict[str, str]]
EVAL_OFFSET = shared.EVAL_OFFSET
TrainingOutcome = shared.TrainingOutcome
POOL = "pool"


# ---------------------------------------------------------------------------------------------
# Scenarios
# ---------------------------------------------------------------------------------------------


def market_scenarios(seeds: Iterable[int], markets: Sequence[str] = TRAIN_MARKETS,
                     turn_budget: int | None = None) -> list[MultiBuyerScenario]:
    """The scenarios of ``seeds`` in each market of :data:`~.scenarios.MARKETS` (market-major), with the seller's
    turn budget set to ``turn_budget`` (None: the market's). The budget changes no draw: a seed's cost, budgets
    and styles are the same under any budget, and the key stays ``"market|seed"``."""
    unknown = [m for m in markets if m not in MARKETS]
    if not markets or unknown:
        raise ValueError(f"markets: unknown {unknown}; known: {list(MARKETS)}")
    seeds = list(seeds)
    out = []
    for m in markets:
        cfg = MARKETS[m] if turn_budget is None else replace(MARKETS[m], turn_budget=int(turn_budget))
        out += [make_scenario(cfg, s, name=m) for s in seeds]
    return out


# ---------------------------------------------------------------------------------------------
# Reward and the episode adapter
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RewardConfig(shared.Penalties):
    """The training reward of the seller (ours around the source paper's reward).

    ``r = normalised surplus - below_cost(sales) - format_penalty bad/turns``: the normalised surplus is the game's
    payoff (:meth:`MultiBuyerGame.payoffs`: the seller's surplus over the best achievable, in [0, 1]; 0 without a
    deal, which is the source paper's reward for a market that runs out of turns). A sale below cost costs
    ``below_cost_penalty * (1 + min(1, loss / cost))`` (worse than no sale, graded so that a group of loss-making
    sales still carries a gradient). An episode the driver cuts (turn or context cap) gets ``-cut_penalty``."""

    below_cost_penalty: float = 0.3
    format_penalty: float = 0.05  # times the fraction of the seller's turns that had no effect
    cut_penalty: float = 0.3  # the driver's floor


def normalised_surplus(record: Mapping[str, Any]) -> float:
    """The game's payoff of the seller in a finished record (the normalised surplus, clipped to [0, 1])."""
    return MultiBuyerGame().payoffs(dict(record)).seller


def reward_of(record: Mapping[str, Any], config: RewardConfig | None = None) -> float:
    """The seller's training reward in a finished episode record (see :class:`RewardConfig`)."""
    c = config or RewardConfig()
    out = record["outcome"]
    cost = float(record["cost"])
    r = normalised_surplus(record)
    loss = sum(max(0.0, cost - float(d["price"])) for d in out["deals"])
    if loss > 0:
        r -= c.below_cost_penalty * (1.0 + min(1.0, loss / cost))
    turns = int(out["seller_turns"])
    if turns:
        r -= c.format_penalty * int(out["seller_bad_parses"]) / turns
    return float(r)


class TrainingEpisode(shared.GameTrainingEpisode):
    """A multi-buyer :class:`~.env.Episode` as a :class:`negolib.training.rollout.TrainableEpisode`: the policy
    sells; the reward is :func:`reward_of`, the score the normalised surplus; a bad parse is a turn without effect
    (a refused seller turn; a buyer's bad call or invalid accept)."""

    def __init__(self, episode: Episode, reward: RewardConfig | None = None) -> None:
        super().__init__(episode, reward or RewardConfig())

    def training_outcome(self, record: dict[str, Any]) -> TrainingOutcome:
        out = record["outcome"]
        return TrainingOutcome(bool(out["deal"]), reward_of(record, self.reward_config), normalised_surplus(record),
                               int(out["seller_turns"]))

    def view(self, role: str) -> Any:
        """The view of ``role``, which must be the party to move (the buyer addressed this turn, as ``buyer``)."""
        if role != self.episode.to_move:
            raise ValueError(f"{self.episode.where()}: the {self.episode.to_move} moves, not the {role}")
        return self.episode.view()


def render(view: Any, scaffold: str = "training") -> Chat:
    """The seller's chat in the local agent's text tool-call format (the scaffold is the paper game's: unused)."""
    return chat_messages(view, "text")


def episode_factory(reward: RewardConfig | None = None) -> EpisodeFactory:
    """Builds a :class:`TrainingEpisode` of an item's scenario."""
    return shared.episode_factory(TrainingEpisode, Episode, reward)


def scenario_items(scenarios: Iterable[MultiBuyerScenario], opponent: str = POOL) -> tuple[ScenarioItem, ...]:
    """Each scenario played against the buyer agent named ``opponent`` (keys ``market|seed``)."""
    return shared.scenario_items(scenarios, opponent)


def roundtrip_chat(turns: int = 3) -> Chat:
    """A multi-turn seller chat (the probe-all seller against the pool, text format) for the trainer's tag check."""
    ep = Episode(make_scenario("base", 0), "roundtrip")
    seller, buyers = make_seller("probe_all", 0), ScriptedBuyers(surface="text")
    while not ep.done and (ep.seller_turns < turns or ep.to_move != "seller"):
        agent = seller if ep.to_move == "seller" else buyers
        ep.step(reply_turn(agent.act_batch([ep.view()])[0]))
    if ep.done or ep.to_move != "seller":
        raise RuntimeError("the round-trip market ended early")  # the probe-all seller probes before it sells
    return chat_messages(ep.view(), "text")  # type: ignore[arg-type]


def training_task(items: Sequence[ScenarioItem], validation_items: Sequence[ScenarioItem] = (),
                  reward: RewardConfig | None = None) -> TrainingTask:
    """The shared trainer's :class:`~negolib.training.grpo.TrainingTask` for this game."""
    return TrainingTask(episode_factory(reward), render, tuple(items), tuple(validation_items), "seller",
                        tuple(roundtrip_chat()))


# ---------------------------------------------------------------------------------------------
# GRPO against the buyer pool
# ---------------------------------------------------------------------------------------------


def default_recipe() -> TrainConfig:
    """The shared GRPO recipe sized for this game on CPU (ours): 4 markets x 4 rollouts a step, 8 steps, a seller
    turn of at most 64 new tokens; the driver allows one seller turn more than the market's budget (12)."""
    return TrainConfig(
        scenarios_per_step=4, rollouts_per_scenario=4, micro_batch_size=4, max_steps=8, learning_rate=1e-5,
        warmup_steps=1, max_new_tokens=64, max_prompt_tokens=2048, max_context_tokens=8192, max_rollout_turns=13,
        validate_every=0, save_every=8, buyer_mixture={POOL: 1.0},
    )


@dataclass(frozen=True)
class MultiBuyerGRPOConfig:
    """GRPO of the seller in this game through the shared trainer (ours)."""

    markets: tuple[str, ...] = tuple(TRAIN_MARKETS)  # markets of the training scenarios (default: the base market)
    train_seeds_per_market: int = 16  # training scenarios: these many seeds (the low block) in every market
    train_seed_offset: int = 0  # first training seed
    validation_seeds_per_market: int = 2  # validation scenarios per market (used when recipe.validate_every > 0)
    turn_budget: int | None = None  # the seller's turn budget in training (None: the market's)
    reward: RewardConfig = field(default_factory=RewardConfig)
    recipe: TrainConfig = field(default_factory=default_recipe)  # the shared recipe; its buyer mixture: the opponent

    def __post_init__(self) -> None:
        if isinstance(self.markets, list):
            object.__setattr__(self, "markets", tuple(self.markets))
        unknown = [m for m in self.markets if m not in MARKETS]
        if not self.markets or unknown:
            raise ValueError(f"MultiBuyerGRPOConfig.markets: unknown {unknown}; known: {list(MARKETS)}")
        if self.train_seeds_per_market < 1 or self.validation_seeds_per_market < 0:
            raise ValueError("MultiBuyerGRPOConfig: train_seeds_per_market >= 1, validation_seeds_per_market >= 0")
        if self.turn_budget is not None and not 1 <= self.turn_budget <= 1000:
            raise ValueError(f"MultiBuyerGRPOConfig.turn_budget must be in 1..1000 (or None), got {self.turn_budget}")
        budget = self.turn_budget or max(MARKETS[m].turn_budget for m in self.markets)
        if self.recipe.max_rollout_turns < budget:
            raise ValueError(f"MultiBuyerGRPOConfig: recipe.max_rollout_turns ({self.recipe.max_rollout_turns}) "
                             f"must allow the seller's turn budget ({budget}); the driver would cut every market")


def run_grpo(start_dir: str | Path, out_dir: str | Path, config: MultiBuyerGRPOConfig | None = None,
             opponent: str = POOL, progress: bool = False, resume: bool = True,
             callbacks: Sequence[Any] = ()) -> TrainResult:
    """GRPO of the seller from ``start_dir`` (a model folder) against the buyer-role agent ``opponent`` (``pool``:
    each buyer in its scenario's style; or one style) into ``out_dir``, through
    :func:`negolib.training.grpo.train` (checkpoints, logs and transcripts as there; the final checkpoint loads as
    ``hf:<checkpoint>``)."""
    c = config or MultiBuyerGRPOConfig()
    return shared.run_game_grpo(start_dir, out_dir, c.recipe, opponent,
                         lambda seeds: market_scenarios(seeds, c.markets, c.turn_budget),
                         train_seeds(c.train_seeds_per_market, c.train_seed_offset), validation_seeds,
                         c.validation_seeds_per_market,
                         lambda name, seed: MultiBuyerGame().make_agent(name, "buyer", seed),
                         lambda items, validation: training_task(items, validation, c.reward),
                         progress, resume, callbacks)


# ---------------------------------------------------------------------------------------------
# Evaluating the stages
# ---------------------------------------------------------------------------------------------

STAGE_COLUMNS = shared.stage_columns("market")
METRICS = ("normalised_surplus", "deal_rate", "top_buyer_share", "exploration", "turns_used", "bad_parses",
           "overshoots")
COUNTS = ("overshoots",)  # totals, without an interval


def stage_seeds(n_seeds: int, offset: int = EVAL_OFFSET) -> list[int]:
    """``n_seeds`` reserved evaluation seeds from ``offset`` into the block."""
    return shared.stage_seeds(n_seeds, offset, SEEDS)


def play_stages(stages: Mapping[str, str | Path], markets: Sequence[str] = ("base",), n_seeds: int = 8,
                seed: int = 0, sampling: SamplingConfig | None = None, turn_budget: int | None = None,
                opponent: str = POOL, max_batch: int = 16, prompt_cap: int = 2048, progress: bool = False,
                seed_offset: int = EVAL_OFFSET) -> pd.DataFrame:
    """Every stage's seller (a model folder, or any seller name the game builds) against ``opponent`` on the same
    evaluation scenarios (:func:`stage_seeds` in every market; ``turn_budget`` as in :func:`market_scenarios`), all
    with the same sampling seed: one row per episode, :func:`.metrics.outcomes_frame`'s columns plus ``stage`` and
    ``cluster`` (the seed)."""
    if not stages:
        raise ValueError("play_stages: no stages")
    game = MultiBuyerGame(lm=shared.stage_lm(sampling, 64, seed, max_batch, prompt_cap))
    scenarios = market_scenarios(stage_seeds(n_seeds, seed_offset), markets, turn_budget)

    def frame(records: list[dict[str, Any]], stage: str, opp: str) -> pd.DataFrame:
        df = outcomes_frame(records)
        return df.assign(stage=stage, cluster=df["seed"].astype(str))

    return shared.play_stage_episodes(game, stages, [opponent], scenarios, seed, progress, frame)


def _terms(df: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per metric, (numerator, denominator) per episode row (valid rows only): the normalised surplus over markets
    with a positive best surplus (0 without a deal), the top-buyer share over deals, the rest per episode."""
    deal = df["deal"].astype(bool).to_numpy()
    gains = (df["best_surplus"].to_numpy(float) > 0)
    surplus = np.nan_to_num(df["normalised_surplus"].to_numpy(float))
    top = df["top_buyer_deal"].fillna(False).astype(bool).to_numpy()
    one = np.ones(len(df))

    def per_episode(col: str) -> tuple[np.ndarray, np.ndarray]:
        return df[col].astype(float).to_numpy(), one

    return {"normalised_surplus": (surplus * gains, gains * 1.0), "deal_rate": (deal * 1.0, one),
            "top_buyer_share": ((top & deal) * 1.0, deal * 1.0), "exploration": per_episode("exploration"),
            "turns_used": per_episode("turns_used"), "bad_parses": per_episode("seller_bad_parses"),
            "overshoots": per_episode("overshoots")}


def stage_table(episodes: pd.DataFrame, stages: Sequence[str] | None = None, n_resamples: int = 10_000,
                seed: int = 0, alpha: float = 0.05) -> pd.DataFrame:
    """The tidy frame of :func:`play_stages`' episodes (columns :data:`STAGE_COLUMNS`), per market and ``all``.

    ``kind="stage"`` rows: each stage's :data:`METRICS` (``bad_parses`` and ``exploration`` per episode,
    ``overshoots`` a total without an interval), with percentile intervals over seed clusters. ``kind="difference"``
    rows: ``stage`` minus ``baseline`` for every later stage against every earlier one (in ``stages`` order), on the
    episodes valid in both (paired by scenario), with paired seed-cluster intervals and a p-value; all intervals
    from one :class:`negolib.stats.ClusterResampler`."""
    return shared.stage_table(episodes, _terms, METRICS, "market", MARKETS, "scenario_key", stages, n_resamples,
                              seed, alpha, COUNTS)


def evaluate_stages(stages: Mapping[str, str | Path], markets: Sequence[str] = ("base",), n_seeds: int = 8,
                    seed: int = 0, sampling: SamplingConfig | None = None, turn_budget: int | None = None,
                    opponent: str = POOL, n_resamples: int = 10_000, alpha: float = 0.05, max_batch: int = 16,
                    prompt_cap: int = 2048, progress: bool = False, seed_offset: int = EVAL_OFFSET) -> pd.DataFrame:
    """:func:`stage_table` of :func:`play_stages` (e.g. ``{"base": <folder>, "GRPO": <checkpoint>}``)."""
    episodes = play_stages(stages, markets, n_seeds, seed, sampling, turn_budget, opponent, max_batch, prompt_cap,
                           progress, seed_offset)
    return stage_table(episodes, list(stages), n_resamples, seed, alpha)


# ---------------------------------------------------------------------------------------------
# SFT data: the tournament's best scripted deals as the seller's chats (the shared negolib.games.sft)
# ---------------------------------------------------------------------------------------------


def replay(record: Mapping[str, Any]) -> Episode:
    """The episode of a multi-buyer record, rebuilt from its market and seed and replayed turn by turn; ValueError
    when the scenario or the sales differ from the record's."""
    cfg = dict(record["config"])
    sc = make_scenario(MarketConfig(**{**cfg, "styles": tuple(cfg["styles"])}), int(record["seed"]),
                       str(record["market"]))
    if sc.cost != record["cost"] or list(sc.budgets) != list(record["budgets"]):
        raise ValueError(f"record {record.get('scenario_key')}: market {record['market']!r} seed {record['seed']} "
                         "does not rebuild its scenario (cost or budgets differ)")
    ep = Episode(sc, str(record.get("scenario_key", sc.key)))
    for t in record["turns"]:
        calls = t.get("raw_tool_calls")
        ep.step(StructuredTurn(t["raw"], calls) if calls is not None else t["raw"])
    want, got = (record.get("outcome") or {}).get("deals"), ep.outcome.deals if ep.outcome else None
    if want != got:
        raise ValueError(f"record {sc.key} does not replay to its sales ({want} vs {got})")
    return ep


def seller_chat(record: Mapping[str, Any]) -> Chat:
    """The seller's conversation of a finished record, ending on its last turn, as the local agent is prompted in
    the text tool format (:func:`.prompts.chat_messages` ``"text"``: tools in the system prompt, each call as
    ``<tool_call>`` text after the message, its result in the next user message)."""
    view = replay(record).view()
    return chat_messages(view, "text")[:-1]  # the last user message asks for a turn after the end


def _valid_sale(record: Mapping[str, Any]) -> bool:
    """At least one sale, none above the buyer's budget (scripted buyers cannot overshoot; a model buyer can)."""
    out = record["outcome"]
    return bool(out["deals"]) and not any(d.get("overshoot") for d in out["deals"])


def sft_dataset(source: str | Path | Iterable[Any], sellers: Sequence[str] | None = None,
                opponents: Sequence[str] | None = None, select: str = "best_deal", min_share: float = 0.0,
                max_examples: int | None = None, max_seller_turns: int | None = None) -> list[sft.GameSFTExample]:
    """The SFT conversations of a multi-buyer tournament: per scenario, the scripted sellers' best sale (the
    highest normalised surplus, :meth:`MultiBuyerGame.payoffs`; no overshoot) as the seller's chat
    (:func:`seller_chat`); see :func:`negolib.games.sft.sft_examples`. ``max_seller_turns``: only sales made within
    that many seller turns (the turn budget the trained seller will have: a demonstration that probes every buyer
    before it sells teaches a seller cut to fewer turns to run out of them)."""
    if max_seller_turns is not None and max_seller_turns < 1:
        raise ValueError(f"max_seller_turns must be >= 1 (or None), got {max_seller_turns}")
    game = MultiBuyerGame()

    def deal_ok(rec: Mapping[str, Any]) -> bool:
        within = max_seller_turns is None or int(rec["outcome"]["seller_turns"]) <= max_seller_turns
        return _valid_sale(rec) and within

    return sft.sft_examples(source, lambda rec: game.payoffs(rec).seller, seller_chat, game="multi_buyer",
                            deal_ok=deal_ok, sellers=sellers, opponents=opponents,
                            select=select,  # type: ignore[arg-type]
                            min_share=min_share, max_examples=max_examples)


__all__ = ["COUNTS", "EVAL_OFFSET", "METRICS", "POOL", "STAGE_COLUMNS", "MultiBuyerGRPOConfig", "RewardConfig",
           "TrainingEpisode", "TrainingOutcome", "default_recipe", "episode_factory", "evaluate_stages",
           "market_scenarios", "normalised_surplus", "play_stages", "render", "replay", "reward_of", "roundtrip_chat",
           "run_grpo", "scenario_items", "seller_chat", "sft_dataset", "stage_seeds", "stage_table", "training_task"]
