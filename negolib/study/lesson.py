"""The matched lesson: GRPO trained and evaluated on one task that differs only in its seeds (ours).

Contract, in the order a notebook calls it (every function returns plain data; plotting lives in
:mod:`negolib.study.report.lesson`)::

    pre = preregister(lesson, n_resamples, alpha)        # printed BEFORE training: outcome, N, MDE, expectation
    run = train_lesson(lesson, start, out_dir)           # GRPO from the start policy; resumable
    before = evaluate_lesson(start, lesson, seed, path)  # paired held-out episodes, common sampling seeds
    after = evaluate_lesson(run.checkpoint, lesson, seed, path2)
    res = lesson_result(before, after, lesson, n_resamples, seed, alpha)   # gain on S, its decomposition, ...

The task (:class:`~negolib.training.config.LessonConfig`): the paper's game on one domain, ``rounds`` rounds, the
seller opening against :class:`~negolib.study.ladder.AcceptingBuyer` (it accepts an opening that names at least
``min_valid_terms`` contract terms in range; otherwise no deal). Training plays training seeds of the domain,
evaluation the reserved evaluation seeds of the same domain; the environment (:func:`lesson_env`), the scaffold, the
buyer and the horizon are one object shared by both, so they cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from negolib.agents.base import Agent
from negolib.games.multi_issue.env import EnvConfig
from negolib.games.multi_issue.protocol import action_text
from negolib.stats import (
    ClusterResampler,
    RatioStat,
    minimum_detectable_effect,
    resample_stats,
    signflip_diffs,
    summarize,
)
from negolib.study.ladder import BUYER, AcceptingBuyer, DeadlineBuyer
from negolib.training.config import LessonConfig, TrainConfig

PRIMARY = "S"
SECONDARY = ("utility on deals", "utility on common deals", "deal rate", "mean turns", "bad-parse rate")
COMMON = "utility on common deals"  # the price alone: scenarios both arms closed, paired (no selection by closing)
NO_DEAL_SCORE = -EnvConfig().no_deal_penalty
BUYER_TURN_TOKENS = 96  # room a round leaves in the context for the buyer's reply (its prose and the chat tags)


# ---------------------------------------------------------------------------------------------
# The task: one environment, one buyer, one scaffold for training and evaluation
# ---------------------------------------------------------------------------------------------

def lesson_env(lesson: LessonConfig) -> EnvConfig:
    """The lesson's environment, the same in training and evaluation."""
    return EnvConfig(max_rounds=lesson.rounds, accept_applies_terms=lesson.accept_applies_terms)


def buyer_name(lesson: LessonConfig) -> str:
    """The name the lesson's buyer plays under (in the training mixture and the evaluation's episode keys)."""
    return BUYER if lesson.buyer == "accepting" else f"lesson_{lesson.buyer}"


def buyer_rule(design: dict[str, Any]) -> str:
    """The buyer's rule in words, from a lesson's fields (``dataclasses.asdict(lesson)``)."""
    if design["buyer"] == "accepting":
        return f"buyer accepts an opening naming >= {design['min_valid_terms']} contract term(s) in range"
    if design["buyer"] == "deadline":
        named = (f" and set >= {design['min_valid_terms']} contract term(s) in range" if design["min_valid_terms"]
                 else "")
        return (f"a conceding buyer with a deadline: it counters as the Conceder does and accepts only at its last "
                f"turn (round {design['rounds']}), the seller's standing offer if the seller's last turn parsed{named}")
    return f"scripted {design['buyer']} buyer (the paper game's time-dependent family)"


def lesson_buyer(lesson: LessonConfig, seed: int = 0) -> Agent:
    """The lesson's buyer (the same kind in training and evaluation): the accepting or the deadline buyer with its
    stated rule, or the named scripted strategy of the paper's game."""
    if lesson.buyer == "accepting":
        return AcceptingBuyer(lesson.min_valid_terms)
    if lesson.buyer == "deadline":
        return DeadlineBuyer(buyer_name(lesson), seed, lesson.min_valid_terms)
    from negolib.games.multi_issue.scripted import make_scripted

    return make_scripted(lesson.buyer, name=buyer_name(lesson), seed=seed)


