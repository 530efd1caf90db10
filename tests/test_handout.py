"""Course handouts: solutions stripped, everything else kept, outputs cleared."""

from __future__ import annotations

import nbformat

from negolib.book import NOTEBOOKS, source_notebook
from negolib.cli import main
from negolib.handout import PLACEHOLDER, make_handout, strip_solutions


def test_handout_strips_tagged_solutions_only(tmp_path):
    counts = make_handout(tmp_path, ["01"])
    assert counts == {"01_environment": 2}
    nb = nbformat.read(tmp_path / "01_environment.ipynb", as_version=4)
    original = source_notebook("01_environment")
    assert len(nb.cells) == len(original.cells)
    for cell, orig in zip(nb.cells, original.cells):
        tags = orig.get("metadata", {}).get("tags", [])
        if "solution" in tags:
            assert cell.source.endswith(PLACEHOLDER) and "explorer.play" not in cell.source
            assert cell.source.startswith("# Exercise")  # the restated task survives
        else:
            assert cell.source == orig.source
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


def test_strip_clears_outputs_of_executed_copies():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1", outputs=[nbformat.v4.new_output("stream", text="1")],
                                          execution_count=3),
                nbformat.v4.new_code_cell("# task\nanswer = 42", metadata={"tags": ["solution"]})]
    assert strip_solutions(nb) == 1
    assert nb.cells[0].outputs == [] and nb.cells[0].source == "x = 1"
    assert nb.cells[1].source == f"# task\n{PLACEHOLDER}"


def test_cli_writes_every_notebook(tmp_path, capsys):
    assert main(["book", "handout", "--out", str(tmp_path)]) == 0
    assert sorted(p.stem for p in tmp_path.glob("*.ipynb")) == sorted(NOTEBOOKS)
    assert "01_environment.ipynb: 2 solution(s) stripped" in capsys.readouterr().out
