"""Notebook 9's analyses (what the paper's Limitations section says is missing, App. A): scripted sellers
against the language-model arms, the buyer opening, fixed openings, the runs with several training
seeds or trained on the evaluation scaffold, and (ours) the sellers replayed under the other ACCEPT rule. Every
contrast is paired on the scenarios both arms played.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from negolib.params import Params, opening_source
from negolib.study.analysis.arms import Results
from negolib.study.analysis.contrasts import run_pairs
from negolib.study.analysis.resamplers import Analysis


def scripted_baseline_contrasts(res: Results) -> pd.DataFrame:
    """S of every language-model arm minus S of every scripted seller (rows ``arm_a``: the LM arm,
    ``arm_b``: the scripted seller), paired on the scenarios both played."""
    p = res.params
    lm = [a for a in res.arms if p.is_lm(a)]
    scripted = [a for a in res.arms if not p.is_lm(a)]
    return run_pairs(res.an, [(m, s) for m in lm for s in scripted])


def variant_base(variant: str, suffix: str = ".buyer_opens") -> str:
    """The seller a beyond-paper variant arm ``<seller><suffix>`` varies."""
    return variant[: -len(suffix)]


def turn_order_contrasts(an: Analysis, variants: Sequence[str], suffix: str = ".buyer_opens") -> pd.DataFrame:
    """S with the buyer opening (``arm_a``: the variant ``<seller><suffix>``) minus S with the seller opening
    (``arm_b``: the seller), paired by scenario and buyer."""
    return run_pairs(an, [(v, variant_base(v, suffix)) for v in variants])


ACCEPT_RULE_METRICS = ("score", "deal_rate", "seller_bad_parse_rate", "invalid_accept_rate")
"""What the ACCEPT rule moves: S, the deal rate, the seller's bad-parse rate (Eq. 1's format penalty and Tables 4-5
count it; under ours an ACCEPT with no counterpart COUNTER is one) and the seller's invalid-accept rate."""


def accept_rule_contrasts(an: Analysis, variants: Sequence[str], suffix: str = ".accept_rule") -> pd.DataFrame:
    """Each seller replayed under the other ACCEPT rule (``arm_a``: the variant ``<seller><suffix>``) minus the
    seller under the protocol's rule (``arm_b``), paired by scenario and buyer, for :data:`ACCEPT_RULE_METRICS`."""
    return run_pairs(an, [(v, variant_base(v, suffix)) for v in variants], ACCEPT_RULE_METRICS)


def fixed_opening_pairs(params: Params, arms: Sequence[str]) -> list[tuple[str, str]]:
    """(fixed-opening arm, the inner seller it holds to a fixed first turn) for each of ``arms``."""
    return [(a, params.arms[a].inner or "") for a in arms]


def own_opening_pairs(params: Params, arms: Sequence[str]) -> list[tuple[str, str]]:
    """(the arm whose openings an ``own:<arm>`` arm plays, that fixed-opening arm) for each such arm of ``arms``
    held by another seller: the part of the opening arm's score its openings do not carry."""
    out = []
    for a in arms:
        source = opening_source(params.arms[a].opening)
        if source is not None and source != params.arms[a].inner:
            out.append((source, a))
    return out


def fixed_opening_contrasts(an: Analysis, params: Params, arms: Sequence[str]) -> pd.DataFrame:
    """S of each fixed-opening arm minus S of its inner seller opening freely; for an ``own:<arm>`` opening held
    by another seller, also S of that arm minus the fixed-opening arm (all paired)."""
    return run_pairs(an, fixed_opening_pairs(params, arms) + own_opening_pairs(params, arms))


def seeds_scaffold_arms(params: Params, arms: Sequence[str]) -> pd.DataFrame:
    """The trained arms among ``arms`` whose run has several training seeds or trains on the evaluation
    scaffold: ``arm``, ``run``, ``train_seed`` (the arm's, else the run's first) and ``scaffold``."""
    rows = []
    for a in arms:
        spec = params.arms[a]
        if spec.backend != "trained" or spec.run not in params.training.runs:
            continue
        run = params.training.runs[spec.run]
        if len(run.seeds) > 1 or run.scaffold == "evaluation":
            rows.append({"arm": a, "run": spec.run, "train_seed": params.train_seed(a), "scaffold": run.scaffold})
    return pd.DataFrame(rows, columns=["arm", "run", "train_seed", "scaffold"])


__all__ = ["ACCEPT_RULE_METRICS", "accept_rule_contrasts", "fixed_opening_contrasts", "fixed_opening_pairs",
           "own_opening_pairs", "scripted_baseline_contrasts", "seeds_scaffold_arms", "turn_order_contrasts",
           "variant_base"]
