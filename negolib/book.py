"""The book runner: execute the notebooks in order with papermill, resumably, and index the outputs.

``run_book(params_path)`` executes ``notebooks/NN_*.py`` (the jupytext ``py:percent`` sources, which
are the source of truth; the paired ``.ipynb`` are kept in sync by tests) with papermill, injecting
``params_path`` and ``output_dir`` into each notebook's ``parameters`` cell. Executed copies go to
``outputs/<profile>/notebooks/``. A small state file records, per notebook, a key (profile hash +
notebook source hash) and the runs of the notebooks it reads from, so a resumed book skips notebooks
already executed for the same inputs and re-executes a notebook whose upstream notebook ran again.
A failure names the notebook and the cell (index and first source line). Finally an index page
(``index.md`` / ``index.html``) links every executed notebook, table and figure.

Inside a notebook, :func:`open_book` gives the shared context: the validated params, the output
paths, the paper's reported numbers and helpers that save tables and figures.
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
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from negolib.agents.factory import ModelCache
from negolib.analysis.arms import compute_results
from negolib.analysis.contrasts import held_out_contrasts, held_out_extension_trigger
from negolib.book_progress import CellHeartbeat
from negolib.cost import Price
from negolib.evaluation import DeviationLog, check_protocol_hashes, evaluate_arms, load_protocol, protocol_hash
from negolib.files import atomic_write_text
from negolib.games.base import StudyTable
from negolib.paper import load_paper_reported
from negolib.params import NOTEBOOKS, Params, load_params, spec_dict
from negolib.progress import PROGRESS_ENV
from negolib.report.booktable import BookTable
from negolib.training.runlog import RunLog
from negolib.training.runs import build_agents, trained_ready, training_run_dir
from negolib.transcripts import TranscriptStore, episodes_frame
from negolib.widgets import BuyerSession, EpisodeExplorer, ledger_table  # re-exported: notebook 01's tools

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
# Which notebooks read files another notebook writes (re-run a notebook when an upstream one ran).
DEPENDS: dict[str, tuple[str, ...]] = {
    "04_evaluation": ("03_training",),
    "05_results": ("04_evaluation",),
    "06_appendix_b_c": ("04_evaluation",),
    "07_appendix_d_e": ("03_training", "04_evaluation"),
    "08_appendix_g_k": ("03_training", "04_evaluation"),
    "09_beyond": ("03_training", "04_evaluation"),
}
STATE_FILE = "book_state.json"
KERNEL_NAME = "python3"


# ---------------------------------------------------------------------------------------------
# Output layout and the in-notebook context
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BookPaths:
    """Where a profile's outputs live (all under ``outputs/<profile>/``)."""

    root: Path

    @property
    def notebooks(self) -> Path:
        return self.root / "notebooks"

    @property
    def tables(self) -> Path:
        return self.root / "tables"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    @property
    def transcripts(self) -> Path:
        """The evaluation transcript store (JSONL, one episode per line, all arms)."""
        return self.root / "transcripts" / "evaluation.jsonl"

    @property
    def beyond_transcripts(self) -> Path:
        """Transcripts of the beyond-paper variants (buyer-opens, ...), kept apart from the protocol's."""
        return self.root / "transcripts" / "beyond.jsonl"

    @property
    def held_out_extension_transcripts(self) -> Path:
        """App. C's held-out-panel extension (the held-out domain on the next block of evaluation seeds), kept
        apart from the main evaluation's transcripts under its own frozen protocol (notebook 04 writes it)."""
        return self.root / "transcripts" / "held_out_extension.jsonl"

    @property
    def training(self) -> Path:
        return self.root / "training"

    @property
    def evaluation(self) -> Path:
        """Protocol file, deviation log, pilot-gate log."""
        return self.root / "evaluation"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def protocol(self) -> Path:
        """The frozen evaluation protocol: notebook 04 writes it, 08 and the runner's checks read it (its
        deviation log lies beside it, :meth:`negolib.evaluation.DeviationLog.for_protocol`)."""
        return self.evaluation / "protocol.yaml"

    @property
    def held_out_extension_protocol(self) -> Path:
        """The held-out-panel extension's own frozen protocol
        (:func:`negolib.evaluation.held_out_extension_protocol`), with its deviation log beside it."""
        return self.evaluation / "held_out_extension.yaml"

    @property
    def pilot_log(self) -> Path:
        """The pilot gate's log, one line per arm x buyer cell (notebook 04 writes it, 08 reads it)."""
        return self.evaluation / "pilot_log.jsonl"

    @property
    def pilot_transcripts(self) -> Path:
        """The pilot gate's episodes, kept apart from the evaluation's transcripts (notebook 04)."""
        return self.evaluation / "pilot.jsonl"

    @property
    def lesson(self) -> Path:
        """The matched lesson (notebook 03): its GRPO run under ``run/``, its paired evaluations as JSON lines."""
        return self.root / "lesson"

    @property
    def headline(self) -> Path:
        """The run's machine-readable headline (:mod:`negolib.headline`)."""
        from negolib.headline import HEADLINE_FILE

        return self.root / HEADLINE_FILE

    @property
    def ladder(self) -> Path:
        """The learning ladder's runs (notebook 03): one folder per rung or sabotaged twin."""
        return self.root / "ladder"

    @staticmethod
    def train_transcripts(run_dir: str | Path) -> Path:
        """The training transcripts a run writes into its output folder ``run_dir`` (one record per
        rollout episode; :func:`negolib.diagnostics.training_step_spread` reads them)."""
        return Path(run_dir) / "transcripts" / "train.jsonl"

    def game(self, name: str) -> Path:
        """Everything one of the other games writes (notebook 10 and on): ``games/<name>/``."""
        return self.root / "games" / name

    def game_tournament(self, name: str) -> Path:
        """A game's round robin (``matches.jsonl``, resumable; :func:`negolib.tournament.run_tournament`)."""
        return self.game(name) / "tournament"

    def game_training(self, name: str, stage: str) -> Path:
        """One stage of a game's language-model training (``sft``, ``grpo``): its model or checkpoints and logs."""
        return self.game(name) / "training" / stage

    @property
    def state(self) -> Path:
        """The runner's state file: per notebook, its status, key, duration and finish time."""
        return self.root / STATE_FILE

    def make(self) -> BookPaths:
        for p in (self.root, self.notebooks, self.tables, self.figures, self.transcripts.parent,
                  self.training, self.evaluation, self.logs):
            p.mkdir(parents=True, exist_ok=True)
        return self


