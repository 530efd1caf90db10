"""Checking a record of the multi-buyer market read back from a tournament file.

Contract: :func:`check_outcome` raises :class:`~negolib.games.records.RecordProblem` for the first problem of a
finished episode's outcome (the envelope and the scenario fields are checked by
:meth:`~negolib.games.multi_buyer.game.MarketGame.check_record`): each deal is with a buyer of the market, at a
positive price up to :data:`.tools.MAX_PRICE`, on a turn within the budget, flagged as an overshoot exactly when
the price is above that buyer's budget; no buyer buys twice, no more deals than items; the counts add up.
"""

from __future__ import annotations

from typing import Any

from negolib.games.multi_buyer.tools import MAX_PRICE
from negolib.games.records import array, boolean, integer, number, require, show, string

ENDS = ("sold_out", "budget")
COUNTS = ("seller_bad_parses", "invalid_addresses", "buyer_turns", "buyer_bad_parses", "buyer_invalid_accepts",
          "buyer_prose_only")


def check_outcome(record: dict[str, Any], out: dict[str, Any]) -> None:
    """Check the outcome ``out`` of ``record`` (a finished episode whose scenario fields were checked)."""
    cfg, budgets = record["config"], record["budgets"]
    n_buyers, budget = len(budgets), cfg["turn_budget"]
    deal = boolean(out, "deal", "outcome")
    require(deal == (record["status"] == "deal"), "outcome.deal", f"is {deal}, but the status is {record['status']!r}")
    deals = array(out, "deals", "outcome")
    require(deal == bool(deals), "outcome.deals", f"{len(deals)} deal(s), but outcome.deal is {deal}")
    require(len(deals) <= cfg["n_items"], "outcome.deals", f"{len(deals)} deals of {cfg['n_items']} item(s)")
    buyers = set()
    for i, d in enumerate(deals):
        where = f"outcome.deals[{i}]"
        require(type(d) is dict, where, f"must be a JSON object, got {show(d)}")
        b = integer(d, "buyer", where, lo=0, hi=n_buyers - 1)
        require(b not in buyers, f"{where}.buyer", f"buyer {b} already bought")
        buyers.add(b)
        price = number(d, "price", where, hi=MAX_PRICE, positive=True)
        integer(d, "turn", where, lo=1, hi=budget)
        over = boolean(d, "overshoot", where)
        require(over == (price > budgets[b]), f"{where}.overshoot", f"is {over}, but the price is {price!r} and the "
                f"buyer's budget {budgets[b]!r}")
    string(out, "end", "outcome", choices=ENDS)
    seller_turns = integer(out, "seller_turns", "outcome", lo=0, hi=budget)
    for name in COUNTS:
        integer(out, name, "outcome", lo=0)
    n_over = integer(out, "overshoots", "outcome", lo=0)
    require(n_over == sum(d["overshoot"] for d in deals), "outcome.overshoots", f"is {n_over}, but "
            f"{sum(d['overshoot'] for d in deals)} deal(s) overshoot")
    addressed = array(out, "addressed", "outcome", length=seller_turns)
    for i, a in enumerate(addressed):
        require(a is None or (type(a) is int and 0 <= a < n_buyers), f"outcome.addressed[{i}]",
                f"must be a buyer index in [0, {n_buyers - 1}] or null, got {show(a)}")


__all__ = ["check_outcome"]
