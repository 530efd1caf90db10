"""A book table: display strings (ours, and the paper's in columns labelled ``paper: ...``), the tidy
numbers behind them and a caption; rendered as pandas Styler HTML in a notebook and saved as CSV,
markdown and HTML under ``outputs/<profile>/tables/``.

A cell with nothing to show is :data:`negolib.core.formatting.DASH`; no number is ever invented.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from negolib.core.formatting import DASH, fmt_ci, fmt_num, fmt_pct, is_number

PAPER = "paper"
"""Columns whose name starts with ``paper:`` hold the paper's reported values."""


def fmt_paper(v: Any, digits: int = 3, signed: bool = False, mark: str = "", pct: bool = False) -> str:
    """A paper value: a number, or ``[est, lo, hi]``."""
    if v is None:
        return DASH
    if isinstance(v, (list, tuple)):
        if len(v) == 3:
            return fmt_ci(v[0], v[1], v[2], digits, signed=signed, mark=mark)
        if len(v) == 2:
            return f"{fmt_num(v[0], digits)} → {fmt_num(v[1], digits)}"
    if pct:
        return fmt_pct(v)
    return fmt_num(v, digits, signed) + (mark or "") if is_number(v) else str(v)


@dataclass
class BookTable:
    """A rendered table: ``frame`` (display strings), ``data`` (tidy numbers, ours) and a caption.

    Columns whose name starts with ``paper:`` hold the paper's reported values.
    """

    name: str
    title: str
    frame: pd.DataFrame
    caption: str = ""
    data: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)
    paper_frame: pd.DataFrame | None = None

    @property
    def paper_columns(self) -> list[str]:
        return [c for c in self.frame.columns if str(c).startswith(f"{PAPER}:")]

    @property
    def empty(self) -> bool:
        return self.frame.empty

    def styler(self) -> Any:
        """pandas Styler: the paper's columns shaded and italic, our columns plain."""
        sty = self.frame.style.set_caption(f"<b>{self.title}</b>" + (f"<br>{self.caption}" if self.caption else ""))
        if self.paper_columns:
            sty = sty.set_properties(subset=self.paper_columns, **{"background-color": "#f1f1f6",
                                                                   "font-style": "italic", "color": "#445"})
        return sty.set_table_styles([{"selector": "caption", "props": "caption-side: top; text-align: left;"}])

    def to_html(self) -> str:
        return self.styler().to_html()

    def _repr_html_(self) -> str:
        notes = "".join(f"<p style='font-size:90%'>{n}</p>" for n in self.notes)
        html = self.to_html() + notes
        if self.paper_frame is not None and not self.paper_frame.empty:
            sty = self.paper_frame.style.set_caption("<b>paper (reported)</b>").set_properties(
                **{"background-color": "#f1f1f6", "font-style": "italic", "color": "#445"})
            html += "<br>" + sty.to_html()
        return html

    def to_markdown(self) -> str:
        body = self.frame.to_markdown(disable_numparse=True) if not self.frame.empty else "(no rows)"
        parts = [f"**{self.title}**", ""]
        if self.caption:
            parts += [self.caption, ""]
        parts.append(body)
        parts += ["", *[f"> {n}" for n in self.notes]] if self.notes else []
        if self.paper_frame is not None and not self.paper_frame.empty:
            parts += ["", "*paper (reported):*", "", self.paper_frame.to_markdown(disable_numparse=True)]
        return "\n".join(parts) + "\n"

    def save(self, folder: str | Path) -> list[Path]:
        """Write ``<name>.csv`` (as displayed), ``<name>.md``, ``<name>.html`` and, with tidy data,
        ``<name>_data.csv``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        out = [folder / f"{self.name}.csv", folder / f"{self.name}.md", folder / f"{self.name}.html"]
        self.frame.to_csv(out[0])
        out[1].write_text(self.to_markdown(), encoding="utf-8")
        out[2].write_text("<!doctype html><meta charset='utf-8'>" + self._repr_html_(), encoding="utf-8")
        if self.data is not None:
            out.append(folder / f"{self.name}_data.csv")
            self.data.to_csv(out[-1], index=False)
        if self.paper_frame is not None:
            out.append(folder / f"{self.name}_paper.csv")
            self.paper_frame.to_csv(out[-1])
        return out


def simple_table(name: str, title: str, frame: pd.DataFrame, caption: str = "",
                 paper_values: Mapping[str, Any] | None = None) -> BookTable:
    """Wrap any frame of ours, optionally adding constant ``paper: <key>`` columns."""
    df = frame.copy()
    for k, v in (paper_values or {}).items():
        df[f"{PAPER}: {k}"] = v if isinstance(v, str) else fmt_paper(v)
    return BookTable(name, title, df, caption)


__all__ = ["BookTable", "PAPER", "fmt_paper", "simple_table"]
