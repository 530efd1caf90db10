"""Checking a record of the multi-product market read back from a tournament file.

Contract: :func:`check_outcome` raises :class:`~negolib.games.records.RecordProblem` for the first problem of a
finished episode's outcome (the envelope and the scenario fields are checked by
:meth:`~negolib.games.multi_buyer.game.MarketGame.check_record`): each sale is of a product of the market to one of
its buyers, at a positive price up to :data:`.protocol.MAX_PRICE`, on a turn within the budget, flagged as an
overshoot exactly when the price is above that buyer's valuation; no product is sold twice and no buyer buys twice;
the counts are non-negative integers and add up.
"""

from __future__ import annotations

from typing import Any

from negolib.games.multi_product.protocol import MAX_PRICE
from negolib.games.records import array, boolean, integer, mapping, number, require, show, string

ENDS = ("budget", "sold_out")
COUNTS = ("valid_messages", "bad_parses", "buyer_turns", "buyer_bad_parses")


def check_outcome(record: dict[str, Any], out: dict[str, Any]) -> None:
    """Check the outcome ``out`` of ``record`` (a finished episode whose scenario fields were checked)."""
    vals, budget = record["valuations"], record["config"]["turn_budget"]
    n_buyers, n_products = len(vals), len(record["costs"])
    sales = array(out, "sales", "outcome")
    require(bool(sales) == (record["status"] == "deal"), "outcome.sales",
            f"{len(sales)} sale(s), but the status is {record['status']!r}")
    buyers, products = set(), set()
    for i, s in enumerate(sales):
        where = f"outcome.sales[{i}]"
        require(type(s) is dict, where, f"must be a JSON object, got {show(s)}")
        b = integer(s, "buyer", where, lo=0, hi=n_buyers - 1)
        k = integer(s, "product", where, lo=0, hi=n_products - 1)
        require(b not in buyers, f"{where}.buyer", f"buyer {b} already bought")
        require(k not in products, f"{where}.product", f"product {k} already sold")
        buyers.add(b)
        products.add(k)
        price = number(s, "price", where, hi=MAX_PRICE, positive=True)
        integer(s, "turn", where, lo=1, hi=budget)
        over = boolean(s, "overshoot", where)
        require(over == (price > vals[b][k]), f"{where}.overshoot",
                f"is {over}, but the price is {price!r} and the buyer's valuation {vals[b][k]!r}")
    string(out, "end", "outcome", choices=ENDS)
    integer(out, "seller_turns", "outcome", lo=0, hi=budget)
    for name in COUNTS:
        integer(out, name, "outcome", lo=0)
    n_over = integer(out, "overshoots", "outcome", lo=0)
    require(n_over == sum(s["overshoot"] for s in sales), "outcome.overshoots",
            f"is {n_over}, but {sum(s['overshoot'] for s in sales)} sale(s) overshoot")
    for name in ("bad_parts", "violations"):
        counts = mapping(out, name, "outcome")
        for kind in counts:
            integer(counts, kind, f"outcome.{name}", lo=0)


__all__ = ["check_outcome"]
