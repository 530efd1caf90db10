"""Atomic checkpoint directories: a failed or interrupted save never looks like a checkpoint."""

from __future__ import annotations

import pytest

from negolib.training.checkpoints import atomic_dir, checkpoint_steps, last_checkpoint, rotate, sweep_staging


def test_atomic_dir_publishes_only_complete_checkpoints(tmp_path):
    with atomic_dir(tmp_path / "checkpoint-8") as d:
        (d / "weights").write_text("w8")
        assert last_checkpoint(tmp_path) is None  # not visible while being written
    with pytest.raises(RuntimeError):
        with atomic_dir(tmp_path / "checkpoint-16") as d:
            (d / "weights").write_text("half")
            raise RuntimeError("killed mid-save")
    assert checkpoint_steps(tmp_path) == [8]
    assert last_checkpoint(tmp_path) == tmp_path / "checkpoint-8"
    with atomic_dir(tmp_path / "checkpoint-8") as d:  # a re-save replaces the old copy
        (d / "weights").write_text("w8b")
    assert (tmp_path / "checkpoint-8" / "weights").read_text() == "w8b"
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-8"]


def test_sweep_and_rotate(tmp_path):
    for step in (8, 16, 24):
        (tmp_path / f"checkpoint-{step}").mkdir()
    (tmp_path / ".staging-checkpoint-32").mkdir()  # left by a crash
    assert last_checkpoint(tmp_path).name == "checkpoint-24"
    assert sweep_staging(tmp_path) == 1
    assert [p.name for p in rotate(tmp_path, 2)] == ["checkpoint-8"]
    assert checkpoint_steps(tmp_path) == [16, 24]
    assert rotate(tmp_path, None) == [] and checkpoint_steps(tmp_path / "missing") == []
