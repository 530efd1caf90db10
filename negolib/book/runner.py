"""The book runner: execute the notebooks in order with papermill, resumably, and index the outputs.

Contract: ``run_book(params_path)`` executes ``notebooks/NN_*.py`` (jupytext ``py:percent``, the source of
truth) with papermill into ``outputs/<profile>/notebooks/``, injecting ``params_path`` and ``output_dir``; a state
file keys each notebook by profile hash + source hash + the runs it reads from, so a resumed book skips what is
current; a failure (:class:`BookError`) names the notebook and the cell, and a cell past its time limit says which
profile field raises it; a heartbeat line shows the running cell's progress every ``heartbeat_s`` seconds; an
index page and ``headline.json`` close the run. :func:`execute_notebook` runs one notebook.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from negolib.book.context import DEPENDS, KERNEL_NAME, NOTEBOOK_DIR, STATE_FILE, BookPaths, load_state
from negolib.book.progress import CellHeartbeat
from negolib.core.files import atomic_write_text
from negolib.core.headline import headline_markdown, read_headline
from negolib.core.progress import PROGRESS_ENV
from negolib.params import NOTEBOOKS, Params, load_params

# ---------------------------------------------------------------------------------------------
# Running the book
# ---------------------------------------------------------------------------------------------

class BookError(RuntimeError):
    """A notebook failed; the message names the notebook and the cell."""

    def __init__(self, notebook: str, cell_index: int | None, first_line: str, error: str,
                 executed_copy: Path | None = None) -> None:
        self.notebook, self.cell_index, self.first_line, self.error = notebook, cell_index, first_line, error
        self.executed_copy = executed_copy
        where = f"cell {cell_index} ({first_line!r})" if cell_index is not None else "before any cell ran"
        copy = f"; executed copy: {executed_copy}" if executed_copy else ""
        super().__init__(f"notebook {notebook} failed at {where}: {error}{copy}")


@dataclass
class NotebookRun:
    """One notebook's outcome in a book run."""

    name: str
    status: str  # "ok", "skipped", "failed", "not run"
    duration_s: float = 0.0
    output: str = ""
    error: str = ""
    budget_s: float | None = None
    peak_memory_gb: float | None = None  # the kernel's peak resident set, where it set the run's high-water mark

    @property
    def over_budget(self) -> bool:
        return self.budget_s is not None and self.duration_s > self.budget_s


@dataclass
class BookResult:
    """The outcome of :func:`run_book`."""

    profile: str
    output_dir: Path
    runs: list[NotebookRun]
    duration_s: float
    budget_s: float
    index: Path | None = None
    error: BookError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def executed(self) -> list[str]:
        return [r.name for r in self.runs if r.status == "ok"]

    @property
    def skipped(self) -> list[str]:
        return [r.name for r in self.runs if r.status == "skipped"]

    def __str__(self) -> str:
        lines = [f"book '{self.profile}' -> {self.output_dir}  ({self.duration_s:.0f} s; budget "
                 f"{self.budget_s:.0f} s{'; OVER BUDGET' if self.duration_s > self.budget_s else ''})"]
        for r in self.runs:
            extra = f"  {r.error}" if r.error else ""
            if r.over_budget:
                extra += f"  (over its {r.budget_s:.0f} s budget)"
            peak = f"  peak {r.peak_memory_gb:.2f} GB" if r.peak_memory_gb else ""
            lines.append(f"  {r.name:<18} {r.status:<8} {r.duration_s:7.1f} s{peak}{extra}")
        if self.index:
            lines.append(f"index: {self.index}")
        return "\n".join(lines)


