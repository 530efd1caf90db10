"""Notebook 12's study of the multi-product market: its tables as plain data, and its stages under the shared contract.

Contract: :func:`rules_table` and :func:`markets_table` are written from the game's constants;
:func:`scripted_stages` reads a tournament's matches (each seller against the buyer pool) into the stage table of the
scripted sellers, which :func:`sellers_table`, :func:`constraints_table`, :func:`arms_table`, :func:`arms_figure` and
:func:`price_arm_note` show; :class:`MultiProductStages` is this game's :class:`negolib.games.training.GameStages` and
:func:`stage_spec` the :class:`~negolib.games.training.StageSpec` of a profile's checked ``games.multi_product``
section (base -> SFT, when the section has it -> GRPO, when it trains); :func:`lm_table`, :func:`refusals` and
:func:`findings_table` read the :class:`~negolib.games.training.StageResults`. Nothing here prints.
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
from negolib.games.multi_product.buyers import RULES
from negolib.games.multi_product.env import VIOLATIONS
from negolib.games.multi_product.metrics import market_metrics
from negolib.games.multi_product.protocol import MAX_MESSAGE_CHARS, MAX_PRICE, PARTS
from negolib.games.multi_product.scenarios import (
    COST_SHARE,
    EVAL_SEED_START,
    LIST_RANGE,
    MARKETS,
    TRAIN_MARKETS,
    VALUE_SIGMA,
)
from negolib.games.multi_product.training import (
    RewardConfig,
    episodes_frame,
    format_stage_table,
    play_stages,
    run_grpo,
    sft_dataset,
    stage_table,
)

LABEL = {"oracle": "oracle (upper bound: reads valuations)", "oracle_surplus": "oracle_surplus (upper bound)"}
"""Display names of the scripted sellers that read the valuations (upper bounds, not baselines)."""
ROLE = {"base": "training market", "small": "unseen size (smaller)", "large": "unseen size (larger)",
        "correlated": "correlated valuations", "cheap": "prices 10x below training",
        "premium": "prices 10x above training"}
CONSTRAINTS = ("n", "constraint_adherence", "bad_parses", "offers_sold_product", "offers_to_buyer_who_bought",
               "offers_below_cost", "sold_twice", "sales_below_cost", "overshoots")
REFUSALS = ("messages", "valid_messages", "bad_parses", "offers_sold_product", "offers_to_buyer_who_bought",
            "offers_below_cost", "n_sales")
THEIRS = "theirs (abstract, qualitative; no numbers given)"
GRPO_LOG = ("step", "reward", "score", "deal_rate", "bad_parse_rate", "truncated_rate", "kl", "seconds")


# ---------------------------------------------------------------------------------------------
# The rules and the markets
# ---------------------------------------------------------------------------------------------


def rules_table() -> StudyTable:
    """``multi_product_rules``: each rule, its value read from the game's constants, and whose it is."""
    base = MARKETS[TRAIN_MARKETS[0]]
    rules = pd.DataFrame([
        ("products and buyers", f"K = {base.n_products} products, M = {base.n_buyers} unit-demand buyers in the "
         "training market (other sizes in the arms)", "theirs (shape); the sizes: ours"),
        ("turn budget", f"{base.turn_budget} seller messages in the training market; each message is one turn, "
         "valid or not; a buyer answers the message addressed to it at once", "a limit: theirs; the rule: ours"),
        ("list prices and costs", f"list price uniform in [{LIST_RANGE[0]:g}, {LIST_RANGE[1]:g}] x the market's "
         f"scale (public); cost a uniform [{COST_SHARE[0]:g}, {COST_SHARE[1]:g}] share of it (private)", "ours"),
        ("valuations", f"log-normal around the list price (sigma {VALUE_SIGMA:g}), correlation rho between one "
         "buyer's products (0: independent)", "heterogeneous and private: theirs; the draw: ours"),
        ("the four parts", " / ".join(PARTS) + ", one per line in this order (blank lines and one code fence "
         "tolerated)", "a four-part protocol: theirs; these parts: ours"),
        ("TO", "buyer_1 .. buyer_M; anything else (an unknown buyer, several, 'all') is a bad parse of TO", "ours"),
        ("PRODUCT", "product_1 .. product_K; anything else is a bad parse of PRODUCT", "ours"),
        ("PRICE", f"a positive number of dollars, at most two decimals, at most {MAX_PRICE:,.0f}; no commas, units "
         "or ranges", "ours"),
        ("MESSAGE", f"non-empty, at most {MAX_MESSAGE_CHARS} characters, no line starting with a part label", "ours"),
        ("refused offers", ", ".join(VIOLATIONS) + ": counted by kind, no effect", "constraint adherence: theirs; "
         "the kinds: ours"),
        ("buyers", "; ".join(f"{n}: accepts iff value - price >= {r.min_share:g} x value and no standing offer "
                             "gives it more" for n, r in RULES.items()) + " (pool: the training buyers; picky: held "
         "out)", "ours"),
        ("seller's reward", f"its surplus over the optimal welfare, in [0, 1], minus "
         f"{RewardConfig().refusal_penalty:g} x the refused share of its messages", "surplus as RLVR reward: theirs; "
         "normaliser and penalty: ours"),
        ("allocation quality", "realised welfare / the welfare of the optimal assignment (linear_sum_assignment, at "
         "most turn-budget sales)", "theirs (metric); the oracle: ours"),
        ("scenario seeds", f"pure functions of (market, seed); evaluation from {EVAL_SEED_START:,}, the same seeds in "
         "every market", "ours"),
    ], columns=["rule", "value", "source"]).set_index("rule")
    return StudyTable("multi_product_rules", "Multi-product market: rules and their source", rules,
                      "Every value is read from the game's constants (negolib.games.multi_product).")


