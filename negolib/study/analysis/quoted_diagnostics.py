"""The smaller diagnostics the paper quotes in its text (§5, App. A, B, D, E), computed from our episode table and
training logs. Numeric frames only; :mod:`negolib.study.report.quoted` puts the paper's values beside them.

* :func:`late_close_change`: the share of deals closed at or after the converge turn (16) and its paired change on
  the scenarios both arms closed (§5: 3.7-20.0% of base deals; training moves it by -7.5 to +5.0 points);
* :func:`integrative_split`: the buyer's change on the integrative (and distributive) terms, and the seller's
  integrative - distributive gap on shared resamples (§5: 31B shared, buyer -0.040 on integrative terms; 4.5B
  shared, gap +0.012), over scenarios both arms closed;
* :func:`gain_shares`: the distributive, integrative and buyer-loss shares of the seller's deal-only gain (§5:
  75-81% distributive at 12B and 31B; the buyer's loss 88%/93% of it under the shared LR, 55%/48% under 3x);
* :func:`self_play_split`: a seller's S against a buyer of its own model and against the others (App. A);
* :func:`kl_at_read`: the logged k3 KL at the step each trained arm was read (App. D's step-56 KL);
* :func:`deal_rate_by_domain`: per domain, the deal rates of a trained arm and its base and the paired drop
  (App. B: the 2.3B shared recipe's deal-rate decline by domain);
* :func:`walkaways`: no-deals before the turn cap (walk-aways) and episodes at the cap, per arm (App. E);
* :func:`off_schema_ledger_share`: the share of deals closing with an off-schema term on the ledger (App. A).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from negolib.games.multi_issue.env import EnvConfig
from negolib.games.multi_issue.metrics import Metric, deal_only, get_metric
from negolib.games.multi_issue.record_scenarios import RecordScenarios
from negolib.games.multi_issue.scenarios import Scenario
from negolib.params import Params
from negolib.study.analysis.resamplers import Analysis
from negolib.study.diagnostics import SPLIT_SKIPPED, decomposition_columns
from negolib.study.paired import ContrastSpec, arm_estimate, contrast_difference, run_contrasts

CONVERGE_FROM_TURN = EnvConfig().converge_from_turn
"""The turn from which each party's prompt says to converge (16): a deal closed at or after it is a late close."""

PAIR_COLUMNS = ["arm_a", "arm_b", "metric", "estimate", "ci_low", "ci_high", "significant", "n_clusters",
                "n_episodes"]


def _pair_rows(an: Analysis, pairs: Sequence[tuple[str, str]], metrics: Sequence[Metric], df: pd.DataFrame,
               restrict_both_closed: bool = True, differences: Sequence[tuple[str, str, str]] = ()) -> list[dict]:
    """Paired contrasts of ``metrics`` per pair on one resampler per pair (over the seeds both played), and the
    ``differences`` (name, first metric, second metric) of two of them on the same resamples."""
    rows = []
    for a, b in pairs:
        if not (an.has(a) and an.has(b)):
            continue
        seeds = an.shared_seeds(a, b)
        if not seeds:
            continue
        sub = df[df["arm"].isin([a, b]) & df["seed"].isin(seeds)]
        specs = [ContrastSpec(a, b, m, restrict_both_closed) for m in metrics]
        cs = run_contrasts(sub, specs, an.resampler(seeds), an.alpha)
        by = {m.name: c for m, c in zip(metrics, cs)}
        for m, c in zip(metrics, cs):
            rows.append({"arm_a": a, "arm_b": b, "metric": m.name, "estimate": c.estimate, "ci_low": c.ci_low,
                         "ci_high": c.ci_high, "significant": c.excludes_zero, "n_clusters": c.n_clusters,
                         "n_episodes": c.n_episodes})
        for name, first, second in differences:
            d = contrast_difference(by[first], by[second], an.alpha)
            rows.append({"arm_a": a, "arm_b": b, "metric": name, "estimate": d.estimate, "ci_low": d.interval.ci_low,
                         "ci_high": d.interval.ci_high,
                         "significant": bool(d.interval.ci_low > 0 or d.interval.ci_high < 0),
                         "n_clusters": by[first].n_clusters, "n_episodes": by[first].n_episodes})
    return rows


# -- late closes ------------------------------------------------------------------------------------------------

def late_close_column(df: pd.DataFrame, converge_from_turn: int = CONVERGE_FROM_TURN) -> pd.DataFrame:
    """Copy of an episode table with ``late_close``: 1.0 for a deal closed at or after ``converge_from_turn``, 0.0
    for an earlier deal, NaN for a no-deal (as :func:`negolib.study.diagnostics.late_close` on a record)."""
    out = df.copy()
    deal = out["deal"].astype(bool).to_numpy()
    out["late_close"] = np.where(deal, (out["turns"].to_numpy() >= converge_from_turn).astype(float), np.nan)
    return out


