"""The book as a website: an executed book folder (``outputs/<profile>/``) built into a static site with Sphinx,
myst-nb and the Sphinx Book Theme, at ``outputs/<profile>/site/index.html``.

Contract: :func:`build_site` writes a Sphinx project into ``outputs/<profile>/site_build/src``, runs Sphinx into
``site_build/html`` and copies that to ``outputs/<profile>/site/``. The project's ``conf.py`` turns notebook
execution off (myst-nb shows the notebooks as the book ran them, outputs and all; widgets as their text, so the
site loads nothing from the network); each executed notebook is a chapter in the sidebar, in book
order. The root page opens with the index's headline box (:func:`negolib.book.runner.headline_box`), a plain
reading of each headline contrast and every guard's pass/fail; then the paper's tables and figures in the paper's
order, each with the notebook that made it (tables show the paper's values beside ours, in ``paper: ...``
columns); then every other table and figure grouped by notebook, one line each saying what it shows.
:func:`missing_tooling` names what is not installed (the ``site`` extra); :func:`site_after_run` is the book
run's one-line, never-failing step.
"""

from __future__ import annotations

import html
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from negolib.book.context import BookPaths
from negolib.book.runner import headline_box
from negolib.core.headline import read_headline

TOOLING = ("sphinx", "myst_nb", "sphinx_book_theme")
INSTALL_HINT = "pip install -e '.[site]'"
PAPER_ITEM = re.compile(r"^(table|figure)(\d+)(?![0-9])")
SLACK_S = 2.0  # a file written in the second a notebook finished still belongs to it


class SiteError(RuntimeError):
    """Sphinx failed; the message holds the end of its output."""


@dataclass
class Artifact:
    """A saved table (``tables/<name>.md``) or figure (``figures/<name>.png``) of the book."""

    name: str
    kind: str  # "table" or "figure"
    path: Path
    title: str
    caption: str = ""
    notebook: str | None = None

    @property
    def paper_key(self) -> tuple[int, int] | None:
        """(number, 0 for a figure, 1 for a table) for the paper's own tables and figures, else None."""
        m = PAPER_ITEM.match(self.name)
        return (int(m.group(2)), 0 if m.group(1) == "figure" else 1) if m else None


@dataclass
class Chapter:
    """An executed notebook: its name, title (first heading) and first line of prose."""

    name: str
    path: Path
    title: str
    summary: str
    window: tuple[float, float] | None = None  # papermill's start and end (epoch seconds)
    outputs_text: str = ""
    sources: str = ""
    artifacts: list[Artifact] = field(default_factory=list)


def missing_tooling() -> list[str]:
    """The site's packages that cannot be imported here (empty when the site can be built)."""
    return [m for m in TOOLING if importlib.util.find_spec(m) is None]


# -- reading the executed book -----------------------------------------------------------------------


