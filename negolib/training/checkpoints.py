"""Atomic checkpoint directories and resume helpers.

A checkpoint is written into a hidden staging directory next to its final place and renamed into
``checkpoint-<step>`` only once every file is on disk (``os.replace`` of a directory is atomic on
POSIX), so an interrupted save never leaves a half-written ``checkpoint-<step>``: the staging
directory is simply swept away at the next start. ``last_checkpoint`` therefore only ever sees
complete checkpoints.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
STAGING_PREFIX = ".staging-"


def checkpoint_steps(run_dir: str | Path) -> list[int]:
    """Steps of the complete checkpoints under ``run_dir``, ascending."""
    d = Path(run_dir)
    if not d.is_dir():
        return []
    steps = [int(m.group(1)) for p in d.iterdir() if p.is_dir() and (m := CHECKPOINT_RE.match(p.name))]
    return sorted(steps)


def last_checkpoint(run_dir: str | Path) -> Path | None:
    """The latest complete checkpoint directory, or None."""
    steps = checkpoint_steps(run_dir)
    return Path(run_dir) / f"checkpoint-{steps[-1]}" if steps else None


def sweep_staging(run_dir: str | Path) -> int:
    """Remove staging directories an interrupted save left behind; returns how many."""
    d = Path(run_dir)
    if not d.is_dir():
        return 0
    stale = [p for p in d.iterdir() if p.is_dir() and p.name.startswith(STAGING_PREFIX)]
    for p in stale:
        shutil.rmtree(p, ignore_errors=True)
    return len(stale)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(path: Path) -> None:
    for root, _dirs, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(root))


def publish(staged: Path, final: Path) -> Path:
    """Move a fully written ``staged`` directory to ``final`` atomically (replacing an older copy)."""
    _fsync_tree(staged)
    old = None
    if final.exists():  # a re-save of the same step: move the old one aside first, drop it after
        old = final.with_name(f"{STAGING_PREFIX}old-{final.name}")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
    os.replace(staged, final)
    _fsync_dir(final.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return final


@contextmanager
def atomic_dir(final: str | Path) -> Iterator[Path]:
    """Yield a staging directory; on normal exit it becomes ``final`` atomically, on error it is removed."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    staged = final.with_name(f"{STAGING_PREFIX}{final.name}-{os.getpid()}")
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir()
    try:
        yield staged
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    publish(staged, final)


def rotate(run_dir: str | Path, keep: int | None) -> list[Path]:
    """Delete all but the newest ``keep`` checkpoints (None: keep all); returns the deleted paths."""
    if keep is None:
        return []
    steps = checkpoint_steps(run_dir)
    doomed = [Path(run_dir) / f"checkpoint-{s}" for s in steps[:-keep]] if keep > 0 else []
    for p in doomed:
        shutil.rmtree(p, ignore_errors=True)
    return doomed