LATE_CLOSE = Metric("late_close_share", "deals closed at or after the converge turn", deal_only("late_close"),
                    lambda d: d["deal"].to_numpy().astype(float))


def late_close_change(an: Analysis, pairs: Sequence[tuple[str, str]],
                      converge_from_turn: int = CONVERGE_FROM_TURN) -> pd.DataFrame:
    """Per (arm, base) pair, on the seeds both played: ``base_share`` and ``arm_share`` (late closes among all
    their deals) and the paired change in the late-close share over the scenarios both arms closed (estimate,
    95% interval; a share, so x100 for points)."""
    cols = ["arm_a", "arm_b", "base_share", "arm_share", "estimate", "ci_low", "ci_high", "significant",
            "n_clusters", "n_episodes"]
    if an.df.empty:
        return pd.DataFrame(columns=cols)
    df = late_close_column(an.df, converge_from_turn)
    rows = _pair_rows(an, pairs, [LATE_CLOSE], df)
    for r in rows:
        seeds = an.shared_seeds(r["arm_a"], r["arm_b"])
        for key, arm in (("base_share", r["arm_b"]), ("arm_share", r["arm_a"])):
            lc = df.loc[(df["arm"] == arm) & df["seed"].isin(seeds), "late_close"].dropna()
            r[key] = float(lc.mean()) if len(lc) else np.nan
        del r["metric"]
    return pd.DataFrame(rows, columns=cols)


# -- the buyer's integrative change and the seller's integrative - distributive gap ----------------------------

def buyer_split_columns(df: pd.DataFrame, scenarios: Mapping[str, Scenario] | None = None) -> pd.DataFrame:
    """:func:`negolib.study.diagnostics.decomposition_columns` plus the buyer's U~ split by term type:
    ``buyer_dist`` and ``buyer_int`` (the buyer's contributions on the distributive and integrative issues; NaN on a
    no-deal and where the split is skipped, ``split_skipped`` saying why). ``scenarios``: the imported ones by
    domain name."""
    out, look = decomposition_columns(df, scenarios=scenarios), RecordScenarios(scenarios)
    masks = {d: np.array([i.distributive for i in look.domain(d).issues]) for d in pd.unique(out["domain"])}
    dist, integ = [], []
    for dom, deal, bt, why in zip(out["domain"], out["deal"], out["buyer_terms"], out[SPLIT_SKIPPED]):
        if not bool(deal) or why:
            dist.append(np.nan)
            integ.append(np.nan)
            continue
        b, mask = np.asarray(bt, dtype=float), masks[dom]
        dist.append(float(b[mask].sum()))
        integ.append(float(b[~mask].sum()))
    out["buyer_dist"], out["buyer_int"] = dist, integ
    return out


def _deal_metric(col: str, name: str) -> Metric:
    return Metric(name, name, deal_only(col), lambda d: d["deal"].to_numpy().astype(float))


SPLIT_METRICS = (_deal_metric("seller_dist", "seller_distributive"), _deal_metric("seller_int", "seller_integrative"),
                 _deal_metric("buyer_dist", "buyer_distributive"), _deal_metric("buyer_int", "buyer_integrative"))


def integrative_split(an: Analysis, pairs: Sequence[tuple[str, str]],
                      scenarios: Mapping[str, Scenario] | None = None) -> pd.DataFrame:
    """Per (arm, base) pair, over the scenarios both arms closed: the paired changes in the seller's and the buyer's
    U~ on distributive and on integrative terms, and ``seller_integrative_minus_distributive`` (the seller's
    integrative change minus its distributive change, on the same resamples). ``scenarios``: the imported ones by
    domain name; episodes whose split is skipped are left out (``n_skipped``; the reasons in ``attrs["skipped"]``)."""
    if an.df.empty or not {"seller_terms", "buyer_terms"} <= set(an.df.columns):  # no per-term contributions
        return pd.DataFrame(columns=[*PAIR_COLUMNS, "n_skipped"])
    df = buyer_split_columns(an.df, scenarios)
    why = df[SPLIT_SKIPPED]
    rows = _pair_rows(an, pairs, SPLIT_METRICS, df[why == ""], differences=[
        ("seller_integrative_minus_distributive", "seller_integrative", "seller_distributive")])
    out = pd.DataFrame(rows, columns=PAIR_COLUMNS).assign(n_skipped=int((why != "").sum()))
    out.attrs["skipped"] = "; ".join(sorted(set(why) - {""}))
    return out


