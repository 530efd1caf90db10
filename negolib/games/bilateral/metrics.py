"""Metrics of bilateral price bargaining as Bergemann et al. report them, per episode and by price tier.

Contract: :func:`outcomes_frame` reads episode records (:meth:`~.env.Episode.record`, error rows included) into
one numeric row per episode; :func:`tier_metrics` aggregates them by tier (cheapest first): deal rate, the
seller's surplus share (price - cost) / (value - cost) over deals with a zone, individual-rationality
violations (a deal below cost or above value) and efficiency (trade exactly when the zone is non-empty; the
share of available gains realised). Frames hold identifiers and numbers only, never formatted strings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from negolib.games.bilateral.scenarios import TIERS

OUTCOME_COLUMNS = (
    "scenario_key", "tier", "seed", "scale", "cost", "value", "zone", "has_zone", "valid", "deal", "price",
    "surplus_share", "seller_ir_violation", "buyer_ir_violation", "ir_violation", "efficient", "realised_gains",
    "available_gains", "walked_away", "turns", "seller_bad_parses", "buyer_bad_parses", "invalid_accepts",
)
_FLAGS = ("has_zone", "valid", "deal", "seller_ir_violation", "buyer_ir_violation", "ir_violation", "efficient",
          "walked_away")
_COUNTS = ("turns", "seller_bad_parses", "buyer_bad_parses", "invalid_accepts")
TIER_COLUMNS = (
    "tier", "scale", "n", "n_errors", "deal_rate", "surplus_share", "surplus_share_sd", "n_surplus",
    "ir_violations", "ir_violation_rate", "efficiency", "deal_rate_with_zone", "no_deal_rate_without_zone",
    "gains_realised", "bad_parses_per_episode",
)


def surplus_share(price: float, cost: float, value: float) -> float:
    """The seller's share of the realised gains from trade, ``(price - cost) / (value - cost)``; NaN without
    a zone (value <= cost). Not clipped: an IR-violating price gives a share outside [0, 1]."""
    zone = value - cost
    return (price - cost) / zone if zone > 0 else math.nan


def outcome_row(record: Mapping[str, Any]) -> dict[str, Any]:
    """One record as numbers (see :data:`OUTCOME_COLUMNS`); an error row is ``valid`` False with NaN outcomes."""
    cost, value = float(record["cost"]), float(record["value"])
    zone = value - cost
    row: dict[str, Any] = {"scenario_key": record.get("scenario_key", f"{record['tier']}|{record['seed']}"),
                           "tier": record["tier"], "seed": int(record["seed"]),
                           "scale": float(record.get("scale", TIERS.get(record["tier"], math.nan))),
                           "cost": cost, "value": value, "zone": zone, "has_zone": zone > 0,
                           "available_gains": max(0.0, zone)}
    out = record.get("outcome")
    if record.get("status") == "error" or not out:
        nan = math.nan
        return {**row, "valid": False, "deal": nan, "price": nan, "surplus_share": nan,
                "seller_ir_violation": nan, "buyer_ir_violation": nan, "ir_violation": nan, "efficient": nan,
                "realised_gains": nan, "walked_away": nan, "turns": nan, "seller_bad_parses": nan,
                "buyer_bad_parses": nan, "invalid_accepts": nan}
    deal = bool(out["deal"])
    price = float(out["price"]) if deal else math.nan
    below, above = deal and price < cost, deal and price > value
    return {**row, "valid": True, "deal": deal, "price": price,
            "surplus_share": surplus_share(price, cost, value) if deal else math.nan,
            "seller_ir_violation": below, "buyer_ir_violation": above, "ir_violation": below or above,
            "efficient": deal == (zone > 0), "realised_gains": zone if deal else 0.0,
            "walked_away": out.get("walked_away_by") is not None, "turns": int(out["turns"]),
            "seller_bad_parses": int(out["seller_bad_parses"]), "buyer_bad_parses": int(out["buyer_bad_parses"]),
            "invalid_accepts": int(out["seller_invalid_accepts"]) + int(out["buyer_invalid_accepts"])}


def outcomes_frame(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per record, columns :data:`OUTCOME_COLUMNS`: flags as nullable booleans and counts as nullable
    integers (missing, ``<NA>``, on error rows), the rest floats."""
    df = pd.DataFrame([outcome_row(r) for r in records], columns=list(OUTCOME_COLUMNS))
    return df.astype({**dict.fromkeys(_FLAGS, "boolean"), **dict.fromkeys(_COUNTS, "Int64"), "seed": "int64"})


def _summary(df: pd.DataFrame) -> dict[str, float]:
    ok = df[df["valid"].astype(bool)]
    deal = ok["deal"].astype(bool)
    deals = ok[deal]
    shares = deals.loc[deals["has_zone"].astype(bool), "surplus_share"].astype(float)
    zone = ok["has_zone"].astype(bool)
    n_viol = int(deals["ir_violation"].astype(bool).sum())
    available = float(ok["available_gains"].sum())
    nan = math.nan
    return {
        "n": len(ok), "n_errors": int((~df["valid"].astype(bool)).sum()),
        "deal_rate": float(deal.mean()) if len(ok) else nan,
        "surplus_share": float(shares.mean()) if len(shares) else nan,
        "surplus_share_sd": float(shares.std(ddof=1)) if len(shares) > 1 else nan,
        "n_surplus": len(shares),
        "ir_violations": n_viol,
        "ir_violation_rate": n_viol / len(deals) if len(deals) else nan,
        "efficiency": float(ok["efficient"].astype(bool).mean()) if len(ok) else nan,
        "deal_rate_with_zone": float(deal[zone].mean()) if zone.any() else nan,
        "no_deal_rate_without_zone": float((~deal[~zone]).mean()) if (~zone).any() else nan,
        "gains_realised": float(ok["realised_gains"].sum()) / available if available > 0 else nan,
        "bad_parses_per_episode": (float((ok["seller_bad_parses"] + ok["buyer_bad_parses"]).mean())
                                   if len(ok) else nan),
    }


def tier_metrics(records_or_frame: Iterable[Mapping[str, Any]] | pd.DataFrame,
                 overall: bool = False) -> pd.DataFrame:
    """The metrics by price tier, cheapest first (columns :data:`TIER_COLUMNS`); with ``overall`` a last row
    ``tier="all"`` (scale NaN) pools every tier.

    ``deal_rate``, ``efficiency`` and the rates are fractions of valid episodes; ``surplus_share`` is the mean
    over deals with a zone and ``ir_violation_rate`` a fraction of deals; ``gains_realised`` is the sum of
    value - cost over deals divided by the sum of positive zones."""
    df = records_or_frame if isinstance(records_or_frame, pd.DataFrame) else outcomes_frame(records_or_frame)
    order = [t for t in TIERS if t in set(df["tier"])] + sorted(set(df["tier"]) - set(TIERS))
    rows = [{"tier": t, "scale": TIERS.get(t, np.nan), **_summary(df[df["tier"] == t])} for t in order]
    if overall:
        rows.append({"tier": "all", "scale": np.nan, **_summary(df)})
    return pd.DataFrame(rows, columns=list(TIER_COLUMNS))
