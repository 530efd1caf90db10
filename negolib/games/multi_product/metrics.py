"""Metrics of the multi-product market, per episode and by market (the source paper's three families).

Contract: :func:`outcomes_frame` reads episode records (error rows included) into one numeric row per episode;
:func:`market_metrics` aggregates them by market. Constraint adherence: the share of seller messages that were
valid and broke no constraint, with counts per kind (bad parses, offers of sold products, offers to buyers who had
bought, prices below cost) and the realised sales re-checked (no product sold twice, none below cost). Surplus:
revenue over the best feasible revenue, seller surplus over the best welfare (the reward). Allocation quality:
realised welfare over the welfare-optimal assignment (:mod:`.oracle`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from negolib.games.multi_buyer.metrics import by_market
from negolib.games.multi_product.scenarios import MARKETS

OUTCOME_COLUMNS = (
    "scenario_key", "market", "seed", "n_products", "n_buyers", "turn_budget", "best_welfare", "best_revenue",
    "valid", "deal", "n_sales", "messages", "valid_messages", "bad_parses", "offers_sold_product",
    "offers_to_buyer_who_bought", "offers_below_cost", "constraint_adherence", "sold_twice", "sales_below_cost",
    "revenue", "revenue_ratio", "seller_surplus", "normalised_surplus", "welfare", "allocation_quality",
    "buyer_surplus", "overshoots",
)
_FLAGS = ("valid", "deal")
_COUNTS = ("n_sales", "messages", "valid_messages", "bad_parses", "offers_sold_product", "offers_to_buyer_who_bought",
           "offers_below_cost", "sold_twice", "sales_below_cost", "overshoots")
MARKET_COLUMNS = (
    "market", "n", "n_errors", "deal_rate", "sales_per_episode", "constraint_adherence", "bad_parses",
    "offers_sold_product", "offers_to_buyer_who_bought", "offers_below_cost", "sold_twice", "sales_below_cost",
    "revenue_ratio", "normalised_surplus", "normalised_surplus_sd", "allocation_quality", "overshoots",
)


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


def outcome_row(record: Mapping[str, Any]) -> dict[str, Any]:
    """One record as numbers (see :data:`OUTCOME_COLUMNS`); an error row is ``valid`` False with NaN outcomes."""
    cfg = record["config"]
    costs = [float(c) for c in record["costs"]]
    vals = [[float(v) for v in row] for row in record["valuations"]]
    row: dict[str, Any] = {"scenario_key": record["scenario_key"], "market": record["market"],
                           "seed": int(record["seed"]), "n_products": len(costs), "n_buyers": len(vals),
                           "turn_budget": int(cfg["turn_budget"]), "best_welfare": float(record["best_welfare"]),
                           "best_revenue": float(record["best_revenue"])}
    out = record.get("outcome")
    if record.get("status") == "error" or not out:
        return {**row, "valid": False, **{c: math.nan for c in OUTCOME_COLUMNS if c not in row and c != "valid"}}
    sales = out["sales"]
    revenue = sum(float(s["price"]) for s in sales)
    surplus = sum(float(s["price"]) - costs[s["product"]] for s in sales)
    welfare = sum(vals[s["buyer"]][s["product"]] - costs[s["product"]] for s in sales)
    times = Counter(s["product"] for s in sales)
    v = out["violations"]
    messages = int(out["seller_turns"])
    return {**row, "valid": True, "deal": bool(sales), "n_sales": len(sales), "messages": messages,
            "valid_messages": int(out["valid_messages"]), "bad_parses": int(out["bad_parses"]),
            "offers_sold_product": int(v["sold_product"]), "offers_to_buyer_who_bought": int(v["buyer_bought"]),
            "offers_below_cost": int(v["below_cost"]),
            "constraint_adherence": _ratio(int(out["valid_messages"]), messages),
            "sold_twice": sum(n - 1 for n in times.values()),
            "sales_below_cost": sum(float(s["price"]) < costs[s["product"]] for s in sales),
            "revenue": revenue, "revenue_ratio": _ratio(revenue, row["best_revenue"]), "seller_surplus": surplus,
            "normalised_surplus": _ratio(surplus, row["best_welfare"]), "welfare": welfare,
            "allocation_quality": _ratio(welfare, row["best_welfare"]),
            "buyer_surplus": welfare - surplus, "overshoots": int(out["overshoots"])}


def outcomes_frame(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per record, columns :data:`OUTCOME_COLUMNS`: flags as nullable booleans, counts as nullable
    integers (``<NA>`` on error rows), the rest floats (ratios NaN when their denominator is 0)."""
    df = pd.DataFrame([outcome_row(r) for r in records], columns=list(OUTCOME_COLUMNS))
    return df.astype({**dict.fromkeys(_FLAGS, "boolean"), **dict.fromkeys(_COUNTS, "Int64"), "seed": "int64",
                      "n_products": "int64", "n_buyers": "int64", "turn_budget": "int64"})


def _summary(df: pd.DataFrame) -> dict[str, float]:
    ok = df[df["valid"].astype(bool)]
    nan = math.nan

    def mean(col: str) -> float:
        x = ok[col].astype(float).dropna()
        return float(x.mean()) if len(x) else nan

    def total(col: str) -> int:
        return int(ok[col].sum()) if len(ok) else 0

    messages = total("messages")
    surplus = ok["normalised_surplus"].astype(float).dropna()
    return {
        "n": len(ok), "n_errors": int((~df["valid"].astype(bool)).sum()),
        "deal_rate": mean("deal"), "sales_per_episode": mean("n_sales"),
        "constraint_adherence": total("valid_messages") / messages if messages else nan,
        "bad_parses": total("bad_parses"), "offers_sold_product": total("offers_sold_product"),
        "offers_to_buyer_who_bought": total("offers_to_buyer_who_bought"),
        "offers_below_cost": total("offers_below_cost"),
        "sold_twice": total("sold_twice"), "sales_below_cost": total("sales_below_cost"),
        "revenue_ratio": mean("revenue_ratio"), "normalised_surplus": float(surplus.mean()) if len(surplus) else nan,
        "normalised_surplus_sd": float(surplus.std(ddof=1)) if len(surplus) > 1 else nan,
        "allocation_quality": mean("allocation_quality"), "overshoots": total("overshoots"),
    }


def market_metrics(records_or_frame: Iterable[Mapping[str, Any]] | pd.DataFrame,
                   overall: bool = False) -> pd.DataFrame:
    """The metrics by market (columns :data:`MARKET_COLUMNS`, :data:`MARKETS` order, then unknown names sorted);
    with ``overall`` a last row ``market="all"`` pools every market.

    ``constraint_adherence`` pools the messages (valid ones over all); counts are totals; the ratios are means over
    valid episodes whose denominator is positive."""
    df = records_or_frame if isinstance(records_or_frame, pd.DataFrame) else outcomes_frame(records_or_frame)
    return by_market(df, MARKETS, _summary, MARKET_COLUMNS, overall)
