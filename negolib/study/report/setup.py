"""Notebook 2 (the setup, paper §4 and App. H, I): the arm matrix, the paired scenario set, the sampling
settings, each training run's recipe and the per-size compute of Table 8, ours beside the paper's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from negolib.core.formatting import DASH, fmt_num, is_number
from negolib.params import Params, spec_dict
from negolib.study.analysis.design import scenario_set_counts
from negolib.study.analysis.training import size_compute
from negolib.study.paper import PaperReported
from negolib.study.report.booktable import BookTable
from negolib.study.report.cells import fmt_count, frame


def arm_matrix(params: Params) -> BookTable:
    """The profile's arms and buyers: backend, model/strategy, sampling, scaffold, paper row mapped."""
    rows = []
    for section, specs in (("seller arm", params.arms), ("buyer", params.buyers)):
        for name, spec in specs.items():
            d = spec_dict(spec)
            what = spec.strategy or spec.model or (f"run {spec.run}" + (f" @ step {spec.step}" if spec.step else "")
                                                   if spec.run else "") or f"{spec.inner} + opening {spec.opening}"
            s = spec.sampling
            samp = DASH if spec.backend in ("scripted", "fixed_opening") else \
                f"T={s.temperature:g}, top-p={s.top_p:g}, top-k={s.top_k}, max_new={s.max_new_tokens}"
            rows.append({"name": name, "role": section, "backend": spec.backend, "what": what,
                         "label": spec.label, "sampling": samp,
                         "scaffold": spec.scaffold if spec.backend not in ("scripted", "fixed_opening") else DASH,
                         "scenario set": ("LM subset" if params.is_lm(name) else "full")
                         if section == "seller arm" else DASH,
                         "paper row": d.get("paper_ref", DASH)})
    return BookTable("arm_matrix", f"Arm matrix of profile '{params.profile}'", frame(rows, "name"),
                     f"{len(params.arms)} seller arms, {len(params.buyers)} buyers.")


SCENARIO_ROWS = (("seeds per domain", "seeds_per_domain", ("design", "seeds_per_domain")),
                 ("domains", "domains", ("design", "domains")), ("buyers", "buyers", ("design", "buyers")),
                 ("episodes per arm", "episodes_per_arm", ("design", "episodes_per_arm")),
                 ("held-out episodes per arm", "held_out_episodes_per_arm", ("design", "held_out_episodes_per_arm")),
                 ("seed clusters", "seed_clusters", ("statistics", "clusters")),
                 ("arms", "arms", ("design", "arms")),
                 ("episodes in total", "episodes_total", ("design", "episodes_total")))
"""(row label, quantity of :func:`negolib.study.analysis.design.scenario_set_counts`, the paper's key)."""


def scenario_set_table(params: Params, paper: PaperReported) -> BookTable:
    """The evaluation scenario set: ours (full and LM subset) beside the paper's design."""
    counts = scenario_set_counts(params).set_index("quantity")

    def ours(q: str, kind: str) -> Any:
        v = counts.loc[q, kind]
        return "" if pd.isna(v) else int(v)

    rows = [{"quantity": label, "ours (scripted arms)": ours(q, "scripted"), "ours (LM arms)": ours(q, "lm"),
             "paper: value": paper.get(*key)} for label, q, key in SCENARIO_ROWS]
    turns = {k: f"{ours('max_rounds', k)} ({ours('max_turns', k)})" for k in ("scripted", "lm")}
    rows.append({"quantity": "max rounds (turns)", "ours (scripted arms)": turns["scripted"],
                 "ours (LM arms)": turns["lm"], "paper: value": f"{paper.get('design', 'max_rounds')} "
                                                                 f"({paper.get('design', 'max_turns')})"})
    df = frame(rows, "quantity").astype(object).fillna(DASH)
    return BookTable("scenario_set", "The paired evaluation scenario set", df,
                     "Every arm plays the identical scenarios (same seeds, weight draws and buyers); "
                     "language-model arms play the declared subset.")


def sampling_table(params: Params, paper: PaperReported) -> BookTable:
    """Sampling per language-model party, beside the paper's (T=1.0, top-p 0.95, top-k 64)."""
    rec = paper.get("recipe", default={}) or {}
    rows = []
    for name, spec in {**params.arms, **params.buyers}.items():
        if spec.backend in ("scripted", "fixed_opening"):
            continue
        s = spec.sampling
        rows.append({"party": name, "backend": spec.backend, "temperature": s.temperature, "top-p": s.top_p,
                     "top-k": s.top_k, "max new tokens": s.max_new_tokens, "thinking": s.thinking,
                     "paper: temperature / top-p / top-k / max new": (
                         f"{rec.get('temperature')} / {rec.get('top_p')} / {rec.get('top_k')} / "
                         f"{rec.get('max_new_tokens')}")})
    return BookTable("sampling", "Sampling settings as declared (recorded per arm as sent)", frame(rows, "party"),
                     "paper: every self-served seller at temperature 1.0, top-p 0.95, top-k 64, thinking off; "
                     "frontier sellers requested at 0.7 [App. A].")


