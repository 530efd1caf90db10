"""Metrics of the multi-buyer market, per episode and by market (the source paper's quantities).

Contract: :func:`outcomes_frame` reads episode records (:meth:`~.env.Episode.record`, error rows included) into
one numeric row per episode; :func:`market_metrics` aggregates them by market: deal rate, the seller's surplus
normalised by the best achievable (the top ``n_items`` budgets minus cost), the share of deals closed with a
highest-budget buyer, exploration (distinct buyers addressed up to the first deal), budget overshoots (accepted
prices above the buyer's budget), turns used. Frames hold identifiers and numbers only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from negolib.games.multi_buyer.scenarios import MARKETS

OUTCOME_COLUMNS = (
    "scenario_key", "market", "seed", "n_buyers", "n_items", "turn_budget", "cost", "max_budget", "best_surplus",
    "valid", "deal", "n_deals", "price", "seller_surplus", "normalised_surplus", "buyer_surplus", "welfare_ratio",
    "top_buyer_deal", "exploration", "explored_share", "overshoots", "turns_used", "seller_bad_parses",
    "invalid_addresses", "buyer_bad_parses",
)
_FLAGS = ("valid", "deal", "top_buyer_deal")
_COUNTS = ("n_deals", "exploration", "overshoots", "turns_used", "seller_bad_parses", "invalid_addresses",
           "buyer_bad_parses")
MARKET_COLUMNS = (
    "market", "n", "n_errors", "deal_rate", "normalised_surplus", "normalised_surplus_sd", "n_surplus",
    "top_buyer_share", "exploration", "explored_share", "overshoots", "overshoot_rate", "turns_used",
    "welfare_ratio", "bad_parses_per_episode",
)


def best_surplus(budgets: list[float], cost: float, n_items: int) -> float:
    """The most the seller can gain: the ``n_items`` highest budgets minus the cost, positive parts only."""
    return float(sum(max(0.0, b - cost) for b in sorted(budgets, reverse=True)[:n_items]))


def is_top(budgets: list[float], buyer: int, n_items: int) -> bool:
    """Whether ``buyer``'s budget is among the ``n_items`` highest (ties count as top)."""
    return budgets[buyer] >= sorted(budgets, reverse=True)[n_items - 1]


def exploration(addressed: list[int | None], deal_turn: int | None) -> int:
    """Distinct buyers addressed up to and including seller turn ``deal_turn`` (1-based; None: the whole episode)."""
    upto = addressed if deal_turn is None else addressed[:deal_turn]
    return len({k for k in upto if k is not None})


def outcome_row(record: Mapping[str, Any]) -> dict[str, Any]:
    """One record as numbers (see :data:`OUTCOME_COLUMNS`); an error row is ``valid`` False with NaN outcomes."""
    cfg = record["config"]
    budgets = [float(b) for b in record["budgets"]]
    cost, n_items = float(record["cost"]), int(cfg["n_items"])
    best = best_surplus(budgets, cost, n_items)
    row: dict[str, Any] = {"scenario_key": record["scenario_key"], "market": record["market"],
                           "seed": int(record["seed"]), "n_buyers": len(budgets), "n_items": n_items,
                           "turn_budget": int(cfg["turn_budget"]), "cost": cost, "max_budget": max(budgets),
                           "best_surplus": best}
    out = record.get("outcome")
    if record.get("status") == "error" or not out:
        return {**row, "valid": False, **{c: math.nan for c in OUTCOME_COLUMNS if c not in row and c != "valid"}}
    deals = out["deals"]
    prices = [float(d["price"]) for d in deals]
    seller = sum(p - cost for p in prices)
    buyers = sum(budgets[d["buyer"]] - float(d["price"]) for d in deals)
    first = deals[0]["turn"] if deals else None
    explored = exploration(out["addressed"], first)
    return {**row, "valid": True, "deal": bool(deals), "n_deals": len(deals),
            "price": float(np.mean(prices)) if prices else math.nan, "seller_surplus": seller,
            "normalised_surplus": seller / best if best > 0 else math.nan, "buyer_surplus": buyers,
            "welfare_ratio": (seller + buyers) / best if best > 0 else math.nan,
            "top_buyer_deal": (sum(is_top(budgets, d["buyer"], n_items) for d in deals) == len(deals)) if deals
            else math.nan,
            "exploration": explored, "explored_share": explored / len(budgets),
            "overshoots": int(out["overshoots"]), "turns_used": int(out["seller_turns"]),
            "seller_bad_parses": int(out["seller_bad_parses"]), "invalid_addresses": int(out["invalid_addresses"]),
            "buyer_bad_parses": int(out["buyer_bad_parses"])}


