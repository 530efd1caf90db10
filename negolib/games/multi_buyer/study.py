"""Notebook 11's study of the multi-buyer market: its tables as plain data, and its stages under the shared contract.

Contract: :func:`rules_table`, :func:`styles_table` and :func:`sellers_table` are written from the game's constants;
:func:`scripted_stages` reads a tournament's matches (each seller against the buyer pool) into the stage table of the
scripted sellers, which :func:`scripted_table`, :func:`arms_table`, :func:`exploration` and :func:`arms_figure` show;
:class:`MultiBuyerStages` is this game's :class:`negolib.games.training.GameStages` and :func:`stage_spec` the
:class:`~negolib.games.training.StageSpec` of a profile's checked ``games.multi_buyer`` section (base -> SFT, when the
section has it -> GRPO, when it trains; the best scripted seller as a reference); :func:`lm_table` and
:func:`findings` read the :class:`~negolib.games.training.StageResults`. Nothing here prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from negolib.core.formatting import fmt_ci
from negolib.core.sampling import SamplingConfig
from negolib.games import training as shared
from negolib.games.base import StudyTable
from negolib.games.matches import read_matches
from negolib.games.multi_buyer.buyers import STYLES
from negolib.games.multi_buyer.game import MultiBuyerGame
from negolib.games.multi_buyer.metrics import outcomes_frame
from negolib.games.multi_buyer.scenarios import (
    BUDGET_DISTRIBUTIONS,
    COST_RANGE,
    EVAL_MARKETS,
    EVAL_SEED_START,
    HELDOUT_STYLES,
    MARKETS,
    TRAIN_SEED_BLOCK,
    TRAIN_STYLES,
    MarketConfig,
)
from negolib.games.multi_buyer.sellers import make_seller
from negolib.games.multi_buyer.tools import MESSAGE_BUYER
from negolib.games.multi_buyer.training import play_stages, run_grpo, sft_dataset, stage_table
from negolib.games.toolcalls import money

SHOW = {"normalised_surplus": "normalised surplus", "top_buyer_share": "deals with the top buyer",
        "exploration": "buyers explored", "overshoots": "overshoots", "deal_rate": "deal rate",
        "turns_used": "turns used"}
"""The metrics a wide table shows, and their column names."""
THEIRS_COLUMN = "Liu et al. (theirs, qualitative; no numbers)"


# ---------------------------------------------------------------------------------------------
# The rules, the buyer styles and the scripted sellers
# ---------------------------------------------------------------------------------------------


def rules_table() -> StudyTable:
    """``multi_buyer_rules``: each rule, its value read from the game's constants, and whose it is."""
    cfg = MarketConfig()
    arms = ", ".join(f"{m} ({'; '.join(f'{k}={v}' for k, v in vars(c).items() if getattr(cfg, k) != v)})"
                     for m, c in MARKETS.items() if m != "base")
    rules = pd.DataFrame([
        ("buyers", f"{cfg.n_buyers} (3-6 allowed), private budgets; buyers never see each other's threads",
         "several buyers, private budgets: theirs; the number: ours"),
        ("items", f"{cfg.n_items} (or one per buyer, at most one each)", "ours"),
        ("seller's cost", f"uniform in [{COST_RANGE[0]:g}, {COST_RANGE[1]:g}] x the scale {money(cfg.scale)}, private",
         "a private cost: theirs; the draw: ours"),
        ("budgets", f"{cfg.budgets} in training; distributions {', '.join(BUDGET_DISTRIBUTIONS)} (x the scale)",
         "heterogeneous budgets and other distributions as an arm: theirs; the draws: ours"),
        ("turn budget", f"{cfg.turn_budget} seller turns shared across buyers; the market ends on a sale or when "
         "they are spent", "a limited turn budget: theirs; the number: ours"),
        ("a turn", f"a message to one buyer plus exactly one {MESSAGE_BUYER}(to, offer?) call; offer: a binding "
         "price", "ours"),
        ("the buyer's answer", "accept the offer made this turn (a sale at that price), counter with a price, or "
         "decline; a buyer who bought cannot be addressed again", "ours"),
        ("bad call", "no call, two calls, a bad buyer or price, a buyer who bought: the turn reaches nobody and "
         "still spends a turn (a bad parse)", "ours"),
        ("buyer styles", f"training pool {', '.join(TRAIN_STYLES)}; held out {', '.join(HELDOUT_STYLES)}",
         "unseen styles as an arm: theirs; the styles: ours"),
        ("markets (arms)", f"base = training; {arms}", "ours"),
        ("scenario seeds", f"evaluation from {EVAL_SEED_START:,} (paired across markets); training "
         f"{TRAIN_SEED_BLOCK.start}-{TRAIN_SEED_BLOCK.stop - 1}", "ours"),
        ("normalised surplus", "sum of (price - cost) over the best achievable (the top budgets minus cost); 0 "
         "without a sale; the seller's payoff and training reward", "a verifiable economic reward: theirs; formula: "
         "ours"),
        ("budget overshoot", "a price above the accepting buyer's budget: impossible for a scripted buyer, counted "
         "for any other", "ours"),
    ], columns=["rule", "value", "source"]).set_index("rule")
    return StudyTable("multi_buyer_rules", "Multi-buyer market: rules and their source", rules,
                      "Every value is read from the game's constants (negolib.games.multi_buyer).")