@dataclass
class Book:
    """What a notebook needs: params, paths, the paper's numbers, and save helpers."""

    params: Params
    paths: BookPaths
    saved: list[Path] = field(default_factory=list)

    @property
    def paper(self) -> Any:
        """The paper's reported numbers (:class:`negolib.paper.PaperReported`)."""
        return load_paper_reported(self.params.paper_reported_path)

    def save_table(self, table: Any) -> Any:
        """Write a :class:`negolib.report.booktable.BookTable` (CSV, markdown, HTML) and return it for display; a
        game study's :class:`negolib.games.base.StudyTable` becomes one first."""
        if isinstance(table, StudyTable):
            table = BookTable(table.name, table.title, table.frame, table.caption, data=table.data)
        self.saved.extend(table.save(self.paths.tables))
        return table

    def update_headline(self, **sections: Any) -> dict[str, Any]:
        """Set sections of the run's ``headline.json`` (:func:`negolib.headline.update_headline`)."""
        from negolib.headline import update_headline

        return update_headline(self.paths.headline, **sections)

    def save_figure(self, fig: Any, name: str, dpi: int = 120) -> None:
        """Save a matplotlib figure as ``figures/<name>.png`` (the notebook shows it inline)."""
        path = self.paths.figures / f"{name}.png"
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
        self.saved.append(path)

    def episodes(self, include_errors: bool = False, beyond: bool = False) -> Any:
        """The episode table of the evaluation transcripts (empty frame when none exist yet); every
        record validated and checked against the frozen protocol (see :meth:`records`)."""
        return episodes_frame(self.records(beyond, include_errors))

    def last_run(self, notebook: str) -> dict[str, Any]:
        """The runner's record of ``notebook``'s last run on this profile (``status``, ``duration_s``,
        ``finished``; empty when the runner has not run it here yet)."""
        return dict(_load_state(self.paths.state).get("notebooks", {}).get(notebook, {}))

    def training_dir(self, run: str, seed: int | None = None) -> Path:
        """Output folder of one training run (and seed)."""
        return training_run_dir(self.params, run, seed)

    def train_transcripts(self, run: str, seed: int | None = None) -> Path:
        """The training transcripts of one training run (and seed)."""
        return self.paths.train_transcripts(self.training_dir(run, seed))

    def training_log(self, run: str, seed: int | None = None, which: str = "train") -> Any:
        """The per-step ``train`` or ``validation`` log of a run as a DataFrame (empty if none yet)."""
        import pandas as pd

        rows = RunLog(self.training_dir(run, seed), f"{which}_log").rows()  # a torn last line is skipped
        if not rows:
            return pd.DataFrame()
        df = pd.DataFrame(rows)
        if "learning_rate" in df and "lr" not in df:
            df["lr"] = df["learning_rate"]
        return df

    def warmup(self, run: str, seed: int | None = None) -> tuple[dict[str, Any], Any, Any]:
        """A run's format warm-up: (summary, per-step log, demonstrations) with empty ones if the run
        has no warm-up (see :mod:`negolib.games.multi_issue.warmup`)."""
        import pandas as pd

        root = self.training_dir(run, seed) / "warmup"
        summary_path = root / "warmup_complete.json"
        summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
        frames = []
        for name in ("warmup_log.jsonl", "demonstrations.jsonl"):
            path = root / name
            frames.append(pd.read_json(path, lines=True) if path.is_file() and path.stat().st_size else pd.DataFrame())
        return summary, frames[0], frames[1]

    def results(self) -> Any:
        """:class:`negolib.analysis.arms.Results` of the evaluation transcripts (estimates and contrasts)."""
        return compute_results(self.episodes(), self.params)

    def held_out_extension_trigger(self) -> Any:
        """App. C's extension trigger evaluated on the main evaluation's held-out gains
        (:func:`negolib.analysis.contrasts.held_out_extension_trigger`; read it with ``extension_fires``)."""
        df = self.episodes()
        held = held_out_contrasts(df, self.params) if not df.empty else None
        return held_out_extension_trigger(held, self.params)

    def held_out_extension_episodes(self, include_errors: bool = False) -> Any:
        """The episode table of the held-out-panel extension (empty when it has not run), every record checked
        against the extension's own frozen protocol."""
        return episodes_frame(self._checked_records(self.paths.held_out_extension_transcripts,
                                                    self.paths.held_out_extension_protocol, include_errors))

    def ready_arms(self, arms: Sequence[str] | None = None) -> tuple[list[str], dict[str, str]]:
        """(arms that can play now, {arm: why not}) -- a trained arm needs its checkpoint."""
        ready, missing = [], {}
        for arm in arms if arms is not None else self.params.eval_arms():
            ok, why = trained_ready(self.params, arm)
            (ready.append(arm) if ok else missing.__setitem__(arm, why))
        return ready, missing

    def evaluate_variant(self, arms: Sequence[str], first_mover: str = "buyer", suffix: str = ".buyer_opens",
                         progress: bool = False, *, accept_applies_terms: bool = False,
                         buyers: Sequence[str] | None = None, accept_needs_offer: bool | None = None) -> list[str]:
        """Play a beyond-paper variant of ``arms`` (default: the buyer opens) into the beyond transcript
        store, logging each variant arm as a deviation of the frozen protocol first (App. K). Returns
        the variant arm names (``<arm><suffix>``); arms that cannot play yet are skipped.

        ``accept_applies_terms``: terms attached to an accept are applied before the deal closes (as in
        training, App. A); ``buyers``: the variant plays these profile buyers instead of the protocol's;
        ``accept_needs_offer``: the variant plays this ACCEPT rule (None: the protocol's)."""
        import dataclasses

        protocol_file = self.paths.protocol
        protocol = load_protocol(protocol_file)
        if accept_applies_terms or buyers is not None:
            bs = {b: spec_dict(self.params.buyers[b]) for b in buyers} if buyers is not None else protocol.buyers
            protocol = dataclasses.replace(protocol, accept_applies_terms=accept_applies_terms, buyers=bs)
        if accept_needs_offer is not None:
            protocol = dataclasses.replace(protocol, accept_needs_offer=accept_needs_offer)
        deviations = DeviationLog.for_protocol(protocol_file)
        ready, _ = self.ready_arms(arms)
        extra = [dataclasses.replace(protocol.arm(a), name=f"{a}{suffix}", first_mover=first_mover) for a in ready]
        what = f"first_mover={first_mover}" + (", accept_applies_terms=True" if accept_applies_terms else "") + \
            (f", buyers={list(buyers)}" if buyers is not None else "") + \
            (f", accept_needs_offer={accept_needs_offer}" if accept_needs_offer is not None else "")
        for spec in extra:
            if not deviations.covers(spec.name):
                deviations.log_deviation([spec.name], f"beyond-paper variant of {spec.name[:-len(suffix)]}: "
                                         f"{what} (not in the frozen arm matrix)", False)
        agents = build_agents(self.params, ready + list(protocol.buyers), cache=ModelCache())
        agents.update({f"{a}{suffix}": agents[a] for a in ready})
        evaluate_arms(protocol, agents, self.paths.beyond_transcripts, progress=progress, arms=[], extra_arms=extra,
                      deviations=deviations)
        return [s.name for s in extra]

    def api_models(self) -> dict[str, str]:
        """Agent name -> model id of every API-served party (openai / anthropic backends)."""
        return {n: s.model or "" for n, s in {**self.params.arms, **self.params.buyers}.items()
                if s.backend in ("openai", "anthropic")}

    def prices(self) -> tuple[dict[str, Any], list[str]]:
        """(the params price table as :class:`negolib.params.Price` values, API models without a price).

        Unpriced API models get a zero price in the table so that calls and tokens are still counted;
        callers must not report USD for them (they are listed in the second element)."""
        table = dict(self.params.prices)
        unpriced = sorted({m for m in self.api_models().values() if m not in table})
        return {**table, **{m: Price(0.0, 0.0) for m in unpriced}}, unpriced

    def records(self, beyond: bool = False, include_errors: bool = False) -> list[dict[str, Any]]:
        """The complete transcript records (for turn-level diagnostics and figures), validated on read.

        When the frozen protocol exists, every record must carry its hash unless a logged deviation
        names the record's arm (:func:`negolib.evaluation.check_protocol_hashes`); before it exists,
        one file may not mix protocols (:meth:`negolib.transcripts.TranscriptStore.records`)."""
        path = self.paths.beyond_transcripts if beyond else self.paths.transcripts
        return self._checked_records(path, self.paths.protocol, include_errors)

    @staticmethod
    def _checked_records(path: Path, protocol_file: Path, include_errors: bool) -> list[dict[str, Any]]:
        if not path.exists():
            return []
        if not protocol_file.is_file():
            return TranscriptStore(path).records(include_errors)
        recs = TranscriptStore(path).records(include_errors, mixed_protocols=True)
        check_protocol_hashes(recs, protocol_hash(load_protocol(protocol_file)),
                              DeviationLog.for_protocol(protocol_file))
        return recs