def ensure_kernel(name: str = KERNEL_NAME) -> str:
    """A kernel spec that runs this interpreter: ``name`` if it exists (argv 'python' resolves to the
    current interpreter), otherwise one installed into ``sys.prefix`` with ipykernel."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(name)
        exe = spec.argv[0]
        if exe in ("python", "python3") or Path(exe).resolve() == Path(sys.executable).resolve():
            return name
    except NoSuchKernel:
        pass
    from ipykernel.kernelspec import install

    install(kernel_name=name, prefix=sys.prefix, display_name=f"Python 3 ({Path(sys.prefix).name})")
    return name


def _hash_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def resolve_notebooks(selection: Sequence[str] | None, folder: Path = NOTEBOOK_DIR) -> list[str]:
    """Notebook names from full names or prefixes ('04', '04_evaluation'), in book order."""
    available = [n for n in NOTEBOOKS if (folder / f"{n}.py").exists() or (folder / f"{n}.ipynb").exists()]
    if not selection:
        return available
    chosen = set()
    for sel in selection:
        sel = Path(sel).stem
        hits = [n for n in available if n == sel or n.startswith(sel)]
        if not hits:
            raise ValueError(f"no notebook matches {sel!r}; available: {available}")
        chosen.update(hits)
    return [n for n in available if n in chosen]


def source_notebook(name: str, folder: Path = NOTEBOOK_DIR) -> Any:
    """The notebook to execute: built from the ``.py`` source (jupytext), else the ``.ipynb``."""
    import jupytext
    import nbformat

    py, ipynb = folder / f"{name}.py", folder / f"{name}.ipynb"
    if py.exists():
        return jupytext.read(py, fmt="py:percent")
    return nbformat.read(ipynb, as_version=4)




def _save_state(path: Path, state: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(state, indent=1, sort_keys=True))


def _first_line(source: str) -> str:
    return next((ln for ln in source.splitlines() if ln.strip()), "")


def _source_index(src_nb: Any, source: str) -> int | None:
    """Index of the cell of the source notebook whose source is ``source`` (the failing cell)."""
    for i, c in enumerate(src_nb.cells):
        if c.source == source:
            return i
    return None


def _failed_source(nb_path: Path) -> str | None:
    """Source of the cell papermill flagged as failing in an executed copy (timeouts, dead kernels)."""
    import nbformat

    if not nb_path.exists():
        return None
    nb = nbformat.read(nb_path, as_version=4)
    for c in nb.cells:
        if c.get("metadata", {}).get("papermill", {}).get("exception") or any(
                o.get("output_type") == "error" for o in c.get("outputs", [])):
            return c.source
    return None


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set for the block (the kernel papermill starts inherits them), then
    restored."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _is_timeout(exc: BaseException) -> bool:
    """Whether papermill/nbclient gave up on a cell for its time limit (nbclient's ``CellTimeoutError`` or a
    plain ``TimeoutError``, whatever wraps it)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, TimeoutError) or type(exc).__name__ == "CellTimeoutError":
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False


def kernels_peak_gb() -> float | None:
    """The largest peak resident memory (GB, 10^9 bytes) of any finished descendant of this one: the notebooks'
    kernels, each shut down (and so waited for) when its notebook ends, and the processes they waited for. ``None``
    where the platform does not say."""
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # kilobytes on Linux, bytes on macOS
    if not peak:
        return None
    return round(peak * (1 if sys.platform == "darwin" else 1024) / 1e9, 3)  # bytes on macOS, KiB on Linux


def execute_notebook(name: str, params_path: Path, output_dir: Path, kernel: str,
                     folder: Path = NOTEBOOK_DIR, timeout_s: float | None = None,
                     heartbeat: Callable[[str], None] | None = None, heartbeat_s: float = 30.0) -> Path:
    """Execute one notebook with papermill into ``output_dir/notebooks``; raise :class:`BookError`.

    With ``heartbeat``, a line naming the running cell, its elapsed time and its last printed line
    (the notebook's own progress bar) is passed to it every ``heartbeat_s`` seconds
    (:class:`negolib.book.progress.CellHeartbeat`); papermill then autosaves at least that often."""
    import nbformat
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    out_nb = output_dir / "notebooks" / f"{name}.ipynb"
    out_nb.parent.mkdir(parents=True, exist_ok=True)
    nb = source_notebook(name, folder)
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": "Python 3", "language": "python"}
    extra: dict[str, Any] = {"execution_timeout": int(timeout_s)} if timeout_s else {}
    if heartbeat is not None:
        extra["autosave_cell_every"] = max(1, int(heartbeat_s))
    with tempfile.TemporaryDirectory(prefix="negobook-") as tmp:
        src_nb = Path(tmp) / f"{name}.ipynb"
        nbformat.write(nb, src_nb)
        progress_file = Path(tmp) / "progress.txt"  # the kernel's library calls report here (negolib.core.progress)
        beat = (CellHeartbeat(out_nb, name, heartbeat, heartbeat_s, progress_file) if heartbeat is not None
                else contextlib.nullcontext())
        try:
            with beat, _environment({PROGRESS_ENV: str(progress_file)}):
                pm.execute_notebook(str(src_nb), str(out_nb), parameters={"params_path": str(params_path),
                                                                          "output_dir": str(output_dir)},
                                    kernel_name=kernel, cwd=str(folder), progress_bar=False, log_output=False,
                                    **extra)
        except PapermillExecutionError as exc:
            raise BookError(name, _source_index(nb, exc.source), _first_line(exc.source),
                            f"{exc.ename}: {exc.evalue}", out_nb) from None
        except Exception as exc:  # kernel death, cell timeout, ...
            source = _failed_source(out_nb)
            idx = _source_index(nb, source) if source is not None else None
            error = f"{type(exc).__name__}: {exc}".strip()
            if timeout_s and _is_timeout(exc):
                error = (f"the cell ran past its {int(timeout_s)} s limit (budgets.cell_timeout_s of {params_path}); "
                         "on a slower or busier machine raise that limit and run the book again: notebooks that "
                         "finished are skipped")
            raise BookError(name, idx, _first_line(source or ""), error, out_nb) from None
    return out_nb


