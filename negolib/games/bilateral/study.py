"""Notebook 10's study of the bilateral game: its tables as plain data, and its stages under the shared contract.

Contract: :func:`rules_table` and :func:`agents_table` are written from the game's constants; :func:`tier_tables`
reads a tournament's matches into the metrics by price tier; :class:`BilateralStages` is this game's
:class:`negolib.games.training.GameStages` and :func:`stage_spec` the :class:`~negolib.games.training.StageSpec` of a
profile's checked ``games.bilateral`` section (base -> SFT -> SFT+GRPO, evaluated against the section's opponent);
:func:`tradeoff_table`, :func:`findings` and :func:`surplus_by_tier` read :class:`~negolib.games.training.StageResults`.
Every table is a :class:`negolib.games.base.StudyTable` (the book saves and shows it); nothing here prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from negolib.core.formatting import fmt_ci
from negolib.core.sampling import SamplingConfig
from negolib.games import training as shared
from negolib.games.base import StudyTable
from negolib.games.bilateral.env import BilateralConfig
from negolib.games.bilateral.game import BilateralGame
from negolib.games.bilateral.metrics import tier_metrics
from negolib.games.bilateral.scenarios import (
    COST_RANGE,
    EVAL_SEED_START,
    TIERS,
    TRAIN_SEED_BLOCK,
    VALUE_RANGE,
    eval_seeds,
    scenario_set,
)
from negolib.games.bilateral.scripted import make_scripted
from negolib.games.bilateral.tools import MAX_PRICE, TOOL_NAMES
from negolib.games.bilateral.training import play_stages, run_grpo, sft_dataset, stage_table
from negolib.games.matches import read_matches
from negolib.games.toolcalls import money

THEIRS = {("SFT", "base"): "surplus share about doubles; deal rate falls",
          ("SFT+GRPO", "SFT"): "deal rate recovers; surplus share erodes"}
"""Bergemann et al.'s qualitative finding (their abstract), beside our stage differences."""
TRADEOFF_METRICS = ("deal_rate", "surplus_share", "ir_violations", "ir_violation_rate")
TIER_COLUMNS = ("tier", "n", "deal_rate", "surplus_share", "ir_violations", "efficiency", "deal_rate_with_zone",
                "no_deal_rate_without_zone", "gains_realised", "bad_parses_per_episode")


# ---------------------------------------------------------------------------------------------
# The rules and the scripted strategies
# ---------------------------------------------------------------------------------------------


def rules_table(n_reference: int = 1000) -> StudyTable:
    """``bilateral_rules``: each rule, its value read from the game's constants, and whose it is (the source's or
    ours); the share of scenarios without a zone over the first ``n_reference`` evaluation seeds of one tier."""
    cfg = BilateralConfig()
    ref = scenario_set(eval_seeds(n_reference), tiers=list(TIERS)[:1])  # tiers only scale a seed's draws
    no_zone = sum(not s.has_zone for s in ref) / len(ref)
    rules = pd.DataFrame([
        ("price tiers", ", ".join(money(v) for v in TIERS.values()), "tiers: theirs; these scales: ours"),
        ("seller's cost", f"log-uniform in [{COST_RANGE[0]:g}, {COST_RANGE[1]:g}] x the tier's scale, private", "ours"),
        ("buyer's value", f"log-uniform in [{VALUE_RANGE[0]:g}, {VALUE_RANGE[1]:g}] x the tier's scale, private",
         "ours"),
        ("no zone of agreement (value <= cost)", f"{no_zone:.1%} of the first {len(ref)} evaluation seeds", "ours"),
        ("scenario seeds", f"evaluation from {EVAL_SEED_START:,} (paired across tiers); training "
         f"{TRAIN_SEED_BLOCK.start}-{TRAIN_SEED_BLOCK.stop - 1}", "ours"),
        ("deadline", f"{cfg.deadline_turns} turns in all ({cfg.turns_of('seller')} seller, {cfg.turns_of('buyer')} "
         f"buyer); the {cfg.first_mover} opens; no deal at the deadline", "ours"),
        ("a turn", f"a message plus at most one tool call among {', '.join(n + '()' for n in TOOL_NAMES)}",
         "tool calls apart from messages: theirs; the tools: ours"),
        ("make_offer(price)", f"a binding offer, 0 < price <= {money(MAX_PRICE)}; replaces the mover's standing offer",
         "ours"),
        ("accept_offer()", "closes at the counterpart's standing offer only; with none standing: an invalid accept "
         "(a bad parse, a no-op)", "ours"),
        ("walk_away()", "ends the episode without a deal", "ours"),
        ("bad parse", "malformed JSON, unknown tool, missing/extra/ill-typed arguments, a bad price, two or more "
         "calls: the turn is a no-op, counted per party", "ours"),
        ("prose-only turn", "no call: not a bad parse; offers stand as they were", "ours"),
        ("surplus share", "(price - cost) / (value - cost) over deals with a zone; IR violation: a deal below cost "
         "or above value", "theirs (metrics); formula ours"),
    ], columns=["rule", "value", "source"]).set_index("rule")
    return StudyTable("bilateral_rules", "Bilateral price bargaining: rules and their source", rules,
                      "Every value is read from the game's constants (negolib.games.bilateral).")


