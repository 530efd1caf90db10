"""Paired contrasts ``arm_a - arm_b`` of an analysis, the profile's design pairs, and the Holm family.

Contrasts are grouped by the seeds each pair shares (one resampler per seed set,
:class:`negolib.study.analysis.resamplers.Analysis`), then the profile's prespecified primary family is
Holm-corrected once over every group (:func:`holm_family`), on the bootstrap p-values floored at
``1 / (B + 1)``. Frames are numeric: ``primary``, ``p_holm`` and ``significant`` say what a report marks
(``*`` for a primary contrast significant after Holm, ``e`` for an exploratory interval excluding zero; see
:func:`negolib.study.report.cells.contrast_marks`); beside the bootstrap every row carries the exact sign-flip test
over its seed clusters (``p_signflip``, ``p_signflip_min``) and ``few_clusters`` (fewer than
:data:`negolib.stats.FEW_CLUSTERS` clusters: the interval is not to be trusted), from
:func:`negolib.study.paired.contrast_table`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from negolib.games.multi_issue.domains import load_domains
from negolib.params import Params
from negolib.stats import holm
from negolib.study.analysis.resamplers import Analysis
from negolib.study.paired import contrast_table

ROLES = ("base", "shared_early", "shared", "lr3", "lr10")
"""The recipe roles of a size group of the design (``design.sizes``), in table order."""

DISPLAY_COLUMNS = ("mark", "ci")
"""Formatted columns :func:`negolib.study.paired.contrast_table` adds, left out of the analysis frames."""

CONTRAST_COLUMNS = ["arm_a", "arm_b", "metric", "estimate", "ci_low", "ci_high", "p_value", "p_holm", "primary",
                    "significant", "p_signflip", "p_signflip_min", "few_clusters"]


def numeric(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` without the formatted columns (:data:`DISPLAY_COLUMNS`) of the lower layers' tables."""
    return frame.drop(columns=[c for c in DISPLAY_COLUMNS if c in frame.columns])


def holm_family(out: pd.DataFrame, primary: Iterable[Sequence[str]], alpha: float) -> pd.DataFrame:
    """Mark the primary family in a contrast frame (in place, and returned): ``primary`` is True for the
    S contrasts of the listed (arm_a, arm_b) pairs, ``p_holm`` their Holm-adjusted p-values (NaN
    elsewhere), ``significant`` the adjusted p (primary) or the raw p (exploratory) below ``alpha``."""
    keys = {(str(a), str(b)) for a, b in primary}
    out["primary"] = [(a, b) in keys and m == "score" for a, b, m in zip(out["arm_a"], out["arm_b"], out["metric"])]
    out["p_holm"] = np.nan
    if out["primary"].any():
        out.loc[out["primary"], "p_holm"] = holm(out.loc[out["primary"], "p_value"].to_numpy())
    test_p = np.where(out["primary"], out["p_holm"], out["p_value"])
    out["significant"] = test_p < alpha
    return out


def run_pairs(an: Analysis, pairs: Sequence[tuple[str, str]], metrics: Sequence[str] = ("score",),
              primary: Sequence[Sequence[str]] = (), restrict_both_closed: bool = False,
              domains: Sequence[str] | None = None, buyer: str | None = None) -> pd.DataFrame:
    """Paired contrasts ``arm_a - arm_b``, grouped by the seeds each pair shares (one resampler per
    seed set); Holm over the ``primary`` pairs (S only) with :func:`holm_family`."""
    pairs = [(a, b) for a, b in pairs if an.has(a) and an.has(b)]
    if not pairs:
        return pd.DataFrame(columns=CONTRAST_COLUMNS)
    groups: dict[tuple, list[tuple[str, str]]] = {}
    for a, b in pairs:
        groups.setdefault(tuple(an.shared_seeds(a, b)), []).append((a, b))
    parts = []
    for seeds, grp in groups.items():
        if not seeds:
            continue
        sub = an.df[an.df["arm"].isin({x for p in grp for x in p}) & an.df["seed"].isin(seeds)]
        parts.append(contrast_table(sub, grp, list(metrics), an.resampler(seeds), None, an.alpha,
                                    refine=an.refine, refine_resamples=an.refine_resamples,
                                    restrict_both_closed=restrict_both_closed, buyer=buyer, domains=domains))
    out = pd.concat([p for p in parts if not p.empty], ignore_index=True) if parts else pd.DataFrame()
    if out.empty:
        return out
    return numeric(holm_family(out, primary, an.alpha))


