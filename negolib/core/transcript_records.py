"""One transcript record: its schema (version, key, statuses), the error a bad one raises, its validation and the
decoding of one JSONL line (:func:`validate_record`, :func:`decode_line`).

Validation is plain Python (notebooks read thousands of records): a fast check of the fields readers use, and on
failure a slow one that names the field. The store that reads and appends whole files of records is
:mod:`negolib.core.transcripts`, whose docstring says what a valid record is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

try:
    import orjson
except ImportError:  # a declared dependency; without it the standard library reads the same lines, slower
    orjson = None

from negolib.core.errors import NegolibError

SCHEMA_VERSION = 2
KEY_FIELDS = ("arm", "domain", "seed", "buyer")
COMPLETE = frozenset({"deal", "no_deal"})
STATUSES = frozenset({"deal", "no_deal", "error", "truncated"})
ROLES = frozenset({"seller", "buyer"})
DEFAULT_NO_DEAL_PENALTY = 0.3
EpisodeKey = tuple[str, str, int, str]


class TranscriptError(NegolibError, ValueError):
    """A transcript file that cannot be used as it stands; the message names the file and line."""

    def __init__(self, path: str | Path, line: int | None, problem: str) -> None:
        self.path, self.line, self.problem = str(path), line, problem
        super().__init__(f"{path}:{line}: {problem}" if line is not None else f"{path}: {problem}")


def record_key(rec: Mapping[str, Any]) -> EpisodeKey:
    """The (arm, domain, seed, buyer) key of a record."""
    return (str(rec["arm"]), str(rec["domain"]), int(rec["seed"]), str(rec["buyer"]))

# ---------------------------------------------------------------------------------------------
# Validation (plain Python: notebooks read thousands of records)
# ---------------------------------------------------------------------------------------------

class _Bad(Exception):
    """Internal: one problem, with the dotted field it is about."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(where, problem)
        self.where, self.problem = where, problem


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, dict):
        return "a JSON object"
    return type(value).__name__


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) or math.isfinite(value) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_num(v: Any) -> bool:
    """A finite number (a float subclass such as numpy's counts; a bool does not)."""
    return (isinstance(v, float) and math.isfinite(v)) or type(v) is int


_TOP_TYPES: tuple[tuple[str, type, str], ...] = (
    ("arm", str, "a string"), ("seller", str, "a string"), ("buyer", str, "a string"),
    ("domain", str, "a string"), ("seed", int, "an integer"), ("held_out", bool, "a boolean"),
    ("status", str, "a string"), ("config", dict, "a JSON object"), ("turns", list, "a JSON array"),
)
_OPTIONAL_TOP: tuple[tuple[str, tuple[type, ...], str], ...] = (
    ("error", (str, type(None)), "a string or null"),
    ("protocol_hash", (str, type(None)), "a string or null"),
    ("settings", (dict,), "a JSON object"), ("settings_fingerprint", (str,), "a string"),
    ("step", (int,), "an integer"), ("training", (dict,), "a JSON object"),
)
_TURN_KEYS = frozenset({"turn", "role", "raw", "prose", "action", "parse_error", "ledger", "invalid_terms",
                        "off_schema_terms", "input_tokens", "output_tokens", "latency_s"})
_OUTCOME_INTS = ("turns", "rounds", "seller_turns", "seller_bad_parses", "bad_parses")
_OUTCOME_OPTIONAL_INTS = ("invalid_accepts", "seller_invalid_accepts")  # schema 2, default 0


