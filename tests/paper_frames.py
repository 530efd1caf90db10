"""Shared inputs of the analysis and report tests: the paper profile's 21 arms on synthetic episodes, and a
check that an analysis frame is tidy (numbers, booleans and identifiers; no formatted strings)."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
from pandas.api.types import is_bool_dtype, is_numeric_dtype

from negolib.games.multi_issue.metrics import synthetic_episodes
from negolib.params import BeyondParams, load_params
from negolib.study.analysis.arms import arm_estimates
from negolib.study.analysis.resamplers import Analysis
from negolib.study.paper import load_paper_reported

ROOT = Path(__file__).resolve().parent.parent
ESTIMATED = ("score", "score_held_out", "deal_rate", "mean_turns", "bad_parse_rate", "deal_utility", "welfare",
             "seller_bad_parse_rate")


@functools.lru_cache(maxsize=1)
def paper_setup() -> tuple[Any, Any, Analysis, pd.DataFrame]:
    """(paper profile, the paper's numbers, an analysis of synthetic episodes of its 21 arms, their estimates)."""
    full = load_params(ROOT / "params" / "paper.yaml")
    # the paper's 21 arms: App. A's limitation arms (and the beyond section naming them) are left out
    p = dataclasses.replace(full, arms={a: s for a, s in full.arms.items() if s.paper_ref}, beyond=BeyondParams())
    paper = load_paper_reported(p.paper_reported_path)
    arms = list(p.arms)
    df = synthetic_episodes(arms, [0.005 * i for i in range(len(arms))], n_seeds=12,
                            buyers=("buyer_terra", "buyer_sonnet5"), seed=3)
    an = Analysis(df, n_resamples=400, seed=0)
    return p, paper, an, arm_estimates(an, arms, ESTIMATED)


FORMATTED = re.compile(r"^[+\-]?(\d+\.\d+|nan)[*e]?( \[|%)|→|^—$|\d%$")
"""What a formatted cell looks like: ``+0.023* [...]``, ``12.5%``, ``a → b``, a dash."""


def assert_tidy(frame: pd.DataFrame, identifiers: Iterable[str] = ()) -> None:
    """Every column of ``frame`` is numeric or boolean, or an identifier column named in ``identifiers`` (or
    an object column of booleans and None, e.g. a guard's ``passed``); no identifier cell is a formatted
    number, interval, share or dash."""
    ids = set(identifiers)
    for col in frame.columns:
        s = frame[col]
        if is_numeric_dtype(s) or is_bool_dtype(s):
            continue
        values = [v for v in s if v is not None and not (isinstance(v, float) and pd.isna(v))]
        if col not in ids:
            assert all(isinstance(v, bool) for v in values), f"column {col!r} ({s.dtype}) is not numeric: {values[:3]}"
            continue
        for v in values:
            items = v if isinstance(v, tuple) else (v,)
            for x in items:
                assert isinstance(x, str) and not FORMATTED.search(x), f"column {col!r} holds a formatted {x!r}"


@functools.lru_cache(maxsize=1)
def played() -> tuple[list[dict[str, Any]], pd.DataFrame]:
    """(records, episode table) of three scripted sellers against two scripted buyers on six seeds of every
    domain (played here: real ledgers, so the decomposition and the guards have terms to split)."""
    from negolib.core.transcripts import episodes_frame
    from negolib.games.multi_issue.env import EnvConfig
    from negolib.games.multi_issue.rollout import make_specs, run_episodes
    from negolib.games.multi_issue.scenarios import eval_seeds, scenario_set
    from negolib.games.multi_issue.scripted import make_scripted

    sellers, buyers = ["boulware", "conceder", "tit_for_tat"], ["linear", "hardliner"]
    agents = {n: make_scripted(n) for n in sellers + buyers}
    scenarios = scenario_set(eval_seeds(6))
    specs = [sp for s in sellers for sp in make_specs(s, s, buyers, scenarios, EnvConfig())]
    res = run_episodes(specs, agents, None, progress=False)
    return res.records, episodes_frame(res.records)