def design_pairs(params: Params) -> list[tuple[str, str]]:
    """Every contrast the paper's tables need, from the profile's design (Table 1, Fig. 2/3, App. C)."""
    pairs: list[tuple[str, str]] = []
    for g in params.design.sizes:
        for role in ("shared_early", "shared", "lr3", "lr10", *g.extra):
            arm = getattr(g, role, None) if role in ROLES else role
            if arm:
                pairs.append((arm, g.base))
        if g.lr3 and g.shared_early:
            pairs.append((g.lr3, g.shared_early))
        if g.lr3 and g.shared:
            pairs.append((g.lr3, g.shared))
        for f in params.design.frontier:
            for role in ("lr3", "shared", "base"):
                arm = getattr(g, role)
                if arm:
                    pairs.append((arm, f))
    if len(params.design.frontier) == 2:
        pairs.append((params.design.frontier[0], params.design.frontier[1]))
    for a, b in params.statistics.primary:
        pairs.append((a, b))
    seen: set[tuple[str, str]] = set()
    return [p for p in pairs if not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]


def design_contrasts(an: Analysis, params: Params, metrics: Sequence[str] = ("score",),
                     domains: Sequence[str] | None = None) -> pd.DataFrame:
    """All design contrasts of S (and ``metrics``), with the profile's primary family marked."""
    return run_pairs(an, design_pairs(params), metrics, params.statistics.primary, domains=domains)


def held_out_contrasts(df: pd.DataFrame, params: Params) -> pd.DataFrame:
    """The design contrasts restricted to the held-out domains (App. C), on a fresh analysis of ``df``.

    Every held-out contrast is exploratory (App. C): no primary family, no Holm adjustment, so a report
    marks an interval excluding zero ``e`` and never ``*``."""
    held = [d for d, dom in load_domains().items() if dom.held_out]
    return run_pairs(Analysis.from_params(df, params), design_pairs(params), ("score",), primary=(), domains=held)


EXTENSION_ROLES = ("shared", "lr3")
"""The trained roles whose held-out gain at the largest size the extension's trigger reads: the shared recipe (the
frozen arm matrix's, prespecified) and the 3x LR (the paper's second evaluation round met the condition again)."""


def held_out_extension_trigger(held: pd.DataFrame, params: Params) -> pd.DataFrame:
    """App. C's prespecified adaptive step, evaluated: double the held-out panel if the held-out gain's interval
    straddles zero for the largest trained model. One row per role of :data:`EXTENSION_ROLES` at the profile's
    largest size (the last of ``design.sizes``): ``arm``, ``base``, its held-out gain over base from ``held``
    (:func:`held_out_contrasts`; NaN and ``available`` False when not evaluated), ``straddles_zero`` and
    ``prespecified`` (the shared recipe's row, whose straddle fires the trigger)."""
    cols = ["size", "paper_size", "role", "arm", "base", "estimate", "ci_low", "ci_high", "n_clusters", "available",
            "straddles_zero", "prespecified"]
    if not params.design.sizes:
        return pd.DataFrame(columns=cols)
    g = params.design.sizes[-1]
    look = {} if held is None or held.empty else {
        (r["arm_a"], r["arm_b"]): r for r in held[held["metric"] == "score"].to_dict("records")}
    rows = []
    for role in EXTENSION_ROLES:
        arm = getattr(g, role)
        r = look.get((arm, g.base)) if arm else None
        ok = r is not None and bool(np.isfinite(r["estimate"]))
        lo, hi = (r["ci_low"], r["ci_high"]) if ok else (np.nan, np.nan)
        rows.append({"size": g.label, "paper_size": g.paper, "role": role, "arm": arm, "base": g.base,
                     "estimate": r["estimate"] if ok else np.nan, "ci_low": lo, "ci_high": hi,
                     "n_clusters": int(r["n_clusters"]) if ok and "n_clusters" in r else 0, "available": ok,
                     "straddles_zero": bool(ok and lo <= 0 <= hi), "prespecified": role == "shared"})
    return pd.DataFrame(rows, columns=cols)


def extension_fires(trigger: pd.DataFrame) -> bool | None:
    """Whether the held-out extension's trigger fires (:func:`held_out_extension_trigger`): read on the prespecified
    (shared-recipe) row where it was evaluated, else on the largest size's other trained arm; None when neither
    has a held-out gain."""
    avail = trigger[trigger["available"]] if len(trigger) else trigger
    read = avail[avail["prespecified"]] if len(avail) and avail["prespecified"].any() else avail
    return bool(read["straddles_zero"].any()) if len(read) else None


def trained_pairs(params: Params, roles: Sequence[str] = ("shared", "lr3", "lr10")) -> list[tuple[str, str]]:
    """(trained arm, same-size base) of every size group, recipe by recipe (``roles``) within a size."""
    return [(getattr(g, r), g.base) for g in params.design.sizes for r in roles if getattr(g, r)]


__all__ = ["CONTRAST_COLUMNS", "DISPLAY_COLUMNS", "EXTENSION_ROLES", "ROLES", "design_contrasts", "design_pairs",
           "extension_fires", "held_out_contrasts", "held_out_extension_trigger", "holm_family", "numeric", "run_pairs",
           "trained_pairs"]