def agents_table() -> StudyTable:
    """``bilateral_agents``: the scripted strategies (both roles) and their parameters, one row per strategy."""
    names = BilateralGame().scripted_strategies()
    agents = pd.DataFrame([make_scripted(n, "seller", 0).settings() for n in names])
    agents = agents.drop(columns=["backend", "name", "seed"]).set_index(pd.Index(names, name="agent"))
    return StudyTable("bilateral_agents", "Scripted strategies (both roles) and their parameters",
                      agents.astype(object).where(agents.notna(), "").astype(str),
                      "markup: opening above cost (seller) or below value (buyer); e: Faratin concession exponent "
                      "(Boulware < 1 < Conceder); margin: the fixed price's; min_concession: tit-for-tat's smallest "
                      "step.")


def tier_tables(matches: str | Path, sellers: Sequence[str]) -> tuple[StudyTable, StudyTable, str]:
    """``bilateral_tiers`` (the tournament's metrics by price tier, :func:`.metrics.tier_metrics`, a replayed match's
    latest record), ``bilateral_tier_share`` (each of ``sellers``' surplus share per tier) and a sentence on the
    largest spread of one seller's share across tiers."""
    latest = {(m.seller, m.buyer, m.scenario_key): m for m in read_matches(matches)}  # a replayed match: latest wins
    outcomes = [dict(m.record, seller_agent=m.seller) for m in latest.values()]
    tiers = tier_metrics(outcomes, overall=True)
    by_seller = pd.concat({a: tier_metrics([r for r in outcomes if r["seller_agent"] == a]).set_index("tier")
                           ["surplus_share"] for a in sellers}, axis=1).T
    spread = float((by_seller.max(axis=1) - by_seller.min(axis=1)).max())
    note = (f"largest difference across tiers of one seller's surplus share: {spread:.4f} (the scripted strategies "
            "are scale-free: they act on prices relative to their reservation, so tiers differ only by rounding to "
            "the cent)")
    return (StudyTable("bilateral_tiers", "Tournament metrics by price tier (tier_metrics)",
                       tiers[list(TIER_COLUMNS)].set_index("tier").round(3), data=tiers),
            StudyTable("bilateral_tier_share", "Seller agent's surplus share by price tier", by_seller.round(3),
                       data=by_seller.reset_index(names="seller")),
            note)


# ---------------------------------------------------------------------------------------------
# The stages: base -> SFT -> SFT+GRPO
# ---------------------------------------------------------------------------------------------


class BilateralStages(shared.GameStages):
    """The bilateral game under the stage contract: SFT on a tournament's best deals, GRPO of the seller, and the
    stages as sellers against the evaluation's opponents in its price tiers."""

    name = "bilateral"

    def sft_examples(self, sft: shared.SFTStage) -> list[Any]:
        return sft_dataset(sft.tournament, select=sft.select,  # type: ignore[arg-type]
                           min_share=sft.min_share, max_examples=sft.max_examples)

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
    """The stages of a profile's checked ``games.bilateral`` section (:class:`negolib.game_params.BilateralGameParams`)
    under its ``statistics`` (:class:`negolib.params.Statistics`): ``base_model`` (the section's base model's folder)
    -> SFT on the tournament at ``tournament`` -> GRPO against the section's opponent, evaluated against that opponent
    with ``sampling`` and sampling seed ``seed``."""
    lm = section.lm
    return shared.StageSpec(
        game=BilateralStages(), base_model=base_model, training_dir=training_dir, opponent=lm.opponent,
        evaluation=shared.lm_evaluation(lm, statistics, seed, sampling, lm.eval_tiers),
        sft=shared.sft_stage(section.sft, tournament), grpo=section.grpo, progress=progress)


def profile_line(profile: str, section: Any) -> str:
    """The profile's name, the tournament's size and the language model of a ``games.bilateral`` section."""
    return (f"profile {profile!r}: {len(section.tournament.agents)} tournament agents, "
            f"{section.tournament.seeds_per_tier} seeds per price tier; language model: {section.lm.base.display}")