def run_book(params_path: str | Path, notebooks: Sequence[str] | None = None,
             output_dir: str | Path | None = None, resume: bool = True, progress: bool = True,
             folder: str | Path | None = None, raise_on_error: bool = False,
             heartbeat_s: float = 30.0) -> BookResult:
    """Execute the book's notebooks in order on a profile; see the module docstring.

    ``notebooks``: names or prefixes (default: all). ``resume``: skip notebooks already executed
    successfully for the same profile, notebook source and upstream runs. With ``progress`` a bar
    over notebooks, and every ``heartbeat_s`` seconds a line naming the running cell, its elapsed
    time and its last printed line, so a long notebook never sits silent. Returns a
    :class:`BookResult`; with ``raise_on_error`` a failure raises :class:`BookError` instead.
    """
    from tqdm.auto import tqdm

    t0 = time.time()
    folder = Path(folder) if folder else NOTEBOOK_DIR
    params_path = Path(params_path).resolve()
    params = load_params(params_path)
    if output_dir:
        params = params.with_output_dir(output_dir)
    paths = BookPaths(params.out).make()
    names = resolve_notebooks(notebooks, folder)
    kernel = ensure_kernel()
    state_path = paths.root / STATE_FILE
    state = load_state(state_path)
    state.setdefault("notebooks", {})
    phash = params.hash()
    runs: list[NotebookRun] = []
    error: BookError | None = None
    bar = tqdm(names, desc="book", unit="nb", disable=not progress)
    for name in bar:
        bar.set_postfix_str(name)
        if error is not None:
            runs.append(NotebookRun(name, "not run"))
            continue
        src = folder / f"{name}.py" if (folder / f"{name}.py").exists() else folder / f"{name}.ipynb"
        key = f"{phash}:{_hash_file(src)}"
        deps = {d: state["notebooks"].get(d, {}).get("run_id") for d in DEPENDS.get(name, ())}
        prev = state["notebooks"].get(name, {})
        out_nb = paths.notebooks / f"{name}.ipynb"
        if resume and prev.get("status") == "ok" and prev.get("key") == key and prev.get("deps") == deps \
                and out_nb.exists():
            runs.append(NotebookRun(name, "skipped", 0.0, str(out_nb)))
            continue
        t = time.time()
        peak_before = kernels_peak_gb() or 0.0
        timeout = params.budgets.cell_timeout_s
        try:
            execute_notebook(name, params_path, paths.root, kernel, folder, timeout,
                             heartbeat=tqdm.write if progress else None, heartbeat_s=heartbeat_s)
        except BookError as exc:
            error = exc
            state["notebooks"][name] = {"status": "failed", "key": key, "error": str(exc)}
            runs.append(NotebookRun(name, "failed", time.time() - t, str(out_nb), str(exc)))
            _save_state(state_path, state)
            continue
        dt = time.time() - t
        peak = kernels_peak_gb()
        state["notebooks"][name] = {"status": "ok", "key": key, "deps": deps, "run_id": f"{time.time():.6f}",
                                    "duration_s": round(dt, 2), "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
                                    # this kernel's peak when it raised the children's high-water mark (else an
                                    # earlier kernel of this process holds the mark, and this one's is not known)
                                    "peak_memory_gb": peak if peak and peak > peak_before else None}
        _save_state(state_path, state)
        runs.append(NotebookRun(name, "ok", dt, str(out_nb), budget_s=params.budgets.notebooks.get(name),
                                peak_memory_gb=state["notebooks"][name]["peak_memory_gb"]))
    bar.close()
    result = BookResult(params.profile, paths.root, runs, time.time() - t0, params.budgets.total_s, None, error)
    if error is None:
        write_run_headline(params, paths, state)
    result.index = write_index(params, paths, result)
    if error is not None and raise_on_error:
        raise error
    return result