def _epoch(stamp: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def read_chapter(path: Path) -> Chapter:
    """A chapter from an executed notebook: title, summary, papermill run window, outputs' and sources' text."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    title, summary, outputs, sources = path.stem, "", [], []
    for cell in nb.get("cells", []):
        src = _text(cell.get("source", ""))
        if cell.get("cell_type") == "markdown" and not summary:
            lines = [ln.strip() for ln in src.splitlines() if ln.strip()]
            heading = next((ln for ln in lines if ln.startswith("#")), None)
            if heading and title == path.stem:
                title = heading.lstrip("#").strip()
            prose = next((ln for ln in lines if not ln.startswith(("#", "|", "<", "```"))), "")
            summary = re.split(r"(?<=[.:;])\s", prose, maxsplit=1)[0]
        elif cell.get("cell_type") == "code":
            sources.append(src)
            for out in cell.get("outputs", []):
                data = out.get("data", {})
                outputs += [_text(data.get(k, "")) for k in ("text/html", "text/markdown", "text/plain")]
    pm = nb.get("metadata", {}).get("papermill", {})
    start, end = _epoch(pm.get("start_time")), _epoch(pm.get("end_time"))
    return Chapter(path.stem, path, title, summary, (start, end) if start and end else None,
                   "\n".join(outputs), "\n".join(sources))


def _table_artifact(md: Path) -> Artifact:
    """A table from its markdown file: ``**title**``, then the caption's first line (if any)."""
    lines = [ln.strip() for ln in md.read_text(encoding="utf-8").splitlines() if ln.strip()]
    title = lines[0].strip("*") if lines else md.stem
    caption = lines[1] if len(lines) > 1 and not lines[1].startswith(("|", "(no rows)", ">", "*paper")) else ""
    return Artifact(md.stem, "table", md, title, caption)


def _figure_title(stem: str) -> str:
    m = PAPER_ITEM.match(stem)
    rest = stem[m.end():].strip("_").replace("_", " ") if m else stem.replace("_", " ")
    return f"Figure {m.group(2)}" + (f": {rest}" if rest else "") if m else f"Figure: {rest}"


def _source_of(art: Artifact, chapters: Sequence[Chapter]) -> str | None:
    """The notebook that wrote ``art``: the one whose papermill run window holds the file's time, else the one
    whose outputs show the table's title or whose code names the figure."""
    mtime = art.path.stat().st_mtime
    for ch in chapters:
        if ch.window and ch.window[0] - SLACK_S <= mtime <= ch.window[1] + SLACK_S:
            return ch.name
    for ch in chapters:
        if art.kind == "table" and (html.escape(art.title) in ch.outputs_text or art.title in ch.outputs_text):
            return ch.name
        if art.kind == "figure" and (f'"{art.name}"' in ch.sources or f"'{art.name}'" in ch.sources):
            return ch.name
    return None


def read_book(paths: BookPaths) -> tuple[list[Chapter], list[Artifact]]:
    """The executed notebooks (book order) and every saved table and figure, each tied to its notebook."""
    chapters = [read_chapter(p) for p in sorted(paths.notebooks.glob("*.ipynb"))]
    tables = [_table_artifact(p) for p in sorted(paths.tables.glob("*.md"))]
    figures = [Artifact(p.stem, "figure", p, _figure_title(p.stem)) for p in sorted(paths.figures.glob("*.png"))]
    by_name = {c.name: c for c in chapters}
    for art in [*tables, *figures]:
        art.notebook = _source_of(art, chapters)
        if art.notebook in by_name:
            by_name[art.notebook].artifacts.append(art)
    return chapters, [*tables, *figures]


# -- the root page ------------------------------------------------------------------------------------


def contrast_reading(contrast: Mapping[str, Any]) -> str:
    """One plain-language line for a headline contrast (``headline.json``: arms, estimate, interval, MDE)."""
    arms = list(contrast.get("arms") or ["?", "?"])
    a, b = (arms + ["?"])[:2]
    est, lo, hi, mde = (contrast.get(k) for k in ("estimate", "ci_low", "ci_high", "mde"))
    if est is None or lo is None or hi is None:
        return f"{a} against {b}: no estimate yet."
    if lo > 0:
        verdict = f"{a} scores higher than {b}; the whole 95% interval lies above zero"
    elif hi < 0:
        verdict = f"{a} scores lower than {b}; the whole 95% interval lies below zero"
    else:
        verdict = f"no difference between {a} and {b} can be told apart from chance at this sample size"
        if mde is not None:
            verdict += f" (differences smaller than about {mde:.3f} would go unseen)"
    clusters = contrast.get("n_clusters")
    few = " Few clusters: read the interval with care." if isinstance(clusters, int) and clusters < 10 else ""
    return f"{a} − {b}: {verdict}.{few}"


def _raw_html(text: str) -> list[str]:
    body = re.sub(r"^<!doctype html>(<meta[^>]*>)?", "", text, flags=re.I)
    return ["````{raw} html", f"<div class='negobook-table'>{body}</div>", "````", ""]


def _item_lines(art: Artifact, chapters: Mapping[str, Chapter]) -> list[str]:
    """A table (its saved HTML, paper columns beside ours) or a figure, with its source notebook."""
    ch = chapters.get(art.notebook or "")
    source = f"From notebook {{doc}}`{ch.name} <notebooks/{ch.name}>`." if ch else "Source notebook unknown."
    if art.kind == "figure":
        return [f"### {art.title}", "", f"```{{figure}} figures/{art.path.name}", f":alt: {art.name}",
                ":width: 100%", "", f"`{art.name}`. {source}", "```", ""]
    page = art.path.with_suffix(".html")
    body = _raw_html(page.read_text(encoding="utf-8")) if page.is_file() else [art.path.read_text(encoding="utf-8")]
    return [f"### {art.title}", "", f"Table `{art.name}`. {source}", "", *body]


def root_page(paths: BookPaths, chapters: Sequence[Chapter], artifacts: Sequence[Artifact],
              title: str, description: str = "") -> str:
    """The site's root page (MyST markdown): headline box, guards, the paper's items in order, then the rest."""
    by_name = {c.name: c for c in chapters}
    md = [f"# {title}", ""] + ([description.strip(), ""] if description.strip() else [])
    md += headline_box(paths)
    contrasts = [c for c in (read_headline(paths.headline).get("primary") or []) if isinstance(c, Mapping)]
    md += [f"- {contrast_reading(c)}" for c in contrasts] + ([""] if contrasts else [])
    guards = paths.tables / "guards.html"
    if guards.is_file():
        md += ["### Every guard", "", *_raw_html(guards.read_text(encoding="utf-8"))]
    paper = sorted((a for a in artifacts if a.paper_key), key=lambda a: (a.paper_key, a.name))
    md += ["## The paper's tables and figures", "",
           "In the paper's order; columns labelled `paper: ...` are the paper's reported values, every other "
           "number is this run's.", ""]
    for art in paper:
        md += _item_lines(art, by_name)
    if not paper:
        md += ["(none yet)", ""]
    md += ["## Everything else, by notebook", ""]
    for ch in chapters:
        rest = [a for a in ch.artifacts if not a.paper_key]
        md += [f"### {{doc}}`{ch.title} <notebooks/{ch.name}>`", "", ch.summary or "", ""]
        for a in rest:
            what = a.title + (f": {a.caption}" if a.caption else "")
            md.append(f"- {a.kind} `{a.name}`: {what}")
        md += [""] if rest else []
    orphans = [a for a in artifacts if a.notebook not in by_name and not a.paper_key]
    if orphans:
        md += ["### Not tied to a notebook", ""] + [f"- {a.kind} `{a.name}`: {a.title}" for a in orphans] + [""]
    md += ["```{toctree}", ":hidden:", ":caption: Chapters", "", *[f"notebooks/{c.name}" for c in chapters], "```", ""]
    return "\n".join(md)


CONF = """# Written by negolib.book.site: the executed book as a static site (nothing is re-executed).
project = {project!r}
html_title = {project!r}
extensions = ["myst_nb"]
nb_execution_mode = "off"
myst_enable_extensions = ["colon_fence"]
html_theme = "sphinx_book_theme"
html_theme_options = {{"home_page_in_toc": True, "show_navbar_depth": 1, "use_download_button": True}}
html_css_files = ["negobook.css"]
html_static_path = ["_static"]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
# offline: no widget JavaScript from a CDN (a widget shows its text; it has no kernel here anyway)
nb_ipywidgets_js = {{}}
nb_mime_priority_overrides = [("*", "application/vnd.jupyter.widget-view+json", None)]
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type", "misc.highlighting_failure"]
"""
CSS = ".negobook-table { overflow-x: auto; margin-bottom: 1em; } .negobook-table table { font-size: 85%; }\n"


def write_project(paths: BookPaths, src: Path, title: str, description: str = "") -> list[Chapter]:
    """Write the Sphinx project into ``src`` (conf.py, root page, notebooks and figures copied, times kept so an
    unchanged notebook is not read again); returns the chapters."""
    chapters, artifacts = read_book(paths)
    for sub in ("notebooks", "figures", "_static"):
        if (src / sub).exists():
            shutil.rmtree(src / sub)
        (src / sub).mkdir(parents=True)
    for ch in chapters:
        shutil.copy2(ch.path, src / "notebooks" / ch.path.name)
    for art in artifacts:
        if art.kind == "figure":
            shutil.copy2(art.path, src / "figures" / art.path.name)
    (src / "_static" / "negobook.css").write_text(CSS, encoding="utf-8")
    (src / "conf.py").write_text(CONF.format(project=title), encoding="utf-8")
    (src / "index.md").write_text(root_page(paths, chapters, artifacts, title, description), encoding="utf-8")
    return chapters


def build_site(root: str | Path, title: str | None = None, description: str = "",
               timeout_s: float = 1800.0) -> Path:
    """Build the site of the executed book at ``root`` into ``root/site`` and return ``root/site/index.html``.

    Raises :class:`SiteError` when the tooling is missing (naming the packages), when the folder holds no
    executed notebook, or when Sphinx fails (with the end of its output)."""
    paths = BookPaths(Path(root))
    missing = missing_tooling()
    if missing:
        raise SiteError(f"the site's tooling is not installed ({', '.join(missing)}): {INSTALL_HINT}")
    if not any(paths.notebooks.glob("*.ipynb")):
        raise SiteError(f"no executed notebooks under {paths.notebooks}: run the book first")
    build, out = paths.root / "site_build", paths.root / "site"
    src, html_dir = build / "src", build / "html"  # myst-nb writes beside Sphinx's output: keep that in build/
    src.mkdir(parents=True, exist_ok=True)
    write_project(paths, src, title or f"negobook: {paths.root.name}", description)
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-d", str(build / "doctrees"), str(src),
           str(html_dir)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise SiteError(f"sphinx ran past {timeout_s:.0f} s building {out}") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise SiteError(f"sphinx failed (exit {proc.returncode}) building {out}:\n{tail}")
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(html_dir, out)
    return out / "index.html"


def site_after_run(root: str | Path, title: str | None = None, description: str = "") -> str:
    """The book run's site step as one line: where the site is, or why it was skipped (never raises
    :class:`SiteError`)."""
    if missing_tooling():
        return f"site: skipped, its tooling is not installed ({', '.join(missing_tooling())}; {INSTALL_HINT})"
    try:
        return f"site: {build_site(root, title, description)}"
    except SiteError as exc:
        return f"site: not built: {exc}"


__all__ = ["Artifact", "Chapter", "SiteError", "build_site", "contrast_reading", "missing_tooling", "read_book",
           "root_page", "site_after_run", "write_project"]
