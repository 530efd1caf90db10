"""The notebooks: jupytext pairs in sync, one parameters cell each, and the whole book executes
under papermill on params/smoke.yaml with the expected tables and no error outputs (the CI smoke)."""

from __future__ import annotations

import json
from pathlib import Path

import jupytext
import nbformat
import pytest

from negolib.book import NOTEBOOKS, run_book

ROOT = Path(__file__).resolve().parent.parent
NB_DIR = ROOT / "notebooks"
# Titles each executed notebook must show (tables and figures it regenerates).
EXPECTED = {
    "01_environment": ["The nine domains", "Domain `car`", "Eq. 1 on example outcomes", "image/png"],
    "02_setup": ["Arm matrix", "The paired evaluation scenario set", "Sampling settings", "GRPO recipe",
                 "Table 8", "Chat-template turn tags"],
    "03_training": ["Learning ladder: the CI rung and its sabotaged twins (ours)", "Format warm-up per run (ours)",
                    "Training diagnostics (App. D)", "image/png"],
    "04_evaluation": ["protocol", "Pilot gate", "Episodes in the transcript store"],
    "05_results": ["Primary family", "Table 1", "Table 2", "Openings", "image/png"],
    "06_appendix_b_c": ["Table 3", "Table 4", "Held-out panel", "image/png"],
    "07_appendix_d_e": ["Training diagnostics", "Prespecified guards", "Table 5", "Table 6", "Style diagnostics"],
    "08_appendix_g_k": ["Table 7", "Cost per episode", "Monte Carlo error", "Table 9"],
    "09_beyond": ["Scripted baseline sellers", "Deal efficiency", "Turn order", "Fixed openings", "image/png"],
}


def _cells(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_pair_in_sync_and_stripped(name):
    py, ipynb = NB_DIR / f"{name}.py", NB_DIR / f"{name}.ipynb"
    assert py.exists() and ipynb.exists(), f"{name}: both the .py source and the paired .ipynb are needed"
    src = jupytext.read(py, fmt="py:percent")
    paired = nbformat.read(ipynb, as_version=4)
    assert _cells(src) == _cells(paired), f"{name}.ipynb drifted from {name}.py: run `jupytext --sync`"
    for c in paired.cells:
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None, f"{name}.ipynb holds outputs"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_exactly_one_parameters_cell(name):
    nb = jupytext.read(NB_DIR / f"{name}.py", fmt="py:percent")
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, f"{name}: {len(params)} parameters cells"
    assert 'params_path: str = "../params/smoke.yaml"' in params[0].source
    assert "output_dir: str" in params[0].source


@pytest.fixture(scope="module")
def smoke_book(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke")
    return run_book(ROOT / "params" / "smoke.yaml", output_dir=out, progress=False)


def test_smoke_book_executes(smoke_book):
    assert smoke_book.ok, str(smoke_book.error)
    assert smoke_book.executed == list(NOTEBOOKS)
    assert (smoke_book.output_dir / "index.md").exists()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_executed_notebook_has_tables_and_no_errors(smoke_book, name):
    path = smoke_book.output_dir / "notebooks" / f"{name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{name}: {errors[0].get('ename')}: {errors[0].get('evalue')}" if errors else ""
    text = json.dumps([c.get("outputs", []) for c in nb.cells])
    for needle in EXPECTED[name]:
        assert needle in text, f"{name}: executed copy shows no {needle!r}"


def test_smoke_outputs_on_disk(smoke_book):
    out = smoke_book.output_dir
    for name in ("table1", "table2", "table3", "table4", "table5", "table6", "table7", "table8", "table9"):
        assert (out / "tables" / f"{name}.csv").exists() and (out / "tables" / f"{name}.md").exists(), name
    for fig in ("figure1_ledger", "figure2", "figure3", "pareto_frontier", "learning_ladder"):
        assert (out / "figures" / f"{fig}.png").exists(), fig
    import pandas as pd

    ladder = pd.read_csv(out / "tables" / "learning_ladder.csv")
    assert len(ladder) == 5 and set(ladder["as required"]) == {"yes"}, ladder  # the rung learns, no twin does
    assert (out / "transcripts" / "evaluation.jsonl").exists()
    assert (out / "evaluation" / "protocol.yaml").exists()
