"""The turn protocol: actions, the parser, and ledger updates [paper §3].

A turn is prose followed by one JSON action::

    {"action": "COUNTER", "terms": [{"name": "price", "value": 40}], "notes": "..."}
    {"action": "ACCEPT"}

The parser is *strict* about what counts as a valid action (the action word, the shape of the
terms, the allowed keys) and *lenient* about surrounding text (code fences, prose before or after,
an identical action repeated). Anything else is a bad parse: the prose still reaches the
counterpart and the ledger is unchanged. Only parsed actions change the ledger, so prose that
"announces" a different ledger (prompt injection) has no effect.

Hostile output stays inside its own turn: a JSON object with a repeated key (``"action"`` twice) or a
number too long for Python's int conversion is a bad parse, never "last key wins" or a crash; a
number that is not a finite float (a 400-digit integer) is an invalid term, not an overflow. What
the counterpart reads is cleaned by the games' one sanitiser (:func:`negolib.core.crossing.clean_prose`):
chat-template and tool-call tags (together, to a fixed point, so no tag can be rebuilt from pieces),
control, invisible, bidirectional-override and Unicode tag characters, odd line breaks made plain;
:func:`display_text` turns a party-named off-schema name or value into a short quoted-
safe single line (no brackets, bars, quotes or backticks), so it cannot pass for a ledger line or a
template tag. ``notes`` are private: they stay in the transcript and never reach the counterpart.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from negolib.core.crossing import clean_prose
from negolib.games.multi_issue.domains import Domain, Issue

ActionKind = Literal["COUNTER", "ACCEPT"]
ACTION_KEYS = frozenset({"action", "terms", "notes"})
TERM_KEYS = frozenset({"name", "value"})
MAX_TEXT_CHARS = 16_000
MAX_TERMS = 64
DISPLAY_CHARS = 40  # what one party names is shown to the other cut to this many characters
_SCALARS = frozenset({str, int, float, bool})  # JSON decoding yields exactly these types

_DISPLAY_DROP_RE = re.compile(r'[<>\[\]{}|`"\\]')  # what could open a tag, a JSON object or a quote
_WS_RE = re.compile(r"\s+")


class Term(NamedTuple):
    """One named term as written by a party (value not yet checked against the schema)."""

    name: str
    value: Any


@dataclass(frozen=True)
class Action:
    """A parsed action. ``terms`` may accompany an ACCEPT (used only in training)."""

    kind: ActionKind
    terms: tuple[Term, ...] = ()
    notes: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"action": self.kind, "terms": [{"name": t.name, "value": t.value}
                                                           for t in self.terms]}
        if self.notes:
            d["notes"] = self.notes
        return d


@dataclass(frozen=True)
class ParseResult:
    """The outcome of parsing one turn: the prose for the counterpart and an action or an error."""

    prose: str
    action: Action | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.action is not None


class _DuplicateKeys(dict):
    """A decoded JSON object that repeated a key (kept so the parser can refuse it by name)."""

    duplicates: tuple[str, ...] = ()


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook``: a plain dict, or a :class:`_DuplicateKeys` when a key repeats."""
    d = dict(pairs)
    if len(d) == len(pairs):
        return d
    seen: set[str] = set()
    repeated: set[str] = set()
    for k, _ in pairs:
        (repeated if k in seen else seen).add(k)
    dup = _DuplicateKeys(d)
    dup.duplicates = tuple(_short(k, 40) for k in sorted(repeated))
    return dup


_DECODER = json.JSONDecoder(object_pairs_hook=_object)


