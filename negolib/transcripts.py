"""Transcripts: schema-versioned JSONL, one episode per line, atomic appends, resumable runs.

Records are keyed by (arm, domain, seed, buyer). Appends take an exclusive ``flock`` and write one
whole line with a single ``write`` followed by ``fsync``, so concurrent writers cannot interleave
and a crash leaves at most a partial last line, which the next writer truncates away and every
reader ignores. A re-run skips keys already complete (status ``deal`` or ``no_deal``); an
``error`` row is superseded by the row that completes it.
"""

from __future__ import annotations

import fcntl
import json
import os
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd

SCHEMA_VERSION = 1
KEY_FIELDS = ("arm", "domain", "seed", "buyer")
COMPLETE = frozenset({"deal", "no_deal"})
EpisodeKey = tuple[str, str, int, str]


def record_key(rec: dict[str, Any]) -> EpisodeKey:
    """The (arm, domain, seed, buyer) key of a record."""
    return (str(rec["arm"]), str(rec["domain"]), int(rec["seed"]), str(rec["buyer"]))


class TranscriptStore:
    """An append-only JSONL file of episode records."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def append(self, records: Iterable[dict[str, Any]]) -> int:
        """Append records atomically (one locked write per batch, then fsync); returns the count."""
        lines = []
        for rec in records:
            if rec.get("schema") != SCHEMA_VERSION:
                raise ValueError(f"record schema {rec.get('schema')!r} != {SCHEMA_VERSION}")
            record_key(rec)
            lines.append(json.dumps(rec, allow_nan=False, separators=(",", ":")) + "\n")
        if not lines:
            return 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _drop_partial_tail(fd)
            data = "".join(lines).encode("utf-8")
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        return len(lines)

    def iter_raw(self) -> Iterator[dict[str, Any]]:
        """Every decodable record in file order (a partial last line is skipped with a warning)."""
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.endswith("\n"):
                    warnings.warn(f"{self.path}:{lineno}: ignoring a partial last line", stacklevel=2)
                    break
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{self.path}:{lineno}: corrupt record: {exc}") from exc
                if rec.get("schema") != SCHEMA_VERSION:
                    raise ValueError(f"{self.path}:{lineno}: schema {rec.get('schema')!r}, "
                                     f"this negolib reads {SCHEMA_VERSION}")
                yield rec

    def records(self, include_errors: bool = False) -> list[dict[str, Any]]:
        """The latest record per key; complete records win over error rows."""
        latest: dict[EpisodeKey, dict[str, Any]] = {}
        for rec in self.iter_raw():
            key = record_key(rec)
            prev = latest.get(key)
            if prev is None or rec["status"] in COMPLETE or prev["status"] not in COMPLETE:
                latest[key] = rec
        return [r for r in latest.values() if include_errors or r["status"] in COMPLETE]

    def completed_keys(self) -> set[EpisodeKey]:
        """Keys already complete: a resumed run skips them."""
        return {record_key(r) for r in self.records()}

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


def _drop_partial_tail(fd: int) -> None:
    """Truncate a half-written last line left by a crash (caller holds the lock)."""
    size = os.lseek(fd, 0, os.SEEK_END)
    if size == 0:
        return
    if os.pread(fd, 1, size - 1) == b"\n":
        return
    pos, chunk = size, 4096
    while pos > 0:
        start = max(0, pos - chunk)
        buf = os.pread(fd, pos - start, start)
        nl = buf.rfind(b"\n")
        if nl >= 0:
            os.ftruncate(fd, start + nl + 1)
            return
        pos = start
    os.ftruncate(fd, 0)


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
