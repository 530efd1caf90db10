"""The book's table object: our numbers in our columns, the paper's in "paper: ..." columns, saved as
CSV, markdown and HTML; a cell with nothing to show is a dash, never an invented number."""

from __future__ import annotations

import pandas as pd
import pytest
from paper_frames import paper_setup

from negolib.core.formatting import DASH, fmt_ci
from negolib.study.report.appendix_b_c import table4
from negolib.study.report.booktable import BookTable, fmt_paper, simple_table


def test_booktable_renders_and_saves(tmp_path):
    p, paper, _, est = paper_setup()
    t = table4(est, ["e2b_base"], p, paper)
    files = t.save(tmp_path)
    assert {f.name for f in files} >= {"table4.csv", "table4.md", "table4.html", "table4_data.csv"}
    md = (tmp_path / "table4.md").read_text()
    assert "Table 4" in md and "paper: S" in md and "0.422 [0.400, 0.446]" in md
    assert "paper: S" in t._repr_html_()
    csv = pd.read_csv(tmp_path / "table4.csv", index_col=0)
    assert csv.loc["e2b_base", "paper: deal rate"] == pytest.approx(0.939)


def test_formatting_never_invents_numbers():
    assert fmt_ci(float("nan"), 0, 1, signed=False) == DASH
    assert fmt_paper(None) == DASH
    assert fmt_paper([0.023, 0.011, 0.035], signed=True, mark="*") == "+0.023* [+0.011, +0.035]"
    assert fmt_paper(0.0004, 4) == "0.0004"
    assert fmt_paper([0.269, 0.261]) == "0.269 → 0.261" and fmt_paper(0.125, pct=True) == "12.5%"


def test_simple_table_labels_the_papers_values(tmp_path):
    t = simple_table("x", "X", pd.DataFrame({"ours": [1.5]}), paper_values={"value": 0.25, "note": "as reported"})
    assert isinstance(t, BookTable) and t.paper_columns == ["paper: value", "paper: note"]
    assert t.frame.loc[0, "paper: value"] == "0.250" and t.frame.loc[0, "paper: note"] == "as reported"
    t.save(tmp_path)
    assert not (tmp_path / "x_data.csv").exists()  # no tidy data given: none written
