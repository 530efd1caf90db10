"""Small read-only views of a transcript record (:meth:`negolib.games.multi_issue.env.Episode.record`): the fields
that key an episode and the seller's turns, shared by the diagnostics, the reading samples and the training curves."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Record = Mapping[str, Any]
KEY_COLS = ["arm", "buyer", "domain", "seed"]


def episode_key(rec: Record) -> dict[str, Any]:
    """``{arm, buyer, domain, seed}`` of a record (the seed as an int)."""
    return {"arm": rec["arm"], "buyer": rec["buyer"], "domain": rec["domain"], "seed": int(rec["seed"])}


def seller_turns(rec: Record) -> list[Mapping[str, Any]]:
    """The record's seller turns, in order."""
    return [t for t in rec["turns"] if t["role"] == "seller"]


__all__ = ["KEY_COLS", "Record", "episode_key", "seller_turns"]