def train_config(lesson: LessonConfig, seed: int = 0) -> TrainConfig:
    """The lesson's GRPO recipe: every episode a fresh training scenario of the domain (``steps x scenarios``
    training seeds), rules and horizon from the lesson, decoding as in the evaluation."""
    per_step = lesson.scenarios_per_step * lesson.rollouts_per_scenario
    return TrainConfig(
        scenarios_per_step=lesson.scenarios_per_step, rollouts_per_scenario=lesson.rollouts_per_scenario,
        micro_batch_size=min(per_step, lesson.micro_batch_size), max_steps=lesson.steps,
        learning_rate=lesson.learning_rate, warmup_steps=lesson.warmup_steps, kl_beta=lesson.kl_beta,
        loo_std_floor=lesson.loo_std_floor, lora_rank=lesson.lora_rank, lora_alpha=lesson.lora_alpha,
        max_new_tokens=lesson.max_new_tokens, temperature=lesson.temperature,
        max_prompt_tokens=lesson.max_prompt_tokens,
        max_context_tokens=lesson.max_prompt_tokens + (lesson.max_new_tokens + BUYER_TURN_TOKENS) * lesson.rounds,
        max_rollout_turns=lesson.rounds, max_rounds=lesson.rounds, scaffold=lesson.scaffold,
        accept_applies_terms=lesson.accept_applies_terms, trained_turns=lesson.trained_turns,
        buyer_mixture={buyer_name(lesson): 1.0},
        train_domains=(lesson.domain,), train_seeds_per_domain=lesson.steps * lesson.scenarios_per_step,
        validate_every=0, save_every=lesson.steps, dtype="float32", seed=seed, data_seed=seed,
    )


