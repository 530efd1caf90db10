"""The paper's reported numbers: ``params/paper_reported.yaml``, transcribed once and never computed.

The book's tables and figures show them beside ours (columns and panels labelled ``paper``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from negolib.files import load_yaml
from negolib.formatting import DASH


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


__all__ = ["PaperReported", "load_paper_reported"]