def _check_turn_slow(t: Any, where: str) -> None:
    """The precise problem of a turn that failed the fast check."""
    if not isinstance(t, dict):
        raise _Bad(where, f"must be a JSON object, got {_kind(t)}")
    missing = sorted(_TURN_KEYS - t.keys())
    if missing:
        raise _Bad(where, f"missing field(s) {missing}")
    for name, ok, what in (
        ("turn", lambda v: type(v) is int and v >= 1, "an integer >= 1"),
        ("role", lambda v: v in ROLES, "'seller' or 'buyer'"),
        ("raw", lambda v: type(v) is str, "a string"),
        ("prose", lambda v: type(v) is str, "a string"),
        ("action", lambda v: v is None or (type(v) is dict and type(v.get("action")) is str
                                           and type(v.get("terms", [])) is list), "null or an action object"),
        ("parse_error", lambda v: v is None or type(v) is str, "a string or null"),
        ("ledger", lambda v: type(v) is dict, "a JSON object"),
        ("invalid_terms", lambda v: type(v) is list, "a JSON array"),
        ("off_schema_terms", lambda v: type(v) is list, "a JSON array"),
        ("input_tokens", lambda v: type(v) is int and v >= 0, "an integer >= 0"),
        ("output_tokens", lambda v: type(v) is int and v >= 0, "an integer >= 0"),
        ("latency_s", lambda v: _is_num(v) and v >= 0, "a finite number >= 0"),
        ("invalid_accept", lambda v: type(v) is bool, "a boolean"),
    ):
        if name in t and not ok(t[name]):
            raise _Bad(f"{where}.{name}", f"must be {what}, got {_show(t[name])}")


def _check_turns(turns: list[Any]) -> None:
    for i, t in enumerate(turns):
        # fast path: one expression over the fields readers use; the slow path names the problem
        if not (type(t) is dict and _TURN_KEYS <= t.keys() and type(t["turn"]) is int and t["role"] in ROLES
                and type(t["raw"]) is str and type(t["prose"]) is str
                and (t["action"] is None or type(t["action"]) is dict) and type(t["ledger"]) is dict
                and (t["parse_error"] is None or type(t["parse_error"]) is str)
                and (isinstance(t["latency_s"], float) or type(t["latency_s"]) is int)
                and type(t["invalid_terms"]) is list and type(t["off_schema_terms"]) is list
                and type(t["input_tokens"]) is int and type(t["output_tokens"]) is int
                and type(t.get("invalid_accept", False)) is bool):
            _check_turn_slow(t, f"turns[{i}]")
        act = t["action"]
        if act is not None and (type(act.get("action")) is not str or type(act.get("terms", ())) not in (list, tuple)):
            _check_turn_slow(t, f"turns[{i}]")


def _check_outcome(out: dict[str, Any], status: str, penalty: float) -> None:
    deal = out.get("deal")
    if type(deal) is not bool:
        raise _Bad("outcome.deal", f"must be a boolean, got {_show(deal)}")
    if (status == "deal") != deal and status in COMPLETE:
        raise _Bad("outcome.deal", f"is {_show(deal)} but status is {status!r}")
    for name in ("seller_utility", "buyer_utility"):
        if name not in out:
            raise _Bad(f"outcome.{name}", "is required")
        u = out[name]
        if u is None:
            if deal:
                raise _Bad(f"outcome.{name}", "must be a number in [0, 1] on a deal, got null")
        elif not (_is_num(u) and 0.0 <= u <= 1.0):
            raise _Bad(f"outcome.{name}", f"U~ must be in [0, 1] (or null without a deal), got {_show(u)}")
    s = out.get("score")
    if not (_is_num(s) and -penalty - 1e-12 <= s <= 1.0):
        raise _Bad("outcome.score", f"S must be a number in [-{penalty:g}, 1], got {_show(s)}")
    want = out["seller_utility"] if deal else -penalty
    if want is not None and abs(s - want) > 1e-9:
        raise _Bad("outcome.score", f"S is {s!r} but Eq. 1 gives {want!r} (the seller's U~ on a deal, "
                                    f"-{penalty:g} without)")
    if not _is_num(out.get("reward")):
        raise _Bad("outcome.reward", f"must be a finite number, got {_show(out.get('reward'))}")
    for name in _OUTCOME_INTS:
        v = out.get(name)
        if type(v) is not int or v < 0:
            raise _Bad(f"outcome.{name}", f"must be an integer >= 0, got {_show(v)}")
    for name in _OUTCOME_OPTIONAL_INTS:
        v = out.get(name, 0)
        if type(v) is not int or v < 0:
            raise _Bad(f"outcome.{name}", f"must be an integer >= 0, got {_show(v)}")
    if type(out.get("final_ledger")) is not dict:
        raise _Bad("outcome.final_ledger", f"must be a JSON object, got {_show(out.get('final_ledger'))}")
    if type(out.get("accept_with_terms", False)) is not bool:
        raise _Bad("outcome.accept_with_terms", f"must be a boolean, got {_show(out['accept_with_terms'])}")
    if out.get("closed_by") is not None and out["closed_by"] not in ROLES:
        raise _Bad("outcome.closed_by", f"must be 'seller', 'buyer' or null, got {_show(out['closed_by'])}")


