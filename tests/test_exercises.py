"""Every notebook's exercises, checked twice without executing the notebook (see :mod:`negolib.book.exercises`).

* As in the book: the exercise's given cells, its solution and its check run in a fresh namespace, in
  the notebooks' folder: the check must pass.
* As in the handout: the same cells after :func:`negolib.book.handout.strip_solutions` (the handout's own
  transformation): the check must raise ``AssertionError`` naming the exercise, so a check that
  cannot fail is caught.

Also: each notebook holds at least :data:`~negolib.book.exercises.MIN_EXERCISES` exercises (the notebooks
listed in :data:`AWAITING_EXERCISES` are expected failures until theirs are written), numbered after
the notebook, in a ``## Exercises`` section, and every ``assert`` of a check carries a message.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from negolib.book.context import NOTEBOOK_DIR
from negolib.book.exercises import (
    CHECK_TAG,
    GIVEN_TAG,
    MIN_EXERCISES,
    SOLUTION_TAG,
    Exercise,
    ExerciseError,
    expect,
    extract_exercises,
    run_cells,
)
from negolib.book.handout import PLACEHOLDER, strip_solutions
from negolib.book.runner import source_notebook
from negolib.params import NOTEBOOKS

AWAITING_EXERCISES: tuple[str, ...] = ()
"""Notebooks (or name prefixes) whose exercises are still to be written: fewer than two is an xfail."""


def _present(names: tuple[str, ...]) -> list[str]:
    return [n for n in names if (NOTEBOOK_DIR / f"{n}.py").exists() or (NOTEBOOK_DIR / f"{n}.ipynb").exists()]


def _exercises() -> Iterator[Exercise]:
    for name in _present(NOTEBOOKS):
        yield from extract_exercises(source_notebook(name), name)


EXERCISES = list(_exercises())


@pytest.fixture
def in_notebooks(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in the notebooks' folder, as the book and JupyterLab do (relative paths such as
    ``../params/default.yaml`` resolve as in a notebook); matplotlib draws off-screen."""
    monkeypatch.chdir(NOTEBOOK_DIR)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    return NOTEBOOK_DIR


def _stripped(ex: Exercise) -> list[str]:
    """The exercise's solution cells as the handout writes them."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src, metadata={"tags": [SOLUTION_TAG]}) for src in ex.solutions]
    assert strip_solutions(nb) == len(ex.solutions)
    return [c.source for c in nb.cells]


@pytest.mark.parametrize("name", _present(NOTEBOOKS))
def test_every_notebook_has_exercises(name: str) -> None:
    found = extract_exercises(source_notebook(name), name)
    if len(found) < MIN_EXERCISES and name.startswith(AWAITING_EXERCISES):
        waiting = [n for n in _present(NOTEBOOKS) if n.startswith(AWAITING_EXERCISES)
                   and len(extract_exercises(source_notebook(n), n)) < MIN_EXERCISES]
        pytest.xfail(f"exercises still to be written in: {', '.join(waiting)}")
    assert len(found) >= MIN_EXERCISES, f"{name} has {len(found)} exercise(s); every notebook needs {MIN_EXERCISES}"


@pytest.mark.parametrize("name", _present(NOTEBOOKS))
def test_exercises_follow_the_convention(name: str) -> None:
    nb = source_notebook(name)
    found = extract_exercises(nb, name)
    if not found:
        pytest.skip(f"{name} has no exercises yet")
    number = int(name[:2])
    assert [e.number for e in found] == [f"{number}.{k}" for k in range(1, len(found) + 1)], \
        f"{name}: exercises must be headed '### Exercise {number}.1', '{number}.2', ... in order"
    sources = [c.source for c in nb.cells]
    tags = {GIVEN_TAG, SOLUTION_TAG, CHECK_TAG}
    first = next(i for i, c in enumerate(nb.cells) if tags & set(c.metadata.get("tags", [])))
    assert any(s.lstrip().startswith("## Exercises") or "\n## Exercises" in s for s in sources[:first]), \
        f"{name}: the exercises must sit in a '## Exercises' section"
    for ex in found:
        for src in ex.solutions:
            assert src.lstrip().startswith("#"), \
                f"{name} {ex.number}: a solution starts with comment lines restating the task"
        tree = ast.parse(ex.check)
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "expect"]
        assert calls, f"{name} {ex.number}: the check must read the answer with expect(globals(), ..., exercise=...)"
        asserts = [n for n in ast.walk(tree) if isinstance(n, ast.Assert)]
        assert asserts, f"{name} {ex.number}: the check asserts nothing"
        assert all(a.msg is not None for a in asserts), f"{name} {ex.number}: every assert of a check needs a message"


@pytest.mark.parametrize("ex", EXERCISES, ids=[f"{e.notebook}-{e.number}" for e in EXERCISES])
def test_check_passes_in_book_and_fails_in_handout(ex: Exercise, in_notebooks: Path) -> None:
    run_cells([*ex.given, *ex.solutions, ex.check])  # the book: the check passes

    stripped = _stripped(ex)
    assert all(s.endswith(PLACEHOLDER) for s in stripped)
    with pytest.raises(AssertionError) as err:  # the handout: it fails, saying which exercise
        run_cells([*ex.given, *stripped, ex.check])
    message = str(err.value)
    assert f"exercise {ex.number}" in message, f"the handout's failure does not name the exercise: {message!r}"


def test_expect_names_what_is_missing() -> None:
    assert expect({"a": 1}, "a", exercise="1.1") == 1
    assert expect({"a": 1, "b": 2}, "a", "b", exercise="1.1") == (1, 2)
    for ns in ({}, {"a": ...}, {"a": None}):
        with pytest.raises(ExerciseError, match=r"exercise 3\.2: define `a`"):
            expect(ns, "a", exercise="3.2")
    with pytest.raises(AssertionError, match="`b`"):
        expect({"a": 1}, "a", "b", exercise="3.2")


def test_extract_groups_cells_by_check() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("## Exercises\n### Exercise 4.1: x"),
                nbformat.v4.new_code_cell("data = 1", metadata={"tags": [GIVEN_TAG]}),
                nbformat.v4.new_code_cell("# task\nans = data + 1", metadata={"tags": [SOLUTION_TAG]}),
                nbformat.v4.new_code_cell("ans = expect(globals(), 'ans', exercise='4.1')\nassert ans == 2, 'no'",
                                          metadata={"tags": [CHECK_TAG]}),
                nbformat.v4.new_code_cell("print('not an exercise')")]
    (ex,) = extract_exercises(nb, "04_x")
    assert (ex.number, ex.given, len(ex.solutions)) == ("4.1", ["data = 1"], 1)
    ns = run_cells([*ex.given, *ex.solutions, "from negolib.book.exercises import expect", ex.check])
    assert ns["ans"] == 2
    nb.cells.append(nbformat.v4.new_code_cell("# orphan\nx = 1", metadata={"tags": [SOLUTION_TAG]}))
    with pytest.raises(ValueError, match="has no check"):
        extract_exercises(nb, "04_x")
