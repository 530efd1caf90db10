"""Training logs: per-step rows (``train_log``/``validation_log``, JSONL appended and fsynced, CSV
rewritten atomically) and the training transcripts, pruned to the resumed step before a resume."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from negolib.files import atomic_write_text


class RunLog:
    """Rows keyed by ``step`` in ``<stem>.jsonl`` (source of truth, appended) and ``<stem>.csv``
    (rewritten atomically after every append)."""

    def __init__(self, directory: str | Path, stem: str) -> None:
        self.jsonl = Path(directory) / f"{stem}.jsonl"
        self.csv = Path(directory) / f"{stem}.csv"

    def rows(self) -> list[dict[str, Any]]:
        if not self.jsonl.is_file():
            return []
        out = []
        for line in self.jsonl.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # a torn last line from a crash
                continue
        return out

    def steps(self) -> set[int]:
        return {int(r["step"]) for r in self.rows()}

    def append(self, row: Mapping[str, Any]) -> None:
        self.jsonl.parent.mkdir(parents=True, exist_ok=True)
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
        with open(self.jsonl, "a") as fh:
            fh.write(json.dumps(clean, allow_nan=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self._write_csv()

    def truncate_after(self, step: int) -> None:
        """Drop rows of steps after ``step`` (they will be redone after a resume)."""
        rows = self.rows()
        keep = [r for r in rows if int(r["step"]) <= step]
        if len(keep) != len(rows):
            atomic_write_text(self.jsonl, "".join(json.dumps(r) + "\n" for r in keep))
            self._write_csv()

    def _write_csv(self) -> None:
        import pandas as pd

        rows = self.rows()
        if rows:
            atomic_write_text(self.csv, pd.DataFrame(rows).to_csv(index=False))


def prune_transcripts(path: Path, max_step: int) -> None:
    """Drop training transcript rows of steps after ``max_step`` (before a resume redoes them)."""
    if not path.is_file():
        return
    keep = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if int(rec.get("step", 0)) <= max_step:
            keep.append(line + "\n")
    atomic_write_text(path, "".join(keep))


def append_records(path: Path, records: Sequence[dict[str, Any]]) -> None:
    from negolib.transcripts import TranscriptStore

    TranscriptStore(path).append(records)


__all__ = ["RunLog", "append_records", "prune_transcripts"]
