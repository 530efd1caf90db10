"""The paper's figures as seaborn/matplotlib figures, ours beside the paper's reported values.

* :func:`figure1`: one episode's ledger after each turn (the negotiation loop) with both parties' U~;
* :func:`figure2`: (a) arm-level S with intervals by size and recipe, (b) paired differences from
  the same-size base; ours in the left column, the paper's reported values in the right;
* :func:`figure3`: (a) paired gain over base against optimizer steps, (b) deal rate against
  deal-only U~ (what a recipe trades);
* :func:`training_curves`: reward, KL (k3), entropy, learning rate, ... from a run's step log, with the
  episodes' per-step spread and a rolling mean where given;
* :func:`ladder_curves`: the learning ladder's per-step mean reward, the rung beside its sabotaged twins;
* :func:`pareto_figure`: one scenario's Pareto frontier, Nash and Kalai points and the deals reached.

Every plotted number comes from this run's transcripts and logs (ours) or from
``params/paper_reported.yaml`` (panels and series labelled "paper"). Nothing else is drawn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from negolib.domains import get_domain
from negolib.efficiency import ScenarioOracle
from negolib.paper import PaperReported
from negolib.params import Params
from negolib.scenarios import make_scenario
from negolib.stats import contrast_lookup, estimate_lookup
from negolib.training.runs import arm_steps
from negolib.utility import both_utilities, features

if TYPE_CHECKING:
    from matplotlib.figure import Figure

ROLE_STYLE = {"base": ("base", "#777777", "o"), "shared": ("shared LR", "#1f77b4", "s"),
              "lr3": ("3× LR", "#d62728", "D"), "lr10": ("10× LR", "#9467bd", "^")}
PAPER_SIZES = ("E2B", "E4B", "12B", "31B")


def _plt() -> Any:
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        try:
            matplotlib.use("Agg", force=False)
        except Exception:  # an interactive backend is already in use
            pass
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    return plt


def _short(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)[:10]


# ---------------------------------------------------------------------------------------------
# Figure 1: the loop
# ---------------------------------------------------------------------------------------------

def ledger_frames(record: Mapping[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """From one transcript record: (values, seller phi, utilities) per turn.

    ``values``: turns x schema terms (ledger value as text, '' when unnamed); ``seller phi``: the
    seller's feature in [-1, 1] (NaN when unnamed); ``utilities``: seller/buyer U~ of the ledger
    after each turn, the action and whether the turn parsed.
    """
    dom = get_domain(record["domain"])
    sc = make_scenario(dom, int(record["seed"]))
    names = [i.name for i in dom.issues]
    vals, phis, utils = [], [], []
    for t in record["turns"]:
        led = t["ledger"]
        phi = features(dom, sc.seller, led)
        vals.append([_short(led[n]) if n in led else "" for n in names])
        phis.append([phi[k] if n in led else np.nan for k, n in enumerate(names)])
        su, bu = both_utilities(sc, led)
        act = (t.get("action") or {}).get("action") or "bad parse"
        utils.append({"turn": t["turn"], "role": t["role"], "action": act, "seller U~": su, "buyer U~": bu})
    idx = [f"{t['turn']} {t['role']}" for t in record["turns"]]
    return (pd.DataFrame(vals, index=idx, columns=names), pd.DataFrame(phis, index=idx, columns=names),
            pd.DataFrame(utils, index=idx))


def figure1(record: Mapping[str, Any], title: str | None = None, max_turns: int | None = None) -> Figure:
    """Figure 1: the ledger after each turn (cells: value; colour: the seller's feature phi) and the
    two parties' U~ of that ledger; the episode's outcome in the title."""
    plt = _plt()
    import seaborn as sns

    vals, phis, utils = ledger_frames(record)
    if max_turns:
        vals, phis, utils = vals.iloc[:max_turns], phis.iloc[:max_turns], utils.iloc[:max_turns]
    n = len(vals)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(4 + 1.1 * vals.shape[1], 1.2 + 0.42 * max(n, 2)),
                                  gridspec_kw={"width_ratios": [vals.shape[1], 3]}, sharey=False)
    sns.heatmap(phis, annot=vals.to_numpy(), fmt="", cmap="RdBu", vmin=-1, vmax=1, cbar=False, ax=ax,
                linewidths=0.5, linecolor="white", annot_kws={"fontsize": 8})
    ax.set_xlabel("contract term (colour: seller's feature φ, blue = good for the seller)")
    ax.set_ylabel("turn")
    ax.tick_params(axis="x", rotation=35)
    y = np.arange(n) + 0.5
    ax2.plot(utils["seller U~"], y, "o-", label="seller Ũ", color="#1f4e9c")
    ax2.plot(utils["buyer U~"], y, "s--", label="buyer Ũ", color="#b5412b")
    for yi, (_, r) in zip(y, utils.iterrows()):
        ax2.annotate(r["action"].lower(), (1.02, yi), fontsize=7, va="center", annotation_clip=False)
    ax2.set_ylim(n, 0)
    ax2.set_xlim(0, 1)
    ax2.set_yticks([])
    ax2.set_xlabel("Ũ of the ledger")
    ax2.legend(loc="lower left", fontsize=8)
    out = record.get("outcome") or {}
    status = "deal" if out.get("deal") else "no deal"
    score = out.get("score")
    head = title or f"{record['arm']} vs {record['buyer']} on {record['domain']} (seed {record['seed']})"
    fig.suptitle(f"{head}: {status}, S = {score:.3f}" if score is not None else head, fontsize=11)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# Figure 2: arm-level S and paired differences
# ---------------------------------------------------------------------------------------------

def _ours_fig2(params: Params, est: pd.DataFrame, contrasts: pd.DataFrame) -> tuple[list, list, list]:
    el, cl = estimate_lookup(est), contrast_lookup(contrasts)
    pts, diffs, refs = [], [], []
    for i, g in enumerate(params.design.sizes):
        for role in ("base", "shared", "lr3", "lr10"):
            arm = getattr(g, role)
            r = el.get((arm, "score")) if arm else None
            if r is not None:
                pts.append((i, role, r["estimate"], r.get("ci_low"), r.get("ci_high")))
            c = cl.get((arm, g.base, "score")) if arm and role != "base" else None
            if c is not None:
                lab = c.get("mark") or ("n.s." if c.get("primary") else "")
                diffs.append((i, role, c["estimate"], c["ci_low"], c["ci_high"], lab))
    sized = {a for g in params.design.sizes for a in (g.base, g.shared, g.shared_early, g.lr3, g.lr10) if a}
    for arm in params.arms:
        r = el.get((arm, "score"))
        if arm not in sized and r is not None:
            refs.append((arm, r["estimate"], arm in params.design.frontier))
    return pts, diffs, refs


def _paper_fig2(paper: PaperReported) -> tuple[list, list, list]:
    pts, diffs, refs = [], [], []
    recipe_arm = {"base": "{}_base", "shared": "{}_shared_104", "lr3": "{}_lr3_56", "lr10": "{}_lr10_56"}
    prefix = {"E2B": "e2b", "E4B": "e4b", "12B": "g12b", "31B": "g31b"}
    for i, size in enumerate(PAPER_SIZES):
        for role, pat in recipe_arm.items():
            s = paper.arm(pat.format(prefix[size])).get("score")
            if isinstance(s, list):
                pts.append((i, role, s[0], s[1], s[2]))
            elif s is not None:
                pts.append((i, role, s, None, None))
        t1 = paper.get("table1", size, default={}) or {}
        for role, key in (("shared", "shared_minus_base"), ("lr3", "lr3_minus_base")):
            v = t1.get(key)
            if v:
                mark = t1.get(f"{key}_mark", "") or ("n.s." if role == "shared" else "")
                diffs.append((i, role, v[0], v[1], v[2], mark))
        v = paper.get("contrasts", "e2b_lr10_minus_base") if size == "E2B" else None
        if v:
            diffs.append((i, "lr10", v[0], v[1], v[2], "e"))
    for ref in ("sonnet5", "terra"):
        s = paper.arm(ref).get("score")
        if s:
            refs.append((paper.arm_label(ref), s[0], True))
    return pts, diffs, refs


def _draw_points(ax: Any, pts: list, jitter: float = 0.12) -> None:
    roles = list(ROLE_STYLE)
    for role in roles:
        sub = [p for p in pts if p[1] == role]
        if not sub:
            continue
        label, color, marker = ROLE_STYLE[role]
        off = (roles.index(role) - 1.5) * jitter
        x = np.array([p[0] for p in sub]) + off
        y = np.array([p[2] for p in sub])
        lo = np.array([p[3] if p[3] is not None else p[2] for p in sub])
        hi = np.array([p[4] if p[4] is not None else p[2] for p in sub])
        ax.errorbar(x, y, yerr=[y - lo, hi - y], fmt=marker, color=color, label=label, capsize=3, ms=6,
                    linestyle="-" if len(sub) > 1 else "none", lw=0.8)


def figure2(params: Params, est: pd.DataFrame, contrasts: pd.DataFrame, paper: PaperReported) -> Figure:
    """Figure 2. Top: arm-level S [95% CI] by size and recipe, reference sellers as horizontal lines
    (frontier: solid; other arms, e.g. scripted baselines: dotted). Bottom: paired differences from
    the same-size base with 95% intervals (* Holm-significant primary; e exploratory; n.s.)."""
    plt = _plt()
    ratios = [max(1, len(params.design.sizes)) + 1.5, 5]
    fig, axes = plt.subplots(2, 2, figsize=(15, 8.5), gridspec_kw={"width_ratios": ratios})
    panels = [("ours", [g.label for g in params.design.sizes], _ours_fig2(params, est, contrasts)),
              ("paper (reported)", [paper.get("sizes", s, "label", default=s) for s in PAPER_SIZES],
               _paper_fig2(paper))]
    for col, (who, labels, (pts, diffs, refs)) in enumerate(panels):
        ax, bx = axes[0, col], axes[1, col]
        labels = labels or []
        _draw_points(ax, pts)
        palette = iter(["#2ca02c", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"])
        for name, s, frontier in refs:
            ax.axhline(s, ls="-" if frontier else ":", lw=1.2, color=next(palette, "#999"), label=f"{name} ({s:.3f})")
        ax.set_xticks(range(len(labels)), labels, rotation=0, fontsize=8)
        ax.set_xlim(-0.6, max(len(labels), 1) - 0.4)
        ax.set_ylabel("S (arm-level mean)")
        ax.set_title(f"(a) attained score S: {who}", fontsize=10)
        if who.startswith("paper"):
            ax.axvline(1.5, ls=":", color="k", lw=1)
            ax.legend(fontsize=7, loc="upper left")
        elif ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        _draw_points(bx, [(d[0], d[1], d[2], d[3], d[4]) for d in diffs])
        for d in diffs:
            if d[1] == "shared" or d[5] in ("*", "n.s."):
                bx.annotate(f"{d[2]:+.3f}{d[5] if d[5] in ('*', 'e') else ' ' + d[5] if d[5] else ''}",
                            (d[0] + 0.08, d[2]), fontsize=7)
        bx.axhline(0, color="k", lw=0.8)
        bx.set_xticks(range(len(labels)), labels, fontsize=8)
        bx.set_xlim(-0.6, max(len(labels), 1) - 0.4)
        bx.set_ylabel("paired difference from base (S)")
        bx.set_title(f"(b) trained arm − base, 95% paired intervals: {who}", fontsize=10)
        if who.startswith("paper"):
            bx.axvline(1.5, ls=":", color="k", lw=1)
        if not pts:
            ax.text(0.5, 0.5, "no arms of this design evaluated", transform=ax.transAxes, ha="center")
        if not diffs:
            bx.text(0.5, 0.5, "no paired contrasts", transform=bx.transAxes, ha="center")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# Figure 3: gain vs steps, deal rate vs utility
# ---------------------------------------------------------------------------------------------

def figure3(params: Params, est: pd.DataFrame, contrasts: pd.DataFrame, paper: PaperReported,
            training_steps: Mapping[str, int] | None = None) -> Figure:
    """Figure 3. (a) paired gain over base against combined steps per size (ours | paper's reported
    gains at 104 steps with the continuation gains as labels); (b) deal rate against deal-only U~ for
    every arm of ours, arrows base → trained, beside the paper's arms."""
    plt = _plt()
    el, cl = estimate_lookup(est), contrast_lookup(contrasts)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), gridspec_kw={"width_ratios": [1, 1, 1.3]})
    ax = axes[0]
    for g in params.design.sizes:
        pts = [(0, 0.0, 0.0, 0.0)]
        for arm in [g.shared_early, g.shared, g.lr3, *g.extra]:
            c = cl.get((arm, g.base, "score")) if arm else None
            steps = (training_steps or {}).get(arm) if arm else None
            steps = steps if steps is not None else (arm_steps(params, arm) if arm else None)
            if c is not None and steps is not None:
                pts.append((steps, c["estimate"], c["ci_low"], c["ci_high"]))
        if len(pts) > 1:
            pts.sort()
            x, y = [p[0] for p in pts], np.array([p[1] for p in pts])
            ax.errorbar(x, y, yerr=[y - np.array([p[2] for p in pts]), np.array([p[3] for p in pts]) - y], fmt="o-",
                        capsize=3, label=g.label)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("combined optimizer steps")
    ax.set_ylabel("paired gain over base (S)")
    ax.set_title("(a) gain vs steps: ours", fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no trained arm evaluated", transform=ax.transAxes, ha="center")
    bx = axes[1]
    cont = paper.get("figure3", "continuation_gain", default={}) or {}
    for size in PAPER_SIZES:
        v = paper.get("table1", size, "shared_minus_base")
        if v:
            bx.errorbar([104], [v[0]], yerr=[[v[0] - v[1]], [v[2] - v[0]]], fmt="o", capsize=3,
                        label=f"{paper.get('sizes', size, 'label', default=size)} (104 steps)")
            if size in cont:
                bx.annotate(f"{cont[size]:+.3f} from the last 40/48 steps", (104, v[0]), xytext=(-14, 0),
                            textcoords="offset points", ha="right", va="center", fontsize=7)
    bx.axhline(0, color="k", lw=0.8)
    bx.set_xlim(0, 115)
    bx.set_xlabel("combined optimizer steps")
    bx.set_title("(a) paper (reported): shared-LR gain at 104 steps", fontsize=10)
    bx.legend(fontsize=7, loc="upper left")
    cx = axes[2]
    rows = []
    for arm in params.arms:
        d, u = el.get((arm, "deal_rate")), el.get((arm, "deal_utility"))
        if d and u:
            rows.append((arm, d["estimate"], u["estimate"]))
    for arm, d, u in rows:
        cx.scatter(d, u, s=40, color="#1f4e9c", zorder=3)
        cx.annotate(arm, (d, u), fontsize=7, xytext=(3, 3), textcoords="offset points")
    for g in params.design.sizes:
        for arm in (g.shared, g.lr3, g.lr10):
            a, b = (el.get((g.base, "deal_rate")), el.get((g.base, "deal_utility"))), \
                (el.get((arm, "deal_rate")), el.get((arm, "deal_utility"))) if arm else (None, None)
            if not (arm and all(a) and all(b)):
                continue
            start, end = (a[0]["estimate"], a[1]["estimate"]), (b[0]["estimate"], b[1]["estimate"])
            # a seller that never closes has no deal-only utility (nan): no arrow from it
            if np.all(np.isfinite([*start, *end])) and start != end:
                cx.annotate("", end, start, arrowprops={"arrowstyle": "->", "color": "#1f4e9c"})
    prow = [(k, v.get("deal_rate"), v.get("deal_utility")) for k, v in (paper.get("arms", default={}) or {}).items()
            if v.get("deal_rate") is not None and v.get("deal_utility") is not None]
    for _k, d, u in prow:
        cx.scatter(d, u, s=30, marker="x", color="#b5412b", zorder=2)
    if prow:
        cx.scatter([], [], marker="x", color="#b5412b", label="paper arms (reported)")
        cx.scatter([], [], color="#1f4e9c", label="ours")
        dr, du = paper.get("figure3", "e2b_deal_rate"), paper.get("figure3", "e2b_deal_utility")
        if dr and du:
            cx.annotate("", (dr[1], du[1]), (dr[0], du[0]), arrowprops={"arrowstyle": "->", "color": "#b5412b"})
            cx.annotate("paper 2.3B base → 104", (dr[1], du[1]), fontsize=7, color="#b5412b",
                        xytext=(-40, 8), textcoords="offset points")
        cx.legend(fontsize=8, loc="lower left")
    cx.set_xlabel("deal rate")
    cx.set_ylabel("deal-only seller Ũ")
    cx.set_title("(b) deal rate vs utility per closed deal", fontsize=10)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# Training curves, efficiency
# ---------------------------------------------------------------------------------------------

CURVE_COLUMNS = (("loss", "loss (warm-up: token NLL)"), ("reward", "reward"), ("score", "score S"),
                 ("deal_rate", "deal rate"), ("kl", "KL (k3)"),
                 ("entropy", "entropy"), ("grad_norm", "grad norm"), ("lr", "learning rate"),
                 ("bad_parse_rate", "bad-parse rate"), ("turns", "turns"), ("advantage_abs_max", "max |advantage|"))


def training_curves(log: pd.DataFrame, title: str = "", paper_kl: float | None = None,
                    spread: pd.DataFrame | None = None, rolling: pd.DataFrame | None = None) -> Figure:
    """Per-step curves of whichever logged columns exist (reward, S, deal rate, KL, entropy, ...).

    ``paper_kl``: a reference line (the paper's logged KL at a comparable point, labelled).
    ``spread``: :func:`negolib.diagnostics.training_step_spread` (per step and metric: the episodes'
    min-max and interquartile range, drawn as two bands on the metric's panel). ``rolling``:
    :func:`negolib.diagnostics.rolling_step_means` (its non-NaN ``rolling`` values drawn as a line)."""
    plt = _plt()
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
    plt = _plt()
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


def pareto_figure(records: Sequence[Mapping[str, Any]], domain: str, seed: int, title: str = "") -> Figure:
    """One scenario's exact Pareto frontier (seller Ũ, buyer Ũ), Nash and Kalai points, and the deals
    each arm reached on it (beyond the paper)."""
    plt = _plt()
    sc = make_scenario(get_domain(domain), seed)
    orc = ScenarioOracle.of(sc)
    fr = orc.frontier
    fig, ax = plt.subplots(figsize=(6, 5.2))
    ax.scatter(fr.points[:, 0], fr.points[:, 1], s=8, color="#444", label="Pareto frontier")
    for a, e in zip(*fr.segments()):
        ax.plot([a[0], e[0]], [a[1], e[1]], "-", color="#444", lw=1.2)
    b = orc.bargaining
    ax.scatter(*b.nash, marker="*", s=160, color="#d62728", zorder=4, label="Nash point")
    ax.scatter(*b.kalai, marker="P", s=110, color="#2ca02c", zorder=4, label="Kalai point")
    ax.scatter(*b.disagreement, marker="x", s=60, color="k", label="reservation point")
    for arm in sorted({r["arm"] for r in records}):
        pts = [both_utilities(sc, r["outcome"]["final_ledger"]) for r in records
               if r["arm"] == arm and r["domain"] == domain and int(r["seed"]) == seed
               and (r.get("outcome") or {}).get("deal")]
        if pts:
            p = np.array(pts)
            ax.scatter(p[:, 0], p[:, 1], s=40, alpha=0.8, label=f"{arm} deals")
    ax.set_xlabel("seller Ũ")
    ax.set_ylabel("buyer Ũ")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.set_title(title or f"{domain}, seed {seed}", fontsize=10)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig


__all__ = ["figure1", "figure2", "figure3", "ledger_frames", "pareto_figure", "training_curves", "ladder_curves"]