# -- shares of the seller's gain --------------------------------------------------------------------------------

def gain_shares(decomp: pd.DataFrame) -> pd.DataFrame:
    """From :func:`negolib.study.analysis.decomposition.decomposition`: per (arm, base) pair, the seller's deal-only
    gain (``seller_gain``), the ``distributive_share`` and ``integrative_share`` of it and ``buyer_loss_share`` (the
    buyer's U~ change, sign flipped, over the seller's gain); ratios of point estimates, NaN for a zero gain."""
    cols = ["arm_a", "arm_b", "seller_gain", "distributive_share", "integrative_share", "buyer_loss_share"]
    if decomp is None or decomp.empty:
        return pd.DataFrame(columns=cols)
    wide = decomp.pivot_table(index=["arm_a", "arm_b"], columns="metric", values="estimate", sort=False)
    rows = []
    for (a, b), r in wide.iterrows():
        g = r.get("seller_utility", np.nan)
        ok = bool(np.isfinite(g) and g != 0)
        rows.append({"arm_a": a, "arm_b": b, "seller_gain": g,
                     "distributive_share": r.get("seller_distributive", np.nan) / g if ok else np.nan,
                     "integrative_share": r.get("seller_integrative", np.nan) / g if ok else np.nan,
                     "buyer_loss_share": -r.get("buyer_utility", np.nan) / g if ok else np.nan})
    return pd.DataFrame(rows, columns=cols)


# -- self-play ---------------------------------------------------------------------------------------------------

def self_play_split(an: Analysis, params: Params, sellers: Sequence[str] | None = None) -> pd.DataFrame:
    """Per seller (``design.frontier`` by default) and evaluation buyer: the seller's S against that buyer with its
    seed-cluster interval and ``self_play`` (the buyer runs the seller's own model: same backend and model)."""
    cols = ["arm", "buyer", "self_play", "estimate", "ci_low", "ci_high", "n_episodes"]
    rows = []
    for arm in sellers if sellers is not None else params.design.frontier:
        if not an.has(arm) or arm not in params.arms:
            continue
        spec = params.arms[arm]
        sub = an.df[an.df["arm"] == arm]
        res = an.resampler(sub["seed"])
        for buyer in params.evaluation.buyers:
            b = params.buyers.get(buyer)
            if not (sub["buyer"] == buyer).any():
                continue
            e = arm_estimate(sub, arm, "score", res, an.alpha, buyer=buyer)
            rows.append({"arm": arm, "buyer": buyer,
                         "self_play": bool(b is not None and (b.backend, b.model) == (spec.backend, spec.model)),
                         "estimate": e.estimate, "ci_low": e.ci_low, "ci_high": e.ci_high,
                         "n_episodes": e.n_episodes})
    return pd.DataFrame(rows, columns=cols)


# -- KL at the read step -----------------------------------------------------------------------------------------

def kl_at_read(logs: Mapping[tuple[str, int], pd.DataFrame], params: Params, arms: Sequence[str]) -> pd.DataFrame:
    """Per trained arm among ``arms``: its run, training seed and read step (``step``, the checkpoint it was
    evaluated from) and the logged k3 KL to the initial policy at that step (``kl``; NaN when the log has no row
    at that step), beside the run's first and last logged KL."""
    cols = ["arm", "run", "seed", "step", "kl", "kl_first", "kl_last"]
    rows = []
    for arm in arms:
        spec = params.arms.get(arm)
        if spec is None or spec.backend != "trained" or spec.run not in params.training.runs:
            continue
        seed = params.train_seed(arm)
        log = logs.get((spec.run, seed))
        kl = first = last = np.nan
        if log is not None and not log.empty and "kl" in log and "step" in log:
            v = log[["step", "kl"]].dropna()
            if len(v):
                first, last = float(v["kl"].iloc[0]), float(v["kl"].iloc[-1])
                at = v[v["step"] == spec.step] if spec.step is not None else v.iloc[-1:]
                kl = float(at["kl"].iloc[-1]) if len(at) else np.nan
        rows.append({"arm": arm, "run": spec.run, "seed": seed, "step": spec.step, "kl": kl, "kl_first": first,
                     "kl_last": last})
    return pd.DataFrame(rows, columns=cols).astype({"seed": "Int64", "step": "Int64"})


# -- per-domain deal rates ---------------------------------------------------------------------------------------