def lesson_key(lesson: LessonConfig, start: str | Path, seed: int) -> str:
    """A short hash of everything the lesson's results depend on (its fields, the start policy, the seed): the
    folder a run writes under, so that changing any of them trains and evaluates afresh instead of reading results
    made under other settings."""
    import hashlib

    evaluation = {"eval_prompt_cap": eval_prompt_cap(lesson)}
    blob = json.dumps([asdict(lesson), str(Path(start).resolve()), int(seed), evaluation], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def eval_scenarios(lesson: LessonConfig) -> list[Any]:
    """One scenario per reserved evaluation seed of the lesson's domain (each seed one cluster)."""
    from negolib.games.multi_issue.domains import load_domains
    from negolib.games.multi_issue.scenarios import eval_seeds, make_scenario

    domain = load_domains()[lesson.domain]
    return [make_scenario(domain, s) for s in eval_seeds(lesson.eval_episodes)]


# ---------------------------------------------------------------------------------------------
# Pre-registration
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Preregistration:
    """What the lesson commits to before it trains (printed by :meth:`lines`)."""

    primary: str
    secondary: tuple[str, ...]
    n_paired: int
    n_clusters: int
    planning_sd: float
    mde: float
    power: float
    alpha: float
    expected_gain: float
    design: dict[str, Any]

    @property
    def powered(self) -> bool:
        """Whether the minimum detectable effect is below the expected gain."""
        return self.mde < self.expected_gain

    def lines(self) -> list[str]:
        d = self.design
        return [
            f"primary outcome: mean {self.primary} (trained minus start), paired over {self.n_paired} held-out "
            f"episodes in {self.n_clusters} seed clusters; 95% cluster-bootstrap interval must exclude 0",
            f"secondary: {', '.join(self.secondary)} (each trained minus start, with its interval); the gain in "
            f"S split into its deal-rate and deal-utility parts",
            f"power: assumed paired SD {self.planning_sd:.3f} per episode -> minimum detectable effect "
            f"{self.mde:.3f} at {self.power:.0%} power (alpha {self.alpha:g}); the design expects "
            f"+{self.expected_gain:.3f}: {'powered' if self.powered else 'NOT powered for it'}",
            f"task (training = evaluation but for the seeds): domain {d['domain']}, {d['rounds']} round(s), "
            f"{d['scaffold']} scaffold, {buyer_rule(d)}, ACCEPT terms "
            f"{'applied' if d['accept_applies_terms'] else 'ignored'}, sampling temperature "
            f"{d.get('temperature', 1.0):g}, at most {d['max_new_tokens']} new tokens a turn",
            f"start: {_start_words(d)}",
            f"training: {d['steps']} GRPO steps x {d['scenarios_per_step']} scenarios x "
            f"{d['rollouts_per_scenario']} rollouts at lr {d['learning_rate']:g}, KL beta {d['kl_beta']:g}, "
            f"leave-one-out std floor {d['loo_std_floor']:g}, "
            + (f"LoRA rank {d['lora_rank']} (alpha {d['lora_alpha']})" if d.get('lora_rank') else "full fine-tuning")
            + ("; the loss trains on the seller's last turn only (its earlier turns masked)"
               if d.get("trained_turns", "all") == "last" else ""),
        ]


def _start_words(design: dict[str, Any]) -> str:
    """The start policy in words, from a lesson's fields."""
    if design.get("start", "run_warmup") == "own_warmup":
        sellers = design.get("start_warmup_strategies") or ()
        imitating = f", imitating the scripted {', '.join(sellers)} sellers" if sellers else ""
        return (f"run {design['start_run']}'s format warm-up recipe, rebuilt on this task "
                f"({design['start_warmup_scenarios']} training scenarios of the domain against the lesson's "
                f"buyer{imitating})")
    return f"step 0 of run {design['start_run']} (its format warm-up on that run's domains and buyers)"


def preregister(lesson: LessonConfig, alpha: float = 0.05) -> Preregistration:
    """The lesson's pre-registration: outcome, sample size and minimum detectable effect (the exact paired-t
    power calculation of :func:`negolib.stats.minimum_detectable_effect` with SE = planning SD / sqrt(N))."""
    n = lesson.eval_episodes
    mde = minimum_detectable_effect(lesson.planning_sd / math.sqrt(n), n, alpha, lesson.power)
    return Preregistration(PRIMARY, SECONDARY, n, n, lesson.planning_sd, mde, lesson.power, alpha,
                           lesson.expected_gain, asdict(lesson))


# ---------------------------------------------------------------------------------------------
# Training and evaluation
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LessonRun:
    """A finished lesson training run: its final checkpoint and one log row per optimizer step."""

    checkpoint: str
    log: list[dict[str, Any]]
    out_dir: str


def train_lesson(lesson: LessonConfig, start: str | Path, out_dir: str | Path, seed: int = 0,
                 progress: bool = False, recipe: Mapping[str, Any] | None = None) -> LessonRun:
    """GRPO from ``start`` (a model folder) through :func:`negolib.training.grpo.build_run` on the lesson's task;
    a run already at ``steps`` returns at once (an interrupted one resumes from its last checkpoint). ``recipe``:
    :class:`TrainConfig` fields to change beyond the lesson's (a benchmark's variants; never the task's)."""
    from negolib.games.multi_issue.training import paper_task
    from negolib.training.checkpoints import last_checkpoint
    from negolib.training.grpo import TRAIN_LOG, build_run
    from negolib.training.release import release_memory
    from negolib.training.runlog import RunLog

    out = Path(out_dir)
    config = train_config(lesson, seed)
    task_fields = {"max_rounds", "max_rollout_turns", "scaffold", "accept_applies_terms", "buyer_mixture",
                   "train_domains"}
    if recipe and task_fields & set(recipe):
        raise ValueError(f"recipe may not change the lesson's task: {sorted(task_fields & set(recipe))}")
    config = dataclasses.replace(config, **dict(recipe or {}))
    final = out / "checkpoints" / f"checkpoint-{lesson.steps}"
    if not final.is_dir():
        run = build_run(config, str(start), out, buyers={buyer_name(lesson): lesson_buyer(lesson, seed)},
                        progress=progress,
                        resume=True, task=paper_task(config))
        run.trainer.train()
        del run  # its trainer sits in reference cycles: freed now, before the evaluation loads the checkpoint
        release_memory()
    checkpoint = last_checkpoint(out / "checkpoints")
    if checkpoint is None:
        raise RuntimeError(f"the lesson's run wrote no checkpoint under {out / 'checkpoints'}")
    return LessonRun(str(checkpoint), RunLog(out, TRAIN_LOG).rows(), str(out))


def eval_sampling_seed(seed: int) -> int:
    """The lesson's evaluation sampling seed for a profile's ``seed``: one for every arm (common random numbers)."""
    return seed * 1_000_003 + 17


def eval_prompt_cap(lesson: LessonConfig) -> int:
    """The evaluation seller's prompt cap: the training context's (:func:`train_config`'s ``max_context_tokens``,
    less the end-of-turn token). Training appends every round to one context (its opening prompt capped at
    ``max_prompt_tokens``), so a seller evaluated under ``max_prompt_tokens`` alone would lose the episode's history
    from the third round on (a 4-round episode with 192-token turns) where training showed it all."""
    return train_config(lesson).max_context_tokens - 1


def evaluate_lesson(weights: str | Path, lesson: LessonConfig, seed: int, path: str | Path | None = None,
                    progress: bool = False) -> list[dict[str, Any]]:
    """Records of the ``hf`` arm served from ``weights``, one episode per evaluation scenario against the lesson's
    buyer, in the lesson's environment and scaffold. Every arm plays under one label and ``seed``, so arms draw the
    same random numbers (identical weights play identical episodes). With ``path``, the records are kept there as
    JSON lines and read back on the next call. Progress (turns played, episodes ended) goes to the book's heartbeat
    (:class:`negolib.core.progress.TurnReporter`)."""
    from negolib.agents.factory import ModelCache, build_agent
    from negolib.core.progress import TurnReporter
    from negolib.games.multi_issue.rollout import make_specs, run_episodes
    from negolib.params import AgentSpec, Sampling

    if path is not None and Path(path).is_file():
        return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    arm = "lesson_seller"
    c = train_config(lesson)
    spec = AgentSpec(backend="hf", path=str(weights), scaffold=lesson.scaffold, batch_size=lesson.eval_batch,
                     prompt_cap=eval_prompt_cap(lesson),
                     sampling=Sampling(c.temperature, c.top_p, c.top_k, lesson.max_new_tokens))
    seller = build_agent(arm, spec, seed, cache=ModelCache(), role="seller")
    scenarios = eval_scenarios(lesson)
    buyer = buyer_name(lesson)
    specs = make_specs(arm, arm, [buyer], scenarios, lesson_env(lesson))
    name = Path(path).stem if path is not None else Path(weights).name  # eval_start, eval_trained: the arm
    turns = TurnReporter(f"lesson evaluation ({name})", len(specs))  # the book's heartbeat
    res = run_episodes(specs, {arm: seller, buyer: lesson_buyer(lesson, seed)}, progress=progress, on_turn=turns)
    by_key = {(r["domain"], int(r["seed"])): r for r in res.records}
    records = [by_key[(sc.domain.name, sc.seed)] for sc in scenarios]
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(path).with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in records))
        tmp.replace(path)
    return records


