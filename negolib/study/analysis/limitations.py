"""The paper's limitations (App. A) as arms and analyses (notebook 9): which arm or analysis of the profile
addresses each, and the analyses that need more than a paired contrast.

* :data:`LIMITATIONS` / :func:`limitations_frame`: every App. A limitation, what would address it, and what this
  profile has for it (its arms, an analysis, "paper.yaml only", or "no run can address it here").
* :func:`seed_spread`: run-to-run spread of the arms trained from several seeds (same run and read step), beside
  the scenario-sampling interval of each seed's arm.
* :func:`buyer_panel`: each seller's S against every buyer it met, the extra (third) buyer's variant folded back
  onto its seller.
* :func:`self_play_split`: a seller against a buyer that is the same agent (same backend, model, strategy and
  parameters) and against the others, and its S with the self-play half dropped.
* :func:`lr_sweep`: the smallest size's trained arms by peak learning rate, with their gain over base.
* :func:`matched_flops`: training FLOPs at each trained arm's read step (steps x FLOPs/step relative to the first
  size, App. I) and the read step that matches a reference budget at every size.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from negolib.params import AgentSpec, Params
from negolib.study.analysis.resamplers import Analysis
from negolib.study.paired import arm_estimate
from negolib.training.config import TrainConfig
from negolib.training.flops import PAPER_SIZES

PAPER_ONLY = "paper.yaml only"
NO_RUN = "no run can address it here"


@dataclass(frozen=True)
class Limitation:
    """One App. A limitation: its ``key``, the paper's heading, what would address it, and ``find`` (the profile's
    arms or analysis that address it; empty: none here), or ``find`` None when no run can address it here."""

    key: str
    title: str
    addressed_by: str
    find: Callable[[Params], list[str]] | None
    paper: str = "not run (App. A)"


def _trained(p: Params) -> list[str]:
    return [a for a, s in p.arms.items() if s.backend == "trained"]


def _lm_listed(p: Params, names: Sequence[str]) -> list[str]:
    return [a for a in names if a in p.arms and p.is_lm(a)]


def _fixed_lm(p: Params) -> list[str]:
    return [a for a in p.beyond.fixed_openings if p.arms[a].inner and p.arms[a].inner in p.arms
            and p.arms[p.arms[a].inner].backend in ("trained", "hf", "vllm")]


def _seeded(p: Params) -> list[str]:
    """Trained arms that share their run and read step with an arm of another training seed."""
    groups: dict[tuple, set[int]] = {}
    for a in _trained(p):
        groups.setdefault((p.arms[a].run, p.arms[a].step), set()).add(p.train_seed(a))
    return [a for a in _trained(p) if len(groups[(p.arms[a].run, p.arms[a].step)]) > 1]


def _eval_scaffold(p: Params) -> list[str]:
    return [a for a in _trained(p) if p.training.runs[p.arms[a].run or ""].scaffold == "evaluation"]


def _lr_sweep(p: Params) -> list[str]:
    arms = lr_sweep_arms(p)
    return arms if len({run_peak_lr(p, p.arms[a].run or "") for a in arms}) > 3 else []


def _matched(p: Params) -> list[str]:
    return [a for a in matched_flops_reads(p)] if len(p.design.sizes) > 1 else []


def _self_play(p: Params) -> list[str]:
    return [a for a in p.arms if any(same_agent(p.arms[a], p.buyers[b]) for b in p.evaluation.buyers)]


def _scripted_vs_panel(p: Params) -> list[str]:
    return p.scripted_arms() if any(p.is_lm(b) for b in p.evaluation.buyers) else []


LIMITATIONS: tuple[Limitation, ...] = (
    Limitation("turn_order", "One environment class: the seller always opens",
               "trained language-model sellers replayed with the buyer opening (beyond.buyer_opens)",
               lambda p: _lm_listed(p, p.beyond.buyer_opens),
               paper="the seller always opens"),
    Limitation("fixed_opening", "Partial strategy analysis: does the opening cause the gain?",
               "trained sellers held to a fixed opening (none / best / the trained arm's own) against the same "
               "seller opening freely",
               _fixed_lm,
               paper="openings described post hoc (Table 2); no fixed-opening arm"),
    Limitation("efficiency", "Partial strategy analysis: no Nash distance or Pareto efficiency",
               "the exact Pareto frontier, Nash and Kalai points of every scenario (an analysis)",
               lambda p: ["efficiency (analysis)"] if p.beyond.efficiency else [],
               paper="joint welfare is the only efficiency proxy"),
    Limitation("scripted_baseline", "No scripted baseline seller",
               "scripted sellers against the evaluation buyers", lambda p: p.scripted_arms(),
               paper="every reference seller is a model"),
    Limitation("scripted_vs_frontier", "No scripted baseline against the paper's frontier buyers",
               "scripted sellers against the language-model evaluation buyers", _scripted_vs_panel,
               paper="every reference seller is a model"),
    Limitation("seeds", "One seed per size: run-to-run variance unknown",
               "several training seeds per arm, their spread beside the scenario-sampling intervals", _seeded,
               paper="each size trained once; intervals quantify scenario sampling only"),
    Limitation("scaffold", "Training and evaluation differ: the prompt shift",
               "a run trained on the evaluation scaffold (training.runs.<run>.scaffold: evaluation)",
               _eval_scaffold,
               paper="trained on the training prompt, evaluated on the scaffold (a prompt shift)"),
    Limitation("accept_terms", "Training and evaluation differ: terms attached to an accept",
               "sellers replayed with accept-terms applied in evaluation, as in training (beyond.accept_terms)",
               lambda p: list(p.beyond.accept_terms),
               paper="training applied accept terms, evaluation ignored them (0-56% of seller closing accepts)"),
    Limitation("lr_sweep", "Two learning rates, not a sweep",
               "a learning-rate sweep finer than {1x, 3x, 10x} on the smallest size", _lr_sweep,
               paper="1x and 3x at every size, 10x at 2.3B"),
    Limitation("matched_flops", "Matched steps, not matched FLOPs",
               "reads of every size at the training FLOPs of the smallest size's read (App. I accounting)",
               _matched,
               paper="matched steps (FLOPs/step 1 : 2.0 : 5.2 : 13.3, App. I)"),
    Limitation("third_buyer", "Two evaluation buyers",
               "a third evaluation buyer from another family (beyond.extra_buyers, played by extra_buyer_arms)",
               lambda p: [f"{b} (buyer)" for b in p.beyond.extra_buyers] if p.beyond.extra_buyer_arms else [],
               paper="two buyers, one per provider family"),
    Limitation("held_out_n128", "One held-out domain at n=128",
               "App. C's prespecified extension: the held-out panel doubled on the next evaluation seeds, for every "
               "arm and both buyers, when its trigger fires (evaluation.held_out_extension)",
               lambda p: ["held-out extension (evaluation.held_out_extension)"] if p.evaluation.held_out_extension
               else [],
               paper="one held-out domain at n=128; the extension triggered but was not run (App. C)"),
    Limitation("off_schema", "Off-schema terms",
               "measured, not removed: the off-schema share of the terms each seller names and of the deals closing "
               "with one on the ledger (analyses, notebook 7)",
               lambda p: ["off-schema shares (analysis)"],
               paper="4-6% of named terms in every arm; 27-55% of deals close with one on the ledger"),
    Limitation("sampling", "Sampling, exactly as sent",
               "no run can change it here: the frontier sellers' provider-side sampling (Sonnet 5 rejects the "
               "temperature) is outside the harness; every self-served seller runs the rollout's sampling, checked "
               "for drift at startup (negolib.core.sampling)", None,
               paper="self-served sellers at 1.0 / 0.95 / 64; frontier sellers requested at 0.7, Sonnet 5 at its "
                     "provider default"),
    Limitation("self_play", "Self-play in the reference arms",
               "each reference seller's S against its own model and against the other buyer", _self_play,
               paper="Sonnet 5 0.518 vs itself, 0.513 vs the other; Terra 0.503 and 0.504"),
    Limitation("one_family", "One model family",
               "a second model family at several sizes (not in this harness's profiles)", None,
               paper="one family (Gemma 4)"),
    Limitation("size_architecture", "Size and architecture co-vary",
               "a family with conventional checkpoints below 12B (Gemma 4 publishes none)", None,
               paper="E-series below 12B, conventional from 12B"),
    Limitation("co_adaptation", "Seller-side only: no buyer training, no co-adaptation",
               "training both parties (the buyers here are frozen)", None,
               paper="frozen buyers; seller side only"),
    Limitation("rl_algorithm", "One RL algorithm, one reward shape",
               "turn-level shaping or hierarchical credit assignment (another recipe)", None,
               paper="GRPO with an outcome reward"),
)
"""Every App. A limitation in the paper's order, with the arm or analysis that addresses it."""


