"""Checking a record of the paper's game read back from a tournament file.

Contract: :func:`check_record` raises :class:`~negolib.games.records.RecordProblem` for the first problem of a
record: the transcript schema (:func:`negolib.core.transcripts.validate_record`: types, U~ in [0, 1], S by Eq. 1), then
the game's invariants: the key names the record's own domain and seed, the record was played under the game's
environment config, and on a deal each party's U~ is that of the final ledger in the scenario the key names (an
imported scenario's: found in ``scenarios``, discounted at the closing turn's normalised time).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from negolib.core.transcripts import TranscriptError, validate_record
from negolib.games.multi_issue.domains import load_domains
from negolib.games.multi_issue.env import EnvConfig
from negolib.games.multi_issue.scenarios import Scenario, make_scenario
from negolib.games.multi_issue.utility import both_utilities, discounted
from negolib.games.records import RecordProblem, require, show

UTILITY_TOL = 1e-9
"""A recorded U~ may differ from the one recomputed from its ledger by this much (float rounding)."""


def check_record(record: Any, config: EnvConfig, scenarios: dict[str, Scenario]) -> None:
    """Check one record (see the module docstring); ``scenarios`` caches the scenarios by key across calls."""
    try:
        validate_record(record)
    except TranscriptError as exc:
        raise RecordProblem("", exc.problem) from None
    key = record.get("scenario_key")
    want_key = f"{record['domain']}|{record['seed']}"
    require(key == want_key, "scenario_key", f"is {show(key)}, but the record is of {want_key!r}")
    fixed = key in scenarios and scenarios[key].domain.imported  # an imported scenario the game plays
    domains = {} if fixed else load_domains()
    require(fixed or record["domain"] in domains, "domain", f"unknown domain {show(record['domain'])}")
    held_out = scenarios[key].domain.held_out if fixed else domains[record["domain"]].held_out
    require(record["held_out"] == held_out, "held_out",
            f"is {show(record['held_out'])}, but domain {record['domain']!r} says otherwise")
    want = asdict(config)
    require(record["config"] == want, "config", f"is {show(record['config'])}, but the game plays {show(want)}")
    out = record["outcome"]
    if record["status"] != "deal" or not out:
        return
    if key not in scenarios:
        scenarios[key] = make_scenario(domains[record["domain"]], record["seed"])
    try:
        sc = scenarios[key]
        time = out["turns"] / config.max_turns
        utilities = tuple(discounted(u, p.discount, time)
                          for u, p in zip(both_utilities(sc, out["final_ledger"]), (sc.seller, sc.buyer)))
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordProblem("outcome.final_ledger", f"is not a contract of {record['domain']!r} ({exc})") from None
    for name, u in zip(("seller_utility", "buyer_utility"), utilities):
        require(abs(out[name] - u) <= UTILITY_TOL, f"outcome.{name}",
                f"is {out[name]!r}, but the final ledger gives {u!r}")


__all__ = ["UTILITY_TOL", "check_record"]
