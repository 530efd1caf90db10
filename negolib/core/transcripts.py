"""Transcripts: schema-versioned JSONL, one episode per line, atomic appends, checked resumable runs.

* Records are keyed by (arm, domain, seed, buyer). Appends take an exclusive ``flock`` and write
  whole lines with a single ``write`` followed by ``fsync``, so concurrent writers cannot
  interleave and a crash leaves at most a partial last line, which the next writer truncates away
  and every reader ignores (with a warning).
* Every line is validated on read and on append (:func:`validate_record`: required fields and
  types, U~ in [0, 1] or null without a deal, S in [-no_deal_penalty, 1] and equal to Eq. 1, a
  known status, this schema version). A bad line is a :class:`TranscriptError` naming the file,
  the line and the field.
* :meth:`TranscriptStore.records` keeps one record per key: a complete row (``deal`` /
  ``no_deal``) supersedes ``error`` rows; two complete rows of one key must be identical (else an
  error naming both lines); one file never mixes protocol hashes unless the caller checks them
  itself (``mixed_protocols=True``, as :func:`negolib.study.evaluation.check_protocol_hashes` does).
* Resume: a re-run skips keys already complete. A store opened with :class:`RunSettings` (what
  shapes every episode of each (arm, buyer) cell: environment config, agent specs and sampling,
  agent seed, protocol hash) stamps ``settings`` and ``settings_fingerprint`` on what it appends,
  and :meth:`TranscriptStore.completed_keys` refuses a file whose complete episodes of those
  cells were played under other settings, listing what differs.
* :meth:`TranscriptStore.run_lock` is held by a runner for its whole run (a non-blocking
  ``flock`` on the sidecar ``<file>.lock``): a second run on the same file refuses at once.

Schema 2 (the ACCEPT rule of issue 13: an ACCEPT closes only on the counterpart's parsed COUNTER)
adds ``invalid_accept`` per turn and ``invalid_accepts`` / ``seller_invalid_accepts`` per outcome;
they are optional (default false / 0) for the reader.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from negolib.core.files import drop_partial_tail, locked_append
from negolib.core.transcript_records import (  # the record's schema and validation, re-exported with the store
    COMPLETE,
    KEY_FIELDS,
    SCHEMA_VERSION,
    STATUSES,
    EpisodeKey,
    TranscriptError,
    _show,
    decode_line,
    record_key,
    validate_record,
)

Cell = tuple[str, str]  # (arm, buyer)


class SettingsMismatchError(TranscriptError):
    """A resumed run whose settings differ from those the file's episodes were played under."""


class RunLockedError(TranscriptError):
    """Another run holds the transcript file's run lock."""


# ---------------------------------------------------------------------------------------------
# Settings a resume checks
# ---------------------------------------------------------------------------------------------

def _plain(value: Any) -> Any:
    """JSON-ready copy: dataclasses and mappings to dicts, tuples to lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def settings_fingerprint(settings: Mapping[str, Any]) -> str:
    """SHA-256 (first 16 hex digits) of the sorted-key compact JSON of ``settings``."""
    text = json.dumps(_plain(settings), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def episode_settings(config: Any, seller: Any, buyer: Any, **extra: Any) -> dict[str, Any]:
    """The settings of one (arm, buyer) cell: environment config, seller and buyer specs (with their
    sampling and seeds), plus ``extra`` (e.g. ``agent_seed``, ``protocol_hash``)."""
    return _plain({"config": config, "seller": seller, "buyer": buyer, **extra})


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix or "<settings>": value}


_MISSING = object()


def settings_diff(stored: Any, current: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(dotted field, stored value, current value) of every field that differs."""
    a = _flatten(stored) if isinstance(stored, dict) else {"<settings>": stored}
    b = _flatten(dict(current))
    return [(k, a.get(k, _MISSING), b.get(k, _MISSING)) for k in sorted(set(a) | set(b))
            if a.get(k, _MISSING) != b.get(k, _MISSING)]