def limitations_frame(params: Params, played: Sequence[str] | None = None,
                      paper: Params | None = None) -> pd.DataFrame:
    """One row per :data:`LIMITATIONS` entry: ``limitation``, ``addressed_by``, ``here`` (this profile's arms or
    analysis, those of ``played`` marked when not yet played; ``paper.yaml only`` when the profile has none and
    ``paper`` has; else empty) and ``addressable`` (False: no run can address it here)."""
    seen = set(played) if played is not None else None
    rows = []
    for lim in LIMITATIONS:
        if lim.find is None:
            here, ok = NO_RUN, False
        else:
            found = lim.find(params)
            ok = True
            if found:
                here = ", ".join(a if seen is None or a in seen or "(" in a else f"{a} (not played yet)"
                                 for a in found)
            elif paper is not None and lim.find(paper):
                here = PAPER_ONLY
            else:
                here = ""
        rows.append({"key": lim.key, "limitation": lim.title, "addressed_by": lim.addressed_by, "here": here,
                     "addressable": ok, "paper": lim.paper})
    return pd.DataFrame(rows, columns=["key", "limitation", "addressed_by", "here", "addressable", "paper"])


# -- training seeds ----------------------------------------------------------------------------------------------

def seed_spread(est: pd.DataFrame, params: Params, arms: Sequence[str], metric: str = "score") -> pd.DataFrame:
    """Per (run, read step) with trained arms from at least two training seeds among ``arms``: ``n_seeds``, the
    seeds' mean ``metric``, their run-to-run standard deviation ``sd_seeds`` (ddof 1) and range, and
    ``mean_half_width``, the mean half-width of the seeds' scenario-sampling intervals (so
    ``spread_ratio`` = sd_seeds / mean_half_width compares the two sources of variation)."""
    cols = ["run", "step", "arms", "n_seeds", "mean", "sd_seeds", "min", "max", "mean_half_width", "spread_ratio"]
    look = est[est["metric"] == metric].set_index("arm") if not est.empty else pd.DataFrame()
    groups: dict[tuple[str, object], list[str]] = {}
    for a in arms:
        spec = params.arms.get(a)
        if spec is None or spec.backend != "trained" or a not in look.index:
            continue
        groups.setdefault((spec.run or "", spec.step), []).append(a)
    rows = []
    for (run, _step), members in groups.items():
        seeds = {params.train_seed(a) for a in members}
        if len(seeds) < 2:
            continue
        v = look.loc[members, "estimate"].to_numpy(float)
        hw = ((look.loc[members, "ci_high"] - look.loc[members, "ci_low"]) / 2).to_numpy(float)
        sd = float(np.std(v, ddof=1))
        mhw = float(np.mean(hw))
        rows.append({"run": run, "step": _arm_steps(params, members[0]), "arms": ", ".join(members),
                     "n_seeds": len(seeds), "mean": float(v.mean()), "sd_seeds": sd, "min": float(v.min()),
                     "max": float(v.max()), "mean_half_width": mhw, "spread_ratio": sd / mhw if mhw > 0 else np.nan})
    return pd.DataFrame(rows, columns=cols)


