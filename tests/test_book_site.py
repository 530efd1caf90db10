"""The book as a website (negolib.book.site): a tiny executed book, two notebooks made here with nbformat (one
shows a PNG figure, the other an HTML table with the paper's column beside ours), built into a site by
``python -m negolib book site``. The root page carries the headline box and its plain reading, every guard, the
paper's items in the paper's order with their source notebook, the rest by notebook, and links every chapter.

The site tests skip, with the reason, where Sphinx, myst-nb or the book theme are not installed (the ``site``
extra); the browser test (marked ``browser``; it runs in ``make test`` where the tools exist) also needs
Playwright and a ``chromium`` on PATH (``apt-get install -y chromium``): it opens the site in headless Chromium,
follows every chapter and checks that every image loaded and no link between pages is broken.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import struct
import zlib
from pathlib import Path
from typing import Any

import nbformat
import pytest

from negolib.book.context import BookPaths
from negolib.book.site import contrast_reading, missing_tooling, read_book, site_after_run
from negolib.cli import main

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "params" / "smoke.yaml"
TABLE1 = ("<table><caption><b>Table 1: paired gains</b></caption><tr><th>arm</th><th>gain</th>"
          "<th>paper: gain</th></tr><tr><td>grpo</td><td>+0.031</td><td>+0.045</td></tr></table>")
PAGE_S = 180  # one page load in a fresh headless Chromium on a busy 2-core machine
needs_tooling = pytest.mark.skipif(bool(missing_tooling()),
                                   reason=f"the site's tooling is not installed ({', '.join(missing_tooling())}; "
                                          "pip install -e '.[site]')")


def tiny_png(width: int = 6, height: int = 4) -> bytes:
    """A valid RGB PNG of one colour."""
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + bytes([200, 30, 30]) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def _notebook(path: Path, heading: str, prose: str, source: str, output: dict[str, Any],
              papermill: dict[str, str] | None = None) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {heading}\n\n{prose}"),
                nbformat.v4.new_code_cell(source, execution_count=1,
                                          outputs=[nbformat.v4.new_output("display_data", data=output)])]
    if papermill:
        nb.metadata["papermill"] = papermill
    nbformat.write(nb, path)


def _add_widget(path: Path) -> None:
    """A widget output (view and saved state, as a run in JupyterLab leaves them) with its text fallback."""
    nb = nbformat.read(path, as_version=4)
    view = {"version_major": 2, "version_minor": 0, "model_id": "abc123"}
    nb.cells[1].outputs.append(nbformat.v4.new_output("display_data", data={
        "application/vnd.jupyter.widget-view+json": view, "text/plain": "EpisodeExplorer(episode 1 of 4)"}))
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {"abc123": {"model_name": "LabelModel", "model_module": "@jupyter-widgets/controls",
                             "model_module_version": "2.0.0", "state": {"value": "x"}}},
        "version_major": 2, "version_minor": 0}}
    nbformat.write(nb, path)


def _table(folder: Path, name: str, title: str, caption: str, html: str) -> None:
    (folder / f"{name}.md").write_text(f"**{title}**\n\n{caption}\n\n| arm | value |\n|---|---|\n| grpo | 1 |\n")
    (folder / f"{name}.html").write_text("<!doctype html><meta charset='utf-8'>" + html)
    (folder / f"{name}.csv").write_text("arm,value\ngrpo,1\n")


def fake_book(root: Path) -> BookPaths:
    """An executed book folder: two notebooks, three tables (one the paper's, one the guards), two figures
    (one the paper's) and a headline."""
    paths = BookPaths(root).make()
    png = tiny_png()
    _notebook(paths.notebooks / "01_first.ipynb", "1. The environment", "One episode's ledger, turn by turn.",
              'B.save_figure(fig, "figure1_ledger")\nB.save_figure(curve, "warmup_curve")',
              {"image/png": base64.b64encode(png).decode(), "text/plain": "<Figure>"})
    _add_widget(paths.notebooks / "01_first.ipynb")
    _notebook(paths.notebooks / "02_second.ipynb", "2. Results", "The paired gains, beside the paper's.",
              "display(B.save_table(table1(R)))",
              {"text/html": TABLE1 + "<b>Deal rates by arm</b><b>Prespecified guards</b>", "text/plain": "t"})
    _table(paths.tables, "table1", "Table 1: paired gains", "Paired by scenario and buyer.", TABLE1)
    _table(paths.tables, "deal_rates", "Deal rates by arm", "Share of episodes that closed.", "<table></table>")
    _table(paths.tables, "guards", "Prespecified guards", "",
           "<table><tr><th>guard</th><th>passed</th></tr><tr><td>invalid ACCEPT</td><td>False</td></tr></table>")
    (paths.tables / "guards.csv").write_text("arm,guard,passed\ngrpo,invalid ACCEPT,False\ngrpo,bad parse,True\n")
    (paths.figures / "figure1_ledger.png").write_bytes(png)
    (paths.figures / "warmup_curve.png").write_bytes(tiny_png(3, 3))
    paths.headline.write_text(json.dumps({
        "profile": "fake", "primary": [{"arms": ["grpo", "base"], "estimate": 0.031, "ci_low": -0.01,
                                        "ci_high": 0.07, "mde": 0.05, "n_paired": 10, "n_clusters": 5}],
        "lesson": {"arms": ["trained", "start"], "estimate": 0.2, "ci_low": 0.1, "ci_high": 0.3, "mde": 0.04,
                   "n_paired": 96, "n_clusters": 48, "verdict": "the trained seller scores higher"}}))
    return paths


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fake book's site, built once through the command line; returns its folder."""
    if missing_tooling():
        pytest.skip(f"the site's tooling is not installed ({', '.join(missing_tooling())}; pip install -e '.[site]')")
    paths = fake_book(tmp_path_factory.mktemp("book") / "fake")
    assert main(["book", "site", "--params", str(SMOKE), "--output-dir", str(paths.root)]) == 0
    return paths.root / "site"


# -- reading the book, without Sphinx -------------------------------------------------------------------


def test_each_table_and_figure_is_tied_to_the_notebook_that_made_it(tmp_path):
    paths = fake_book(tmp_path / "fake")
    _notebook(paths.notebooks / "03_third.ipynb", "3. Training", "The runs.", "plot(run)", {"text/plain": "x"},
              {"start_time": "2026-01-01T10:00:00", "end_time": "2026-01-01T10:05:00"})
    late = paths.figures / "training_run_seed1.png"  # named in no source: its time falls in 03's run
    late.write_bytes(tiny_png())
    from datetime import datetime

    t = datetime.fromisoformat("2026-01-01T10:03:00").timestamp()
    os.utime(late, (t, t))
    chapters, artifacts = read_book(paths)
    assert [c.name for c in chapters] == ["01_first", "02_second", "03_third"]
    assert chapters[0].title == "1. The environment" and chapters[0].summary == "One episode's ledger, turn by turn."
    source = {a.name: a.notebook for a in artifacts}
    assert source == {"table1": "02_second", "deal_rates": "02_second", "guards": "02_second",
                      "figure1_ledger": "01_first", "warmup_curve": "01_first", "training_run_seed1": "03_third"}
    paper = sorted((a for a in artifacts if a.paper_key), key=lambda a: a.paper_key)
    assert [a.name for a in paper] == ["figure1_ledger", "table1"]


def test_a_contrast_reads_in_plain_words():
    c = {"arms": ["grpo", "base"], "estimate": 0.03, "ci_low": -0.01, "ci_high": 0.07, "mde": 0.05, "n_clusters": 5}
    assert "no difference between grpo and base" in contrast_reading(c) and "0.050" in contrast_reading(c)
    assert "Few clusters" in contrast_reading(c)
    assert "grpo scores higher than base" in contrast_reading({**c, "ci_low": 0.01, "n_clusters": 40})
    assert "grpo scores lower than base" in contrast_reading({**c, "ci_high": -0.001})


def test_the_book_run_skips_the_site_in_one_line_without_its_tooling(tmp_path, monkeypatch):
    import negolib.book.site as book_site

    paths = fake_book(tmp_path / "fake")
    monkeypatch.setattr(book_site, "missing_tooling", lambda: ["sphinx"])
    line = site_after_run(paths.root)
    assert line.startswith("site: skipped") and "sphinx" in line and "\n" not in line
    assert not (paths.root / "site").exists()


def test_no_executed_notebook_is_no_site(tmp_path):
    if missing_tooling():
        pytest.skip("the site's tooling is not installed")
    BookPaths(tmp_path / "empty").make()
    line = site_after_run(tmp_path / "empty")
    assert line.startswith("site: not built") and "no executed notebooks" in line


# -- the built site ---------------------------------------------------------------------------------------


@needs_tooling
def test_the_site_links_every_chapter_and_shows_the_figures(site):
    index = (site / "index.html").read_text()
    for chapter in ("01_first", "02_second"):
        assert f'href="notebooks/{chapter}.html"' in index
        assert (site / "notebooks" / f"{chapter}.html").is_file()
    assert "1. The environment" in index and "2. Results" in index  # the chapters in the navigation
    copied = site / "_images" / "figure1_ledger.png"
    assert copied.read_bytes() == tiny_png() and 'src="_images/figure1_ledger.png"' in index
    first = (site / "notebooks" / "01_first.html").read_text()
    assert "<img" in first  # the notebook's own output, inline
    assert "EpisodeExplorer(episode 1 of 4)" in first  # a widget as its text
    for page in site.rglob("*.html"):  # nothing loaded from the network (a widget's JavaScript from a CDN)
        assert not re.search(r"""(src|href)=["']https?://[^"']*\.(js|css)""", page.read_text()), page


@needs_tooling
def test_the_root_page_opens_with_the_headline_then_the_papers_items(site):
    page = (site / "index.html").read_text()
    index = page[page.index('class="bd-article"'):]  # the page's own content, not its navigation
    assert "+0.031" in index and "no difference between grpo and base" in index  # the box and its reading
    assert "the trained seller scores higher" in index
    assert "grpo: invalid ACCEPT" in index and "Every guard" in index  # the failed guard, named
    fig, tab, rest = (index.index(s) for s in ("figure1_ledger", "Table 1: paired gains", "Everything else"))
    assert index.index("Headline") < fig < tab < rest  # the paper's order, then the rest
    assert "paper: gain" in index and "+0.045" in index  # the paper's value beside ours
    paper_part = index[tab:rest]
    assert 'href="notebooks/02_second.html"' in paper_part  # its source notebook
    assert "Deal rates by arm" in index[rest:] and "Share of episodes that closed." in index[rest:]
    assert "warmup_curve" in index[rest:] and "paper: gain" in (site / "notebooks" / "02_second.html").read_text()


# -- in a browser -------------------------------------------------------------------------------------------


def _broken(page: Any, url: str, site: Path) -> list[str]:
    """Open ``url``; the images that did not load and the links to pages of the site that do not exist."""
    page.goto(url, wait_until="load")
    images = page.eval_on_selector_all("img", "els => els.map(e => [e.src, e.complete && e.naturalWidth > 0])")
    links = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
    bad = [f"image {src}" for src, ok in images if not ok]
    for href in links:
        target = href.split("#", 1)[0]
        if target.startswith("file://") and target.endswith(".html") and str(site) in target:
            if not Path(target.removeprefix("file://")).is_file():
                bad.append(f"link {target}")
    return bad


@pytest.mark.browser
@needs_tooling
def test_a_browser_follows_every_chapter_and_sees_every_figure(site, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (the site extra)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("no chromium on PATH (apt-get install -y chromium)")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.set_default_timeout(PAGE_S * 1000)
            index = (site / "index.html").as_uri()
            assert _broken(page, index, site) == []
            assert page.eval_on_selector_all("img", "els => els.length") >= 1  # the paper's Figure 1
            nav = page.eval_on_selector_all("nav a[href]", "els => els.map(e => e.href)")
            chapters = sorted({h.split("#", 1)[0] for h in nav if "/notebooks/" in h})
            assert [Path(c).name for c in chapters] == ["01_first.html", "02_second.html"]
            for chapter in chapters:
                assert _broken(page, chapter, site) == [], chapter
                assert page.title() and "404" not in page.title()
            assert page.eval_on_selector_all("table", "els => els.length") >= 1  # 02's table, inline
            page.goto(chapters[0])
            assert page.eval_on_selector_all("img", "els => els.filter(e => e.naturalWidth > 0).length") >= 1
            # the check can fail: a copy of the site missing the figure and a chapter is caught
            broken = tmp_path / "site"
            shutil.copytree(site, broken)
            (broken / "_images" / "figure1_ledger.png").unlink()
            (broken / "notebooks" / "02_second.html").unlink()
            found = _broken(page, (broken / "index.html").as_uri(), broken)
            assert any(b.startswith("image") and "figure1_ledger" in b for b in found), found
            assert any(b.startswith("link") and "02_second" in b for b in found), found
        finally:
            browser.close()