def _find_actions(text: str) -> tuple[list[tuple[int, int, dict[str, Any]]], str | None]:
    """Top-level JSON objects carrying an "action" key, as (start, end, obj); and why some '{' that
    looks like the start of an action failed to decode (None when none did)."""
    found, broken, pos = [], None, 0
    while True:
        start = text.find("{", pos)
        if start < 0:
            return found, broken
        try:
            obj, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, or the int-digit limit
            if broken is None:
                if not isinstance(exc, (json.JSONDecodeError, RecursionError)):
                    msg = str(exc)
                    broken = ("a number in the JSON has too many digits to read" if "digits" in msg
                              else f"unreadable JSON ({_short(msg)})")
                elif re.match(r'\{\s*"action"', text[start:start + 40]):
                    broken = "malformed or truncated JSON action"
            pos = start + 1
            continue
        if isinstance(obj, dict) and "action" in obj:
            found.append((start, end, obj))
        pos = end


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _validate(obj: dict[str, Any]) -> Action:
    if type(obj) is _DuplicateKeys:
        raise ValueError(f"duplicate keys {list(obj.duplicates)} in the JSON action")
    unknown = set(obj) - ACTION_KEYS
    if unknown:
        raise ValueError(f"unknown action keys {sorted(unknown)}; allowed {sorted(ACTION_KEYS)}")
    word = obj["action"]
    if not isinstance(word, str) or word.strip().upper() not in ("COUNTER", "ACCEPT"):
        raise ValueError(f"action must be 'COUNTER' or 'ACCEPT', got {word!r}")
    kind: ActionKind = word.strip().upper()  # type: ignore[assignment]
    raw_terms = obj.get("terms", [])
    if raw_terms is None and kind == "ACCEPT":
        raw_terms = []
    if kind == "COUNTER" and "terms" not in obj:
        raise ValueError("COUNTER needs a 'terms' list")
    if not isinstance(raw_terms, list):
        raise ValueError(f"'terms' must be a list of {{name, value}} objects, got {type(raw_terms).__name__}")
    if len(raw_terms) > MAX_TERMS:
        raise ValueError(f"too many terms ({len(raw_terms)} > {MAX_TERMS})")
    terms = []
    for i, t in enumerate(raw_terms):
        if type(t) is _DuplicateKeys:
            raise ValueError(f"terms[{i}] has duplicate keys {list(t.duplicates)}")
        if type(t) is not dict or t.keys() != TERM_KEYS:
            raise ValueError(f"terms[{i}] must be an object with exactly 'name' and 'value'")
        name, value = t["name"], t["value"]
        if type(name) is not str or not name.strip() or len(name) > 80:
            raise ValueError(f"terms[{i}].name must be a non-empty string")
        kind_of_value = type(value)
        if kind_of_value not in _SCALARS or (kind_of_value is str and len(value) > 200):
            raise ValueError(f"terms[{i}].value must be a string, number or boolean")
        if kind_of_value is float and not math.isfinite(value):
            raise ValueError(f"terms[{i}].value must be finite")
        terms.append(Term(name.strip(), value))
    notes = obj.get("notes", "")
    if notes is None:
        notes = ""
    if not isinstance(notes, str):
        raise ValueError("'notes' must be a string")
    return Action(kind, tuple(terms), notes)


def parse_action(text: str) -> ParseResult:
    """Parse one turn's raw text into counterpart-visible prose and exactly one action.

    Lenient: code fences, prose before and after the JSON, and an identical action repeated are
    accepted. Strict: the action word, allowed keys, the {name, value} term shape and value types.
    Conflicting actions, no action, malformed or truncated JSON, a repeated key and a number with
    too many digits to read are bad parses (error is set). Never raises on any ``str``.
    """
    if not isinstance(text, str):
        return ParseResult("", None, f"turn text must be a string, got {type(text).__name__}")
    truncated = len(text) > MAX_TEXT_CHARS
    body = text[:MAX_TEXT_CHARS]
    found, broken = _find_actions(body)
    if not found:
        err = broken or "no JSON action found"
        if truncated:
            err += f" (text cut at {MAX_TEXT_CHARS} characters)"
        return ParseResult(clean_prose(body), None, err)
    try:
        distinct = {json.dumps(obj, sort_keys=True) for _, _, obj in found} if len(found) > 1 else {""}
    except (RecursionError, ValueError):  # decodable but too deep to compare: not one clear action
        distinct = {"", "?"}
    prose = body
    for start, end, _ in reversed(found):
        prose = prose[:start] + prose[end:]
    prose = clean_prose(prose)
    if len(distinct) > 1:
        return ParseResult(prose, None, f"{len(found)} conflicting actions in one turn")
    try:
        action = _validate(found[0][2])
    except ValueError as exc:
        return ParseResult(prose, None, str(exc))
    return ParseResult(prose, action)