# ---------------------------------------------------------------------------------------------
# The result
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Episodes:
    """Per-episode outcomes of one arm, shape (N,) each, in evaluation-scenario order."""

    score: np.ndarray
    deal: np.ndarray
    utility: np.ndarray  # the seller's normalised utility; NaN without a deal
    turns: np.ndarray
    bad_parses: np.ndarray  # seller turns without a valid action
    seller_turns: np.ndarray
    seeds: np.ndarray

    @classmethod
    def from_records(cls, records: Sequence[dict[str, Any]]) -> Episodes:
        def col(key: str, default: float = math.nan) -> np.ndarray:
            return np.array([float((r.get("outcome") or {}).get(key, default) if (r.get("outcome") or {}).get(key)
                                   is not None else default) for r in records])

        return cls(col("score"), col("deal", 0.0), col("seller_utility"), col("turns", 0.0),
                   col("seller_bad_parses", 0.0), col("seller_turns", 0.0),
                   np.array([int(r["seed"]) for r in records]))

    def summary(self) -> dict[str, float]:
        deals = self.deal > 0
        return {"S": float(np.mean(self.score)), "deal rate": float(np.mean(deals)),
                "utility on deals": float(np.mean(self.utility[deals])) if deals.any() else math.nan,
                "mean turns": float(np.mean(self.turns)),
                "bad-parse rate": float(self.bad_parses.sum() / max(1.0, self.seller_turns.sum()))}


@dataclass(frozen=True)
class Estimate:
    """A trained-minus-start difference with its percentile cluster-bootstrap interval and p-value."""

    start: float
    trained: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float

    @property
    def excludes_zero(self) -> bool:
        return bool(self.ci_low > 0 or self.ci_high < 0)


