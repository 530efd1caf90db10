"""Training logs: per-step rows (``train_log``/``validation_log``, JSONL appended and fsynced, CSV
rewritten atomically) and the training transcripts, pruned to the resumed step before a resume.

Both JSONL files behave like the transcript store: an append takes an exclusive ``flock``, first
truncates a torn last line left by a crash (so a new row is never glued onto it), then writes whole
lines and fsyncs; readers skip a torn last line with a warning, and any other bad line is a
:class:`~negolib.core.transcripts.TranscriptError` naming the file and line.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from negolib.core.files import atomic_write_text, locked_append
from negolib.core.transcripts import TranscriptError, TranscriptStore


def _read_rows(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """(rows, whether a torn last line was skipped) of a run-log JSONL file."""
    if not path.is_file():
        return [], False
    data = path.read_bytes()
    lines = data.split(b"\n")
    torn = lines.pop() != b""  # the piece after the last newline: empty unless a write was torn
    if torn:
        warnings.warn(f"{path}:{len(lines) + 1}: ignoring a partial last line", stacklevel=3)
    out = []
    for lineno, raw in enumerate(lines, 1):
        try:
            row = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise TranscriptError(path, lineno, f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
        except ValueError as exc:
            raise TranscriptError(path, lineno, f"corrupt row: {exc}") from None
        if not isinstance(row, dict):
            raise TranscriptError(path, lineno, f"a row must be a JSON object, got {type(row).__name__}")
        if type(row.get("step")) is not int:
            raise TranscriptError(path, lineno, f"field 'step': must be an integer, got {row.get('step')!r}")
        out.append(row)
    return out, torn


class RunLog:
    """Rows keyed by ``step`` in ``<stem>.jsonl`` (source of truth, appended) and ``<stem>.csv``
    (rewritten atomically after every append)."""

    def __init__(self, directory: str | Path, stem: str) -> None:
        self.jsonl = Path(directory) / f"{stem}.jsonl"
        self.csv = Path(directory) / f"{stem}.csv"

    def rows(self) -> list[dict[str, Any]]:
        """Every whole row in file order (a torn last line is skipped with a warning)."""
        return _read_rows(self.jsonl)[0]

    def steps(self) -> set[int]:
        return {int(r["step"]) for r in self.rows()}

    def append(self, row: Mapping[str, Any]) -> None:
        """Append one row (non-finite floats become null) under a lock, after dropping a torn tail."""
        if type(row.get("step")) is not int:
            raise ValueError(f"{self.jsonl}: a row needs an integer 'step', got {row.get('step')!r}")
        self.jsonl.parent.mkdir(parents=True, exist_ok=True)
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
        data = (json.dumps(clean, allow_nan=False) + "\n").encode("utf-8")
        locked_append(self.jsonl, data)
        self._write_csv()

    def truncate_after(self, step: int) -> None:
        """Drop rows of steps after ``step`` (they will be redone after a resume) and a torn last line."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the torn line is dropped right here
            rows, torn = _read_rows(self.jsonl)
        keep = [r for r in rows if int(r["step"]) <= step]
        if len(keep) != len(rows) or torn:
            atomic_write_text(self.jsonl, "".join(json.dumps(r) + "\n" for r in keep))
            self._write_csv()

    def _write_csv(self) -> None:
        import pandas as pd

        rows = self.rows()
        if rows:
            atomic_write_text(self.csv, pd.DataFrame(rows).to_csv(index=False))


def prune_transcripts(path: Path, max_step: int) -> None:
    """Drop training transcript rows of steps after ``max_step`` (before a resume redoes them) and a
    torn last line; every other line is validated (:func:`negolib.core.transcripts.validate_record`)."""
    if not path.is_file():
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the torn line is dropped right here
        keep = [json.dumps(rec, allow_nan=False, separators=(",", ":")) + "\n"
                for _, rec in TranscriptStore(path).iter_lines() if rec.get("step", 0) <= max_step]
    atomic_write_text(path, "".join(keep))


def append_records(path: Path, records: Sequence[dict[str, Any]]) -> None:
    """Append training transcript records (validated; a torn last line is dropped first)."""
    TranscriptStore(path).append(records)


__all__ = ["RunLog", "append_records", "prune_transcripts"]
