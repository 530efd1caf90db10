"""The book runner's heartbeat: the running cell, its elapsed time and its last printed line."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from negolib.book.progress import CellStatus, running_cell
from negolib.book.runner import ensure_kernel, execute_notebook

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "params" / "smoke.yaml"
NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc)


def _cell(source: str, status: str, start: datetime | None = None, outputs: list | None = None) -> dict:
    meta = {"papermill": {"status": status, "start_time": start.isoformat() if start else None}}
    return {"cell_type": "code", "source": source, "metadata": meta, "outputs": outputs or []}


def test_running_cell_names_index_source_elapsed_and_last_output():
    bar = {"output_type": "stream", "name": "stderr",
           "text": "episodes:  10%|#         | 1/10\repisodes:  40%|####      | 4/10"}
    nb = {"cells": [
        {"cell_type": "markdown", "source": "# title", "metadata": {}},
        _cell("x = 1", "completed", NOW - timedelta(minutes=9)),
        _cell("\n# train\nresult = train_all(P)\n", "running", NOW - timedelta(seconds=245), [bar]),
        _cell("show(result)", "pending"),
    ]}
    s = running_cell(nb, NOW)
    assert s == CellStatus(2, 3, "# train", 245.0, "episodes:  40%|####      | 4/10")
    assert s.line("03_training") == ("03_training: cell 2/3 `# train` running 4m05s | "
                                     "episodes:  40%|####      | 4/10")
    display = {"output_type": "display_data", "data": {"text/plain": ["steps: 3/4\n", "\n"]}}
    nb["cells"][2]["outputs"].append(display)
    assert running_cell(nb, NOW).last_output == "steps: 3/4"
    # a Trainer's notebook progress is HTML whose text/plain is only a repr: the heartbeat reads the HTML
    trainer = {"output_type": "display_data", "data": {
        "text/plain": ["<IPython.core.display.HTML object>"],
        "text/html": ["\n", "    <div>\n", "      <progress value='3' max='6'></progress>\n",
                      "      [3/6 04:12 &lt; 12:37, 0.00 it/s, Epoch 0.67/2]\n", "    </div>\n",
                      "<table><tr><th>Step</th><th>Training Loss</th></tr>",
                      "<tr><td>1</td><td>0.479768</td></tr></table>"]}}
    nb["cells"][2]["outputs"].append(trainer)
    assert running_cell(nb, NOW).last_output == "[3/6 04:12 < 12:37, 0.00 it/s, Epoch 0.67/2]"
    trainer["data"]["text/html"] = ["<div></div>"]  # an HTML display with no text keeps the repr
    assert running_cell(nb, NOW).last_output == "<IPython.core.display.HTML object>"


def test_no_running_cell_means_no_line():
    assert running_cell({"cells": [_cell("x", "completed", NOW)]}, NOW) is None
    assert running_cell({"cells": []}, NOW) is None


def test_a_long_cell_reports_while_it_runs(tmp_path):
    """A notebook whose one cell runs ~4 s while printing progress: the heartbeat (every second) names the
    cell and shows what it printed, before the cell ends."""
    folder = tmp_path / "nb"
    folder.mkdir()
    (folder / "01_environment.py").write_text(
        '# %% tags=["parameters"]\nparams_path = ""\noutput_dir = ""\n\n'
        "# %%\nimport sys, time\nfor i in range(8):\n    print(f'step {i}/8', flush=True)\n    time.sleep(0.5)\n")
    lines: list[str] = []
    execute_notebook("01_environment", SMOKE, tmp_path / "out", ensure_kernel(), folder,
                     heartbeat=lines.append, heartbeat_s=1)
    assert lines, "no heartbeat while the cell ran"
    # cells: parameters, the parameters papermill injects, ours
    assert all(ln.startswith("01_environment: cell 3/3 `import sys, time` running ") for ln in lines)
    assert any("| step " in ln for ln in lines)


def test_a_cell_whose_bars_are_widgets_shows_what_the_library_reported(tmp_path):
    """The kernel's library calls report through negolib.core.progress (a notebook's tqdm bars are widgets the saved
    notebook never updates): the heartbeat shows the reported ``desc: n/total`` while the cell prints nothing."""
    folder = tmp_path / "nb"
    folder.mkdir()
    (folder / "01_environment.py").write_text(
        '# %% tags=["parameters"]\nparams_path = ""\noutput_dir = ""\n\n'
        "# %%\nimport time\nfrom negolib.core.progress import ProgressBar\n"
        "for i in ProgressBar(range(6), desc='GRPO', unit='step', file=open('/dev/null', 'w')):\n"
        "    time.sleep(0.6)\n")
    lines: list[str] = []
    execute_notebook("01_environment", SMOKE, tmp_path / "out", ensure_kernel(), folder,
                     heartbeat=lines.append, heartbeat_s=1)
    assert any("| GRPO: " in ln and "/6 step" in ln for ln in lines), lines


def test_a_cell_past_its_limit_names_notebook_cell_limit_and_how_to_raise_it(tmp_path):
    """A slow machine is not a crash: the error names the notebook, the cell, the limit, the profile field that
    sets it, and that a re-run resumes."""
    import pytest

    from negolib.book.runner import BookError

    folder = tmp_path / "nb"
    folder.mkdir()
    (folder / "01_environment.py").write_text(
        '# %% tags=["parameters"]\nparams_path = ""\noutput_dir = ""\n\n# %%\nimport time\ntime.sleep(30)\n')
    with pytest.raises(BookError) as exc:
        execute_notebook("01_environment", SMOKE, tmp_path / "out", ensure_kernel(), folder, timeout_s=2)
    text = str(exc.value)
    assert "notebook 01_environment failed at cell 1 ('import time')" in text
    assert "2 s limit" in text and "budgets.cell_timeout_s" in text and "skipped" in text


def test_index_opens_with_the_headline_and_names_every_failed_guard(tmp_path):
    """The index's headline box: the run's contrasts from headline.json, the lesson's verdict, and the guards
    that failed by name (a run whose guards all pass says so instead)."""
    import json

    from negolib.book.context import BookPaths
    from negolib.book.runner import failed_guards, headline_box

    paths = BookPaths(tmp_path).make()
    paths.headline.write_text(json.dumps({"profile": "default", "commit": "abcdef1234", "minutes": 50.0, "lesson": {
        "arms": ["lesson_trained", "lesson_start"], "estimate": 0.2, "ci_low": 0.1, "ci_high": 0.3, "mde": 0.16,
        "n_paired": 96, "n_clusters": 96, "verdict": "learned: S rose"}}))
    (paths.tables / "guards.csv").write_text("arm,guard,passed\nsmollm2_grpo,invalid ACCEPT rate,False\n"
                                             "smollm2_grpo,deal rate,True\n")
    box = "\n".join(headline_box(paths))
    assert "| default | abcdef1 | 50.0 | matched lesson |" in box and "The matched lesson: learned: S rose." in box
    assert failed_guards(paths) == ["smollm2_grpo: invalid ACCEPT rate"]
    assert "Guards that failed** (1" in box
    (paths.tables / "guards.csv").write_text("arm,guard,passed\nsmollm2_grpo,deal rate,True\n")
    assert "Every guard passed" in "\n".join(headline_box(paths))