def _check_record(rec: Any) -> None:
    """Raise :class:`_Bad` on the first problem of one decoded line."""
    if not isinstance(rec, dict):
        raise _Bad("<line>", f"must be a JSON object (one episode record), got {_kind(rec)}")
    schema = rec.get("schema")
    if schema != SCHEMA_VERSION or type(schema) is not int:
        raise _Bad("schema", f"schema {_show(schema)}, this negolib reads schema {SCHEMA_VERSION} "
                   "(records of another version were played under other rules: play them again into a new file)")
    for name, tp, what in _TOP_TYPES:
        if name not in rec:
            raise _Bad(name, "is required")
        v = rec[name]
        if type(v) is not tp:
            raise _Bad(name, f"must be {what}, got {_show(v)}")
    for name, tps, what in _OPTIONAL_TOP:
        if name in rec and type(rec[name]) not in tps:
            raise _Bad(name, f"must be {what}, got {_show(rec[name])}")
    status = rec["status"]
    if status not in STATUSES:
        raise _Bad("status", f"unknown status {status!r}; known: {sorted(STATUSES)}")
    _check_turns(rec["turns"])
    out = rec.get("outcome", ...)
    if out is ...:
        raise _Bad("outcome", "is required (null for an episode that did not finish)")
    if out is None:
        if status in COMPLETE:
            raise _Bad("outcome", f"a {status!r} record needs an outcome object, got null")
        return
    if type(out) is not dict:
        raise _Bad("outcome", f"must be a JSON object or null, got {_kind(out)} {_show(out)}")
    penalty = rec["config"].get("no_deal_penalty", DEFAULT_NO_DEAL_PENALTY)
    if not (_is_num(penalty) and 0 <= penalty <= 1):
        raise _Bad("config.no_deal_penalty", f"must be a number in [0, 1], got {_show(penalty)}")
    _check_outcome(out, status, float(penalty))


def validate_record(rec: Any, source: str = "<record>", line: int | None = None) -> dict[str, Any]:
    """Check one transcript record (see the module docstring); returns it, or raises
    :class:`TranscriptError` naming ``source``, ``line`` and the field."""
    try:
        _check_record(rec)
    except _Bad as bad:
        where = "" if bad.where == "<line>" else f"field '{bad.where}': "
        raise TranscriptError(source, line, where + bad.problem) from None
    return rec


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid JSON value")


_STRICT_DECODE = json.JSONDecoder(parse_constant=_reject_constant).decode


def decode_line(raw: bytes, path: str | Path, lineno: int) -> Any:
    """One JSON line as Python values: strict JSON (no NaN or Infinity), valid UTF-8. orjson decodes when it can
    (about twice as fast as the standard library on a paper-scale evaluation); any line it refuses goes through the
    standard library's decoder, which either reads it (a lone surrogate) or raises the :class:`TranscriptError`
    naming ``path`` and ``lineno``. orjson reads an integer beyond 64 bits as a float: no field of a valid record
    holds one, and :func:`validate_record` checks every integer field's type, so such a line fails validation
    (naming the field) instead of reading as another number."""
    if orjson is not None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TranscriptError(path, lineno, f"not valid UTF-8 ({exc.reason} at byte {exc.start} of the line)") from None
    try:
        return _STRICT_DECODE(text)
    except (json.JSONDecodeError, ValueError) as exc:
        raise TranscriptError(path, lineno, f"corrupt record: {exc}") from None


__all__ = ["COMPLETE", "DEFAULT_NO_DEAL_PENALTY", "KEY_FIELDS", "ROLES", "SCHEMA_VERSION", "STATUSES", "EpisodeKey",
           "TranscriptError", "decode_line", "record_key", "validate_record"]
