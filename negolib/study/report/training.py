"""Notebook 3 (training, paper §4 and App. D): the learning ladder's table and curves, each run's training
curves, and the per-run training summary with the paper's logged KL and entropy beside ours.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from negolib.core.formatting import DASH, fmt_ci, fmt_num
from negolib.params import Params
from negolib.study.analysis.serving import root_init
from negolib.study.paper import PaperReported
from negolib.study.report.booktable import BookTable, fmt_paper, simple_table
from negolib.study.report.figures import pyplot

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SUMMARY_COLUMNS = (("reward", "reward", 3), ("score", "score S", 3), ("deal_rate", "deal rate", 3),
                   ("kl", "KL (k3)", 4), ("entropy", "entropy", 3), ("validation_score", "validation S", 3))
"""(series of :func:`negolib.study.analysis.training.training_summary`, column label, decimals)."""


def _arrow(first: float, last: float, digits: int) -> str:
    return DASH if pd.isna(first) else f"{first:.{digits}f} → {last:.{digits}f}"


def training_summary_display(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary of :func:`negolib.study.analysis.training.training_summary` for display, indexed by (run, seed):
    each series first → last, wall time in whole seconds and, where counted, the training FLOPs."""
    rows = []
    for r in summary.to_dict("records"):
        row: dict[str, Any] = {"run": r["run"], "seed": r["seed"], "steps": r["steps"]}
        row.update({label: _arrow(r[f"{name}_first"], r[f"{name}_last"], digits)
                    for name, label, digits in SUMMARY_COLUMNS})
        row["wall time (s)"] = fmt_num(r["wall_time_s"], 0)
        if r["flops_counted"]:
            row["training FLOPs"] = DASH if pd.isna(r["training_flops"]) else f"{r['training_flops']:.3g}"
        rows.append(row)
    return pd.DataFrame(rows).set_index(["run", "seed"]) if rows else pd.DataFrame()


def ladder_table(ladder: Mapping[str, Any], caption: str = "") -> BookTable:
    """The learning ladder (:mod:`negolib.study.ladder`): per run, whether it must learn, its training and
    evaluation gains with 99% intervals, S initial -> evaluated, the largest weight change, whether it
    learned and whether that is as required (the rung must, no twin may)."""
    rows = []
    for name, r in ladder.items():
        t, must = r.training, name == "rung"
        rows.append({"run": name, "must learn": "yes" if must else "no",
                     "training gain [99% CI]": fmt_ci(t.train_gain.estimate, t.train_gain.ci_low,
                                                      t.train_gain.ci_high, signed=True),
                     "evaluation gain [99% CI]": fmt_ci(r.eval_gain.estimate, r.eval_gain.ci_low,
                                                        r.eval_gain.ci_high, signed=True),
                     "S initial -> evaluated": f"{pd.Series(r.eval_initial).mean():.3f} -> "
                                               f"{pd.Series(r.eval_trained).mean():.3f}",
                     "max weight change": f"{t.weight_change:.2g}",
                     "learned": "yes" if r.learned else "no",
                     "as required": "yes" if r.learned == must else "NO"})
    return simple_table("learning_ladder", "Learning ladder: the CI rung and its sabotaged twins (ours)",
                        pd.DataFrame(rows).set_index("run"), caption=caption)


CURVE_COLUMNS = (("loss", "loss (warm-up: token NLL)"), ("reward", "reward"), ("score", "score S"),
                 ("deal_rate", "deal rate"), ("kl", "KL (k3)"),
                 ("entropy", "entropy"), ("grad_norm", "grad norm"), ("lr", "learning rate"),
                 ("bad_parse_rate", "bad-parse rate"), ("turns", "turns"), ("advantage_abs_max", "max |advantage|"))


def training_curves(log: pd.DataFrame, title: str = "", paper_kl: float | None = None,
                    spread: pd.DataFrame | None = None, rolling: pd.DataFrame | None = None) -> Figure:
    """Per-step curves of whichever logged columns exist (reward, S, deal rate, KL, entropy, ...).

    ``paper_kl``: a reference line (the paper's logged KL at a comparable point, labelled).
    ``spread``: :func:`negolib.study.diagnostics.training_step_spread` (per step and metric: the episodes'
    min-max and interquartile range, drawn as two bands on the metric's panel). ``rolling``:
    :func:`negolib.study.diagnostics.rolling_step_means` (its non-NaN ``rolling`` values drawn as a line)."""
    plt = pyplot()
    cols = [(c, lab) for c, lab in CURVE_COLUMNS if c in log.columns and log[c].notna().any()]
    n = max(1, len(cols))
    ncol = min(3, n)
    nrow = int(np.ceil(n / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.3 * ncol, 3.0 * nrow), squeeze=False)
    x = log["step"] if "step" in log.columns else pd.Series(np.arange(len(log)))
    for ax, (c, lab) in zip(axes.ravel(), cols):
        ok = log[c].notna()
        band = spread[spread["metric"] == c].sort_values("step") if spread is not None else None
        if band is not None and not band.empty:
            ax.fill_between(band["step"], band["min"], band["max"], color="#1f77b4", alpha=0.10, lw=0,
                            label="episodes: min-max")
            ax.fill_between(band["step"], band["q25"], band["q75"], color="#1f77b4", alpha=0.25, lw=0,
                            label="episodes: IQR")
        ax.plot(x[ok], log.loc[ok, c], "o-", ms=3, color="#1f77b4", label="step mean")
        roll = rolling[(rolling["metric"] == c) & rolling["rolling"].notna()] if rolling is not None else None
        if roll is not None and not roll.empty:
            ax.plot(roll["step"], roll["rolling"], "-", lw=2.2, color="#d62728", label="rolling mean")
        ax.set_title(lab, fontsize=10)
        ax.set_xlabel("step")
        if c == "kl" and paper_kl is not None:
            ax.axhline(paper_kl, ls=":", color="#b5412b", label=f"paper ({paper_kl:g})")
        if len(ax.get_legend_handles_labels()[0]) > 1:
            ax.legend(fontsize=7)
    for ax in axes.ravel()[len(cols):]:
        ax.axis("off")
    if not cols:
        axes[0, 0].text(0.5, 0.5, "no logged steps", ha="center", transform=axes[0, 0].transAxes)
    fig.suptitle(title or "training log", fontsize=11)
    fig.tight_layout()
    return fig