def write_run_headline(params: Params, paths: BookPaths, state: Mapping[str, Any]) -> Path:
    """Add the run's profile, commit, minutes (the summed time of every notebook's last successful run, so a
    resumed book still reports what the whole book cost), finish time, machine and peak memory (the largest
    notebook kernel's peak resident set, GB; per notebook where its kernel set a new high-water mark) to
    ``headline.json``."""
    from negolib.core.headline import checkout_commit, machine, update_headline

    nbs = state.get("notebooks", {})
    ok = {n: v for n, v in nbs.items() if v.get("status") == "ok"}
    seconds = sum(float(v.get("duration_s", 0.0)) for v in ok.values())
    peaks = [float(v["peak_memory_gb"]) for v in ok.values() if v.get("peak_memory_gb")]
    update_headline(paths.headline, profile=params.profile, commit=checkout_commit(Path(params.root)),
                    minutes=round(seconds / 60, 2), finished=time.strftime("%Y-%m-%d %H:%M:%S"), machine=machine(),
                    notebooks={n: v.get("duration_s") for n, v in ok.items()},
                    peak_memory_gb=max(peaks) if peaks else None,
                    notebook_peak_memory_gb={n: v.get("peak_memory_gb") for n, v in ok.items()})
    return paths.headline


# ---------------------------------------------------------------------------------------------
# The index page
# ---------------------------------------------------------------------------------------------

def _rel(path: Path, root: Path) -> str:
    return os.path.relpath(path, root)


def failed_guards(paths: BookPaths) -> list[str]:
    """``arm: guard`` for every guard of ``tables/guards.csv`` (notebook 07) that did not pass (empty without it)."""
    import csv

    table = paths.tables / "guards.csv"
    if not table.is_file():
        return []
    with table.open(newline="") as f:
        return [f"{r.get('arm', '')}: {r.get('guard', '')}" for r in csv.DictReader(f)
                if str(r.get("passed", "")).strip().lower() == "false"]


def headline_box(paths: BookPaths) -> list[str]:
    """Markdown lines opening the index: the run's headline contrasts (``headline.json``: estimate, interval,
    clusters, MDE), the lesson's verdict in words, and every guard that failed, named."""
    out = ["## Headline", ""]
    if paths.headline.is_file():
        out += [headline_markdown([paths.headline]).rstrip("\n"), ""]
        verdict = (read_headline(paths.headline).get("lesson") or {}).get("verdict")
        if verdict:
            out += [f"The matched lesson: {verdict}.", ""]
    else:
        out += ["(no headline yet: notebooks 03 and 05 write it)", ""]
    failed = failed_guards(paths)
    guards = paths.tables / "guards.csv"
    if failed:
        out += [f"**Guards that failed** ({len(failed)}; table `guards`): " + "; ".join(failed), ""]
    elif guards.is_file():
        out += ["Every guard passed (table `guards`).", ""]
    return out


