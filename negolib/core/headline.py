"""One machine-readable headline per book run: ``outputs/<profile>/headline.json``.

The notebooks that compute a headline number add their section (:func:`update_headline`: notebook 03 the matched
lesson, notebook 05 the primary contrasts); the book runner adds the run's profile, commit, minutes and machine when
it finishes. :func:`headline_rows` turns any number of these files into one table row per (run, contrast): the
README's results table is made from it (``python -m negolib headline outputs/*/headline.json``), not from prose.

Sections (every number as computed; none is typed in)::

    {"profile": ..., "commit": ..., "minutes": ..., "finished": ..., "machine": ...,
     "lesson": {"arms": [trained, start], "estimate", "ci_low", "ci_high", "mde", "n_paired", "n_clusters",
                "utility_on_deals": {"estimate", "ci_low", "ci_high"}, "deal_rate": {...}, "verdict"},
     "primary": [{"arms": [arm, base], "estimate", "ci_low", "ci_high", "mde", "n_paired", "n_clusters"}, ...]}
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from negolib.core.files import atomic_write_text

HEADLINE_FILE = "headline.json"
ROW_COLUMNS = ("profile", "commit", "minutes", "contrast", "arms", "estimate", "95% interval", "MDE",
               "paired episodes", "clusters", "utility on deals", "deal rate")


def _clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become None, tuples lists, mappings plain dicts."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _clean(value.item())
    return value


def read_headline(path: str | Path) -> dict[str, Any]:
    """The headline at ``path`` (empty when it does not exist); a file that is not a JSON object is an error
    naming it."""
    p = Path(path)
    if not p.is_file():
        return {}
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{p}: must hold a JSON object, got {type(data).__name__}")
    return data


def update_headline(path: str | Path, **sections: Any) -> dict[str, Any]:
    """Set ``sections`` (key -> JSON-ready value) in the headline at ``path``, keeping the others; written
    atomically. Returns the whole headline."""
    data = read_headline(path)
    data.update({k: _clean(v) for k, v in sections.items()})
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
    return data


def checkout_commit(root: str | Path) -> str:
    """The commit of the checkout at ``root`` (``unknown`` outside a git checkout); ``+dirty`` when tracked files
    differ from it."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30).stdout.strip()

    try:
        head = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + ("+dirty" if head and dirty else "")


def machine() -> str:
    """The CPU model and the cores this process may use (for the headline and RESULTS.md rows)."""
    import os
    import platform

    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {cores} cores"


def _ci(d: Mapping[str, Any] | None, digits: int = 3) -> str:
    if not d or d.get("estimate") is None:
        return ""
    lo, hi = d.get("ci_low"), d.get("ci_high")
    inner = f" [{lo:+.{digits}f}, {hi:+.{digits}f}]" if lo is not None and hi is not None else ""
    return f"{d['estimate']:+.{digits}f}{inner}"


def headline_rows(paths: Iterable[str | Path]) -> list[dict[str, str]]:
    """One row per (headline file, contrast): the lesson first, then each primary contrast."""
    rows = []
    for path in paths:
        h = read_headline(path)
        if not h:
            continue
        run = {"profile": str(h.get("profile", "")), "commit": str(h.get("commit", ""))[:7],
               "minutes": f"{h['minutes']:.1f}" if isinstance(h.get("minutes"), (int, float)) else ""}
        items = [("matched lesson", h["lesson"])] if h.get("lesson") else []
        items += [("primary", c) for c in h.get("primary") or []]
        for kind, c in items:
            rows.append({**run, "contrast": kind, "arms": " − ".join(c.get("arms") or []),
                         "estimate": f"{c['estimate']:+.3f}" if c.get("estimate") is not None else "",
                         "95% interval": _ci(c).partition(" ")[2],
                         "MDE": f"{c['mde']:.3f}" if c.get("mde") is not None else "",
                         "paired episodes": str(c.get("n_paired", "")), "clusters": str(c.get("n_clusters", "")),
                         "utility on deals": _ci(c.get("utility_on_deals")), "deal rate": _ci(c.get("deal_rate"))})
    return rows


def headline_markdown(paths: Iterable[str | Path]) -> str:
    """:func:`headline_rows` as a markdown table (the README's results table)."""
    rows = headline_rows(paths)
    lines = ["| " + " | ".join(ROW_COLUMNS) + " |", "|" + "---|" * len(ROW_COLUMNS)]
    lines += ["| " + " | ".join(r[c] for c in ROW_COLUMNS) + " |" for r in rows]
    return "\n".join(lines) + "\n"


__all__ = ["HEADLINE_FILE", "checkout_commit", "headline_markdown", "headline_rows", "machine", "read_headline",
           "update_headline"]
