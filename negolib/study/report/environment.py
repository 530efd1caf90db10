"""Notebook 1 (the environment, paper §3): the domains' contract schemas and Figure 1, one episode's
ledger turn by turn with both parties' U~.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from negolib.games.multi_issue.domains import get_domain
from negolib.games.multi_issue.scenarios import make_scenario
from negolib.games.multi_issue.utility import both_utilities, features
from negolib.study.report.booktable import BookTable
from negolib.study.report.cells import frame
from negolib.study.report.figures import pyplot

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def domain_table(domain: Any) -> BookTable:
    """One domain's contract schema (ours; the paper names the car domain's issues only)."""
    rows = []
    for i in domain.issues:
        if i.kind == "continuous":
            what = f"{i.lo:g} to {i.hi:g} {i.unit}".strip()
            pref = f"seller prefers {'high' if i.seller_sign > 0 else 'low'}"
        else:
            what = " / ".join(str(v) for v in i.levels) if i.kind == "categorical" else "yes / no"
            pref = "each party draws a preferred level"
        rows.append({"term": i.name, "kind": i.kind, "class": "distributive" if i.distributive else "integrative",
                     "range / levels": what, "preferences": pref, "description": i.description})
    title = f"Domain `{domain.name}`: {domain.title}" + (" (held out)" if domain.held_out else "")
    return BookTable(f"domain_{domain.name}", title, frame(rows, "term"),
                     f"{len(domain.issues)} issues, {sum(i.distributive for i in domain.issues)} distributive.")


def domains_overview(domains: Mapping[str, Any]) -> BookTable:
    """All domains: issue counts by class (paper: 7-10 issues, 3-5 distributive, car has 10)."""
    rows = [{"domain": d.name, "title": d.title, "held out": d.held_out, "issues": len(d.issues),
             "distributive": sum(i.distributive for i in d.issues),
             "integrative": sum(not i.distributive for i in d.issues)} for d in domains.values()]
    return BookTable("domains", "The nine domains (eight training, one held out)", frame(rows, "domain"),
                     "paper: 7-10 issues per domain (10 in the held-out car domain), 3-5 distributive terms.")


def _short(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)[:10]


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
    plt = pyplot()
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


__all__ = ["domain_table", "domains_overview", "figure1", "ledger_frames"]