@contextlib.contextmanager
def summarize_warnings(max_chars: int = 240) -> Iterator[None]:
    """Collect the warnings raised inside the block and print one line per category (how many, and
    the first message) instead of one line per warning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    by: dict[str, list[str]] = {}
    for w in caught:
        by.setdefault(w.category.__name__, []).append(str(w.message))
    for cat, msgs in by.items():
        print(f"{len(msgs)} x {cat}; first: {msgs[0][:max_chars]}")


def open_book(params_path: str | Path, output_dir: str | Path | None = None) -> Book:
    """Load a profile and create its output folders (``output_dir`` overrides ``outputs/<profile>``)."""
    params = load_params(params_path)
    if output_dir:
        params = params.with_output_dir(output_dir)
    return Book(params, BookPaths(params.out).make())


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
            lines.append(f"  {r.name:<18} {r.status:<8} {r.duration_s:7.1f} s{extra}")
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


def _load_state(path: Path) -> dict[str, Any]:
    if path.exists():
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError:
            return {}
    return {}


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


def execute_notebook(name: str, params_path: Path, output_dir: Path, kernel: str,
                     folder: Path = NOTEBOOK_DIR, timeout_s: float | None = None,
                     heartbeat: Callable[[str], None] | None = None, heartbeat_s: float = 30.0) -> Path:
    """Execute one notebook with papermill into ``output_dir/notebooks``; raise :class:`BookError`.

    With ``heartbeat``, a line naming the running cell, its elapsed time and its last printed line
    (the notebook's own progress bar) is passed to it every ``heartbeat_s`` seconds
    (:class:`negolib.book_progress.CellHeartbeat`); papermill then autosaves at least that often."""
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
        progress_file = Path(tmp) / "progress.txt"  # the kernel's library calls report here (negolib.progress)
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
    state = _load_state(state_path)
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
        state["notebooks"][name] = {"status": "ok", "key": key, "deps": deps, "run_id": f"{time.time():.6f}",
                                    "duration_s": round(dt, 2), "finished": time.strftime("%Y-%m-%d %H:%M:%S")}
        _save_state(state_path, state)
        runs.append(NotebookRun(name, "ok", dt, str(out_nb), budget_s=params.budgets.notebooks.get(name)))
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
    resumed book still reports what the whole book cost), finish time and machine to ``headline.json``."""
    from negolib.headline import checkout_commit, machine, update_headline

    nbs = state.get("notebooks", {})
    seconds = sum(float(v.get("duration_s", 0.0)) for v in nbs.values() if v.get("status") == "ok")
    update_headline(paths.headline, profile=params.profile, commit=checkout_commit(Path(params.root)),
                    minutes=round(seconds / 60, 2), finished=time.strftime("%Y-%m-%d %H:%M:%S"), machine=machine(),
                    notebooks={n: v.get("duration_s") for n, v in nbs.items() if v.get("status") == "ok"})
    return paths.headline


# ---------------------------------------------------------------------------------------------
# The index page
# ---------------------------------------------------------------------------------------------

def _rel(path: Path, root: Path) -> str:
    return os.path.relpath(path, root)


def write_index(params: Params, paths: BookPaths, result: BookResult | None = None) -> Path:
    """Write ``index.md`` and ``index.html`` linking every executed notebook, table and figure."""
    root = paths.root
    state = _load_state(root / STATE_FILE).get("notebooks", {})
    nbs = [(n, state.get(n, {})) for n in NOTEBOOKS if (paths.notebooks / f"{n}.ipynb").exists() or n in state]
    tables = sorted(paths.tables.glob("*.md"))
    figures = sorted(paths.figures.glob("*.png"))
    md = [f"# negobook: profile `{params.profile}`", "", params.description.strip(), "",
          f"Profile file: `{params.source}`  ", f"Output folder: `{root}`", ""]
    if result is not None:
        md += [f"Book run: {result.duration_s:.0f} s (budget {result.budget_s:.0f} s)"
               + (f"; **failed**: {result.error}" if result.error else ""), ""]
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
    (root / "index.html").write_text(_index_html(params, paths, nbs, tables, figures, result))
    return root / "index.md"


def _index_html(params: Params, paths: BookPaths, nbs: list[tuple[str, dict]], tables: list[Path],
                figures: list[Path], result: BookResult | None) -> str:
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
            f"<h2>Notebooks</h2><table><tr><th>notebook</th><th>status</th><th>seconds</th><th>finished</th></tr>"
            f"{rows}</table><h2>Tables</h2><ul>{tabs or '<li>(none yet)</li>'}</ul>"
            f"<h2>Figures</h2>{figs or '<p>(none yet)</p>'}"
            "<p>Columns labelled <code>paper: ...</code> are the paper's reported numbers; every other number "
            "is computed from this run's transcripts and logs.</p></body></html>")


__all__ = ["Book", "BookError", "BookPaths", "BookResult", "BuyerSession", "DEPENDS", "EpisodeExplorer",
           "NOTEBOOKS", "NotebookRun", "ensure_kernel", "execute_notebook", "ledger_table",
           "open_book", "resolve_notebooks", "run_book", "summarize_warnings", "write_index"]
