"""Progress a long library call reports, for the book's heartbeat (a notebook's own bars are widgets the runner
cannot read).

Contract: the book runner names a file in the kernel's environment (:data:`PROGRESS_ENV`) while it executes a
notebook; :func:`report` overwrites that file with one line (atomically), and does nothing when the variable is
unset (a plain script, a test). :class:`ProgressBar` is ``tqdm.auto.tqdm`` that also reports
``desc: n/total unit`` at most once a second and when it closes; :func:`read_progress` returns the line if it was
written at or after a given time (so a finished cell's progress never labels the next one). :class:`TurnReporter` is
an ``on_turn`` callback for a rollout whose episodes all advance together (so that they end together and an episode
count stays at 0 until the end): it reports turns played and episodes ended.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

PROGRESS_ENV = "NEGOBOOK_PROGRESS"
REPORT_EVERY_S = 1.0


def report(text: str, environ: dict[str, str] | None = None) -> None:
    """Write ``text`` (one line) to the file named by :data:`PROGRESS_ENV`, if set; never raises."""
    path = (os.environ if environ is None else environ).get(PROGRESS_ENV)
    if not path:
        return
    line = " ".join(str(text).split())
    try:
        tmp = f"{path}.tmp"
        Path(tmp).write_text(line + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError:  # progress is a courtesy: never fail the work over it
        pass


def read_progress(path: str | Path, since: float) -> str:
    """The reported line of ``path`` if it was written at or after ``since`` (epoch seconds), else ``""``."""
    p = Path(path)
    try:
        if p.stat().st_mtime < since:
            return ""
        return p.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


class ProgressBar(tqdm):
    """``tqdm.auto.tqdm`` that also :func:`report` s ``desc: n/total unit`` (at most every
    :data:`REPORT_EVERY_S` seconds, and at the end). A disabled bar reports nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reported_at = 0.0

    def update(self, n: float | None = 1) -> bool | None:
        out = super().update(n)
        if not self.disable:
            now = time.monotonic()
            if now - self._reported_at >= REPORT_EVERY_S or (self.total is not None and self.n >= self.total):
                self._reported_at = now
                report(self.progress_text())
        return out

    def close(self) -> None:
        """Close the bar, reporting its final count (a loop over the bar updates it only now and then)."""
        if not self.disable and getattr(self, "_reported_at", None) is not None:
            report(self.progress_text())
        super().close()

    def progress_text(self) -> str:
        """``desc: n/total unit`` (``desc: n unit`` without a total)."""
        label = f"{self.desc}: " if self.desc else ""
        of = f"/{self.total:g}" if self.total is not None else ""
        return f"{label}{self.n:g}{of} {self.unit}"


@dataclass
class TurnReporter:
    """An ``on_turn(episode, reply)`` callback that :func:`report` s ``label: T turns played, E of N episodes ended``
    (at most every ``every_s`` seconds, and when the last episode ends). ``episode`` needs a ``done`` attribute."""

    label: str
    episodes: int
    every_s: float = REPORT_EVERY_S
    environ: dict[str, str] | None = None
    turns: int = 0
    ended: int = 0
    _reported_at: float = field(default=-float("inf"), repr=False)

    def __call__(self, episode: Any, reply: Any = None) -> None:
        self.turns += 1
        self.ended += bool(getattr(episode, "done", False))
        now = time.monotonic()
        if self.ended >= self.episodes or now - self._reported_at >= self.every_s:
            self._reported_at = now
            report(self.progress_text(), self.environ)

    def progress_text(self) -> str:
        return f"{self.label}: {self.turns} turns played, {self.ended} of {self.episodes} episodes ended"


__all__ = ["PROGRESS_ENV", "ProgressBar", "TurnReporter", "read_progress", "report"]