# -- the evaluation buyers: a third buyer, self-play -------------------------------------------------------------

def buyer_panel(an: Analysis, arms: Sequence[str], suffix: str = ".extra_buyers") -> pd.DataFrame:
    """Each of ``arms``' S against every buyer it met (its seed-cluster interval): the protocol's buyers from the
    arm's own episodes, an extra buyer from the variant ``<arm><suffix>`` (``variant`` True)."""
    cols = ["arm", "buyer", "variant", "estimate", "ci_low", "ci_high", "n_episodes"]
    rows = []
    for arm in arms:
        for name, variant in ((arm, False), (f"{arm}{suffix}", True)):
            if not an.has(name):
                continue
            sub = an.df[an.df["arm"] == name]
            res = an.resampler(sub["seed"])
            for buyer in pd.unique(sub["buyer"]):
                e = arm_estimate(sub, name, "score", res, an.alpha, buyer=str(buyer))
                rows.append({"arm": arm, "buyer": str(buyer), "variant": variant, "estimate": e.estimate,
                             "ci_low": e.ci_low, "ci_high": e.ci_high, "n_episodes": e.n_episodes})
    return pd.DataFrame(rows, columns=cols)


def same_agent(a: AgentSpec, b: AgentSpec) -> bool:
    """Whether two parties are the same agent: same backend and model, and for scripted ones the same strategy
    and parameters."""
    return (a.backend, a.model, a.strategy, dict(a.params)) == (b.backend, b.model, b.strategy, dict(b.params))


