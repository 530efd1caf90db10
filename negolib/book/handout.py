"""Course handouts: the book's notebooks with the exercise solutions taken out.

An exercise (the convention is :mod:`negolib.book.exercises`) is a markdown cell stating it, optional
given cells tagged ``exercise``, code cells tagged ``solution`` whose leading comment lines restate
the task, and a cell tagged ``check``. The handout keeps every cell but replaces each solution's code
(after those comment lines) by a placeholder, and clears all outputs, so students run the same book
and fill in the gaps; each check then fails with its message until the student answers. The book
itself executes the solutions as ordinary cells.

:func:`make_handout` writes the stripped ``.ipynb`` files to a folder and, beside it, a ZIP that opens
in JupyterLab as it is: a small project (``notebooks/`` with the stripped notebooks only, never the
``.py`` sources, which hold the solutions; ``params/`` with the profiles; the ``negolib`` library with
its domains and prompt templates; ``pyproject.toml`` so that ``pip install -e .`` installs it and
relative paths in a profile resolve; a ``README.md`` for students) and nothing generated: no
``outputs/``, no caches, no executed cells.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from negolib.book.context import NOTEBOOK_DIR
from negolib.book.exercises import SOLUTION_TAG
from negolib.book.runner import resolve_notebooks, source_notebook

PLACEHOLDER = "...  # your code here"
ROOT = NOTEBOOK_DIR.parent
"""The project the handout is made from (its ``params/``, ``negolib/`` and ``pyproject.toml``)."""
LIBRARY_SUFFIXES = (".py", ".yaml", ".j2", ".txt", ".json", ".csv")
"""What of the library travels in the ZIP: source, domains, prompt templates and small data files."""
STUDENT_README = """# Negotiation RL: course notebooks

The notebooks of the negobook with the exercise solutions taken out. Each exercise is a task, a
cell where you write your answer (`...  # your code here`) and a check cell that fails, saying what
is missing, until your answer is right.

1. `python -m venv .venv && .venv/bin/pip install -e ".[book]"` (add `ml` for the training notebooks),
2. `.venv/bin/jupyter lab notebooks/`,
3. open a notebook, run it top to bottom (it uses `params/smoke.yaml` unless you change
   `params_path`), then work through its `## Exercises` section. Each exercise runs on its own.

Notebooks write what they produce under `outputs/<profile>/`; later notebooks read what earlier
ones wrote, so run them in order.
"""


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
                 folder: str | Path | None = None, zip_path: str | Path | None = None,
                 write_zip: bool = True) -> dict[str, int]:
    """Write handout copies (``.ipynb``) of the book's notebooks to ``out_dir`` and, unless
    ``write_zip`` is false, the runnable ZIP (:func:`write_zip_handout`) at ``zip_path`` (default:
    ``out_dir`` with the suffix ``.zip``, beside the folder). Returns the number of solutions
    stripped per notebook (notebooks without exercises are copied with outputs cleared)."""
    import nbformat

    src = Path(folder) if folder else NOTEBOOK_DIR
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name in resolve_notebooks(notebooks, src):
        nb = source_notebook(name, src)
        counts[name] = strip_solutions(nb, tag)
        nb.metadata.pop("jupytext", None)  # a student's copy pairs with no .py (the sources hold the solutions)
        nbformat.write(nb, out / f"{name}.ipynb")
    if write_zip:
        write_zip_handout(out, [out / f"{n}.ipynb" for n in counts], zip_path)
    return counts


def default_zip_path(out_dir: str | Path) -> Path:
    """Where :func:`make_handout` writes the ZIP: beside ``out_dir``, named after it (``handout.zip``)."""
    out = Path(out_dir).resolve()
    return out.with_name(out.name + ".zip")


def _library_files(root: Path) -> Iterator[Path]:
    """The library's source and small data files under ``root/negolib`` (no caches, no bytecode)."""
    for path in sorted((root / "negolib").rglob("*")):
        if path.is_file() and path.suffix in LIBRARY_SUFFIXES and "__pycache__" not in path.parts:
            yield path


def write_zip_handout(out_dir: str | Path, notebooks: Sequence[Path], zip_path: str | Path | None = None,
                      root: str | Path | None = None) -> Path:
    """The handout as a ZIP that opens in JupyterLab as it is: one top folder named after ``out_dir``
    holding ``notebooks/`` (the given stripped ``.ipynb`` files), ``params/*.yaml``, the ``negolib``
    library (:data:`LIBRARY_SUFFIXES`), ``pyproject.toml`` and a student ``README.md``; nothing
    generated. Returns the ZIP's path."""
    base = Path(root) if root else ROOT
    target = Path(zip_path) if zip_path else default_zip_path(out_dir)
    top = Path(out_dir).resolve().name
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for nb in notebooks:
            zf.write(nb, f"{top}/notebooks/{Path(nb).name}")
        for profile in sorted((base / "params").glob("*.yaml")):
            zf.write(profile, f"{top}/params/{profile.name}")
        for path in _library_files(base):
            zf.write(path, f"{top}/{path.relative_to(base).as_posix()}")
        zf.write(base / "pyproject.toml", f"{top}/pyproject.toml")
        zf.writestr(f"{top}/README.md", STUDENT_README)
    return target


__all__ = ["LIBRARY_SUFFIXES", "PLACEHOLDER", "SOLUTION_TAG", "STUDENT_README", "default_zip_path", "make_handout",
           "strip_solutions", "write_zip_handout"]