def canonical_value(issue: Issue, value: Any) -> tuple[bool, Any]:
    """(ok, canonical value) of a party's value for a schema issue; never raises.

    Continuous: a number or a numeric string ('$', ',' and '%' allowed) that is a finite float (an
    integer too large for a float, '1e400', 'nan' are not). Categorical and table: a level, matched
    case-insensitively (a table level that is an integer may be given as a number). Binary: a
    boolean or 'true'/'false'/'yes'/'no'.
    """
    if issue.kind == "continuous":
        kind_of_value = type(value)
        if kind_of_value is float or kind_of_value is int:  # the common case, straight from JSON
            try:
                x = float(value)
            except OverflowError:  # an int with ~310+ digits
                return False, None
            return (True, x) if math.isfinite(x) else (False, None)
        if not isinstance(value, str):  # bool, or anything that is not JSON
            return False, None
        s = value.strip().replace("$", "").replace(",", "").replace("%", "")
        try:
            x = float(s)
        except (ValueError, OverflowError):
            return False, None
        return (True, x) if math.isfinite(x) else (False, None)
    if issue.kind == "binary":
        if isinstance(value, bool):
            return True, value
        if isinstance(value, str) and value.strip().lower() in ("true", "yes", "false", "no"):
            return True, value.strip().lower() in ("true", "yes")
        return False, None
    if issue.kind == "table" and type(value) in (int, float) and math.isfinite(value) and value == int(value):
        value = str(int(value))  # an integer level of an imported numeric issue, written as a number
    if isinstance(value, str):
        want = value.strip().lower()
        for level in issue.levels:
            if level.lower() == want:
                return True, level
    return False, None


def _scalar_text(value: Any) -> str:
    """A JSON scalar as text (an int past Python's int-to-str digit limit does not raise)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    try:
        return str(value)
    except ValueError:  # an int beyond sys.get_int_max_str_digits()
        return "a number too long to show"


def display_text(value: Any, limit: int = DISPLAY_CHARS) -> str:
    """A party-named term name or value as the other party may read it, inside one line.

    Template tags, control, invisible and bidi characters removed (as :func:`clean_prose`), then
    every character that could open a tag, a JSON object or a quote (``<>[]{}|`"\\``), all on one
    line, cut to ``limit`` characters with an ellipsis. The result never contains a newline.
    """
    text = _scalar_text(value)[: 8 * limit]
    text = _DISPLAY_DROP_RE.sub("", clean_prose(text))
    text = _WS_RE.sub(" ", text).strip()
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "\u2026"
    return text


@dataclass
class LedgerUpdate:
    """What applying a list of terms did: invalid known terms and off-schema names."""

    written: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    off_schema: list[str] = field(default_factory=list)


def apply_terms(domain: Domain, ledger: dict[str, Any], terms: tuple[Term, ...]) -> LedgerUpdate:
    """Overwrite ``ledger`` in place with ``terms``.

    A schema name (matched case-insensitively) with a usable value is written canonically; with an
    unusable value it is not written and counted invalid. Off-schema names enter the ledger as
    written but are never scored.
    """
    upd = LedgerUpdate()
    for term in terms:
        issue = domain.lookup(term.name)
        if issue is None:
            ledger[term.name] = term.value
            upd.off_schema.append(term.name)
            continue
        ok, value = canonical_value(issue, term.value)
        if ok:
            ledger[issue.name] = value
            upd.written.append(issue.name)
        else:
            upd.invalid.append(issue.name)
    return upd


def format_action(action: Action) -> str:
    """The JSON line of an action, as agents write it."""
    return json.dumps(action.to_dict())


def action_text(turn: Mapping[str, Any]) -> str:
    """A recorded turn's parsed action (:meth:`Action.to_dict` under ``"action"``) in one line:
    ``COUNTER seats=240, deployment=cloud``, ``ACCEPT``, or ``bad parse (<why>)``."""
    act = turn.get("action")
    if act is None:
        return f"bad parse ({turn.get('parse_error')})"
    terms = ", ".join(f"{t['name']}={t['value']}" for t in act.get("terms") or ())
    return act["action"] + (f" {terms}" if terms else "")