def self_play_split(an: Analysis, params: Params, sellers: Sequence[str]) -> pd.DataFrame:
    """Per seller among ``sellers`` that meets itself as a buyer (:func:`same_agent`): S against itself, S
    against the other buyers and S with the self-play half dropped (the same, as one estimate), with intervals."""
    cols = ["arm", "buyer", "self_play", "estimate", "ci_low", "ci_high", "n_episodes"]
    rows = []
    for arm in sellers:
        if not an.has(arm) or arm not in params.arms:
            continue
        sub = an.df[an.df["arm"] == arm]
        res = an.resampler(sub["seed"])
        met = [str(b) for b in pd.unique(sub["buyer"])]
        selfs = [b for b in met if b in params.buyers and same_agent(params.arms[arm], params.buyers[b])]
        if not selfs:
            continue
        others = [b for b in met if b not in selfs]
        for label, bs, sp in ((", ".join(selfs), selfs, True), (", ".join(others), others, False)):
            if not bs:
                continue
            e = arm_estimate(sub, arm, "score", res, an.alpha, buyer=bs)
            rows.append({"arm": arm, "buyer": label, "self_play": sp, "estimate": e.estimate, "ci_low": e.ci_low,
                         "ci_high": e.ci_high, "n_episodes": e.n_episodes})
    return pd.DataFrame(rows, columns=cols)


# -- learning rates and FLOPs ------------------------------------------------------------------------------------

def run_peak_lr(params: Params, run: str) -> float:
    """A training run's peak learning rate (its TrainConfig overrides on the recipe's defaults)."""
    return TrainConfig.from_params(params.training.runs[run].config, source=f"training.runs.{run}.config").peak_lr


def _run_root(params: Params, run: str) -> str:
    """The run a (chain of) continuation(s) starts from."""
    seen = set()
    while run in params.training.runs and "@" in params.training.runs[run].init and run not in seen:
        seen.add(run)
        run = params.training.runs[run].init.split("@")[0]
    return run


def _size_base(params: Params, arm: str) -> str | None:
    spec = params.arms[arm]
    if spec.backend != "trained" or spec.run not in params.training.runs:
        return None
    return params.training.runs[_run_root(params, spec.run or "")].init


