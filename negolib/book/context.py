"""The book's in-notebook context: :func:`open_book` gives a notebook the validated params, the output paths
(:class:`BookPaths`), the paper's reported numbers and helpers that save tables and figures (:class:`Book`).

The runner that executes the notebooks in order, resumably, is :mod:`negolib.book.runner`.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from negolib.agents.factory import ModelCache
from negolib.book.widgets import BuyerSession, EpisodeExplorer, ledger_table  # re-exported: notebook 01's tools
from negolib.core.transcripts import TranscriptStore, episodes_frame
from negolib.games.base import StudyTable
from negolib.params import Params, load_params, spec_dict
from negolib.profile_genius import imported_scenarios
from negolib.study.analysis.arms import compute_results
from negolib.study.analysis.contrasts import held_out_contrasts, held_out_extension_trigger
from negolib.study.cost import Price
from negolib.study.evaluation import DeviationLog, check_protocol_hashes, evaluate_arms, load_protocol, protocol_hash
from negolib.study.paper import load_paper_reported
from negolib.study.report.booktable import BookTable
from negolib.study.runs import build_agents, trained_ready, training_run_dir
from negolib.training.runlog import RunLog

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
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
        deviation log lies beside it, :meth:`negolib.study.evaluation.DeviationLog.for_protocol`)."""
        return self.evaluation / "protocol.yaml"

    @property
    def held_out_extension_protocol(self) -> Path:
        """The held-out-panel extension's own frozen protocol
        (:func:`negolib.study.evaluation.held_out_extension_protocol`), with its deviation log beside it."""
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
        """The run's machine-readable headline (:mod:`negolib.core.headline`)."""
        from negolib.core.headline import HEADLINE_FILE

        return self.root / HEADLINE_FILE

    @property
    def ladder(self) -> Path:
        """The learning ladder's runs (notebook 03): one folder per rung or sabotaged twin."""
        return self.root / "ladder"

    @staticmethod
    def train_transcripts(run_dir: str | Path) -> Path:
        """The training transcripts a run writes into its output folder ``run_dir`` (one record per
        rollout episode; :func:`negolib.study.diagnostics.training_step_spread` reads them)."""
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
        """The paper's reported numbers (:class:`negolib.study.paper.PaperReported`)."""
        return load_paper_reported(self.params.paper_reported_path)

    def save_table(self, table: Any) -> Any:
        """Write a :class:`negolib.study.report.booktable.BookTable` (CSV, markdown, HTML) and return it for display; a
        game study's :class:`negolib.games.base.StudyTable` becomes one first."""
        if isinstance(table, StudyTable):
            table = BookTable(table.name, table.title, table.frame, table.caption, data=table.data)
        self.saved.extend(table.save(self.paths.tables))
        return table

    def update_headline(self, **sections: Any) -> dict[str, Any]:
        """Set sections of the run's ``headline.json`` (:func:`negolib.core.headline.update_headline`)."""
        from negolib.core.headline import update_headline

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
        return dict(load_state(self.paths.state).get("notebooks", {}).get(notebook, {}))

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
        """:class:`negolib.study.analysis.arms.Results` of the evaluation transcripts (estimates and contrasts)."""
        return compute_results(self.episodes(), self.params)

    def held_out_extension_trigger(self) -> Any:
        """App. C's extension trigger evaluated on the main evaluation's held-out gains
        (:func:`negolib.study.analysis.contrasts.held_out_extension_trigger`; read it with ``extension_fires``)."""
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
        names the record's arm (:func:`negolib.study.evaluation.check_protocol_hashes`); before it exists,
        one file may not mix protocols (:meth:`negolib.core.transcripts.TranscriptStore.records`)."""
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


def load_state(path: Path) -> dict[str, Any]:
    if path.exists():
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError:
            return {}
    return {}


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


class ResultsSetup(NamedTuple):
    """What a notebook that reads the evaluation opens with (:func:`open_results`)."""

    book: Book
    params: Params
    paper: Any  # the paper's reported numbers (:class:`negolib.study.paper.PaperReported`)
    results: Any  # :class:`negolib.study.analysis.arms.Results` of the evaluation transcripts
    records: list[dict[str, Any]]  # the transcript records, validated on read (:meth:`Book.records`)
    imported: dict[str, Any]  # the profile's imported Genius scenarios by name


def open_results(params_path: str | Path, output_dir: str | Path | None = None) -> ResultsSetup:
    """The first cell of the notebooks that read the evaluation (05, 07, 08, 09): :func:`open_book`, then the
    paper's numbers, the results, the transcript records and the profile's imported scenarios, in that order."""
    book = open_book(params_path, output_dir or None)
    params = book.params
    return ResultsSetup(book, params, book.paper, book.results(), book.records(),
                        imported_scenarios(params.evaluation.genius))


__all__ = ["DEPENDS", "KERNEL_NAME", "NOTEBOOK_DIR", "STATE_FILE", "Book", "BookPaths", "BuyerSession",
           "EpisodeExplorer", "ResultsSetup", "ledger_table", "load_state", "open_book", "open_results",
           "summarize_warnings"]
