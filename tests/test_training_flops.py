"""App. I FLOP accounting and the Table 8 builder."""

from __future__ import annotations

import pytest

from negolib.core.errors import ValidationError
from negolib.training.flops import (
    PAPER_RELATIVE_FLOPS,
    PAPER_SIZES,
    flops_from_log,
    sizes_from_params,
    step_flops,
    table8,
)


def test_step_flops_formula():
    assert step_flops(2.3e9, 1_000, 10_000) == pytest.approx(2 * 2.3e9 * 1_000 + 6 * 2.3e9 * 10_000)
    assert step_flops(1.0, 0, 1, ref_forward=True) == 8.0
    with pytest.raises(ValueError):
        step_flops(-1, 0, 0)


def test_flops_from_logged_tokens():
    rows = [
        {"step": 1, "tokens_generated": 100, "tokens_trained": 1000},
        {"step": 2, "tokens_generated": 50, "tokens_trained": 500},
    ]
    out = flops_from_log(rows, 1e6)
    assert [o["flops"] for o in out] == pytest.approx([2e8 + 6e9, 1e8 + 3e9])
    assert out[-1]["cum_flops"] == pytest.approx(out[0]["flops"] + out[1]["flops"])


def test_table8_matches_the_paper():
    t = table8()
    assert list(t.columns) == ["E2B", "E4B", "12B", "31B"]
    assert t.loc["Relative FLOPs/step (effective params)"].tolist() == PAPER_RELATIVE_FLOPS["effective"]
    assert t.loc["Relative FLOPs/step (total params)"].tolist() == PAPER_RELATIVE_FLOPS["total"]
    assert t.loc["Generation memory fraction"].tolist() == [0.45, 0.40, 0.35, 0.30]
    assert t.loc["Train tensor-parallel degree"].tolist() == [1, 1, 1, 4]
    assert t.loc["Eval serving accelerators (48 GB)"].tolist() == [1, 1, 1, 4]
    assert t.loc["Effective parameters", "E2B"] == "2.3B" and t.loc["Total parameters", "E2B"] == "5.1B"


def test_table8_from_params():
    t = table8(
        {"E2B": {"gen_memory_fraction": 0.5}, "135M": {"effective_params": 1.35e8, "total_params": 1.35e8}}
    )
    assert t.loc["Generation memory fraction", "E2B"] == 0.5
    assert "135M" in t.columns and t.loc["Effective parameters", "135M"] == "135M"
    assert sizes_from_params()["31B"] == PAPER_SIZES["31B"]
    with pytest.raises(ValidationError, match="E2B.tp"):
        sizes_from_params({"E2B": {"tp": 2}})
    with pytest.raises(ValidationError, match="total_params"):
        sizes_from_params({"X": {"effective_params": 1e9}})