@dataclass(frozen=True)
class LessonResult:
    """The lesson's outcome: ``estimates`` by outcome name (``S`` first), the decomposition of the S gain,
    the observed paired SD and the minimum detectable effect it implies, and a one-line verdict."""

    estimates: dict[str, Estimate]
    decomposition: dict[str, float]
    n_paired: int
    n_clusters: int
    observed_sd: float
    observed_mde: float
    n_resamples: int
    changed: int  # paired episodes whose S differs
    verdict: str
    example_seed: int = field(default=-1)
    p_signflip: float = math.nan  # paired sign-flip (randomisation) test of the S gain over the clusters
    p_signflip_min: float = math.nan  # the smallest p that test can give here

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "estimates": {k: asdict(v) for k, v in self.estimates.items()}}


def _stat(num_a: np.ndarray, den_a: np.ndarray, num_b: np.ndarray, den_b: np.ndarray) -> RatioStat:
    """sum(num_a)/sum(den_a) - sum(num_b)/sum(den_b) over clusters (rows), as a :class:`RatioStat`."""
    return RatioStat(np.stack([num_a, num_b], axis=1).astype(float), np.stack([den_a, den_b], axis=1).astype(float),
                     np.ones(2), 1)


def decompose(start: dict[str, float], trained: dict[str, float], no_deal: float = NO_DEAL_SCORE) -> dict[str, float]:
    """The gain in S split exactly into a deal-rate part and a deal-utility part.

    With deal rate p and utility on deals U, S = p (U - s0) + s0 (s0 the no-deal score), so (midpoint rule)
    dS = dp ((U_a + U_b) / 2 - s0) + dU (p_a + p_b) / 2, the two parts summing to dS."""
    pa, pb, ua, ub = trained["deal rate"], start["deal rate"], trained["utility on deals"], start["utility on deals"]
    if not all(math.isfinite(x) for x in (pa, pb, ua, ub)):
        return {"deal rate part": math.nan, "deal utility part": math.nan, "total": trained["S"] - start["S"]}
    rate = (pa - pb) * ((ua + ub) / 2 - no_deal)
    util = (ua - ub) * (pa + pb) / 2
    return {"deal rate part": rate, "deal utility part": util, "total": rate + util}


def _verdict(s: Estimate, u: Estimate) -> str:
    if s.ci_high < 0:
        return "worse: S fell (the interval excludes zero from below)"
    if not s.ci_low > 0:
        return "no gain shown: the interval of the S gain does not exclude zero"
    if math.isfinite(u.ci_low) and u.ci_low > 0:
        return "learned: S rose and utility on deals rose (both intervals exclude zero)"
    if math.isfinite(u.diff) and u.diff >= 0:
        return "learned: S rose (interval excludes zero) and utility on deals did not fall"
    return "closes more, not a better price: S rose (interval excludes zero) but utility on deals fell"