def _fmt_diff(diff: list[tuple[str, Any, Any]], limit: int = 8) -> str:
    def show(v: Any) -> str:
        return "(absent)" if v is _MISSING else _show(v)

    parts = [f"{k}: {show(a)} in the file, {show(b)} in this run" for k, a, b in diff[:limit]]
    if len(diff) > limit:
        parts.append(f"and {len(diff) - limit} more field(s)")
    return "; ".join(parts)


@dataclass
class RunSettings:
    """What shapes the episodes of each (arm, buyer) cell of a run, checked on resume.

    ``cells`` maps (arm, buyer) to :func:`episode_settings`; ``excused`` maps an arm to top-level
    settings fields whose differences are accepted (e.g. ``protocol_hash`` for an arm covered by a
    logged deviation).
    """

    cells: Mapping[Cell, Mapping[str, Any]]
    excused: Mapping[str, frozenset[str]] = field(default_factory=dict)
    plain: dict[Cell, dict[str, Any]] = field(init=False, repr=False)
    fingerprints: dict[Cell, str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.plain = {(str(a), str(b)): json.loads(json.dumps(_plain(s), allow_nan=False, default=str))
                      for (a, b), s in self.cells.items()}
        self.fingerprints = {c: settings_fingerprint(s) for c, s in self.plain.items()}

    def differences(self, rec: Mapping[str, Any]) -> list[tuple[str, Any, Any]] | None:
        """None when ``rec``'s cell is not part of this run; else the fields that differ (empty: same)."""
        cell = (rec["arm"], rec["buyer"])
        want = self.plain.get(cell)
        if want is None:
            return None
        stored = rec.get("settings", _MISSING)
        if stored == want and rec.get("settings_fingerprint") == self.fingerprints[cell]:
            return []
        if stored is _MISSING:
            return [("settings", "(not recorded: a run that did not record its settings)", "recorded")]
        excused = self.excused.get(cell[0], frozenset())
        diff = [d for d in settings_diff(stored, want) if d[0].split(".")[0] not in excused]
        if not diff and rec.get("settings_fingerprint") != settings_fingerprint(stored):
            diff = [("settings_fingerprint", rec.get("settings_fingerprint"), "the hash of the recorded settings")]
        return diff


# ---------------------------------------------------------------------------------------------
# The store
# ---------------------------------------------------------------------------------------------

class TranscriptStore:
    """An append-only JSONL file of episode records (see the module docstring).

    ``settings`` (optional) makes the store stamp each appended record's cell settings and check
    them on resume (:meth:`completed_keys`).
    """

    def __init__(self, path: str | Path, settings: RunSettings | None = None) -> None:
        self.path = Path(path)
        self.settings = settings
        self._lock_depth = 0

    @property
    def lock_path(self) -> Path:
        """The sidecar file a run locks for its whole duration."""
        return self.path.with_name(self.path.name + ".lock")

    @contextlib.contextmanager
    def run_lock(self) -> Iterator[None]:
        """Hold the run lock (non-blocking; re-entrant on this store object) or raise
        :class:`RunLockedError` naming the file when another run holds it."""
        if self._lock_depth:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
            os.close(fd)
            raise RunLockedError(self.path, None, f"another run is writing this transcript file (it holds "
                                 f"{self.lock_path}{', ' + holder if holder else ''}); wait for it to end, "
                                 "or write this run to another file (e.g. another --out)") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}\n".encode(), 0)
            self._lock_depth = 1
            yield
        finally:
            self._lock_depth = 0
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def append(self, records: Iterable[dict[str, Any]]) -> int:
        """Validate, stamp the run's settings (when the store has them) and append records
        atomically (one locked write per batch, then fsync); returns the count."""
        lines = []
        for i, rec in enumerate(records):
            if self.settings is not None and isinstance(rec, dict) and "arm" in rec and "buyer" in rec:
                cell = (str(rec["arm"]), str(rec["buyer"]))
                if cell in self.settings.plain:
                    rec["settings"] = self.settings.plain[cell]
                    rec["settings_fingerprint"] = self.settings.fingerprints[cell]
            validate_record(rec, f"{self.path} (appending record {i} of the batch)")
            lines.append(json.dumps(rec, allow_nan=False, separators=(",", ":")) + "\n")
        if not lines:
            return 0
        locked_append(self.path, "".join(lines).encode("utf-8"))
        return len(lines)

    def iter_lines(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """(line number, validated record) in file order; a partial last line is skipped with a
        warning; any other bad line raises :class:`TranscriptError` naming the file and line."""
        if not self.path.exists():
            return
        with open(self.path, "rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                if not raw.endswith(b"\n"):
                    warnings.warn(f"{self.path}:{lineno}: ignoring a partial last line", stacklevel=3)
                    return
                yield lineno, validate_record(decode_line(raw, self.path, lineno), str(self.path), lineno)

    def iter_raw(self) -> Iterator[dict[str, Any]]:
        """Every validated record in file order (see :meth:`iter_lines`)."""
        for _, rec in self.iter_lines():
            yield rec

    def _latest(self, include_errors: bool) -> list[tuple[int, dict[str, Any]]]:
        """(line, record) of the record kept per key, in first-seen key order."""
        latest: dict[EpisodeKey, tuple[int, dict[str, Any]]] = {}
        for lineno, rec in self.iter_lines():
            key = (rec["arm"], rec["domain"], rec["seed"], rec["buyer"])
            prev = latest.get(key)
            if prev is None:
                latest[key] = (lineno, rec)
                continue
            pline, prec = prev
            if rec["status"] in COMPLETE:
                if prec["status"] in COMPLETE:
                    if rec != prec:
                        fields = sorted(k for k in set(rec) | set(prec) if rec.get(k) != prec.get(k))
                        raise TranscriptError(self.path, lineno, f"episode {key} is already complete at line "
                                              f"{pline} with different content (fields {fields}); one key, one "
                                              "episode: remove the record that does not belong")
                    continue  # an identical duplicate
                latest[key] = (lineno, rec)
            elif prec["status"] not in COMPLETE:
                latest[key] = (lineno, rec)  # a later error row replaces an earlier one
        return [(n, r) for n, r in latest.values() if include_errors or r["status"] in COMPLETE]

    def records(self, include_errors: bool = False, *, mixed_protocols: bool = False) -> list[dict[str, Any]]:
        """One record per key (see the module docstring). Records stamped with different protocol
        hashes (or stamped and unstamped) are refused unless ``mixed_protocols`` (the caller then
        checks them, e.g. with :func:`negolib.study.evaluation.check_protocol_hashes`)."""
        kept = self._latest(include_errors)
        if not mixed_protocols:
            first: dict[str | None, int] = {}
            for lineno, rec in kept:
                first.setdefault(rec.get("protocol_hash"), lineno)
            if len(first) > 1:
                (h0, l0), (h1, l1) = sorted(first.items(), key=lambda kv: kv[1])[:2]
                raise TranscriptError(self.path, l1, f"record of protocol {_short(h1)}, while line {l0} is of "
                                      f"protocol {_short(h0)}: one analysis never mixes protocols; check them "
                                      "against the frozen protocol and its deviation log (negolib summary "
                                      "--protocol, evaluation.evaluation_frame)")
        return [r for _, r in kept]

    def completed_keys(self) -> set[EpisodeKey]:
        """Keys already complete: a resumed run skips them. With :class:`RunSettings`, complete
        episodes of the run's cells played under other settings raise :class:`SettingsMismatchError`."""
        kept = self._latest(include_errors=False)
        if self.settings is not None:
            self._check_settings(kept)
        return {(r["arm"], r["domain"], r["seed"], r["buyer"]) for _, r in kept}

    def _check_settings(self, kept: list[tuple[int, dict[str, Any]]]) -> None:
        assert self.settings is not None
        bad: list[tuple[int, dict[str, Any], list[tuple[str, Any, Any]]]] = []
        for lineno, rec in kept:
            diff = self.settings.differences(rec)
            if diff:
                bad.append((lineno, rec, diff))
        if not bad:
            return
        lineno, rec, diff = bad[0]
        raise SettingsMismatchError(
            self.path, lineno,
            f"{len(bad)} complete episode(s) of this run's arms were played under other settings (the first: "
            f"arm {rec['arm']!r} vs buyer {rec['buyer']!r}): {_fmt_diff(diff)}. Nothing was played. Write this "
            f"run to another transcript file (e.g. another --out), or move {self.path.name} away to replay "
            "every episode")

    def to_dataframe(self, include_errors: bool = False) -> pd.DataFrame:
        """One row per episode: key, status and the flattened outcome (see :func:`episodes_frame`)."""
        return episodes_frame(self.records(include_errors))

    def turns_dataframe(self) -> pd.DataFrame:
        """One row per turn of every complete episode."""
        return turns_frame(self.records())

    def to_parquet(self, path: str | Path) -> Path:
        """Write the episode table as parquet for analysis."""
        path = Path(path)
        self.to_dataframe().to_parquet(path, index=False)
        return path


def _short(h: str | None) -> str:
    return "(no hash)" if h is None else h[:12]


def episodes_frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Flatten records to one row per episode (outcome fields become columns)."""
    rows = []
    for rec in records:
        row = {k: rec.get(k) for k in ("arm", "seller", "buyer", "domain", "seed", "held_out", "status",
                                       "error")}
        out = rec.get("outcome") or {}
        for k, v in out.items():
            if k not in ("final_ledger",):
                row[k] = v
        row["final_ledger"] = json.dumps(out.get("final_ledger")) if out else None
        row["n_invalid_terms"] = sum(len(t["invalid_terms"]) for t in rec["turns"])
        row["n_off_schema_terms"] = sum(len(t["off_schema_terms"]) for t in rec["turns"])
        row["n_named_terms"] = sum(len((t["action"] or {}).get("terms", [])) for t in rec["turns"])
        seller = [t for t in rec["turns"] if t["role"] == "seller"]
        counters = [t for t in seller if (t["action"] or {}).get("action") == "COUNTER"]
        row["n_seller_named_terms"] = sum(len(t["action"].get("terms", [])) for t in counters)
        row["n_seller_off_schema_terms"] = sum(len(t["off_schema_terms"]) for t in counters)
        row["n_prompt_capped_turns"] = sum(bool(t.get("prompt_capped", False)) for t in seller)
        row["n_tags_stripped"] = sum(int(t.get("tags_stripped", 0) or 0) for t in seller)
        row["input_tokens"] = sum(t["input_tokens"] for t in rec["turns"])
        row["output_tokens"] = sum(t["output_tokens"] for t in rec["turns"])
        rows.append(row)
    df = pd.DataFrame(rows)
    if not df.empty:
        df["welfare"] = df["seller_utility"] + df["buyer_utility"]
    return df


def turns_frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per turn: key, turn, role, prose, action kind, parse error, token counts."""
    rows = []
    for rec in records:
        for t in rec["turns"]:
            rows.append({
                "arm": rec["arm"], "buyer": rec["buyer"], "domain": rec["domain"], "seed": rec["seed"],
                "turn": t["turn"], "role": t["role"], "prose": t["prose"], "raw": t["raw"],
                "action": (t["action"] or {}).get("action"), "parse_error": t["parse_error"],
                "n_terms": len((t["action"] or {}).get("terms", [])),
                "n_invalid": len(t["invalid_terms"]), "n_off_schema": len(t["off_schema_terms"]),
                "input_tokens": t["input_tokens"], "output_tokens": t["output_tokens"],
                "latency_s": t["latency_s"],
            })
    return pd.DataFrame(rows)


__all__ = ["SCHEMA_VERSION", "KEY_FIELDS", "COMPLETE", "STATUSES", "EpisodeKey", "RunSettings", "RunLockedError",
           "SettingsMismatchError", "TranscriptError", "TranscriptStore", "drop_partial_tail", "episode_settings",
           "episodes_frame", "record_key", "settings_diff", "settings_fingerprint", "turns_frame", "validate_record"]
