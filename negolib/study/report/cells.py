"""Cells of the book's tables from the analysis layer's tidy frames: intervals, significance marks, arm
labels, counts. Shared by the section modules of :mod:`negolib.study.report`.

Marks: ``*`` for a contrast of the prespecified primary family significant after Holm, ``e`` for an
exploratory interval excluding zero (from the frames' ``primary`` and ``significant``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from negolib.core.formatting import DASH, fmt_ci, fmt_num, is_number
from negolib.params import Params
from negolib.stats import FEW_CLUSTERS, percentile_coverage
from negolib.study.analysis.decomposition import DECOMP_NAMES
from negolib.study.diagnostics import DECOMPOSITION_METRICS, HASH_FIELD
from negolib.study.paired import contrast_lookup

ROLE_LABELS = {"base": "base", "shared_early": "shared LR (early)", "shared": "shared LR",
               "lr3": "3× LR", "lr10": "10× LR"}
"""Display labels of the recipe roles of :data:`negolib.study.analysis.contrasts.ROLES`."""


def frame(rows: list[dict[str, Any]], index: str | None = None) -> pd.DataFrame:
    """A display frame from row dicts, indexed by ``index`` when it has rows."""
    df = pd.DataFrame(rows)
    if index and not df.empty:
        df = df.set_index(index)
    return df


def contrast_marks(contrasts: pd.DataFrame) -> np.ndarray:
    """Per row: ``*`` (primary, significant after Holm), ``e`` (exploratory, significant) or ``''``."""
    sig = contrasts["significant"].astype(bool).to_numpy()
    return np.where(sig, np.where(contrasts["primary"].astype(bool).to_numpy(), "*", "e"), "")


def contrast_data(contrasts: pd.DataFrame) -> pd.DataFrame:
    """A contrast frame with its display columns: ``mark`` and ``ci`` (``+0.023* [...]`` style, every value
    printed, ``nan`` included) right after ``significant``, as the book's ``*_data.csv`` files hold them."""
    if contrasts is None or contrasts.empty or "significant" not in contrasts.columns:
        return contrasts
    out = contrasts.copy()
    at = list(out.columns).index("significant") + 1
    out.insert(at, "mark", contrast_marks(out))
    out.insert(at + 1, "ci", [fmt_ci(e, lo, hi, signed=True, missing=None)
                              for e, lo, hi in zip(out["estimate"], out["ci_low"], out["ci_high"])])
    return out


FEW = "†"
"""The mark of a contrast over too few seed clusters for its interval to be trusted (``few_clusters``)."""


def few_clusters_note(contrasts: pd.DataFrame | None) -> str | None:
    """The table note for contrasts flagged ``few_clusters`` (fewer than :data:`negolib.stats.FEW_CLUSTERS` seed
    clusters): why their percentile intervals are not to be trusted, at the fewest clusters shown; None when no
    row is flagged."""
    if contrasts is None or contrasts.empty or "few_clusters" not in contrasts.columns:
        return None
    few = contrasts[contrasts["few_clusters"].astype(bool)]
    if few.empty:
        return None
    g = int(few["n_clusters"].min())
    cov = percentile_coverage(g)
    n_resamples = math.comb(2 * g - 1, g) if g > 0 else 0
    return (f"{FEW} fewer than {FEW_CLUSTERS} seed clusters (here as few as {g}): too few for the percentile "
            f"bootstrap interval to be trusted. Cluster-bootstrap and cluster-robust inference over-reject with "
            f"few clusters (Cameron, Gelbach & Miller 2008, 5-30 clusters; MacKinnon & Webb 2017); over {g} "
            f"clusters the bootstrap has at most {n_resamples:,} distinct resamples, and a nominal 95% percentile "
            f"interval of a normal mean covers about {cov:.0%}. Read the exact sign-flip p beside it.")


DECOMP_LABELS = {DECOMP_NAMES[k]: m.label for k, m in DECOMPOSITION_METRICS.items() if k in DECOMP_NAMES}
"""Labels of the decomposition metrics (:mod:`negolib.study.diagnostics`) by their analysis names."""


def decomposition_data(decomp: pd.DataFrame) -> pd.DataFrame:
    """:func:`negolib.study.analysis.decomposition.decomposition` with its display columns: :func:`contrast_data`'s
    and each metric's ``label`` (before the protocol hash, if any)."""
    out = contrast_data(decomp)
    if out is None or out.empty:
        return out
    out = out.copy()
    at = list(out.columns).index(HASH_FIELD) if HASH_FIELD in out.columns else len(out.columns)
    out.insert(at, "label", out["metric"].map(DECOMP_LABELS))
    return out


def marked_lookup(contrasts: pd.DataFrame) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(arm_a, arm_b, metric) -> row dict with its ``mark`` (see :func:`contrast_data`)."""
    return contrast_lookup(contrast_data(contrasts))


def contrast_cell(look: Mapping, a: str | None, b: str | None, metric: str = "score", signed: bool = True,
                  digits: int = 3) -> str:
    """``+0.023* [+0.011, +0.035]``: the contrast ``a - b`` of ``metric`` with its mark, or a dash."""
    if not a or not b:
        return DASH
    r = look.get((a, b, metric))
    if r is None:
        return DASH
    return fmt_ci(r["estimate"], r["ci_low"], r["ci_high"], digits, signed=signed, mark=r.get("mark", ""))


def estimate_cell(look: Mapping, arm: str | None, metric: str, digits: int = 3, ci: bool = True) -> str:
    """``0.422 [0.400, 0.446]`` (with ``ci``) or ``0.422``: an arm's estimate of ``metric``, or a dash."""
    if not arm:
        return DASH
    r = look.get((arm, metric))
    if r is None:
        return DASH
    if ci and "ci_low" in r:
        return fmt_ci(r["estimate"], r.get("ci_low"), r.get("ci_high"), digits, signed=False)
    return fmt_num(r["estimate"], digits)


def arm_label(params: Params | None, arm: str) -> str:
    """The arm's label in the profile (its name when it has none)."""
    if params is not None and arm in params.arms and params.arms[arm].label:
        return params.arms[arm].label
    return arm


def paper_ref(params: Params | None, arm: str) -> str | None:
    """The paper's arm an arm of ours is shown beside (``paper_ref`` in the profile), or None."""
    return params.arms[arm].paper_ref if params is not None and arm in params.arms else None


def fmt_count(n: Any) -> str:
    """A parameter count: ``2.30B``, ``135.0M``, ``4.6k``; a dash when not a number."""
    if not is_number(n):
        return DASH
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.1f}k"


def skipped_notes(data: pd.DataFrame | None) -> list[str]:
    """A table's note naming the episodes its analysis left out and why (``attrs["skipped"]``; none: [])."""
    why = data.attrs.get("skipped") if data is not None else None
    return [f"Left out (counted in n_skipped): {why}."] if why else []


__all__ = ["DECOMP_LABELS", "FEW", "ROLE_LABELS", "arm_label", "contrast_cell", "contrast_data", "contrast_marks",
           "decomposition_data", "estimate_cell", "few_clusters_note", "fmt_count", "frame", "marked_lookup",
           "paper_ref", "skipped_notes"]
