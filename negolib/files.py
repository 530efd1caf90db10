"""Writing files so that a crash never leaves a half-written one [SPEC 12].

Whole-file writes go through a synced temporary file renamed into place
(:func:`atomic_write_text`); line-oriented logs grow by :func:`locked_append`: an exclusive
``flock``, a torn last line left by a crash dropped first, one whole write, then ``fsync``.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a synced temporary file renamed into place: readers see the
    old content or the new, never a torn file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def drop_partial_tail(fd: int) -> None:
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


def locked_append(path: str | Path, data: bytes) -> None:
    """Append ``data`` (whole lines) to ``path`` under an exclusive ``flock``: a torn last line is
    truncated first (so nothing is glued onto it), then one write loop and ``fsync``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        drop_partial_tail(fd)
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        os.fsync(fd)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


__all__ = ["atomic_write_text", "drop_partial_tail", "locked_append"]
