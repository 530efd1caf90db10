"""The book runner's heartbeat: a long notebook never leaves the terminal silent.

Contract: while papermill executes a notebook it autosaves the executed copy (at every cell start and
end, and every few seconds while a cell prints); :class:`CellHeartbeat` re-reads that copy every
``every_s`` seconds in a background thread and writes one line naming the running cell (its index
among code cells, its first source line), how long it has run, and the last line it printed (for
example the notebook's own progress bar). :func:`running_cell` is the pure part: notebook JSON in,
a :class:`CellStatus` out. With ``progress_file`` (the file the kernel's library calls write through
:mod:`negolib.core.progress`), the line ends with what the running cell last reported there (``GRPO step 3/12: ...``,
``episodes: 40/96 ep``) instead of its last printed line, whose widgets a saved notebook does not update;
a reported line older than :data:`STALE_AFTER_S` is led by its age (``[reported 4m10s ago] GRPO step 2/2: ...``),
so a long silent stretch after it (an evaluation after the last training step) does not read as a running step.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from html import unescape
from pathlib import Path
from typing import Any

from negolib.core.progress import read_progress

MAX_LINE_CHARS = 100
STALE_AFTER_S = 60.0
_TAG = re.compile(r"<[^>]*>")
_OBJECT_REPR = re.compile(r"<[\w.]+ object( at 0x[0-9a-f]+)?>")


@dataclass(frozen=True)
class CellStatus:
    """The cell papermill marks as running: 1-based index among code cells, of ``n_cells``."""

    index: int
    n_cells: int
    first_line: str
    elapsed_s: float
    last_output: str

    def line(self, notebook: str) -> str:
        """One terminal line, e.g. ``03_training: cell 7/21 `train_all(...)` running 4m05s | steps: 50%``."""
        text = (f"{notebook}: cell {self.index}/{self.n_cells} `{_cut(self.first_line, 50)}` "
                f"running {_minutes(self.elapsed_s)}")
        if self.last_output:
            text += f" | {_cut(self.last_output, MAX_LINE_CHARS)}"
        return text


def _minutes(seconds: float) -> str:
    """``4m05s``."""
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s"


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _source(cell: Mapping[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _html_line(html: str) -> str:
    """The first line of text in an HTML display (a Trainer's notebook progress: ``[3/6 04:12 < 12:37, ...]``
    above its loss table), tags removed."""
    text = unescape(_TAG.sub("\n", html))
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _last_output_line(cell: Mapping[str, Any]) -> str:
    """The last non-empty line the cell printed: a stream's text (a tqdm bar's latest state after its
    last carriage return) or a display's ``text/plain``; where that is only an object's repr
    (``<IPython.core.display.HTML object>``), the first text line of its ``text/html``."""
    for out in reversed(cell.get("outputs", [])):
        data = out.get("data", {})
        if out.get("output_type") == "stream":
            text = _source({"source": out.get("text", "")})
        else:
            text = _source({"source": data.get("text/plain", "")})
            if _OBJECT_REPR.fullmatch(text.strip()) and "text/html" in data:
                text = _html_line(_source({"source": data["text/html"]})) or text
        for line in reversed(text.replace("\r", "\n").splitlines()):
            if line.strip():
                return line.strip()
    return ""


def running_cell(nb: Mapping[str, Any], now: datetime) -> CellStatus | None:
    """The running code cell of a papermill notebook (JSON as a dict) at time ``now`` (aware), or None."""
    code = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    for i, cell in enumerate(code, 1):
        meta = cell.get("metadata", {}).get("papermill", {})
        if meta.get("status") != "running":
            continue
        started = meta.get("start_time")
        elapsed = 0.0
        if started:
            t0 = datetime.fromisoformat(str(started))
            if t0.tzinfo is None:
                t0 = t0.replace(tzinfo=timezone.utc)
            elapsed = max(0.0, (now - t0).total_seconds())
        first = next((ln.strip() for ln in _source(cell).splitlines() if ln.strip()), "")
        return CellStatus(i, len(code), first, elapsed, _last_output_line(cell))
    return None


def _age_s(path: Path, now: float) -> float:
    """Seconds since ``path`` was last written (0 if it cannot be read)."""
    try:
        return max(0.0, now - path.stat().st_mtime)
    except OSError:
        return 0.0


class CellHeartbeat:
    """Context manager: every ``every_s`` seconds write ``running_cell(...).line(notebook)`` of the
    autosaved ``executed`` notebook with ``write`` (nothing while no cell runs or the file is being
    rewritten). The thread is a daemon and stops when the block exits."""

    def __init__(self, executed: str | Path, notebook: str, write: Callable[[str], None],
                 every_s: float = 30.0, progress_file: str | Path | None = None) -> None:
        self.path, self.notebook, self.write, self.every_s = Path(executed), notebook, write, every_s
        self.progress_file = Path(progress_file) if progress_file is not None else None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{notebook}", daemon=True)

    def beat(self) -> str | None:
        """Write (and return) one line now, if a cell is running."""
        try:
            nb = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # not written yet, or caught mid-rewrite: try again next beat
            return None
        now = datetime.now(timezone.utc)
        status = running_cell(nb, now)
        if status is None:
            return None
        if self.progress_file is not None:
            reported = read_progress(self.progress_file, now.timestamp() - status.elapsed_s)
            if reported:
                age = _age_s(self.progress_file, now.timestamp())
                if age >= STALE_AFTER_S:  # put first: a long line is cut at its end, and the age must show
                    reported = f"[reported {_minutes(age)} ago] {reported}"
                status = replace(status, last_output=reported)
        line = status.line(self.notebook)
        self.write(line)
        return line

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.beat()

    def __enter__(self) -> CellHeartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


__all__ = ["STALE_AFTER_S", "CellHeartbeat", "CellStatus", "running_cell"]
