"""Checking a game's episode records as read back from a file: the typed field checks every game shares.

Contract: a game's :meth:`~negolib.games.base.Game.check_record` raises :class:`RecordProblem` (the dotted field and
what is wrong with it) for the first problem of a decoded record; the reader adds the file and line. The helpers
here check one field each and return its value: JSON types exactly (a boolean is not a number, a float is not an
integer), numbers finite and in range. :func:`check_episode` checks what the three tool-calling games' records
share (the envelope: game, agents, status, turns, outcome) and :func:`check_scenario` that a record's scenario
fields are those of the scenario its key names.
"""

from __future__ import annotations

import json
import math
from collections.abc import Container, Mapping
from typing import Any

ROLES = ("seller", "buyer")
STATUSES = ("deal", "no_deal", "error")
"""A record's status: a finished episode with or without a deal, or an episode that failed (status ``error``)."""


class RecordProblem(ValueError):
    """One problem of a record: ``field`` (dotted, empty for the record itself) and ``problem``."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"field '{field}': {problem}" if field else problem)
        self.field, self.problem = field, problem


def show(value: Any) -> str:
    """``value`` as short one-line JSON for a message."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _get(obj: Mapping[str, Any], name: str, where: str) -> tuple[Any, str]:
    field = f"{where}.{name}" if where else name
    if name not in obj:
        raise RecordProblem(field, "is required")
    return obj[name], field


def mapping(obj: Mapping[str, Any], name: str, where: str = "", null: bool = False) -> Any:
    """``obj[name]``, a JSON object (or null when ``null``)."""
    v, field = _get(obj, name, where)
    if not (type(v) is dict or (null and v is None)):
        raise RecordProblem(field, f"must be a JSON object{' or null' if null else ''}, got {show(v)}")
    return v


def array(obj: Mapping[str, Any], name: str, where: str = "", length: int | None = None) -> list[Any]:
    """``obj[name]``, a JSON array (of ``length`` items when given)."""
    v, field = _get(obj, name, where)
    if type(v) is not list:
        raise RecordProblem(field, f"must be a JSON array, got {show(v)}")
    if length is not None and len(v) != length:
        raise RecordProblem(field, f"must have {length} items, got {len(v)}")
    return v


def string(obj: Mapping[str, Any], name: str, where: str = "", null: bool = False,
           choices: Container[str] | None = None) -> Any:
    """``obj[name]``, a string (one of ``choices`` when given; or null when ``null``)."""
    v, field = _get(obj, name, where)
    if null and v is None:
        return v
    if type(v) is not str:
        raise RecordProblem(field, f"must be a string{' or null' if null else ''}, got {show(v)}")
    if choices is not None and v not in choices:
        raise RecordProblem(field, f"must be one of {sorted(choices)}, got {show(v)}")  # type: ignore[call-overload]
    return v


def boolean(obj: Mapping[str, Any], name: str, where: str = "") -> bool:
    """``obj[name]``, a boolean."""
    v, field = _get(obj, name, where)
    if type(v) is not bool:
        raise RecordProblem(field, f"must be a boolean, got {show(v)}")
    return v


def integer(obj: Mapping[str, Any], name: str, where: str = "", lo: int | None = None, hi: int | None = None,
            null: bool = False) -> Any:
    """``obj[name]``, an integer in [``lo``, ``hi``] (or null when ``null``)."""
    v, field = _get(obj, name, where)
    if null and v is None:
        return v
    if type(v) is not int or (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f" in [{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
        raise RecordProblem(field, f"must be an integer{rng if lo is not None or hi is not None else ''}"
                                   f"{' or null' if null else ''}, got {show(v)}")
    return v


def number(obj: Mapping[str, Any], name: str, where: str = "", lo: float | None = None, hi: float | None = None,
           null: bool = False, positive: bool = False) -> Any:
    """``obj[name]``, a finite number in [``lo``, ``hi``] (> 0 when ``positive``; or null when ``null``)."""
    v, field = _get(obj, name, where)
    if null and v is None:
        return v
    ok = type(v) in (int, float) and math.isfinite(v)
    if ok and ((lo is not None and v < lo) or (hi is not None and v > hi) or (positive and v <= 0)):
        ok = False
    if not ok:
        what = "a finite number" + (" > 0" if positive else "")
        if lo is not None or hi is not None:
            what += f" in [{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
        raise RecordProblem(field, f"must be {what}{' or null' if null else ''}, got {show(v)}")
    return v


def require(ok: bool, field: str, problem: str) -> None:
    """Raise :class:`RecordProblem` (``field``, ``problem``) unless ``ok``."""
    if not ok:
        raise RecordProblem(field, problem)


def check_episode(record: Any, game: str) -> dict[str, Any] | None:
    """Check the envelope the tool-calling games' records share (the record is a JSON object of ``game``, names its
    agents, its play seed and a known status; an ``error`` record says why; ``turns`` is an array of objects whose
    ``turn`` is a positive integer and ``role`` a role) and return the outcome of a finished episode: a JSON
    object, or None for an error record (whose outcome is not read)."""
    require(type(record) is dict, "", f"the record must be a JSON object, got {show(record)}")
    require(record.get("game") == game, "game", f"must be {game!r}, got {show(record.get('game'))}")
    string(record, "scenario_key")
    string(record, "seller")
    string(record, "buyer")
    integer(record, "play_seed")
    status = string(record, "status", choices=STATUSES)
    for i, turn in enumerate(array(record, "turns")):
        require(type(turn) is dict, f"turns[{i}]", f"must be a JSON object, got {show(turn)}")
        integer(turn, "turn", f"turns[{i}]", lo=1)
        string(turn, "role", f"turns[{i}]", choices=ROLES)
    if status == "error":
        string(record, "error")
        mapping(record, "outcome", null=True)
        return None
    out = mapping(record, "outcome")
    return out


def check_scenario(record: Mapping[str, Any], expected: Mapping[str, Any]) -> None:
    """Every field of ``expected`` (the scenario fields of a record of the scenario its key names) holds the same
    value in ``record``: a record can not carry another cost, budget or config than its scenario's."""
    key = record.get("scenario_key")
    for name, want in expected.items():
        got = record.get(name, ...)
        if got is ...:
            raise RecordProblem(name, "is required")
        if got != want or type(got) is not type(want):
            raise RecordProblem(name, f"is {show(got)}, but scenario {key!r} has {show(want)}")


__all__ = ["ROLES", "STATUSES", "RecordProblem", "array", "boolean", "check_episode", "check_scenario", "integer",
           "mapping", "number", "require", "show", "string"]