def styles_table() -> StudyTable:
    """``multi_buyer_styles``: each scripted buyer style's bids, cap and tolerance (fractions of its budget)."""
    styles = pd.DataFrame([{"style": s.name, "pool": "training" if s.name in TRAIN_STYLES else "held out",
                            "first bid (x budget)": s.open, "step": s.step, "cap": s.cap, "tolerance": s.tolerance,
                            "counters": s.counters, "splits the difference": s.split} for s in STYLES.values()])
    return StudyTable("multi_buyer_styles", "Scripted buyer styles (fractions of the buyer's budget)",
                      styles.set_index("style"), "A buyer accepts an offer at most its next bid x (1 + tolerance) and "
                      "never above its budget; its bids never exceed cap x budget.")


def sellers_table() -> StudyTable:
    """``multi_buyer_sellers``: the scripted sellers and their parameters, one row per seller."""
    names = MultiBuyerGame().scripted_strategies()
    sellers = pd.DataFrame([make_seller(n, 0).settings() for n in names])
    sellers = sellers.drop(columns=["backend", "name", "seed", "surface"]).set_index(pd.Index(names, name="seller"))
    return StudyTable("multi_buyer_sellers", "Scripted sellers and their parameters",
                      sellers.astype(object).where(sellers.notna(), "").astype(str),
                      "margin: the lowest price over cost; premium: probe-all's opening ask over the best bid; markup: "
                      "the fixed price's.")


# ---------------------------------------------------------------------------------------------
# The scripted sellers against the buyer pool
# ---------------------------------------------------------------------------------------------


