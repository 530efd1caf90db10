"""The paper's reported numbers: ``params/paper_reported.yaml``, transcribed once and never computed.

The book's tables and figures show them beside ours (columns and panels labelled ``paper``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from negolib.core.files import load_yaml
from negolib.core.formatting import DASH

PRINTED_MARKS: dict[tuple[str, ...], str] = {
    # Table 2/9, 2.3B 3x LR, delta buyer U~: printed -0.011 [-0.022, -0.000] with an ``e``; the upper bound
    # rounds to zero, so re-deriving the mark from the rounded interval would lose it.
    ("table2", "lr3", "E2B", "d_buyer_utility"): "e",
}
"""Marks the paper printed on intervals whose transcribed bounds round to zero (where the mark cannot be
read back from the rounded numbers), by the value's path in ``paper_reported.yaml``."""


@dataclass(frozen=True)
class PaperReported:
    """``params/paper_reported.yaml``: the paper's numbers, transcribed once (never computed)."""

    data: dict[str, Any]
    path: Path | None = None

    def get(self, *keys: str, default: Any = None) -> Any:
        """Nested lookup: ``get("table1", "E2B", "lr3_score")``."""
        cur: Any = self.data
        for k in keys:
            if not isinstance(cur, Mapping) or k not in cur:
                return default
            cur = cur[k]
        return cur

    def mark(self, *keys: str) -> str:
        """The significance mark the paper printed on the interval at ``keys`` (``"*"``, ``"e"`` or ``""``):
        a transcribed ``<key>_mark`` beside it, else :data:`PRINTED_MARKS`, else ``"e"`` when the printed
        interval excludes zero (only where no bound rounds to zero; such a cell needs a printed mark)."""
        *parent, key = keys
        printed = self.get(*parent, f"{key}_mark")
        if printed is not None:
            return str(printed)
        if tuple(keys) in PRINTED_MARKS:
            return PRINTED_MARKS[tuple(keys)]
        v = self.get(*keys)
        if isinstance(v, (list, tuple)) and len(v) == 3 and all(isinstance(x, (int, float)) for x in v):
            return "e" if (v[1] > 0 or v[2] < 0) else ""
        return ""

    def arm(self, ref: str | None) -> dict[str, Any]:
        """The paper's numbers for one of its 21 arms (empty when ``ref`` is None or unknown)."""
        return dict(self.get("arms", ref, default={}) or {}) if ref else {}

    def arm_label(self, ref: str | None) -> str:
        a = self.arm(ref)
        if not a:
            return DASH
        if "label" in a:
            return str(a["label"])
        size = self.get("sizes", a.get("size"), "label", default=a.get("size", ""))
        recipe = {"base": "base", "shared": "shared LR", "lr3": "3× LR", "lr10": "10× LR"}.get(a.get("recipe"), "")
        steps = f", {a['steps']} steps" if a.get("steps") else ""
        return f"{size}, {recipe}{steps}"


def load_paper_reported(path: str | Path) -> PaperReported:
    """Load the paper's numbers (a plain YAML mapping; a key given twice is an error naming it)."""
    path = Path(path)
    data = load_yaml(path)
    if not isinstance(data, dict) or "arms" not in data:
        raise ValueError(f"{path}: not a paper_reported file (needs an 'arms' mapping)")
    return PaperReported(data, path)


__all__ = ["PRINTED_MARKS", "PaperReported", "load_paper_reported"]