def sft_line(results: shared.StageResults) -> str:
    """What SFT learned from: the conversations by seller, their mean surplus share, its steps and loss."""
    sft = results.sft
    if sft is None:
        return "SFT: not run"
    picked = pd.DataFrame([(e.seller, e.buyer, e.surplus_share) for e in results.sft_examples],
                          columns=["seller", "buyer", "share"])
    sellers = ", ".join(f"{k}: {v}" for k, v in picked["seller"].value_counts().items())
    return (f"SFT: {sft.examples} conversations ({sellers}; mean surplus share {picked['share'].mean():.3f}), "
            f"{sft.steps} steps in {sft.seconds:.0f} s; loss on the seller's tokens {sft.loss_before:.3f} -> "
            f"{sft.loss_after:.3f}")


# ---------------------------------------------------------------------------------------------
# The trade-off beside the source paper's finding
# ---------------------------------------------------------------------------------------------


def _pooled(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["tier"] == "all"].set_index(["kind", "stage", "baseline", "metric"])


def tradeoff_table(results: shared.StageResults, spec: shared.StageSpec) -> StudyTable:
    """``bilateral_tradeoff``: per stage, then per paired difference, the pooled deal rate, surplus share and IR
    violations (a count and a rate) with seed-cluster intervals, the episodes, and Bergemann et al.'s finding."""
    table, pooled = results.table, _pooled(results.table)
    e = spec.evaluation

    def cell(kind: str, stage: str, baseline: str, metric: str) -> str:
        r = pooled.loc[(kind, stage, baseline, metric)]
        if metric == "ir_violations":
            return f"{r['estimate']:+.0f}" if kind == "difference" else f"{r['estimate']:.0f}"
        return fmt_ci(r["estimate"], r["ci_low"], r["ci_high"], signed=kind == "difference")

    rows = list(dict.fromkeys((k, s, b) for k, s, b, _ in pooled.index))
    trade = pd.DataFrame([[cell(k, s, b, m) for m in TRADEOFF_METRICS]
                          + [int(pooled.loc[(k, s, b, "deal_rate"), "n_episodes"]), THEIRS.get((s, b), "")]
                          for k, s, b in rows],
                         index=[s if k == "stage" else f"{s} - {b}" for k, s, b in rows],
                         columns=[*TRADEOFF_METRICS, "episodes", "Bergemann et al. (theirs, qualitative)"])
    return StudyTable(
        "bilateral_tradeoff", "Trade-off of the training stages (ours) beside the source paper's finding (theirs)",
        trade, f"Seller vs {spec.opponent!r}, {e.seeds_per_group} seed clusters x {len(set(table['tier'])) - 1} "
        f"tier(s); {1 - e.alpha:.0%} seed-cluster intervals, differences paired by scenario.", data=table)


def _change(pooled: pd.DataFrame, stage: str, baseline: str, metric: str) -> str:
    """The measured direction of ``stage - baseline``: higher / lower when the interval excludes zero."""
    r, name = pooled.loc[("difference", stage, baseline, metric)], metric.replace("_", " ")
    if pd.isna(r["estimate"]):
        return f"{name} not measured (no deal with a zone in one of the two stages)"
    word = "no clear change" if r["ci_low"] <= 0 <= r["ci_high"] else ("higher" if r["estimate"] > 0 else "lower")
    return f"{name} {word} ({fmt_ci(r['estimate'], r['ci_low'], r['ci_high'], signed=True)})"


def findings(results: shared.StageResults) -> list[str]:
    """Ours beside theirs, as measured: SFT vs base (surplus share, its ratio, deal rate), SFT+GRPO vs SFT."""
    pooled = _pooled(results.table)
    base_share, sft_share = (pooled.loc[("stage", s, "", "surplus_share"), "estimate"] for s in ("base", "SFT"))
    ratio = f", SFT/base ratio {sft_share / base_share:.2f}" if base_share > 0 and pd.notna(sft_share) else ""
    return [f"Ours, SFT vs base: {_change(pooled, 'SFT', 'base', 'surplus_share')}{ratio}; "
            f"{_change(pooled, 'SFT', 'base', 'deal_rate')}.",
            f"Ours, SFT+GRPO vs SFT: {_change(pooled, 'SFT+GRPO', 'SFT', 'deal_rate')}; "
            f"{_change(pooled, 'SFT+GRPO', 'SFT', 'surplus_share')}."]


def surplus_by_tier(results: shared.StageResults) -> pd.DataFrame:
    """Each stage's surplus share per price tier (rows: the stages in order; columns: the tiers)."""
    t = results.table
    share = t[(t["kind"] == "stage") & (t["metric"] == "surplus_share") & (t["tier"] != "all")]
    return share.pivot(index="stage", columns="tier", values="estimate").reindex(list(results.stages)).round(3)


__all__ = ["THEIRS", "BilateralStages", "agents_table", "findings", "profile_line", "rules_table", "sft_line",
           "stage_spec", "surplus_by_tier", "tier_tables", "tradeoff_table"]