def scripted_stages(matches: str | Path, sellers: Sequence[str], statistics: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(episodes, table) of a tournament's matches: each seller's own match (the round robin's diagonal: the buyer
    role reads as the pool; a replayed match's latest record), one row per seller, market and seed; and their stage
    table (:func:`.training.stage_table`, the sellers as stages) under ``statistics`` (n_resamples, seed, alpha)."""
    latest = {(m.seller, m.buyer, m.scenario_key): m for m in read_matches(matches)}  # a replayed match: latest wins
    own = [m for (s, b, _), m in latest.items() if s == b]
    episodes = pd.concat([outcomes_frame([m.record for m in own if m.seller == a]).assign(stage=a) for a in sellers],
                         ignore_index=True)
    episodes["cluster"] = episodes["seed"].astype(str)
    return episodes, stage_table(episodes, list(sellers), statistics.n_resamples, statistics.seed, statistics.alpha)


def ci_cell(row: Mapping[str, Any]) -> str:
    """A stage-table row as ``estimate [low, high]`` (signed for a difference); overshoots a bare count."""
    if row["metric"] == "overshoots":
        return f"{row['estimate']:.0f}" if row["kind"] == "stage" else f"{row['estimate']:+.0f}"
    return fmt_ci(row["estimate"], row["ci_low"], row["ci_high"], signed=row["kind"] == "difference")


def wide(table: pd.DataFrame, market: str, kind: str = "stage", index: str = "seller") -> pd.DataFrame:
    """One row per stage (or per ``stage - baseline`` difference) of ``market``: the :data:`SHOW` metrics as
    intervals, and the episodes behind them."""
    rows = table[(table["kind"] == kind) & (table["market"] == market) & table["metric"].isin(list(SHOW))].copy()
    rows["label"] = rows["stage"] if kind == "stage" else rows["stage"] + " - " + rows["baseline"]
    rows["cell"] = rows.apply(ci_cell, axis=1)
    out = rows.pivot(index="label", columns="metric", values="cell")
    out = out.reindex(index=list(dict.fromkeys(rows["label"])), columns=list(SHOW)).rename(columns=SHOW)
    n = rows.groupby("label")["n_episodes"].max()
    return out.assign(episodes=n.reindex(out.index).astype(int)).rename_axis(index=index, columns=None)


def scripted_table(table: pd.DataFrame, seeds: int, n_resamples: int) -> StudyTable:
    """``multi_buyer_scripted``: the scripted sellers on the training market (``seeds`` seed clusters)."""
    return StudyTable(
        "multi_buyer_scripted", "Scripted sellers vs the buyer pool, training market (seed-cluster 95% CI)",
        wide(table, "base"), f"{seeds} seed clusters, {n_resamples} resamples; normalised surplus over markets with a "
        "positive best surplus, top-buyer share over deals, overshoots a count.", data=table)


def best_seller(table: pd.DataFrame) -> str:
    """The scripted seller with the highest normalised surplus on the training market."""
    rows = table[(table["kind"] == "stage") & (table["market"] == "base") & (table["metric"] == "normalised_surplus")]
    return str(rows.set_index("stage")["estimate"].idxmax())


def _arms(table: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    rows = table[(table["kind"] == "stage") & (table["metric"] == "normalised_surplus")]
    return rows, [m for m in [*EVAL_MARKETS, "all"] if m in set(rows["market"])]


def arms_table(table: pd.DataFrame, sellers: Sequence[str]) -> StudyTable:
    """``multi_buyer_arms``: each seller's normalised surplus in each market arm (and pooled)."""
    rows, markets = _arms(table)
    cells = rows.assign(cell=rows.apply(ci_cell, axis=1)).pivot(index="stage", columns="market", values="cell")
    return StudyTable("multi_buyer_arms", "Normalised surplus by market arm (scripted sellers, seed-cluster 95% CI)",
                      cells.reindex(index=list(sellers), columns=markets), "Rows: the seller; columns: the market arm.",
                      data=rows)


def exploration(table: pd.DataFrame) -> pd.DataFrame:
    """Buyers explored and the top-buyer share, per seller and market arm."""
    _, markets = _arms(table)
    explore = table[(table["kind"] == "stage") & (table["metric"].isin(["exploration", "top_buyer_share"]))]
    return explore.pivot_table(index=["metric", "stage"], columns="market", values="estimate").reindex(
        columns=markets).round(3)


def arms_figure(table: pd.DataFrame, sellers: Sequence[str]) -> Any:
    """Bars of each seller's normalised surplus per market arm, with seed-cluster intervals."""
    rows, markets = _arms(table)
    fig, ax = plt.subplots(figsize=(9, 3.6))
    width = 0.8 / len(sellers)
    x = np.arange(len(markets))
    for i, seller in enumerate(sellers):
        r = rows[rows["stage"] == seller].set_index("market").reindex(markets)
        ax.bar(x + i * width, r["estimate"], width, label=seller,
               yerr=[r["estimate"] - r["ci_low"], r["ci_high"] - r["estimate"]], capsize=2)
    ax.set_xticks(x + width * (len(sellers) - 1) / 2, markets)
    ax.set_ylabel("normalised surplus")
    ax.set_title("Scripted sellers by market arm (95% seed-cluster CI)")
    ax.legend(fontsize=8, ncol=len(sellers))
    return fig


# ---------------------------------------------------------------------------------------------
# The stages: base -> SFT -> GRPO, the best scripted seller beside them
# ---------------------------------------------------------------------------------------------


class MultiBuyerStages(shared.GameStages):
    """The multi-buyer market under the stage contract: SFT on the tournament's best sales made within
    ``turn_budget`` seller turns, GRPO of the seller, and the stages as sellers against one buyer agent in the
    evaluation's markets (their turn budget cut to ``turn_budget``; None: each market's)."""

    name = "multi_buyer"

    def __init__(self, turn_budget: int | None = None) -> None:
        self.turn_budget = turn_budget

    def sft_examples(self, sft: shared.SFTStage) -> list[Any]:
        return sft_dataset(sft.tournament, select=sft.select, min_share=sft.min_share, max_examples=sft.max_examples,
                           max_seller_turns=self.turn_budget)  # sales a seller with this budget can make

    run_grpo = staticmethod(run_grpo)
    stage_table = staticmethod(stage_table)

    def evaluate(self, stages: Mapping[str, str | Path], evaluation: shared.StageEvaluation,
                 progress: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
        e = evaluation
        if len(e.opponents) != 1:
            raise ValueError(f"multi_buyer: the stages meet one buyer agent, got {list(e.opponents)}")
        episodes = play_stages(stages, e.groups or list(EVAL_MARKETS), e.seeds_per_group, e.seed, e.sampling,
                               self.turn_budget, e.opponents[0], e.max_batch, e.prompt_cap, progress)
        return self.tabulate(episodes, stages, e)


def stage_spec(section: Any, statistics: Any, *, base_model: str | Path, sampling: SamplingConfig | None, seed: int,
               training_dir: Path, tournament: Path, reference: str | None = None,
               progress: bool = True) -> shared.StageSpec:
    """The stages of a profile's checked ``games.multi_buyer`` section
    (:class:`negolib.game_params.MultiBuyerGameParams`) under its ``statistics``: ``base_model`` -> SFT on the
    tournament at ``tournament`` (when the section has ``sft``) -> GRPO against the section's opponent (when it
    trains), the scripted seller ``reference`` beside them; evaluated against that opponent in the section's markets
    (none named: every evaluation market) with ``sampling`` and sampling seed ``seed``, under GRPO's turn budget."""
    lm, sft = section.lm, section.sft
    return shared.StageSpec(
        game=MultiBuyerStages(section.grpo.turn_budget), base_model=base_model, training_dir=training_dir,
        opponent=lm.opponent,
        evaluation=shared.lm_evaluation(lm, statistics, seed, sampling, lm.eval_tiers or EVAL_MARKETS),
        sft=shared.sft_stage(sft, tournament),
        grpo=section.grpo if section.train else None,
        references={f"{reference} (scripted)": reference} if reference else {}, progress=progress)


def profile_line(profile: str, section: Any) -> str:
    """The profile's name, the tournament's size and the language model's stages of a ``games.multi_buyer``
    section."""
    stages = " -> ".join(["base", *(["SFT"] if section.sft else []), *(["GRPO"] if section.train else [])])
    return (f"profile {profile!r}: {len(section.tournament.agents)} sellers, {section.tournament.seeds_per_tier} "
            f"seeds per market; language model: {section.lm.base.display} ({stages})")


def sft_line(results: shared.StageResults) -> str:
    """What SFT learned from (the sellers of the best sales, their mean normalised surplus), its steps and loss."""
    sft = results.sft
    if sft is None:
        return "SFT: not run on this profile (no games.multi_buyer.sft section)"
    examples = results.sft_examples
    return (f"SFT: {sft.examples} conversations (the best scripted sale of each scenario: "
            f"{', '.join(sorted({e.seller for e in examples}))}; mean normalised surplus "
            f"{np.mean([e.payoff for e in examples]):.3f}), {sft.steps} optimizer steps, {sft.seconds:.0f} s; "
            f"seller-turn loss {sft.loss_before:.3f} -> {sft.loss_after:.3f}")


# ---------------------------------------------------------------------------------------------
# The trained stages beside the source paper's findings
# ---------------------------------------------------------------------------------------------


def lm_table(results: shared.StageResults, spec: shared.StageSpec) -> StudyTable:
    """``multi_buyer_lm``: the stages, then their paired differences, pooled over the evaluation's markets, with
    Liu et al.'s qualitative findings (theirs) beside the rows they speak of."""
    table, e = results.table, spec.evaluation
    theirs = {"base": "fails to explore the buyer pool; fixates on the current highest bid",
              f"{results.trained or 'GRPO'} - base": "substantially higher surplus; deals with high-value buyers more "
                                                      "consistently; probes more (their RLVR seller; no SFT stage in "
                                                      "theirs)"}
    shown = pd.concat([wide(table, "all", index="stage"), wide(table, "all", "difference", index="stage")])
    shown[THEIRS_COLUMN] = [theirs.get(i, "") for i in shown.index]
    turn_budget = getattr(spec.game, "turn_budget", None)
    seeds = f"{e.seeds_per_group} seed clusters x {len(set(table['market'])) - 1} market(s)"
    budget = f"{turn_budget} seller turns per market" if turn_budget else "full turn budgets"
    return StudyTable(
        "multi_buyer_lm", "The language-model seller before and after training (ours) beside Liu et al.'s (theirs)",
        shown, f"Seller vs {spec.opponent!r}, {seeds}, {budget}; {1 - e.alpha:.0%} seed-cluster intervals, "
        "differences paired by scenario.", data=table)


def _change(pooled: pd.DataFrame, stage: str, baseline: str, metric: str) -> str:
    """The measured direction of ``stage - baseline``: higher / lower when the interval excludes zero."""
    r, name = pooled.loc[("difference", stage, baseline, metric)], SHOW.get(metric, metric)
    if pd.isna(r["estimate"]):
        return f"{name} not measured (no deal in one of the two stages)"
    word = "no clear change" if r["ci_low"] <= 0 <= r["ci_high"] else ("higher" if r["estimate"] > 0 else "lower")
    return f"{name} {word} ({fmt_ci(r['estimate'], r['ci_low'], r['ci_high'], signed=True)})"


def findings(results: shared.StageResults) -> list[str]:
    """Ours, pooled over the evaluation's markets: the base model's exploration and wasted turns, then each trained
    stage against the stages before it (normalised surplus, top-buyer share, exploration)."""
    pooled = results.table[results.table["market"] == "all"].set_index(["kind", "stage", "baseline", "metric"])
    lines = [f"Ours, base model: {pooled.loc[('stage', 'base', '', 'exploration'), 'estimate']:.2f} buyers explored "
             f"per market on average; {pooled.loc[('stage', 'base', '', 'bad_parses'), 'estimate']:.2f} wasted "
             "(bad-parse) turns per market."]
    trained = results.trained or "GRPO"
    for stage, baseline in (("SFT", "base"), (trained, "base"), (trained, "SFT")):
        if stage in results.stages and baseline in results.stages:
            lines.append(f"Ours, {stage} vs {baseline}: {_change(pooled, stage, baseline, 'normalised_surplus')}; "
                         f"{_change(pooled, stage, baseline, 'top_buyer_share')}; "
                         f"{_change(pooled, stage, baseline, 'exploration')}.")
    return lines


def surplus_by_market(results: shared.StageResults) -> pd.DataFrame:
    """Each stage's normalised surplus per market (rows: the stages in order; columns: the markets and ``all``)."""
    t = results.table
    rows = t[(t["kind"] == "stage") & (t["metric"] == "normalised_surplus")]
    return rows.pivot(index="stage", columns="market", values="estimate").reindex(list(results.stages)).round(3)


__all__ = ["SHOW", "THEIRS_COLUMN", "MultiBuyerStages", "arms_figure", "arms_table", "best_seller", "ci_cell",
           "exploration", "findings", "lm_table", "profile_line", "rules_table", "scripted_stages", "scripted_table",
           "sellers_table", "sft_line", "stage_spec", "styles_table", "surplus_by_market", "wide"]
