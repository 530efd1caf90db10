"""Course handouts: solutions stripped, everything else kept, outputs cleared; the ZIP is a runnable project."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat

from negolib.book.exercises import extract_exercises
from negolib.book.handout import PLACEHOLDER, ROOT, default_zip_path, make_handout, strip_solutions
from negolib.book.runner import resolve_notebooks, source_notebook
from negolib.cli import main


def test_handout_strips_tagged_solutions_only(tmp_path: Path) -> None:
    counts = make_handout(tmp_path / "h", ["01"], write_zip=False)
    original = source_notebook("01_environment")
    n_solutions = sum("solution" in c.get("metadata", {}).get("tags", []) for c in original.cells)
    assert counts == {"01_environment": n_solutions} and n_solutions >= 2
    nb = nbformat.read(tmp_path / "h" / "01_environment.ipynb", as_version=4)
    assert len(nb.cells) == len(original.cells)
    assert "jupytext" not in nb.metadata  # a student's copy pairs with no .py
    for cell, orig in zip(nb.cells, original.cells):
        tags = orig.get("metadata", {}).get("tags", [])
        if "solution" in tags:
            assert cell.source.endswith(PLACEHOLDER) and "class LastCallBoulware" not in cell.source
            assert cell.source.startswith("# Exercise")  # the restated task survives
        else:
            assert cell.source == orig.source
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
    assert len(extract_exercises(nb, "01_environment")) == len(extract_exercises(original, "01_environment"))


def test_strip_clears_outputs_of_executed_copies() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1", outputs=[nbformat.v4.new_output("stream", text="1")],
                                          execution_count=3),
                nbformat.v4.new_code_cell("# task\nanswer = 42", metadata={"tags": ["solution"]})]
    assert strip_solutions(nb) == 1
    assert nb.cells[0].outputs == [] and nb.cells[0].source == "x = 1"
    assert nb.cells[1].source == f"# task\n{PLACEHOLDER}"


def test_cli_writes_every_notebook_and_the_zip(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    out = tmp_path / "handout"
    assert main(["book", "handout", "--out", str(out)]) == 0
    assert sorted(p.stem for p in out.glob("*.ipynb")) == sorted(resolve_notebooks(None))
    text = capsys.readouterr().out
    assert "01_environment.ipynb: " in text and "solution(s) stripped" in text
    assert default_zip_path(out) == tmp_path / "handout.zip" and "handout.zip" in text
    assert (tmp_path / "handout.zip").exists()


def test_zip_is_a_runnable_project_with_nothing_generated(tmp_path: Path) -> None:
    counts = make_handout(tmp_path / "course", ["01", "04"])
    with zipfile.ZipFile(tmp_path / "course.zip") as zf:
        names = zf.namelist()
        assert all(n.startswith("course/") for n in names)  # one top folder
        rel = {n.removeprefix("course/") for n in names}
        assert {f"notebooks/{n}.ipynb" for n in counts} == {r for r in rel if r.startswith("notebooks/")}
        assert {f"params/{p.name}" for p in (ROOT / "params").glob("*.yaml")} <= rel
        assert {"pyproject.toml", "README.md", "negolib/__init__.py", "negolib/games/multi_issue/domains/car.yaml",
                "negolib/games/multi_issue/prompts/system.j2", "negolib/book/exercises.py"} <= rel
        assert not [r for r in rel if r.startswith(("outputs/", "tests/", "benchmarks/"))]
        assert not [r for r in rel if "__pycache__" in r or r.endswith((".pyc", ".parquet", ".jsonl"))]
        assert not [r for r in rel if r.startswith("notebooks/") and not r.endswith(".ipynb")]  # no .py sources
        nb = nbformat.reads(zf.read("course/notebooks/01_environment.ipynb").decode(), as_version=4)
        assert json.loads(zf.read("course/notebooks/04_evaluation.ipynb"))["nbformat"] == 4
    solutions = [c for c in nb.cells if "solution" in c.metadata.get("tags", [])]
    assert solutions and all(c.source.endswith(PLACEHOLDER) for c in solutions)
    assert all(c.outputs == [] for c in nb.cells if c.cell_type == "code")
    # the notebooks' relative profile path resolves inside the unpacked project
    with zipfile.ZipFile(tmp_path / "course.zip") as zf:
        zf.extractall(tmp_path / "unzipped")
    project = tmp_path / "unzipped" / "course"
    assert (project / "notebooks" / "../params/smoke.yaml").resolve().exists()
    from negolib.params import load_params

    profile = load_params(project / "params" / "smoke.yaml")
    assert Path(profile.root).resolve() == project.resolve()  # outputs/ would be written inside the project
    assert profile.paper_reported_path.resolve().is_relative_to(project.resolve())


def test_zipped_exercise_runs_on_the_zipped_library(tmp_path: Path) -> None:
    """Unpacked, the ZIP's own negolib (not this checkout's) runs a handout exercise: its given cells
    work and its check fails with the exercise's message until the student answers."""
    make_handout(tmp_path / "course", ["01"])
    with zipfile.ZipFile(tmp_path / "course.zip") as zf:
        zf.extractall(tmp_path / "unzipped")
    project = tmp_path / "unzipped" / "course"
    script = (
        "import nbformat, negolib, pathlib\n"
        "from negolib.book.exercises import extract_exercises, run_cells\n"
        f"assert pathlib.Path(negolib.__file__).resolve().is_relative_to(pathlib.Path({str(project)!r}).resolve())\n"
        "nb = nbformat.read('01_environment.ipynb', as_version=4)\n"
        "ex = extract_exercises(nb, '01_environment')[0]\n"
        "try:\n"
        "    run_cells([*ex.given, *ex.solutions, ex.check])\n"
        "except AssertionError as err:\n"
        "    print('FAILED:', err)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(project)}
    res = subprocess.run([sys.executable, "-c", script], cwd=project / "notebooks", env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "FAILED: exercise 1.1: define `ex1_S`, `ex1_reward`" in res.stdout
