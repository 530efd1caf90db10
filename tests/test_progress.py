"""negolib.core.progress: what a long library call reports for the book's heartbeat (issue 29)."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta, timezone

from negolib.book.progress import CellHeartbeat
from negolib.core.progress import PROGRESS_ENV, ProgressBar, TurnReporter, read_progress, report


def test_report_writes_one_line_where_the_environment_says_and_nothing_otherwise(tmp_path):
    target = tmp_path / "progress.txt"
    report("GRPO step 3/12:\nreward +0.1", {PROGRESS_ENV: str(target)})
    assert target.read_text() == "GRPO step 3/12: reward +0.1\n"
    report("ignored", {})  # no variable: a script or a test; nothing written, nothing raised
    assert target.read_text() == "GRPO step 3/12: reward +0.1\n"
    report("x", {PROGRESS_ENV: str(tmp_path / "missing" / "dir" / "p.txt")})  # never raises


def test_read_progress_ignores_a_line_older_than_the_cell(tmp_path):
    target = tmp_path / "p.txt"
    target.write_text("episodes: 4/10 ep\n")
    assert read_progress(target, time.time() - 60) == "episodes: 4/10 ep"
    old = time.time() - 3600
    os.utime(target, (old, old))
    assert read_progress(target, time.time() - 60) == ""
    assert read_progress(tmp_path / "none.txt", 0.0) == ""


def test_progress_bar_reports_its_count_and_a_disabled_or_plain_bar_does_not(tmp_path, monkeypatch):
    target = tmp_path / "p.txt"
    monkeypatch.setenv(PROGRESS_ENV, str(target))
    with open(os.devnull, "w") as sink:
        for _ in ProgressBar(range(5), desc="episodes", unit="ep", file=sink):
            pass
    assert target.read_text().strip() == "episodes: 5/5 ep"  # the end is always reported
    target.unlink()
    with open(os.devnull, "w") as sink:
        for _ in ProgressBar(range(5), desc="episodes", disable=True, file=sink):
            pass
        from tqdm import tqdm  # the sabotaged twin: a plain bar reports nothing
        for _ in tqdm(range(5), desc="episodes", file=sink):
            pass
    assert not target.exists()


def test_heartbeat_prefers_the_reported_line_to_the_printed_one(tmp_path):
    now = datetime.now(timezone.utc)
    nb = tmp_path / "nb.ipynb"
    cell = {"cell_type": "code", "source": "train(P)", "outputs": [
        {"output_type": "stream", "name": "stdout", "text": "format warm-up:   0%|          | 0/24"}],
        "metadata": {"papermill": {"status": "running", "start_time": (now - timedelta(seconds=30)).isoformat()}}}
    nb.write_text(json.dumps({"cells": [cell]}))
    progress = tmp_path / "p.txt"
    lines: list[str] = []
    beat = CellHeartbeat(nb, "03_training", lines.append, progress_file=progress)
    assert beat.beat().endswith("| format warm-up:   0%|          | 0/24")  # nothing reported yet
    progress.write_text("GRPO step 3/12: reward +0.100 (71 s)\n")
    assert beat.beat().endswith("| GRPO step 3/12: reward +0.100 (71 s)")
    old = (now - timedelta(minutes=5)).timestamp()  # reported before this cell began: not this cell's
    os.utime(progress, (old, old))
    assert beat.beat().endswith("| format warm-up:   0%|          | 0/24")


def test_heartbeat_names_the_age_of_a_reported_line_that_is_a_minute_old(tmp_path):
    now = datetime.now(timezone.utc)
    nb = tmp_path / "nb.ipynb"
    cell = {"cell_type": "code", "source": "lesson = run_lesson(P)", "outputs": [],
            "metadata": {"papermill": {"status": "running", "start_time": (now - timedelta(minutes=20)).isoformat()}}}
    nb.write_text(json.dumps({"cells": [cell]}))
    progress = tmp_path / "p.txt"
    progress.write_text("GRPO step 2/2: reward +0.800 (103 s) " + "x" * 200 + "\n")
    beat = CellHeartbeat(nb, "03_training", [].append, progress_file=progress)
    assert "[reported" not in beat.beat()  # just written: no age
    old = (now - timedelta(minutes=4, seconds=10)).timestamp()  # after the cell began, four minutes silent
    os.utime(progress, (old, old))
    line = beat.beat()
    assert "| [reported 4m1" in line and "GRPO step 2/2" in line  # the age leads: a long line is cut at its end


class _Episode:
    def __init__(self, done: bool) -> None:
        self.done = done


def test_turn_reporter_counts_turns_and_ended_episodes_and_always_reports_the_last_end(tmp_path):
    target = tmp_path / "p.txt"
    env = {PROGRESS_ENV: str(target)}
    turns = TurnReporter("lesson evaluation of start", episodes=2, every_s=3600.0, environ=env)
    turns(_Episode(False))  # the first turn is reported at once
    assert target.read_text().strip() == "lesson evaluation of start: 1 turns played, 0 of 2 episodes ended"
    turns(_Episode(False))
    turns(_Episode(True))  # within every_s and not the last end: counted, not reported
    assert target.read_text().strip().endswith("1 turns played, 0 of 2 episodes ended")
    turns(_Episode(True))  # the last episode ended: reported whatever the time
    assert target.read_text().strip() == "lesson evaluation of start: 4 turns played, 2 of 2 episodes ended"
    assert (turns.turns, turns.ended) == (4, 2)