LADDER_STYLE = {"rung": ("#1f77b4", "-", 2.4), "env_mask_zero": ("#d62728", "--", 1.4),
                "shuffle_rewards": ("#9467bd", "-.", 1.4), "lr_zero": ("#ff7f0e", ":", 1.8),
                "eval_initial": ("#2ca02c", (0, (1, 3)), 1.4)}


def ladder_curves(curves: Mapping[str, Sequence[float]], optimum: float | None = None, window: int | None = None,
                  title: str = "") -> Figure:
    """Per-step mean training reward of the ladder's rung and its sabotaged twins, one line each.

    ``curves``: run label -> mean episode reward per optimizer step (step 1 first); ``optimum``: the mean
    reward of always naming the top level (a dotted reference); ``window``: shade the first and the last
    ``window`` steps (the early and late windows the training gain compares)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 4.2))
    n_steps = max((len(v) for v in curves.values()), default=0)
    if window and n_steps >= 2 * window:
        ax.axvspan(0.5, window + 0.5, color="#999", alpha=0.15, lw=0, label="early / late window")
        ax.axvspan(n_steps - window + 0.5, n_steps + 0.5, color="#999", alpha=0.15, lw=0)
    for i, (label, ys) in enumerate(curves.items()):
        color, ls, lw = LADDER_STYLE.get(label, (f"C{i}", "-", 1.4))
        ax.plot(np.arange(1, len(ys) + 1), ys, ls=ls, lw=lw, color=color, label=label)
    if optimum is not None:
        ax.axhline(optimum, ls=":", color="k", lw=1, label=f"optimum ({optimum:.3f})")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("mean episode reward")
    ax.set_title(title or "learning ladder: the CI rung and its sabotaged twins", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def run_sizes(runs: Sequence[str], params: Params | None) -> dict[str, str | None]:
    """Each run's paper size key (the size group whose base its weights start from; None when none)."""
    if params is None:
        return {r: None for r in runs}
    bases = {g.base: g.paper for g in params.design.sizes}
    return {r: bases.get(root_init(params, r)) if r in params.training.runs else None for r in runs}


def training_table(summary: pd.DataFrame, paper: PaperReported, params: Params | None = None) -> BookTable:
    """App. D: per training run (:func:`negolib.study.analysis.training.training_summary`), logged KL (k3), entropy
    start -> end, reward, validation, wall time and FLOPs; beside each run, the paper's entropy over the continued
    steps and KL at the end of the continuation of the size the run starts from (``params`` maps runs to sizes;
    without it, or for a run of no size group, a dash)."""
    shown = training_summary_display(summary)
    df = shown.copy()
    kl = paper.get("training", "kl_end_of_continuation", default={}) or {}
    ent = paper.get("training", "entropy_continuation", default={}) or {}
    runs = [i[0] for i in df.index] if len(df) else []
    size = run_sizes(runs, params)
    df["paper: size"] = [size[r] or DASH for r in runs]
    df["paper: entropy start → end (continued steps)"] = [fmt_paper(ent.get(size[r] or "")) for r in runs]
    df["paper: KL at end of continuation"] = [fmt_paper(kl.get(size[r] or ""), 4) for r in runs]
    return BookTable("training", "Training diagnostics (App. D)", df,
                     "Logged k3 KL to the initial policy and policy entropy from the run logs. The paper's values are "
                     "per size, over the shared recipe's continued steps (2.3B / 4.5B / 12B / 31B entropy "
                     + " / ".join(fmt_paper(ent.get(k)) for k in ("E2B", "E4B", "12B", "31B")) + ").", shown)


__all__ = ["CURVE_COLUMNS", "LADDER_STYLE", "SUMMARY_COLUMNS", "ladder_curves", "ladder_table", "training_curves",
           "run_sizes", "training_summary_display", "training_table"]
