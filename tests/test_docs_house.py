"""The house a newcomer enters (issue 29): the README is for users and short, run history lives in RESULTS.md,
and the profiles' comments say what a value means, not when it was measured."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def _outside_results_block(text: str) -> str:
    """The README without its generated results table (whose rows name commits by design)."""
    return re.sub(r"<!-- results:begin.*?<!-- results:end -->", "", text, flags=re.S)


def test_readme_is_short_and_carries_no_run_history():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    body = _outside_results_block(text)
    assert not DATE.search(body), DATE.search(body)
    assert "results:begin" in text and "RESULTS.md" in body


def test_sabotaged_readme_with_a_dated_run_log_is_caught():
    text = "Intro.\n<!-- results:begin -->| a |<!-- results:end -->\nRun of 2026-12-02 at 5f3d1ee."
    body = _outside_results_block(text)
    assert DATE.search(body)


def test_profile_comments_carry_no_dates():
    for path in sorted((ROOT / "params").glob("*.yaml")):
        if path.name == "paper_reported.yaml":  # the paper's own citation
            continue
        comments = [line.split("#", 1)[1] for line in path.read_text().splitlines() if "#" in line]
        dated = [c for c in comments if DATE.search(c)]
        assert not dated, f"{path.name}: {dated[:2]}"


def test_docs_links_in_the_readme_resolve():
    text = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target


SPEC_CITATION = re.compile(r"\bSPEC(?:\.md| \d)")  # the original system spec: a file users do not have


def test_no_module_cites_a_file_outside_the_repository():
    cited = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "negolib").rglob("*.py"))
             for i, line in enumerate(p.read_text().splitlines(), 1) if SPEC_CITATION.search(line)]
    assert not cited, f"cite the paper or docs/, not the spec: {cited}"
    assert SPEC_CITATION.search('"""The protocol [paper §4; SPEC 7]."""')  # the check catches a citation
    assert not SPEC_CITATION.search("PARAM_SPECS = {}")
