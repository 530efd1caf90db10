"""Tournament report: display tables and figures from the frames of :mod:`negolib.tournament`.

Contract: every function reads a frame returned by :func:`negolib.tournament.cross_table`,
:func:`~negolib.tournament.agent_summary` or :func:`~negolib.tournament.ratings` and computes nothing new:
``*_display`` return frames of strings for printing, ``*_figure`` return matplotlib figures (built without
pyplot: save with ``fig.savefig``; a notebook shows a returned figure inline). Agent order is the frame's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure

RATING_LABEL = "rating (Bradley-Terry, Elo scale: 400 points = 10:1 odds, mean 0)"


def _agents_of(cross: pd.DataFrame, level: str) -> list[str]:
    return list(dict.fromkeys(map(str, cross.index.get_level_values(level))))


def cross_table_matrix(cross: pd.DataFrame, value: str = "seller_payoff") -> pd.DataFrame:
    """``cross[value]`` as a ``(K sellers, K buyers)`` numeric matrix (rows: seller agent, columns: buyer
    agent), in the cross-table's agent order."""
    sellers, buyers = _agents_of(cross, "seller"), _agents_of(cross, "buyer")
    flat = cross[value].copy()
    flat.index = pd.MultiIndex.from_arrays([flat.index.get_level_values("seller").astype(str),
                                            flat.index.get_level_values("buyer").astype(str)],
                                           names=["seller", "buyer"])
    mat = flat.unstack("buyer").reindex(index=sellers, columns=buyers)
    mat.index.name, mat.columns.name = "seller", "buyer"
    return mat


def cross_table_display(cross: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """The cross-table as a ``(K, K)`` frame of strings, a cell ``"seller / buyer (deal%)"`` per (seller row,
    buyer column), with ``" [n err]"`` where error episodes were left out."""
    f = f"{{:.{digits}f}}"
    sp, bp = cross_table_matrix(cross, "seller_payoff"), cross_table_matrix(cross, "buyer_payoff")
    dr, ne = cross_table_matrix(cross, "deal_rate"), cross_table_matrix(cross, "n_errors")
    out = pd.DataFrame("", index=sp.index, columns=sp.columns)
    for s in sp.index:
        for b in sp.columns:
            if np.isnan(sp.loc[s, b]):
                cell = "n/a"
            else:
                cell = f"{f.format(sp.loc[s, b])} / {f.format(bp.loc[s, b])} ({dr.loc[s, b]:.0%})"
            if ne.loc[s, b] > 0:
                cell += f" [{int(ne.loc[s, b])} err]"
            out.loc[s, b] = cell
    out.index.name = "seller \\ buyer"
    out.columns.name = None
    return out


def _ci(est: float, lo: float, hi: float, fmt: str) -> str:
    if np.isnan(est):
        return "n/a"
    return f"{fmt.format(est)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def agent_summary_display(summary: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """The per-agent summary as strings, best mean payoff first: payoff and deal rate with their intervals,
    the payoff in each role, the episode and error counts."""
    f = f"{{:.{digits}f}}"
    s = summary.sort_values("payoff", ascending=False, kind="stable")
    return pd.DataFrame({
        "payoff [95% CI]": [_ci(*r, f) for r in s[["payoff", "payoff_low", "payoff_high"]].to_numpy()],
        "deal rate [95% CI]": [_ci(*r, "{:.0%}") for r in s[["deal_rate", "deal_rate_low", "deal_rate_high"]]
                               .to_numpy()],
        "as seller": [f.format(v) for v in s["payoff_as_seller"]],
        "as buyer": [f.format(v) for v in s["payoff_as_buyer"]],
        "episodes": s["n_episodes"].astype(int).to_numpy(),
        "seed clusters": s["n_clusters"].astype(int).to_numpy(),
        "errors": s["n_errors"].astype(int).to_numpy(),
    }, index=s.index)


def ratings_display(ratings: pd.DataFrame) -> pd.DataFrame:
    """The ratings as strings, highest first: rating with its interval (signed Elo points), mean comparison
    score, wins / comparisons and the comparisons left out for error episodes."""
    r = ratings.sort_values("rating", ascending=False, kind="stable")
    return pd.DataFrame({
        "rating [95% CI]": [_ci(*v, "{:+.0f}") for v in r[["rating", "ci_low", "ci_high"]].to_numpy()],
        "score": ["n/a" if np.isnan(v) else f"{v:.0%}" for v in r["score"]],
        "wins / comparisons": [f"{w:g} / {int(n)}" for w, n in zip(r["wins"], r["comparisons"])],
        "excluded": r["n_excluded"].astype(int).to_numpy(),
    }, index=r.index)


def cross_table_figure(cross: pd.DataFrame, value: str = "seller_payoff", label: str | None = None,
                       vmin: float = 0.0, vmax: float = 1.0, digits: int = 2) -> Figure:
    """Heatmap of ``cross[value]`` (rows: seller agent, columns: buyer agent), each cell annotated with its
    value; ``label`` names the colour bar (default: ``value``)."""
    from matplotlib.figure import Figure

    mat = cross_table_matrix(cross, value)
    k_rows, k_cols = mat.shape
    fig = Figure(figsize=(2.8 + 1.05 * k_cols, 1.6 + 0.8 * k_rows), layout="constrained")
    ax = fig.add_subplot()
    data = np.ma.masked_invalid(mat.to_numpy(float))
    im = ax.imshow(data, cmap="viridis", vmin=vmin, vmax=vmax, aspect="auto")
    for i in range(k_rows):
        for j in range(k_cols):
            v = mat.iat[i, j]
            if np.isnan(v):
                ax.text(j, i, "n/a", ha="center", va="center", color="0.4")
                continue
            r, g, b, _ = im.cmap(im.norm(v))
            dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
            ax.text(j, i, f"{v:.{digits}f}", ha="center", va="center", color="white" if dark else "black")
    ax.set_xticks(range(k_cols), list(mat.columns), rotation=30, ha="right")
    ax.set_yticks(range(k_rows), list(mat.index))
    ax.set_xlabel("buyer agent")
    ax.set_ylabel("seller agent")
    ax.grid(False)
    fig.colorbar(im, ax=ax, label=label or value)
    ax.set_title(f"{label or value}, seller (row) vs buyer (column)", fontsize="medium")
    return fig


def ratings_figure(ratings: pd.DataFrame) -> Figure:
    """Forest plot of the ratings, highest on top: a point per agent, its interval as a bar, 0 marked."""
    from matplotlib.figure import Figure

    r = ratings.sort_values("rating", ascending=True, kind="stable")
    k = len(r)
    fig = Figure(figsize=(6.5, 1.2 + 0.45 * k), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(k)
    est = r["rating"].to_numpy(float)
    err = np.vstack([est - r["ci_low"].to_numpy(float), r["ci_high"].to_numpy(float) - est])
    ax.errorbar(est, y, xerr=np.clip(np.nan_to_num(err), 0, None), fmt="o", color="#1f77b4", ecolor="#1f77b4",
                capsize=3)
    ax.axvline(0.0, color="0.5", lw=1, ls="--")
    ax.set_yticks(y, [str(a) for a in r.index])
    ax.set_xlabel(RATING_LABEL)
    ax.set_ylim(-0.6, k - 0.4)
    return fig


__all__ = ["RATING_LABEL", "agent_summary_display", "cross_table_display", "cross_table_figure",
           "cross_table_matrix", "ratings_display", "ratings_figure"]