def recipe_table(config: Mapping[str, Any], paper: PaperReported, run: str = "") -> BookTable:
    """A training run's configuration beside the paper's recipe [App. H]."""
    rec = paper.get("recipe", default={}) or {}
    mapping = [
        ("scenarios per step", "scenarios_per_step", "scenarios_per_step"),
        ("rollouts per scenario (group)", "rollouts_per_scenario", "rollouts_per_scenario"),
        ("optimizer steps", "max_steps", "initial_steps"),
        ("learning rate (peak)", "peak_lr", "learning_rate"),
        ("warmup steps", "warmup_steps", "warmup_steps"),
        ("KL coefficient (k3, in loss)", "kl_beta", "kl_coef"),
        ("PPO clip (low/high)", ("clip_low", "clip_high"), "clip"),
        ("Adam betas", ("adam_beta1", "adam_beta2"), "adam_betas"),
        ("weight decay", "weight_decay", "weight_decay"),
        ("max new tokens per turn", "max_new_tokens", "max_new_tokens"),
        ("prompt cap (tokens)", "max_prompt_tokens", "prompt_cap_tokens"),
        ("context (tokens)", "max_context_tokens", "context_tokens"),
        ("rollout turns", "max_rollout_turns", "rollout_turns"),
        ("temperature / top-p / top-k", ("temperature", "top_p", "top_k"), ("temperature", "top_p", "top_k")),
        ("validation every (steps)", "validate_every", "validation_every"),
    ]

    def get(d: Mapping, k: Any) -> str:
        if isinstance(k, tuple):
            vals = [d.get(x) for x in k]
            return DASH if all(v is None for v in vals) else " / ".join(f"{v:g}" if is_number(v) else str(v)
                                                                        for v in vals)
        v = d.get(k)
        if isinstance(v, (list, tuple)):
            return " / ".join(f"{x:g}" for x in v)
        return DASH if v is None else (f"{v:g}" if is_number(v) else str(v))

    rows = [{"setting": label, "ours": get(config, ours), "paper: value": get(rec, theirs)}
            for label, ours, theirs in mapping]
    return BookTable(f"recipe_{run}" if run else "recipe", f"GRPO recipe{f' of run {run!r}' if run else ''}",
                     frame(rows, "setting"), "paper: App. H (identical at every size up to the LR arm).")


def table8(sizes: Sequence[Mapping[str, Any]], paper: PaperReported) -> BookTable:
    """Table 8: per-size parameter counts and relative FLOPs/step; ours from the loaded models' configs
    (:func:`negolib.study.analysis.training.size_compute`), the paper's Gemma 4 sizes below."""
    rows = [{"size (ours)": r["size"], "parameters": fmt_count(r["params"]),
             "non-embedding parameters": fmt_count(r["non_embedding_params"]),
             "relative FLOPs/step": fmt_num(r["rel_flops"], 2), "device": r["device"]}
            for r in size_compute(sizes).to_dict("records")]
    ours = frame(rows, "size (ours)")
    prow = []
    for key, v in (paper.get("sizes", default={}) or {}).items():
        prow.append({"paper: size": v.get("label", key), "paper: effective / total": (
            f"{v['effective_params_b']:g}B / {v['total_params_b']:g}B"),
            "paper: train TP": v.get("train_tp"), "paper: gen. memory fraction": v.get("gen_memory_fraction"),
            "paper: eval accelerators (48 GB)": v.get("eval_accelerators"),
            "paper: rel. FLOPs (effective)": f"{v.get('rel_flops_effective'):g}×",
            "paper: rel. FLOPs (total)": f"{v.get('rel_flops_total'):g}×"})
    theirs = frame(prow, "paper: size")
    return BookTable("table8", "Table 8: per-size parameters and relative training compute", ours,
                     "Ours: the models this profile trains and evaluates (counts from the loaded weights); "
                     "below, the paper's Gemma 4 sizes.", paper_frame=theirs)


__all__ = ["SCENARIO_ROWS", "arm_matrix", "recipe_table", "sampling_table", "scenario_set_table", "table8"]