def write_index(params: Params, paths: BookPaths, result: BookResult | None = None) -> Path:
    """Write ``index.md`` and ``index.html`` linking every executed notebook, table and figure."""
    root = paths.root
    state = load_state(root / STATE_FILE).get("notebooks", {})
    nbs = [(n, state.get(n, {})) for n in NOTEBOOKS if (paths.notebooks / f"{n}.ipynb").exists() or n in state]
    tables = sorted(paths.tables.glob("*.md"))
    figures = sorted(paths.figures.glob("*.png"))
    md = [f"# negobook: profile `{params.profile}`", "", params.description.strip(), "",
          f"Profile file: `{params.source}`  ", f"Output folder: `{root}`", ""]
    if result is not None:
        md += [f"Book run: {result.duration_s:.0f} s (budget {result.budget_s:.0f} s)"
               + (f"; **failed**: {result.error}" if result.error else ""), ""]
    box = headline_box(paths)
    md += box
    md += ["## Notebooks", "", "| notebook | status | seconds | finished |", "|---|---|---|---|"]
    for n, s in nbs:
        link = f"[{n}](notebooks/{n}.ipynb)" if (paths.notebooks / f"{n}.ipynb").exists() else n
        md.append(f"| {link} | {s.get('status', '')} | {s.get('duration_s', '')} | {s.get('finished', '')} |")
    md += ["", "## Tables", ""]
    md += [f"- [{t.stem}](tables/{t.name}) ([csv](tables/{t.stem}.csv))" for t in tables] or ["(none yet)"]
    md += ["", "## Figures", ""]
    md += [f"- [{f.stem}](figures/{f.name})" for f in figures] or ["(none yet)"]
    md += ["", "Columns labelled `paper: ...` are the paper's reported numbers "
           f"(`{_rel(params.paper_reported_path, root)}`); every other number is computed from this run's "
           "transcripts and logs.", ""]
    (root / "index.md").write_text("\n".join(md))
    (root / "index.html").write_text(_index_html(params, paths, nbs, tables, figures, result, box))
    return root / "index.md"


def _markdown_box_html(lines: list[str]) -> str:
    """The headline box's markdown as simple HTML: a table for the table lines, a paragraph for the rest."""
    e = html.escape
    out, rows = [], []
    for line in lines:
        if line.startswith("|"):
            if not set(line) <= set("|-"):
                rows.append([c.strip() for c in line.strip("|").split("|")])
            continue
        if rows:
            head, *body = rows
            out.append("<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in head) + "</tr>"
                       + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in body) + "</table>")
            rows = []
        if line.startswith("## "):
            out.append(f"<h2>{e(line[3:])}</h2>")
        elif line.strip():
            out.append(f"<p>{e(line.replace('**', ''))}</p>")
    return "".join(out)


def _index_html(params: Params, paths: BookPaths, nbs: list[tuple[str, dict]], tables: list[Path],
                figures: list[Path], result: BookResult | None, box: list[str]) -> str:
    """The index as HTML; ``box``: the :func:`headline_box` lines :func:`write_index` already read."""
    e = html.escape
    rows = "".join(
        f"<tr><td><a href='notebooks/{e(n)}.ipynb'>{e(n)}</a></td><td>{e(str(s.get('status', '')))}</td>"
        f"<td>{e(str(s.get('duration_s', '')))}</td><td>{e(str(s.get('finished', '')))}</td></tr>" for n, s in nbs)
    tabs = "".join(
        f"<li><a href='tables/{e(t.stem)}.html'>{e(t.stem)}</a> (<a href='tables/{e(t.stem)}.csv'>csv</a>, "
        f"<a href='tables/{e(t.name)}'>md</a>)</li>" for t in tables)
    figs = "".join(f"<figure><img src='figures/{e(f.name)}' style='max-width:900px'><figcaption>{e(f.stem)}"
                   "</figcaption></figure>" for f in figures)
    status = ""
    if result is not None:
        status = f"<p>Book run: {result.duration_s:.0f} s (budget {result.budget_s:.0f} s)</p>"
        if result.error:
            status += f"<p style='color:#b00'><b>failed</b>: {e(str(result.error))}</p>"
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>negobook: {e(params.profile)}</title>"
            "<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto}td,th{padding:2px 8px}"
            "</style></head><body>"
            f"<h1>negobook: profile <code>{e(params.profile)}</code></h1><p>{e(params.description)}</p>{status}"
            f"{_markdown_box_html(box)}<h2>Notebooks</h2><table><tr><th>notebook</th><th>status</th><th>seconds</th><th>finished</th></tr>"
            f"{rows}</table><h2>Tables</h2><ul>{tabs or '<li>(none yet)</li>'}</ul>"
            f"<h2>Figures</h2>{figs or '<p>(none yet)</p>'}"
            "<p>Columns labelled <code>paper: ...</code> are the paper's reported numbers; every other number "
            "is computed from this run's transcripts and logs.</p></body></html>")


__all__ = ["BookError", "BookResult", "NotebookRun", "ensure_kernel", "execute_notebook", "resolve_notebooks",
           "run_book", "source_notebook", "write_index", "write_run_headline"]