def lr_sweep_arms(params: Params) -> list[str]:
    """The trained arms of the smallest size (``design.sizes[0]``: runs that start from its base arm) that are not
    continuations and train on the training scaffold from the run's first seed: the learning-rate sweep."""
    if not params.design.sizes:
        return []
    base = params.design.sizes[0].base
    out = []
    for a in _trained(params):
        spec = params.arms[a]
        run = params.training.runs[spec.run or ""]
        if run.init == base and run.scaffold == "training" and spec.train_seed in (None, run.seeds[0]):
            out.append(a)
    return out


def lr_sweep(contrasts: pd.DataFrame, params: Params) -> pd.DataFrame:
    """The smallest size's sweep (:func:`lr_sweep_arms`) by peak learning rate: ``arm``, ``run``, ``peak_lr``,
    ``lr_multiplier`` (over the recipe's shared rate), ``step`` and the arm's paired gain over its base
    (``gain``, ``ci_low``, ``ci_high`` from ``contrasts``, rows ``arm_a`` = arm, ``arm_b`` = base, metric score)."""
    cols = ["arm", "run", "peak_lr", "lr_multiplier", "step", "gain", "ci_low", "ci_high"]
    if not params.design.sizes:
        return pd.DataFrame(columns=cols)
    base, shared = params.design.sizes[0].base, TrainConfig().learning_rate
    look = _gains(contrasts, base)
    rows = []
    for a in lr_sweep_arms(params):
        spec = params.arms[a]
        lr = run_peak_lr(params, spec.run or "")
        g = look.get(a, {})
        rows.append({"arm": a, "run": spec.run, "peak_lr": lr, "lr_multiplier": lr / shared,
                     "step": _arm_steps(params, a),
                     "gain": g.get("estimate", np.nan), "ci_low": g.get("ci_low", np.nan),
                     "ci_high": g.get("ci_high", np.nan)})
    return pd.DataFrame(rows, columns=cols).sort_values(["peak_lr", "step"], kind="stable").reset_index(drop=True)


def _gains(contrasts: pd.DataFrame, base: str) -> dict[str, dict[str, float]]:
    if contrasts is None or contrasts.empty:
        return {}
    c = contrasts[(contrasts["arm_b"] == base) & (contrasts["metric"] == "score")]
    return {r["arm_a"]: r for r in c.to_dict("records")}


def trained_base_pairs(params: Params) -> list[tuple[str, str]]:
    """(trained arm, its size's base arm) for every trained arm of a ``design.sizes`` entry (the gain pairs of
    :func:`matched_flops`)."""
    bases = {g.base for g in params.design.sizes}
    return [(a, b) for a in _trained(params) if (b := _size_base(params, a) or "") in bases]


def relative_flops(params: Params, sizes: Mapping[str, float] | None = None) -> dict[str, float]:
    """Training FLOPs per step of each ``design.sizes`` entry relative to the first (App. I: proportional to the
    effective parameter count at matched tokens per step). ``sizes``: label -> parameter count (else the paper's
    Table 8 from each size's ``paper`` key; NaN for a size with neither)."""
    counts = {}
    for g in params.design.sizes:
        n = (sizes or {}).get(g.label)
        if n is None and g.paper in PAPER_SIZES:
            n = PAPER_SIZES[g.paper].effective_params
        counts[g.label] = float(n) if n is not None else np.nan
    first = next(iter(counts.values()), np.nan)
    return {k: v / first for k, v in counts.items()}


def _size_of(params: Params) -> dict[str, str]:
    """Base arm -> size label."""
    return {g.base: g.label for g in params.design.sizes}


