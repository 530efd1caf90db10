"""The contrasts the paper quotes in its text (not in a table), computed on our transcripts the paper's way.

Each quantity (:class:`Quoted`) is a paired contrast of S, ``arm_a - arm_b`` (:class:`Term`), or a difference of
two paired contrasts on shared resamples, ``(arm_a - arm_b) - (arm_c - arm_d)``
(:func:`negolib.study.paired.contrast_difference`, e.g. the gain difference between two sizes). Arms are named by their
place in the profile's design, never by name: ``<size>.<role>`` where ``<size>`` is a size group's ``paper`` key
(``E2B``, ``E4B``, ``12B``, ``31B``) and ``<role>`` one of ``base``, ``shared_early``, ``shared``, ``lr3``,
``lr10`` or ``lr3_other`` (the other read of the 3x-LR run among the group's ``extra`` arms, e.g. 4.5B 3x at step
64), and ``frontier.<i>`` for the i-th frontier seller. A quantity whose arm the profile does not have (or did
not evaluate) gives a row with ``available`` False and the refs it lacks in ``missing``.

Sections (the notebook a row is shown in): ``5`` (the gain differences behind contribution (i), §5), ``B`` (the
continuation gains labelled in Figure 3), ``C`` (the frontier sellers, 31B@56 - 12B@104 and
31B@104 - 12B@104 by panel), ``E`` (the
10x-LR arm by buyer) and ``K`` (the two contrasts App. K re-runs at 10^5 resamples; computed at both the
profile's ``n_resamples`` and its ``refine_resamples``). Every quantity is exploratory and unadjusted:
``significant`` is an interval excluding zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from negolib.games.multi_issue.domains import load_domains
from negolib.games.multi_issue.metrics import get_metric
from negolib.params import Params
from negolib.stats import summarize
from negolib.study.analysis.resamplers import Analysis
from negolib.study.paired import ContrastSpec, contrast_difference, run_contrasts

PAPER_SIZES = ("E2B", "E4B", "12B", "31B")
DOMAIN_SETS = ("all", "training", "held_out")


@dataclass(frozen=True)
class Term:
    """One paired contrast of S, ``a - b`` (design refs), optionally against one buyer of
    ``design.buyer_split`` (``buyer``: its index) and on a domain set (:data:`DOMAIN_SETS`)."""

    a: str
    b: str
    buyer: int | None = None
    domains: str = "all"


@dataclass(frozen=True)
class Quoted:
    """A quantity the paper quotes: ``first`` or, with ``second``, ``first - second`` on shared resamples."""

    key: str
    section: str
    first: Term
    second: Term | None = None
    refined: bool = False


def _gain(size: str, role: str = "shared", **kw: object) -> Term:
    return Term(f"{size}.{role}", f"{size}.base", **kw)  # type: ignore[arg-type]


QUOTED: tuple[Quoted, ...] = (
    Quoted("gain_diff_within_eseries", "5", _gain("E4B"), _gain("E2B")),
    Quoted("gain_diff_across_boundary", "5", _gain("12B"), _gain("E4B")),
    Quoted("gain_diff_within_conventional", "5", _gain("31B"), _gain("12B")),
    Quoted("lr3_g31b_minus_g12b", "5", Term("31B.lr3", "12B.lr3")),
    Quoted("e4b_lr3_56_minus_64", "5", Term("E4B.lr3", "E4B.lr3_other")),
    *(Quoted(f"continuation_gain.{s}", "B", Term(f"{s}.shared", f"{s}.shared_early")) for s in PAPER_SIZES),
    *(Quoted(f"sonnet_minus_terra.{d}", "C", Term("frontier.0", "frontier.1", domains=dom))
      for d, dom in (("training_domains", "training"), ("pooled", "all"), ("held_out", "held_out"))),
    *(Quoted(f"g31b_56_minus_g12b_104.{d}", "C", Term("31B.shared_early", "12B.shared", domains=dom))
      for d, dom in (("pooled", "all"), ("held_out", "held_out"))),
    *(Quoted(f"g31b_104_minus_g12b_104.{d}", "C", Term("31B.shared", "12B.shared", domains=dom))
      for d, dom in (("pooled", "all"), ("held_out", "held_out"))),
    Quoted("e2b_lr10_minus_base", "E", _gain("E2B", "lr10")),
    Quoted("e2b_lr10_minus_base_vs_terra", "E", _gain("E2B", "lr10", buyer=0)),
    Quoted("e2b_lr10_minus_base_vs_sonnet5", "E", _gain("E2B", "lr10", buyer=1)),
    Quoted("e2b_lr10_split_minus_base_split", "E", _gain("E2B", "lr10", buyer=0), _gain("E2B", "lr10", buyer=1)),
    Quoted("e2b_lr10_minus_lr3", "E", Term("E2B.lr10", "E2B.lr3")),
    Quoted("gain_diff_within_conventional", "K", _gain("31B"), _gain("12B"), refined=True),
    Quoted("lr3_g31b_minus_g12b", "K", Term("31B.lr3", "12B.lr3"), refined=True),
)
"""Every quoted quantity, in the order the paper gives them within a section."""

QUOTED_COLUMNS = ["key", "section", "arm_a", "arm_b", "arm_c", "arm_d", "buyer", "buyer_c", "domains",
                  "n_resamples", "estimate", "ci_low", "ci_high", "se_low", "se_high", "p_value", "significant",
                  "n_clusters", "n_episodes", "available", "missing"]


def resolve(params: Params, ref: str) -> str | None:
    """The profile's arm at a design ref (``<size>.<role>`` or ``frontier.<i>``), or None."""
    where, _, role = ref.partition(".")
    if where == "frontier":
        i = int(role)
        return params.design.frontier[i] if i < len(params.design.frontier) else None
    group = next((g for g in params.design.sizes if g.paper == where), None)
    if group is None:
        return None
    if role == "lr3_other":
        run = params.arms[group.lr3].run if group.lr3 and group.lr3 in params.arms else None
        others = [a for a in group.extra if run and a in params.arms and params.arms[a].run == run]
        return others[0] if others else None
    return getattr(group, role, None)


