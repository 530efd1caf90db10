"""Checking a record of bilateral price bargaining read back from a tournament file.

Contract: :func:`check_record` raises :class:`~negolib.games.records.RecordProblem` for the first problem of a
record: the shared envelope (:func:`negolib.games.records.check_episode`), the scenario fields of the scenario its
key names (tier, seed, scale, cost, value: a pure function of the key) and the game's config, the turns (1, 2, ...
up to the deadline, standing offers positive prices up to :data:`.tools.MAX_PRICE`) and the outcome: a deal has a
price, which is the standing offer the closing party accepted; without one, no price; the turn counts add up.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from negolib.games.bilateral.env import BilateralConfig
from negolib.games.bilateral.scenarios import make_scenario, parse_key
from negolib.games.bilateral.tools import MAX_PRICE
from negolib.games.records import (
    ROLES,
    RecordProblem,
    boolean,
    check_episode,
    check_scenario,
    integer,
    number,
    require,
    string,
)

ENDS = ("accept", "walk_away", "deadline")
COUNTS = ("seller_turns", "buyer_turns", "seller_bad_parses", "buyer_bad_parses", "seller_invalid_accepts",
          "buyer_invalid_accepts", "seller_prose_only", "buyer_prose_only")


def _scenario_fields(key: str, config: BilateralConfig) -> dict[str, Any]:
    try:
        sc = make_scenario(*parse_key(key))
    except (ValueError, KeyError) as exc:
        raise RecordProblem("scenario_key", f"names no scenario of the game ({exc})") from None
    return {"tier": sc.tier, "seed": sc.seed, "scale": sc.scale, "cost": sc.cost, "value": sc.value,
            "config": asdict(config)}


def check_record(record: Any, config: BilateralConfig) -> None:
    """Check one record (see the module docstring) of a game playing ``config``."""
    out = check_episode(record, "bilateral")
    check_scenario(record, _scenario_fields(record["scenario_key"], config))
    turns = record["turns"]
    require(len(turns) <= config.deadline_turns, "turns",
            f"{len(turns)} turns, past the deadline of {config.deadline_turns}")
    for i, t in enumerate(turns):
        where = f"turns[{i}]"
        require(t["turn"] == i + 1, f"{where}.turn", f"must be {i + 1}, got {t['turn']!r}")
        string(t, "message", where)
        boolean(t, "invalid_accept", where)
        for name in ("seller_offer", "buyer_offer"):
            number(t, name, where, hi=MAX_PRICE, positive=True, null=True)
    if out is None:
        return
    deal = boolean(out, "deal", "outcome")
    require(deal == (record["status"] == "deal"), "outcome.deal", f"is {deal}, but the status is {record['status']!r}")
    end = string(out, "end", "outcome", choices=ENDS)
    require(deal == (end == "accept"), "outcome.end", f"is {end!r}, {'with' if deal else 'without'} a deal")
    price = number(out, "price", "outcome", hi=MAX_PRICE, positive=True, null=not deal)
    require(deal or price is None, "outcome.price", f"must be null without a deal, got {price!r}")
    closed_by = string(out, "closed_by", "outcome", null=not deal, choices=ROLES)
    require(deal or closed_by is None, "outcome.closed_by", f"must be null without a deal, got {closed_by!r}")
    walked = string(out, "walked_away_by", "outcome", null=True, choices=ROLES)
    require((walked is not None) == (end == "walk_away"), "outcome.walked_away_by",
            f"is {walked!r}, but the episode ended by {end!r}")
    offers = {r: number(out, f"{r}_offer", "outcome", hi=MAX_PRICE, positive=True, null=True) for r in ROLES}
    if deal:
        accepted = offers["buyer" if closed_by == "seller" else "seller"]
        require(price == accepted, "outcome.price",
                f"is {price!r}, but the {closed_by} accepted the standing offer {accepted!r}")
    n = integer(out, "turns", "outcome", lo=0)
    require(n == len(turns), "outcome.turns", f"is {n}, but the record has {len(turns)} turns")
    counts = {name: integer(out, name, "outcome", lo=0, hi=n) for name in COUNTS}
    require(counts["seller_turns"] + counts["buyer_turns"] == n, "outcome.seller_turns",
            f"seller_turns {counts['seller_turns']} + buyer_turns {counts['buyer_turns']} is not turns {n}")


__all__ = ["check_record"]