def markets_table() -> StudyTable:
    """``multi_product_markets``: each market's sizes, turn budget, valuation correlation, price scale and arm."""
    markets = pd.DataFrame([{"market": n, "K": c.n_products, "M": c.n_buyers, "turn budget": c.turn_budget,
                             "rho": c.rho, "scale": c.scale, "arm": ROLE.get(n, "")} for n, c in MARKETS.items()])
    return StudyTable("multi_product_markets", "Markets: the training market and the generalisation arms",
                      markets.set_index("market"),
                      "Sizes, valuation correlation and price scale of each market (ours).")


# ---------------------------------------------------------------------------------------------
# The scripted sellers against the buyer pool
# ---------------------------------------------------------------------------------------------


def scripted_stages(matches: str | Path, sellers: Sequence[str], statistics: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(episodes, table) of a tournament's matches: each seller's own match against the pool (a replayed match's
    latest record), one row per seller, market and seed (:func:`.training.episodes_frame`); and their stage table
    (the sellers as stages) under ``statistics`` (n_resamples, seed, alpha)."""
    latest = {(m.seller, m.buyer, m.scenario_key): m for m in read_matches(matches)}  # a replayed match: latest wins
    records = {s: [m.record for (a, b, _), m in latest.items() if a == b == s] for s in sellers}
    episodes = pd.concat([episodes_frame(records[s], s, "pool") for s in sellers], ignore_index=True)
    return episodes, stage_table(episodes, list(sellers), statistics.n_resamples, statistics.seed, statistics.alpha)


def sellers_table(table: pd.DataFrame) -> StudyTable:
    """``multi_product_sellers``: the scripted sellers and their paired differences, every market pooled."""
    return StudyTable(
        "multi_product_sellers", "Scripted sellers vs the buyer pool, every market pooled (seed-cluster 95% CI)",
        format_stage_table(table).rename(index=lambda s: LABEL.get(s, s)),
        "normalised_surplus: seller surplus / optimal welfare; revenue_ratio: revenue / best feasible revenue; "
        "allocation_quality: realised welfare / optimal assignment; constraint_adherence: valid messages / messages; "
        "'a - b' rows: paired differences.", data=table)


def constraints_table(episodes: pd.DataFrame, sellers: Sequence[str]) -> StudyTable:
    """``multi_product_constraints``: each seller's constraint adherence and its broken rules (counts), pooled."""
    cons = pd.concat({s: market_metrics(episodes[episodes["stage"] == s], overall=True).set_index("market").loc["all"]
                      for s in sellers}, axis=1).T
    cols = list(CONSTRAINTS)
    return StudyTable("multi_product_constraints", "Constraint adherence of the scripted sellers (counts)",
                      cons[cols].round(3), "sold_twice and sales_below_cost re-check the realised sales.",
                      data=cons[cols].reset_index(names="seller"))


def _arms(table: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    arm = table[(table["kind"] == "stage") & (table["market"] != "all")]
    order = list(arm.pivot_table(index="market", columns=["metric", "stage"], values="estimate", sort=False).index)
    return arm, order


def arms_table(table: pd.DataFrame, sellers: Sequence[str]) -> StudyTable:
    """``multi_product_arms``: per market arm, each seller's normalised surplus and allocation quality."""
    arm, order = _arms(table)

    def cell(market: str, seller: str, metric: str) -> str:
        r = arm[(arm["market"] == market) & (arm["stage"] == seller) & (arm["metric"] == metric)]
        return fmt_ci(*r[["estimate", "ci_low", "ci_high"]].iloc[0], signed=False)

    cells = pd.DataFrame({(m, s): [cell(mk, s, m) for mk in order]
                          for m in ("normalised_surplus", "allocation_quality") for s in sellers},
                         index=pd.Index(order, name="market"))
    return StudyTable("multi_product_arms", "Scripted sellers by market arm (seed-cluster 95% CI)", cells,
                      "Columns: (metric, seller).", data=arm)


def arms_figure(table: pd.DataFrame, sellers: Sequence[str]) -> Any:
    """Bars of each seller's normalised surplus and allocation quality per market arm, with seed-cluster intervals."""
    arm, order = _arms(table)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
    width = 0.8 / len(sellers)
    for ax, metric in zip(axes, ("normalised_surplus", "allocation_quality")):
        for j, s in enumerate(sellers):
            r = arm[(arm["stage"] == s) & (arm["metric"] == metric)].set_index("market").reindex(order)
            x = np.arange(len(order)) + (j - (len(sellers) - 1) / 2) * width
            err = np.vstack([r["estimate"] - r["ci_low"], r["ci_high"] - r["estimate"]]).clip(0)
            ax.bar(x, r["estimate"], width, yerr=err, capsize=2, label=LABEL.get(s, s))
        ax.set_xticks(np.arange(len(order)), order, rotation=30)
        ax.set_title(metric.replace("_", " "))
        ax.set_ylim(0, 1.05)
    axes[0].legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig


def price_arm_note(table: pd.DataFrame, sellers: Sequence[str]) -> str:
    """The largest difference of each seller's normalised surplus between a price arm and the training market ("":
    no price arm played)."""
    arm, _ = _arms(table)
    surplus = arm[arm["metric"] == "normalised_surplus"].pivot(index="stage", columns="market", values="estimate")
    priced = [m for m in ("cheap", "premium") if m in surplus and "base" in surplus]
    if not priced:
        return ""
    gap = surplus[priced].sub(surplus["base"], axis=0).abs().max(axis=1)
    return ("largest difference of a seller's normalised surplus between a price arm and the training market: "
            + ", ".join(f"{s} {gap[s]:.4f}" for s in sellers) + " (the price arms draw the same scenarios at another "
            "scale: a seller acting on prices relative to list prices and costs scores the same up to rounding to the "
            "cent; the random seller seeds its draws with the market's name, so its episodes differ)")


# ---------------------------------------------------------------------------------------------
# The stages: base -> SFT -> GRPO
# ---------------------------------------------------------------------------------------------


class MultiProductStages(shared.GameStages):
    """The multi-product market under the stage contract: SFT on the tournament's best clean sales (never an upper
    bound's), GRPO of the seller, and the stages against the evaluation's buyer agents in its markets."""

    name = "multi_product"

    def sft_examples(self, sft: shared.SFTStage) -> list[Any]:
        return sft_dataset(sft.tournament, select=sft.select, min_share=sft.min_share, max_examples=sft.max_examples)

    run_grpo = staticmethod(run_grpo)
    stage_table = staticmethod(stage_table)

    def evaluate(self, stages: Mapping[str, str | Path], evaluation: shared.StageEvaluation,
                 progress: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
        e = evaluation
        episodes = play_stages(stages, e.opponents, e.seeds_per_group, e.groups, e.seed, e.sampling,
                               max_batch=e.max_batch, prompt_cap=e.prompt_cap, progress=progress)
        return self.tabulate(episodes, stages, e)


def stage_spec(section: Any, statistics: Any, *, base_model: str | Path, sampling: SamplingConfig | None, seed: int,
               training_dir: Path, tournament: Path, progress: bool = True) -> shared.StageSpec:
    """The stages of a profile's checked ``games.multi_product`` section
    (:class:`negolib.game_params.MultiProductGameParams`) under its ``statistics``: ``base_model`` -> SFT on the
    tournament at ``tournament`` (when the section has ``sft``) -> GRPO against the section's opponent (when it
    trains); evaluated against that opponent in the section's markets (none named: every evaluation market) with
    ``sampling`` and sampling seed ``seed``."""
    lm, sft = section.lm, section.sft
    return shared.StageSpec(
        game=MultiProductStages(), base_model=base_model, training_dir=training_dir, opponent=lm.opponent,
        evaluation=shared.lm_evaluation(lm, statistics, seed, sampling, lm.eval_tiers),
        sft=shared.sft_stage(sft, tournament),
        grpo=section.grpo if section.train else None, progress=progress)


def profile_line(profile: str, section: Any) -> str:
    """The profile's name, the tournament's sellers and the language model's stages of a ``games.multi_product``
    section."""
    t = section.tournament
    stages = " -> ".join(["base", *(["SFT"] if section.sft else []), *(["GRPO"] if section.train else [])])
    return (f"profile {profile!r}: sellers {', '.join(t.agents)}; {t.seeds_per_tier} seeds per market; language "
            f"model: {section.lm.base.display} ({stages})")


def sft_line(results: shared.StageResults) -> str:
    """What SFT learned from (the sellers of the best clean sales, their mean normalised surplus), steps and loss."""
    sft = results.sft
    if sft is None:
        return "SFT: not run on this profile (no games.multi_product.sft section)"
    examples = results.sft_examples
    return (f"SFT: {sft.examples} conversations (the best clean sale of each scenario: "
            f"{', '.join(sorted({e.seller for e in examples}))}; mean normalised surplus "
            f"{np.mean([e.payoff for e in examples]):.3f}), {sft.steps} optimizer steps, {sft.seconds:.0f} s; "
            f"seller-message loss {sft.loss_before:.3f} -> {sft.loss_after:.3f}")


# ---------------------------------------------------------------------------------------------
# The trained stages, and the source paper's findings beside ours
# ---------------------------------------------------------------------------------------------


def lm_table(results: shared.StageResults, spec: shared.StageSpec, model: str) -> StudyTable:
    """``multi_product_lm``: the stages of the language model ``model`` and their paired differences, pooled."""
    e = spec.evaluation
    markets = ", ".join(e.groups or MARKETS)
    return StudyTable(
        "multi_product_lm", f"The language-model seller before and after training ({model}; ours)",
        format_stage_table(results.table), f"Against {spec.opponent!r}, {e.seeds_per_group} seed clusters in "
        f"{markets}; {1 - e.alpha:.0%} seed-cluster intervals, differences paired by scenario.", data=results.table)


def refusals(results: shared.StageResults) -> pd.DataFrame:
    """Per stage, its messages, the valid ones, bad parses, each kind of refused offer and its sales (totals)."""
    counts = results.episodes.groupby("stage", sort=False)[list(REFUSALS)].sum()
    return counts.reindex(list(results.stages))


def _ci(table: pd.DataFrame, kind: str, stage: str, baseline: str, market: str, metric: str) -> str:
    """``estimate [low, high]`` of one row of a stage table (signed for a difference)."""
    r = table.set_index(["kind", "stage", "baseline", "market", "metric"]).loc[(kind, stage, baseline, market, metric)]
    return fmt_ci(r["estimate"], r["ci_low"], r["ci_high"], signed=kind == "difference")


def _change(results: shared.StageResults, metric: str, market: str = "all") -> str:
    """The trained stage - base on ``metric`` as measured (a direction only where the interval excludes zero)."""
    trained, table = results.trained, results.table
    if trained is None:
        return "not measured: no GRPO on this profile"
    r = table.set_index(["kind", "stage", "baseline", "market", "metric"]).loc[
        ("difference", trained, "base", market, metric)]
    if pd.isna(r["estimate"]):
        return "not measured (undefined on these episodes)"
    word = "no clear change" if r["ci_low"] <= 0 <= r["ci_high"] else ("higher" if r["estimate"] > 0 else "lower")
    return f"{trained} - base {word}: {_ci(table, 'difference', trained, 'base', market, metric)}"


def findings_table(results: shared.StageResults, spec: shared.StageSpec, scripted: pd.DataFrame,
                   sellers: Sequence[str]) -> StudyTable:
    """``multi_product_findings``: the source paper's five qualitative findings (theirs, no number) and what this run
    measured of each (ours): the stages' constraint adherence, the trained stage's changes, frontier sellers of the
    tournament (``sellers`` with a ``:``; ``scripted`` its stage table) and the unseen markets."""
    lm = results.table
    frontier = [a for a in sellers if ":" in a]
    unseen = [m for m in (spec.evaluation.groups or MARKETS) if m not in spec.grpo.markets] if spec.grpo else []
    adherence = "; ".join(f"{s}: {_ci(lm, 'stage', s, '', 'all', 'constraint_adherence')}" for s in results.stages)
    if frontier:
        versus = "; ".join(f"{a}: surplus {_ci(scripted, 'stage', a, '', 'all', 'normalised_surplus')}, allocation "
                           f"{_ci(scripted, 'stage', a, '', 'all', 'allocation_quality')}" for a in frontier)
        versus = f"frontier sellers in the tournament: {versus} (the trained model played other seeds: not paired)"
    else:
        versus = "not measured: no frontier model sold in this profile's tournament"
    if unseen and results.trained:
        general = "; ".join(f"{m}: {_change(results, 'normalised_surplus', m)}" for m in unseen) + \
            " (normalised surplus)"
    else:
        general = "not measured for the language model: its evaluation used only training markets on this profile"
    findings = pd.DataFrame([
        ("a four-part protocol maps language to a parsable, regulated decision space; constraint adherence is "
         "measured", f"constraint adherence {adherence}"),
        ("the trained seller learns to match limited inventory to buyers more effectively",
         f"allocation quality: {_change(results, 'allocation_quality')}"),
        ("RLVR anchored on the economic outcome trains the seller's surplus extraction",
         f"normalised surplus: {_change(results, 'normalised_surplus')}"),
        ("it matches or outperforms trillion-parameter frontier models in surplus extraction and allocation quality",
         versus),
        ("the learned strategies generalise to unseen market structures, correlated valuations and price ranges",
         general),
    ], columns=[THEIRS, "ours (this run)"])
    return StudyTable("multi_product_findings", "The source paper's qualitative findings (theirs) beside ours",
                      findings.set_index(THEIRS),
                      "Theirs: second abstract of related_systems_abstracts.txt. Ours: measured above.")


__all__ = ["GRPO_LOG", "LABEL", "ROLE", "MultiProductStages", "arms_figure", "arms_table", "constraints_table",
           "findings_table", "lm_table", "markets_table", "price_arm_note", "profile_line", "refusals", "rules_table",
           "scripted_stages", "sellers_table", "sft_line", "stage_spec"]
