"""Compatibility: the book's table object and its cells, moved to the report layer.

The former ``tables`` module is now two layers: :mod:`negolib.analysis` (tidy numeric frames: estimates,
contrasts, decomposition, guards, cost, training summaries) and :mod:`negolib.report` (one module per
notebook section: the display tables and figures, the paper's values beside ours). This module only
re-exports the table object and the generic helpers for code written against the old name; new code
imports from :mod:`negolib.report.booktable` (and the section modules) directly.
"""

from __future__ import annotations

from negolib.formatting import DASH, fmt_ci, fmt_num, fmt_pct
from negolib.report.booktable import PAPER, BookTable, fmt_paper, simple_table

__all__ = ["DASH", "PAPER", "BookTable", "fmt_ci", "fmt_num", "fmt_paper", "fmt_pct", "simple_table"]