def deal_rate_by_domain(an: Analysis, pairs: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """Per (arm, base) pair and domain, on the seeds both played: both deal rates and the paired change (arm - base)
    with its seed-cluster interval."""
    cols = ["arm_a", "arm_b", "domain", "base_rate", "arm_rate", "estimate", "ci_low", "ci_high", "significant",
            "n_episodes"]
    rows = []
    metric = get_metric("deal_rate")
    for a, b in pairs:
        if not (an.has(a) and an.has(b)):
            continue
        sub, res = an.pair_frame(a, b)
        domains = sorted(pd.unique(sub["domain"]))
        specs = [ContrastSpec(a, b, metric, False, None, (d,)) for d in domains]
        for d, c in zip(domains, run_contrasts(sub, specs, res, an.alpha)):
            dd = sub[sub["domain"] == d]
            rows.append({"arm_a": a, "arm_b": b, "domain": d,
                         "base_rate": float(dd.loc[dd["arm"] == b, "deal"].astype(float).mean()),
                         "arm_rate": float(dd.loc[dd["arm"] == a, "deal"].astype(float).mean()),
                         "estimate": c.estimate, "ci_low": c.ci_low, "ci_high": c.ci_high,
                         "significant": c.excludes_zero, "n_episodes": c.n_episodes})
    return pd.DataFrame(rows, columns=cols)


# -- walk-aways and the turn cap ---------------------------------------------------------------------------------

def walkaways(df: pd.DataFrame, max_turns: int) -> pd.DataFrame:
    """Per arm: episodes, no-deals, ``walkaways`` (no-deals that ended before the ``max_turns`` cap: in this
    protocol a no-deal is reached only at the cap, so a walk-away counts an episode cut short) and episodes at the
    cap (``at_cap``, deal or not)."""
    cols = ["arm", "n_episodes", "n_no_deal", "walkaways", "at_cap"]
    if df is None or df.empty:
        return pd.DataFrame(columns=cols)
    d = df.assign(_nd=~df["deal"].astype(bool), _cap=df["turns"] >= max_turns)
    d["_walk"] = d["_nd"] & ~d["_cap"]
    g = d.groupby("arm", sort=False)
    out = pd.DataFrame({"n_episodes": g.size(), "n_no_deal": g["_nd"].sum(), "walkaways": g["_walk"].sum(),
                        "at_cap": g["_cap"].sum()}).reset_index()
    return out[cols].astype({c: int for c in cols[1:]})


# -- off-schema terms on the closing ledger ----------------------------------------------------------------------

def ledger_off_schema(df: pd.DataFrame, scenarios: Mapping[str, Scenario] | None = None) -> pd.Series:
    """Per episode: whether its final ledger holds a term name outside the domain's schema (NaN for a no-deal);
    ``scenarios``: the imported ones by domain name (their own schema)."""
    look = RecordScenarios(scenarios)
    look.require(pd.unique(df["domain"]), "ledger_off_schema")
    doms = {d: look.domain(d) for d in pd.unique(df["domain"])}
    out = []
    for dom, deal, led in zip(df["domain"], df["deal"], df["final_ledger"]):
        if not bool(deal):
            out.append(np.nan)
            continue
        ledger = json.loads(led) if isinstance(led, str) else (led or {})
        out.append(float(any(doms[dom].lookup(k) is None for k in ledger)))
    return pd.Series(out, index=df.index, dtype=float)


def off_schema_ledger_share(df: pd.DataFrame, scenarios: Mapping[str, Scenario] | None = None) -> pd.DataFrame:
    """Per arm: deals, the deals that close with at least one off-schema term on the ledger and their share
    (``scenarios``: as in :func:`ledger_off_schema`)."""
    cols = ["arm", "n_deals", "n_off_schema_deals", "off_schema_deal_share"]
    if df is None or df.empty or "final_ledger" not in df:
        return pd.DataFrame(columns=cols)
    d = df.assign(_off=ledger_off_schema(df, scenarios))
    rows = []
    for arm, g in d.groupby("arm", sort=False):
        deals = g["_off"].dropna()
        rows.append({"arm": arm, "n_deals": int(len(deals)), "n_off_schema_deals": int(deals.sum()),
                     "off_schema_deal_share": float(deals.mean()) if len(deals) else np.nan})
    return pd.DataFrame(rows, columns=cols)


__all__ = ["CONVERGE_FROM_TURN", "LATE_CLOSE", "PAIR_COLUMNS", "SPLIT_METRICS", "buyer_split_columns",
           "deal_rate_by_domain", "gain_shares", "integrative_split", "kl_at_read", "late_close_change",
           "late_close_column", "ledger_off_schema", "off_schema_ledger_share", "self_play_split", "walkaways"]