def _domains(an: Analysis, which: str, imported: Iterable[str] = ()) -> tuple[str, ...] | None:
    """The domains of ``an`` in a domain set; an ``imported`` scenario is neither a training nor a held-out domain."""
    if which == "all":
        return None
    held, skip = {d for d, dom in load_domains().items() if dom.held_out}, set(imported)
    present = sorted(pd.unique(an.df["domain"])) if not an.df.empty else []
    return tuple(d for d in present if d not in skip and (d in held) == (which == "held_out"))


def _buyer(params: Params, i: int | None) -> str | None:
    split = params.design.buyer_split
    return split[i] if i is not None and i < len(split) else None


def _row(q: Quoted, params: Params, an: Analysis, n_resamples: int) -> dict:
    terms = [q.first] + ([q.second] if q.second else [])
    arms = [(resolve(params, t.a), resolve(params, t.b)) for t in terms]
    buyers = [_buyer(params, t.buyer) for t in terms]
    row: dict = {"key": q.key, "section": q.section, "arm_a": arms[0][0], "arm_b": arms[0][1],
                 "arm_c": arms[1][0] if q.second else None, "arm_d": arms[1][1] if q.second else None,
                 "buyer": buyers[0], "buyer_c": buyers[1] if q.second else None, "domains": q.first.domains,
                 "n_resamples": n_resamples, **dict.fromkeys(("estimate", "ci_low", "ci_high", "se_low", "se_high",
                                                               "p_value"), np.nan),
                 "significant": False, "n_clusters": 0, "n_episodes": 0, "available": False, "missing": None}
    missing = [ref for t, (a, b) in zip(terms, arms) for ref, arm in ((t.a, a), (t.b, b)) if not an.has(arm)]
    missing += [f"buyer_split.{t.buyer}" for t, b in zip(terms, buyers) if t.buyer is not None and b is None]
    if missing:
        return {**row, "missing": ", ".join(dict.fromkeys(missing))}
    names = sorted({x for pair in arms for x in pair if x})
    seeds = set(an.df["seed"])
    for arm in names:
        seeds &= set(an.df.loc[an.df["arm"] == arm, "seed"])
    if not seeds:
        return {**row, "missing": "shared seeds"}
    sub = an.df[an.df["arm"].isin(names) & an.df["seed"].isin(seeds)]
    res = an.resampler(seeds)
    if res.n_resamples != n_resamples:
        res = res.with_resamples(n_resamples)
    genius = params.evaluation.genius or {}  # the profile's imported scenarios: in no training or held-out set
    specs = [ContrastSpec(a, b, get_metric("score"), False, buyer, _domains(an, t.domains, genius))  # type: ignore[arg-type]
             for t, (a, b), buyer in zip(terms, arms, buyers)]
    try:
        cs = run_contrasts(sub, specs, res, an.alpha)
    except (KeyError, ValueError):  # no paired episode after the buyer / domain filter
        return {**row, "missing": f"episodes ({q.first.domains} domains)"}
    if any(c.n_episodes == 0 for c in cs):
        return {**row, "missing": f"episodes ({q.first.domains} domains)"}
    if q.second:
        d = contrast_difference(cs[0], cs[1], an.alpha)
        est, iv = d.estimate, d.interval
    else:
        est, iv = cs[0].estimate, summarize(cs[0].distribution, an.alpha)  # type: ignore[arg-type]
    return {**row, "estimate": est, "ci_low": iv.ci_low, "ci_high": iv.ci_high, "se_low": iv.se_low,
            "se_high": iv.se_high, "p_value": iv.p_value, "significant": bool(iv.ci_low > 0 or iv.ci_high < 0),
            "n_clusters": max(c.n_clusters for c in cs), "n_episodes": sum(c.n_episodes for c in cs),
            "available": True}


def quoted_contrasts(an: Analysis, params: Params, sections: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per quoted quantity of ``sections`` (all when None; :data:`QUOTED`): the estimate, its 95%
    percentile interval on the profile's resamples (a ``refined`` quantity also at ``statistics.refine_resamples``,
    a second row), the endpoints' Monte Carlo SEs, whether the interval excludes zero, the paired seed clusters
    and episodes; ``available`` False (numbers NaN) and ``missing`` naming the design refs the profile lacks."""
    rows = []
    for q in QUOTED:
        if sections is not None and q.section not in sections:
            continue
        counts = [an.n_resamples] + ([an.refine_resamples] if q.refined else [])
        rows += [_row(q, params, an, n) for n in counts]
    out = pd.DataFrame(rows, columns=QUOTED_COLUMNS)
    return out.astype({"significant": bool, "available": bool})


__all__ = ["DOMAIN_SETS", "PAPER_SIZES", "QUOTED", "QUOTED_COLUMNS", "Quoted", "Term", "quoted_contrasts",
           "resolve"]
