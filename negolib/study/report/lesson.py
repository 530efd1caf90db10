"""Notebook 3's matched lesson as a reader sees it: the pre-registration, the contrast table (trained minus start
on every outcome, with intervals), the decomposition of the S gain, the side-by-side figure, and one held-out
scenario played by both sellers. Reads :mod:`negolib.study.lesson`'s plain data; computes nothing new.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from negolib.core.formatting import fmt_num
from negolib.study.lesson import buyer_rule
from negolib.study.report.booktable import BookTable
from negolib.study.report.figures import pyplot

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _bound(x: float) -> str:
    """A bound at the precision that decides its sign: 3 decimals, more when it would round to zero."""
    if not np.isfinite(x):
        return "—"
    for digits in (3, 4, 5, 6):
        text = f"{x:+.{digits}f}"
        if float(text) != 0.0 or x == 0.0:
            return text
    return f"{x:+.1e}"


def _p(p: float, n_resamples: int) -> str:
    floor = 1.0 / (n_resamples + 1)
    return f"<= {floor:.1e}" if p <= floor else fmt_num(p, 4)


def preregistration_table(pre: Any) -> BookTable:
    """The pre-registration (:class:`negolib.study.lesson.Preregistration`) as a two-column table."""
    d = pre.design
    rows = [("primary outcome", f"mean {pre.primary}, trained minus start"),
            ("secondary outcomes", ", ".join(pre.secondary)),
            ("paired episodes (seed clusters)", f"{pre.n_paired} ({pre.n_clusters})"),
            ("assumed paired SD per episode", f"{pre.planning_sd:.3f}"),
            (f"minimum detectable effect ({pre.power:.0%} power, alpha {pre.alpha:g})", f"{pre.mde:.3f}"),
            ("expected gain on S", f"+{pre.expected_gain:.3f} ({'powered' if pre.powered else 'not powered'})"),
            ("task", f"{d['domain']}, {d['rounds']} round(s), {d['scaffold']} scaffold, {buyer_rule(d)}; ACCEPT terms "
                     f"{'applied' if d['accept_applies_terms'] else 'ignored'}; the same in training and evaluation"),
            ("training", f"{d['steps']} steps x {d['scenarios_per_step']} x {d['rollouts_per_scenario']} episodes, "
                         f"lr {d['learning_rate']:g}, KL beta {d['kl_beta']:g}, std floor {d['loo_std_floor']:g}")]
    df = pd.DataFrame(rows, columns=["item", "pre-registered"]).set_index("item")
    return BookTable("lesson_preregistration", "The matched lesson: pre-registered before training", df)


def lesson_table(res: Any) -> BookTable:
    """Every outcome: start, trained, trained minus start [95% interval], bootstrap p."""
    rows = []
    for name, e in res.estimates.items():
        rows.append({"outcome": name, "start": fmt_num(e.start, 3), "trained": fmt_num(e.trained, 3),
                     "trained − start": f"{_bound(e.diff)} [{_bound(e.ci_low)}, {_bound(e.ci_high)}]",
                     "p (bootstrap)": _p(e.p_value, res.n_resamples),
                     "interval excludes 0": "yes" if e.excludes_zero else "no"})
    df = pd.DataFrame(rows).set_index("outcome")
    caption = (f"{res.n_paired} paired held-out episodes in {res.n_clusters} seed clusters, {res.changed} of them "
               f"changed; percentile cluster bootstrap, {res.n_resamples:,} resamples (p at least 1/(B+1)); "
               f"paired sign-flip test of the S gain p = {_p(res.p_signflip, res.n_resamples)} (smallest "
               f"attainable {res.p_signflip_min:.2g}). "
               f"Observed paired SD {res.observed_sd:.3f}: minimum detectable effect {res.observed_mde:.3f}. "
               f"Verdict: {res.verdict}.")
    return BookTable("lesson_contrast", "The matched lesson: trained minus start on held-out seeds", df, caption)


def decomposition_table(res: Any) -> BookTable:
    """The S gain split into its deal-rate part and its deal-utility part (they sum to the gain)."""
    df = pd.DataFrame([{"part": k, "ΔS": _bound(v)} for k, v in res.decomposition.items()]).set_index("part")
    return BookTable("lesson_decomposition", "Where the S gain comes from", df,
                     "S = p (U − s0) + s0 with deal rate p, utility on deals U and the no-deal score s0 = −0.3; "
                     "ΔS = Δp ((U_a + U_b)/2 − s0) + ΔU (p_a + p_b)/2 (midpoint rule, exact).")


def lesson_figure(res: Any, title: str = "") -> Figure:
    """Start and trained side by side on S, utility on deals and deal rate, each with the interval of the
    difference drawn on the trained bar."""
    plt = pyplot()
    names = ["S", "utility on deals", "deal rate"]
    fig, axes = plt.subplots(1, 3, figsize=(10.5, 3.2))
    for ax, name in zip(axes, names):
        e = res.estimates[name]
        ax.bar([0, 1], [e.start, e.trained], color=["#aec7e8", "#1f77b4"], width=0.6)
        lo, hi = e.start + e.ci_low, e.start + e.ci_high
        ax.errorbar([1], [e.trained], yerr=[[e.trained - lo], [hi - e.trained]], color="k", capsize=5,
                    label="start + 95% interval of the gain")
        ax.set_xticks([0, 1], ["start", "trained"])
        ax.set_title(f"{name}: {e.diff:+.3f}", fontsize=10)
        ax.axhline(0, color="grey", lw=0.6)
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle(title or "matched lesson: held-out seeds, paired", fontsize=11)
    fig.tight_layout()
    return fig


def side_by_side(before: str, after: str, where: str) -> str:
    """One held-out scenario played by the start and by the trained seller, as text."""
    return (f"=== {where}: the start policy ===\n{before}\n\n=== {where}: the trained policy ===\n{after}")


__all__ = ["decomposition_table", "lesson_figure", "lesson_table", "preregistration_table", "side_by_side"]