def matched_flops_reads(params: Params, budget_arm: str | None = None,
                        sizes: Mapping[str, float] | None = None) -> dict[str, int]:
    """Per size: the shared-recipe read whose training FLOPs match ``budget_arm``'s (default: the first size's
    ``shared`` arm): ``budget steps x rel_flops(budget size) / rel_flops(size)``, moved to the nearest checkpoint
    the size's shared run saves (every ``save_every`` steps and at the end; the budget arm's own size keeps its
    read). Keyed by the arm that reads the size there when the profile has one (else ``<size label>@<step>``)."""
    if not params.design.sizes:
        return {}
    first = params.design.sizes[0]
    arm = budget_arm or first.shared
    if arm is None or arm not in params.arms or _size_base(params, arm) not in _size_of(params):
        return {}
    rel = relative_flops(params, sizes)
    own = _size_of(params)[_size_base(params, arm) or ""]
    budget = _arm_steps(params, arm) * rel[own]
    out = {}
    for g in params.design.sizes:
        if not np.isfinite(rel[g.label]):
            continue
        if g.label == own:
            out[arm] = _arm_steps(params, arm)
            continue
        want = budget / rel[g.label]
        run = _shared_run(params, g)
        grid = _checkpoint_steps(params, run) if run else []
        step = min(grid, key=lambda s: (abs(s - want), s)) if grid else int(round(want))
        have = [a for a in _trained(params) if _size_base(params, a) == g.base and _arm_steps(params, a) == step
                and _is_shared(params, params.arms[a].run or "")]
        out[have[0] if have else f"{g.label}@{step}"] = step
    return out


def _shared_run(params: Params, g: object) -> str | None:
    """The first shared-recipe run of a size (the run its ``shared_early`` or ``shared`` arm reads, followed back
    to the run the continuations start from)."""
    for role in ("shared_early", "shared"):
        a = getattr(g, role, None)
        if a in params.arms and params.arms[a].run in params.training.runs:
            return _run_root(params, params.arms[a].run or "")
    return None


def _checkpoint_steps(params: Params, run: str) -> list[int]:
    cfg = TrainConfig.from_params(params.training.runs[run].config)
    every = max(int(cfg.save_every), 1) if cfg.save_every else cfg.max_steps
    return sorted(set(range(every, cfg.max_steps + 1, every)) | {cfg.max_steps})


def _arm_steps(params: Params, arm: str) -> int:
    """Combined optimizer steps of a trained arm: ``steps``, else its read ``step``, else its run's last step."""
    s = params.arms[arm]
    if s.steps is not None or s.step is not None:
        return int(s.steps if s.steps is not None else s.step or 0)
    return int(TrainConfig.from_params(params.training.runs[s.run or ""].config).max_steps)


def _is_shared(params: Params, run: str) -> bool:
    return TrainConfig.from_params(params.training.runs[run].config).lr_multiplier == 1.0 and \
        params.training.runs[run].scaffold == "training"


def matched_flops(contrasts: pd.DataFrame, params: Params, sizes: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Every trained arm of ``design.sizes``: ``size``, ``arm``, combined ``steps``, ``rel_flops_per_step``,
    ``train_flops`` (steps x relative FLOPs/step, in units of one first-size step), ``matched`` (True for the
    reads of :func:`matched_flops_reads`) and the paired gain over its size's base from ``contrasts``."""
    cols = ["size", "arm", "steps", "rel_flops_per_step", "train_flops", "matched", "gain", "ci_low", "ci_high"]
    rel, size_of = relative_flops(params, sizes), _size_of(params)
    reads = matched_flops_reads(params, sizes=sizes)
    rows = []
    for a in _trained(params):
        base = _size_base(params, a)
        if base not in size_of:
            continue
        label = size_of[base]
        g = _gains(contrasts, base).get(a, {})
        steps = _arm_steps(params, a)
        rows.append({"size": label, "arm": a, "steps": steps, "rel_flops_per_step": rel[label],
                     "train_flops": steps * rel[label], "matched": a in reads,
                     "gain": g.get("estimate", np.nan), "ci_low": g.get("ci_low", np.nan),
                     "ci_high": g.get("ci_high", np.nan)})
    return pd.DataFrame(rows, columns=cols)


__all__ = ["LIMITATIONS", "NO_RUN", "PAPER_ONLY", "Limitation", "buyer_panel", "limitations_frame", "lr_sweep",
           "lr_sweep_arms", "matched_flops", "matched_flops_reads", "relative_flops", "run_peak_lr", "same_agent",
           "seed_spread", "self_play_split", "trained_base_pairs"]