def outcomes_frame(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per record, columns :data:`OUTCOME_COLUMNS`: flags as nullable booleans, counts as nullable
    integers (``<NA>`` on error rows; ``top_buyer_deal`` also without a deal), the rest floats."""
    df = pd.DataFrame([outcome_row(r) for r in records], columns=list(OUTCOME_COLUMNS))
    return df.astype({**dict.fromkeys(_FLAGS, "boolean"), **dict.fromkeys(_COUNTS, "Int64"), "seed": "int64",
                      "n_buyers": "int64", "n_items": "int64", "turn_budget": "int64"})


def _summary(df: pd.DataFrame) -> dict[str, float]:
    ok = df[df["valid"].astype(bool)]
    deal = ok["deal"].astype(bool)
    deals = ok[deal]
    surplus = ok.loc[ok["best_surplus"] > 0, "normalised_surplus"].astype(float)
    n_deals = int(ok["n_deals"].sum()) if len(ok) else 0
    nan = math.nan
    return {
        "n": len(ok), "n_errors": int((~df["valid"].astype(bool)).sum()),
        "deal_rate": float(deal.mean()) if len(ok) else nan,
        "normalised_surplus": float(surplus.mean()) if len(surplus) else nan,
        "normalised_surplus_sd": float(surplus.std(ddof=1)) if len(surplus) > 1 else nan,
        "n_surplus": len(surplus),
        "top_buyer_share": float(deals["top_buyer_deal"].astype(bool).mean()) if len(deals) else nan,
        "exploration": float(ok["exploration"].astype(float).mean()) if len(ok) else nan,
        "explored_share": float(ok["explored_share"].mean()) if len(ok) else nan,
        "overshoots": int(ok["overshoots"].sum()) if len(ok) else 0,
        "overshoot_rate": float(ok["overshoots"].sum()) / n_deals if n_deals else nan,
        "turns_used": float(ok["turns_used"].astype(float).mean()) if len(ok) else nan,
        "welfare_ratio": float(ok.loc[ok["best_surplus"] > 0, "welfare_ratio"].mean()) if len(surplus) else nan,
        "bad_parses_per_episode": float(ok["seller_bad_parses"].astype(float).mean()) if len(ok) else nan,
    }


def market_metrics(records_or_frame: Iterable[Mapping[str, Any]] | pd.DataFrame,
                   overall: bool = False) -> pd.DataFrame:
    """The metrics by market (columns :data:`MARKET_COLUMNS`, :data:`MARKETS` order, then unknown names sorted);
    with ``overall`` a last row ``market="all"`` pools every market.

    ``deal_rate`` and the means are over valid episodes; ``normalised_surplus`` (the seller's reward: 0 without a
    deal) and ``welfare_ratio`` over those with a positive best surplus; ``top_buyer_share`` over episodes with a
    deal; ``overshoot_rate`` per item sold; ``bad_parses_per_episode`` counts the seller's."""
    df = records_or_frame if isinstance(records_or_frame, pd.DataFrame) else outcomes_frame(records_or_frame)
    return by_market(df, MARKETS, _summary, MARKET_COLUMNS, overall)


def by_market(df: pd.DataFrame, known: Iterable[str], summary: Callable[[pd.DataFrame], dict[str, Any]],
              columns: Sequence[str], overall: bool = False) -> pd.DataFrame:
    """One row per market of ``df`` (``summary`` of its rows): the ``known`` markets in order, then unknown names
    sorted; with ``overall`` a last row ``market="all"`` of every row (shared with the multi-product market)."""
    known = list(known)
    present = set(df["market"])
    order = [m for m in known if m in present] + sorted(present - set(known))
    rows = [{"market": m, **summary(df[df["market"] == m])} for m in order]
    if overall:
        rows.append({"market": "all", **summary(df)})
    return pd.DataFrame(rows, columns=list(columns))
