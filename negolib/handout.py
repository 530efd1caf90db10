"""Course handouts: the book's notebooks with the exercise solutions taken out.

An exercise is a markdown cell stating it, followed by a code cell tagged ``solution`` whose
leading comment lines restate the task. The handout keeps every cell but replaces each solution's
code (after those comment lines) by a placeholder, and clears all outputs, so students run the same
book and fill in the gaps; the book itself executes the solutions as ordinary cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from negolib.book import NOTEBOOK_DIR, resolve_notebooks, source_notebook

SOLUTION_TAG = "solution"
PLACEHOLDER = "...  # your code here"


def strip_solutions(nb: Any, tag: str = SOLUTION_TAG) -> int:
    """Replace the code of every cell tagged ``tag`` in ``nb`` (in place) by its leading comment
    lines and :data:`PLACEHOLDER`; clear all code outputs. Returns the number of cells stripped."""
    stripped = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs, cell.execution_count = [], None
        if tag in cell.get("metadata", {}).get("tags", []):
            lines = cell.source.splitlines()
            head = []
            for line in lines:
                if not line.lstrip().startswith("#"):
                    break
                head.append(line)
            cell.source = "\n".join([*head, PLACEHOLDER])
            stripped += 1
    return stripped


def make_handout(out_dir: str | Path, notebooks: Sequence[str] | None = None, tag: str = SOLUTION_TAG,
                 folder: str | Path | None = None) -> dict[str, int]:
    """Write handout copies (``.ipynb``) of the book's notebooks to ``out_dir``; returns the number of
    solutions stripped per notebook (notebooks without exercises are copied with outputs cleared)."""
    import nbformat

    src = Path(folder) if folder else NOTEBOOK_DIR
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name in resolve_notebooks(notebooks, src):
        nb = source_notebook(name, src)
        counts[name] = strip_solutions(nb, tag)
        nbformat.write(nb, out / f"{name}.ipynb")
    return counts


__all__ = ["PLACEHOLDER", "SOLUTION_TAG", "make_handout", "strip_solutions"]
