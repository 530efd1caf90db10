"""The paper's reported numbers: transcribed once in params/paper_reported.yaml, read as they stand."""

from __future__ import annotations

from pathlib import Path

import pytest

from negolib.study.paper import load_paper_reported

ROOT = Path(__file__).resolve().parent.parent


def test_paper_reported_holds_the_papers_numbers():
    paper = load_paper_reported(ROOT / "params" / "paper_reported.yaml")
    assert len(paper.get("arms")) == 21
    assert paper.arm("e2b_base")["score"] == [0.422, 0.400, 0.446]
    assert paper.get("table1", "31B", "shared_minus_base") == [0.078, 0.064, 0.092]
    assert paper.get("cost", "usd_per_frontier_episode") == 0.069
    assert paper.get("statistics", "primary_p_e2b") == 0.91
    assert paper.get("training", "kl_step56", "g31b_lr3_56") == 0.437
    assert paper.get("design", "episodes_total") == 24_192


def test_paper_reported_with_a_key_given_twice_is_refused(tmp_path):
    from negolib.core.errors import ValidationError

    path = tmp_path / "paper_reported.yaml"
    path.write_text("arms:\n  base: {score: 0.1}\n  base: {score: 0.9}\n", encoding="utf-8")
    with pytest.raises(ValidationError, match=r"paper_reported\.yaml.*arms\.base.*given twice"):
        load_paper_reported(path)
