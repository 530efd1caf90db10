"""Checked exercises in the book's notebooks: the convention, the checks' helper and the extractor.

The convention (every notebook follows it; ``tests/test_exercises.py`` enforces it)
================================================================================

An exercise lives in a notebook's ``## Exercises`` section, near its end, as consecutive cells:

1. a **markdown** cell headed ``### Exercise N.k: <title>`` (``N`` the notebook's number, ``k`` from 1)
   stating the task and *what a good answer shows*, naming the variables the answer must define;
2. optionally, **code** cells tagged ``exercise``: the given material (imports, a small synthetic
   data set, a transcript). They are kept in the handout;
3. one or more **code** cells tagged ``solution``: leading ``#`` comment lines restating the task
   (kept in the handout), then the answer, which defines the names the check reads. The handout
   (:mod:`negolib.book.handout`) replaces everything after the comment lines by ``...  # your code here``,
   so in a student's copy those names are undefined until the student answers;
4. one **code** cell tagged ``check``: it first reads the answer's names with :func:`expect` (an
   undefined name, ``...`` or ``None`` fails with ``AssertionError("exercise N.k: define `name` ...")``),
   then ``assert``\\ s, each with a readable message, properties that only a correct answer has
   (values against the library's own function, shapes, an interval that excludes zero, ...).

Self-contained: an exercise's ``exercise``, ``solution`` and ``check`` cells run on their own, in a
fresh namespace, in the notebook's folder, in seconds: they may import anything (``negolib``, numpy,
pandas), build small synthetic data or read small files shipped in the repository, but never read a
name that another cell of the notebook defines, a model, or anything under ``outputs/`` (the test
runs them without executing the notebook). Give the answer's names a prefix unlikely to clash with
the notebook's own variables. No check may print in place of asserting, and a check must fail in the
handout: the test runs each exercise twice, as in the book (solution then check: must pass) and as in
the handout (stripped solution then check: must raise ``AssertionError`` naming the exercise).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SOLUTION_TAG = "solution"
CHECK_TAG = "check"
GIVEN_TAG = "exercise"
MIN_EXERCISES = 2
"""Every notebook of the book holds at least this many exercises."""
_TITLE = re.compile(r"^#{2,4}\s*Exercise\s+(\d+\.\d+)\b", re.MULTILINE)


class ExerciseError(AssertionError):
    """A check that failed because the answer is missing (an :class:`AssertionError`, so a check
    that reads a missing answer fails the same way as one whose answer is wrong)."""


def expect(ns: Mapping[str, Any], *names: str, exercise: str) -> Any:
    """The values of ``names`` in the namespace ``ns`` (pass ``globals()``): one value for one name,
    else a tuple. A name that is undefined, ``...`` or ``None`` raises :class:`ExerciseError` saying
    which exercise wants which name, so a handout's check fails readably until the student answers."""
    if not names:
        raise ValueError("expect needs at least one name")
    missing = [n for n in names if n not in ns or ns[n] is Ellipsis or ns[n] is None]
    if missing:
        which = ", ".join(f"`{n}`" for n in missing)
        raise ExerciseError(f"exercise {exercise}: define {which} in the solution cell above "
                            f"(the task says what {'it' if len(missing) == 1 else 'each'} must hold), "
                            "then run this check again")
    values = tuple(ns[n] for n in names)
    return values[0] if len(values) == 1 else values


@dataclass
class Exercise:
    """One exercise's cells, in notebook order: ``given`` (tagged ``exercise``), ``solutions`` and the
    ``check`` (each a cell's source)."""

    notebook: str
    number: str
    given: list[str] = field(default_factory=list)
    solutions: list[str] = field(default_factory=list)
    check: str = ""


def _tags(cell: Any) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def extract_exercises(nb: Any, notebook: str = "") -> list[Exercise]:
    """The exercises of a notebook (an nbformat node), per the convention above.

    A ``check`` cell closes an exercise made of the ``exercise`` and ``solution`` cells since the
    previous check; its number is the last ``### Exercise N.k`` heading before it (``?`` if none).
    Raises ``ValueError`` for a check with no solution before it or a solution never checked."""
    out: list[Exercise] = []
    number, given, solutions = "?", [], []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            m = _TITLE.search(cell.source)
            if m:
                number = m.group(1)
            continue
        if cell.cell_type != "code":
            continue
        tags = _tags(cell)
        if GIVEN_TAG in tags:
            given.append(cell.source)
        elif SOLUTION_TAG in tags:
            solutions.append(cell.source)
        elif CHECK_TAG in tags:
            if not solutions:
                raise ValueError(f"{notebook}: the check of exercise {number} has no solution cell before it")
            out.append(Exercise(notebook, number, given, solutions, cell.source))
            given, solutions = [], []
    if solutions:
        raise ValueError(f"{notebook}: a solution cell after exercise {number} has no check cell")
    return out


def run_cells(sources: Sequence[str], ns: dict[str, Any] | None = None) -> dict[str, Any]:
    """Execute cell sources in order in one namespace (a fresh one by default) and return it; IPython
    magics are not supported (exercise cells are plain Python)."""
    ns = {"__name__": "__exercise__"} if ns is None else ns
    for i, src in enumerate(sources):
        exec(compile(src, f"<cell {i}>", "exec"), ns)  # noqa: S102 - the book's own cells
    return ns


__all__ = ["CHECK_TAG", "Exercise", "ExerciseError", "GIVEN_TAG", "MIN_EXERCISES", "SOLUTION_TAG",
           "expect", "extract_exercises", "run_cells"]