def lesson_result(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]], lesson: LessonConfig,
                  n_resamples: int = 10_000, seed: int = 0, alpha: float = 0.05) -> LessonResult:
    """Trained (``after``) minus start (``before``) on the same evaluation scenarios (row i of each is one
    scenario, one cluster). Intervals: negolib's percentile cluster bootstrap (``n_resamples``, ``seed``); utility
    on deals is a ratio (deal-weighted), resampled as such; utility on common deals is the same ratio over the
    scenarios both arms closed (the price alone: a seller that closes more scenarios also closes harder ones, which
    can lower its utility on deals with no change in price). Bootstrap p-values are at least 1/(B+1)."""
    a, b = Episodes.from_records(after), Episodes.from_records(before)
    if a.seeds.tolist() != b.seeds.tolist():
        raise ValueError("the two arms were not played on the same scenarios in the same order")
    n = a.score.size
    ones = np.ones(n)
    ua = np.nan_to_num(a.utility) * (a.deal > 0)
    ub = np.nan_to_num(b.utility) * (b.deal > 0)
    both = ((a.deal > 0) & (b.deal > 0)).astype(float)  # scenarios both arms closed
    stats = {
        "S": _stat(a.score, ones, b.score, ones),
        "utility on deals": _stat(ua, (a.deal > 0).astype(float), ub, (b.deal > 0).astype(float)),
        COMMON: _stat(ua * both, both, ub * both, both),
        "deal rate": _stat((a.deal > 0).astype(float), ones, (b.deal > 0).astype(float), ones),
        "mean turns": _stat(a.turns, ones, b.turns, ones),
        "bad-parse rate": _stat(a.bad_parses, a.seller_turns, b.bad_parses, b.seller_turns),
    }
    resampler = ClusterResampler(np.arange(n), n_resamples, seed)
    dist = resample_stats(resampler, list(stats.values()))
    sa, sb = a.summary(), b.summary()
    n_both = both.sum()
    sa[COMMON] = float((ua * both).sum() / n_both) if n_both else math.nan
    sb[COMMON] = float((ub * both).sum() / n_both) if n_both else math.nan
    floor = 1.0 / (n_resamples + 1)
    est = {}
    for j, (name, stat) in enumerate(stats.items()):
        if name == COMMON and not n_both:  # no scenario closed by both arms: nothing to compare
            est[name] = Estimate(math.nan, math.nan, math.nan, math.nan, math.nan, math.nan)
            continue
        iv = summarize(dist[:, j], alpha)
        est[name] = Estimate(sb[name], sa[name], stat.value(), iv.ci_low, iv.ci_high, max(iv.p_value, floor))
    d = a.score - b.score
    sd = float(np.std(d, ddof=1)) if n > 1 else math.nan
    mde = minimum_detectable_effect(sd / math.sqrt(n), n, alpha, lesson.power) if sd > 0 else math.nan
    changed = int(np.count_nonzero(np.abs(d) > 1e-12))
    flip = signflip_diffs(d, n_resamples=n_resamples, seed=seed) if n > 1 else None
    return LessonResult(est, decompose(sb, sa), n, n, sd, mde, n_resamples, changed,
                        _verdict(est["S"], est["utility on deals"]), int(a.seeds[0]) if n else -1,
                        flip.p_value if flip else math.nan, flip.p_min if flip else math.nan)


def lesson_headline(res: LessonResult, pre: Preregistration, train_seconds: float) -> dict[str, Any]:
    """The lesson's section of the run's ``headline.json`` (:mod:`negolib.core.headline`): the S gain with its interval,
    p-values and MDEs (observed and pre-registered), the sample, utility on deals and deal rate with intervals, the
    decomposition and the verdict."""
    est = res.estimates

    def part(name: str) -> dict[str, float]:
        return {"estimate": est[name].diff, "ci_low": est[name].ci_low, "ci_high": est[name].ci_high}

    return {"arms": ["lesson_trained", "lesson_start"], **part("S"), "p_value": est["S"].p_value,
            "p_signflip": res.p_signflip, "mde": res.observed_mde, "preregistered_mde": pre.mde,
            "n_paired": res.n_paired, "n_clusters": res.n_clusters, "utility_on_deals": part("utility on deals"),
            "utility_on_common_deals": part(COMMON), "deal_rate": part("deal rate"),
            "decomposition": res.decomposition, "verdict": res.verdict,
            "train_seconds": round(train_seconds, 1)}


def episode_text(record: dict[str, Any]) -> str:
    """An episode as the seller played it: its first turn as written, then every later turn as
    ``turn k, role: ACTION terms``, and how the episode ended (a one-round episode shows its opening alone)."""
    turns = record.get("turns") or []
    first = next((i for i, t in enumerate(turns) if t.get("role") == "seller"), None)
    out = record.get("outcome") or {}
    if first is None:
        lines = ["(no turn)"]
    else:
        lines = [turns[first].get("raw") or turns[first].get("prose") or ""]
        lines += [f"turn {t.get('turn', i + 1)}, {t.get('role')}: {action_text(t)}"
                  for i, t in enumerate(turns) if i > first]
    end = (f"deal, seller utility {out['seller_utility']:.3f}" if out.get("deal")
           else "no deal") + f"; S = {out.get('score', math.nan):+.3f}"
    return "\n".join(lines) + f"\n-> {end}"


__all__ = ["COMMON", "Episodes", "Estimate", "LessonResult", "LessonRun", "Preregistration", "buyer_name",
           "buyer_rule", "decompose", "episode_text", "eval_prompt_cap", "eval_sampling_seed", "eval_scenarios",
           "evaluate_lesson", "lesson_buyer", "lesson_env", "lesson_headline", "lesson_key", "lesson_result",
           "preregister", "train_config", "train_lesson"]
