"""The matched lesson at several training seeds: is its gain the design's, or one seed's?

Contract::

    rows = lesson_seed_sweep(params, seeds=range(8), out="outputs/default/lesson_seeds")
    print(sweep_summary(rows).line())           # "S gain excludes zero for 6 of 8 training seeds ..."
    print("\\n".join(sweep_markdown(rows)))      # one table row per seed

The start policy is the book's (:func:`negolib.study.lesson_start.lesson_start`; with ``start: run_warmup`` the
start run's format warm-up, trained as notebook 03 trains it, or read back where the book already did) and is
evaluated once. Each training seed trains the lesson on its own training scenarios and sampling, and every trained
policy plays the same held-out scenarios under the same sampling seed as the start (common random numbers), so seed
``params.seed`` repeats the book's own lesson. Everything is kept under ``out`` (``start_eval.jsonl``, ``seed-<s>/``,
``seeds.jsonl``, one row per finished seed): an interrupted sweep resumes where it stopped; ``lesson.json`` holds
the lesson's settings and the sampling seed, and a folder that holds another lesson's sweep is refused.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from negolib.core.errors import ValidationError
from negolib.core.formatting import fmt_ci, fmt_num
from negolib.core.isolate import run_isolated
from negolib.core.progress import report
from negolib.params import Params
from negolib.study.lesson import Estimate, eval_sampling_seed, evaluate_lesson, lesson_result, train_lesson
from negolib.study.lesson_start import lesson_start
from negolib.study.runs import train_run
from negolib.training.config import LessonConfig

__all__ = ["SeedRow", "SweepSummary", "eval_seed", "lesson_seed_sweep", "sweep_markdown", "sweep_summary"]

ROWS_FILE = "seeds.jsonl"
SETTINGS_FILE = "lesson.json"
START_EVAL = "start_eval.jsonl"


def eval_seed(params: Params) -> int:
    """The evaluation's sampling seed, notebook 03's: one for every arm (common random numbers)."""
    return eval_sampling_seed(params.seed)


@dataclass(frozen=True)
class SeedRow:
    """One training seed's lesson: trained minus start on the held-out scenarios."""

    seed: int
    s_gain: Estimate
    utility_on_deals: Estimate
    deal_rate: Estimate
    bad_parse_rate: Estimate
    decomposition: dict[str, float]  # "deal rate part", "deal utility part", "total"
    p_signflip: float
    n_paired: int
    verdict: str
    train_seconds: float
    eval_seconds: float

    @property
    def gained(self) -> bool:
        """The S gain's interval lies above zero."""
        return bool(self.s_gain.ci_low > 0)

    @property
    def learned(self) -> bool:
        """The lesson's whole verdict: S rose and utility on deals did not fall (estimate at least zero)."""
        return self.verdict.startswith("learned")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SeedRow:
        est = {k: Estimate(**d[k]) for k in ("s_gain", "utility_on_deals", "deal_rate", "bad_parse_rate")}
        return cls(**{**d, **est})


@dataclass(frozen=True)
class SweepSummary:
    """Counts over the seeds: how many gained on S, how many learned (the whole verdict), how many sold for
    less (utility on deals' interval below zero); the S gain's mean and range."""

    n_seeds: int
    n_gained: int
    n_learned: int
    n_lower_price: int
    mean_gain: float
    min_gain: float
    max_gain: float

    def line(self) -> str:
        return (f"S gain excludes zero for {self.n_gained} of {self.n_seeds} training seeds (mean "
                f"{self.mean_gain:+.3f}, range {self.min_gain:+.3f} to {self.max_gain:+.3f}); the whole verdict "
                f"(utility on deals not lower) holds for {self.n_learned}; utility on deals fell (interval below "
                f"zero) for {self.n_lower_price}")


def sweep_summary(rows: Sequence[SeedRow]) -> SweepSummary:
    """The :class:`SweepSummary` of ``rows`` (at least one)."""
    if not rows:
        raise ValueError("no seeds to summarise")
    gains = [r.s_gain.diff for r in rows]
    return SweepSummary(len(rows), sum(r.gained for r in rows), sum(r.learned for r in rows),
                        sum(r.utility_on_deals.ci_high < 0 for r in rows), sum(gains) / len(gains), min(gains),
                        max(gains))


def _ci(e: Estimate) -> str:
    """``+0.516 [+0.410, +0.615]`` (the decimals the bounds need to show their sign); a dash when undefined."""
    return fmt_ci(e.diff, e.ci_low, e.ci_high, signed=True)


def sweep_markdown(rows: Sequence[SeedRow]) -> list[str]:
    """A markdown table, one row per training seed: S (start -> trained, gain), utility on deals, deal rate,
    the decomposition, bad parses and the verdict."""
    out = ["| training seed | S start -> trained | S gain [95% CI] | utility on deals | deal rate | deal-rate part "
           "| deal-utility part | bad-parse rate | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        d = r.decomposition
        out.append(f"| {r.seed} | {r.s_gain.start:.3f} -> {r.s_gain.trained:.3f} | {_ci(r.s_gain)} | "
                   f"{_ci(r.utility_on_deals)} | {_ci(r.deal_rate)} | "
                   f"{fmt_num(d.get('deal rate part'), signed=True)} | "
                   f"{fmt_num(d.get('deal utility part'), signed=True)} | {r.bad_parse_rate.start:.3f} -> "
                   f"{r.bad_parse_rate.trained:.3f} | {r.verdict} |")
    return out


def _read_rows(path: Path) -> dict[int, SeedRow]:
    if not path.is_file():
        return {}
    rows = (SeedRow.from_dict(json.loads(line)) for line in path.read_text().splitlines() if line.strip())
    return {r.seed: r for r in rows}


def _check_settings(root: Path, lesson: LessonConfig, sampling_seed: int) -> None:
    """Write ``root/lesson.json`` on the first call; refuse a folder whose file names other settings."""
    settings = json.loads(json.dumps({"lesson": dataclasses.asdict(lesson), "eval_seed": sampling_seed}))
    path = root / SETTINGS_FILE
    if not path.is_file():
        path.write_text(json.dumps(settings, indent=1, sort_keys=True))
        return
    held = json.loads(path.read_text())
    if held != settings:
        changed = sorted(k for k in set(held.get("lesson", {})) | set(settings["lesson"])
                         if held.get("lesson", {}).get(k) != settings["lesson"].get(k))
        if held.get("eval_seed") != sampling_seed:
            changed.append("eval_seed")
        raise ValueError(f"{root} holds the sweep of another lesson (differs in: {', '.join(changed)}); "
                         "give another output folder")


def _caller(isolate: bool) -> Callable[..., Any]:
    """``run_isolated`` (a child process for each heavy call) or a plain call."""
    return run_isolated if isolate else (lambda fn, *args, **kwargs: fn(*args, **kwargs))


def _start_policy(params: Params, lesson: LessonConfig, isolate: bool) -> Path:
    """The book's start: building the start run's warm-up first where the lesson starts from it."""
    if lesson.start == "run_warmup":  # notebook 03's run: read back where the book trained it already
        _caller(isolate)(train_run, params, lesson.start_run, None, progress=False, isolate=isolate)
    return lesson_start(params, lesson, params.out / "lesson", isolate=isolate)


def lesson_seed_sweep(params: Params, seeds: Iterable[int], out: str | Path, *, start: str | Path | None = None,
                      isolate: bool = True, n_resamples: int | None = None,
                      train: Callable[..., Any] = train_lesson,
                      evaluate: Callable[..., list[dict[str, Any]]] = evaluate_lesson,
                      log: Callable[[str], None] = print) -> list[SeedRow]:
    """The profile's lesson trained at each of ``seeds`` from one start and evaluated against one evaluation of
    that start; one :class:`SeedRow` per seed, in the order given (finished seeds are read back from
    ``out/seeds.jsonl``). ``start``: a model folder (default: the book's start, built if missing). ``train`` and
    ``evaluate`` have :func:`train_lesson`'s and :func:`evaluate_lesson`'s signatures; each heavy call runs in a
    child process with ``isolate``."""
    lesson = params.lesson
    if lesson is None:
        raise ValidationError(params.source, "lesson", "the profile has no matched lesson to train at several seeds")
    seeds = [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"training seeds must be given, each once: {seeds}")
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    _check_settings(root, lesson, eval_seed(params))
    rows_path = root / ROWS_FILE
    done = _read_rows(rows_path)
    call = _caller(isolate)
    stats = params.statistics
    start_path, before = None, []
    if any(s not in done for s in seeds):
        start_path = Path(start) if start is not None else _start_policy(params, lesson, isolate)
        log(f"start policy: {start_path}")
        before = call(evaluate, start_path, lesson, eval_seed(params), root / START_EVAL)
    for i, seed in enumerate(seeds, 1):
        if seed in done:
            log(f"training seed {seed}: read back ({done[seed].verdict})")
            continue
        report(f"lesson seeds: seed {seed} ({i} of {len(seeds)}) training")
        t0 = time.perf_counter()
        run = call(train, lesson, start_path, root / f"seed-{seed}" / "run", seed=seed)
        t1 = time.perf_counter()
        report(f"lesson seeds: seed {seed} ({i} of {len(seeds)}) evaluation")
        after = call(evaluate, run.checkpoint, lesson, eval_seed(params), root / f"seed-{seed}" / "eval_trained.jsonl")
        t2 = time.perf_counter()
        res = lesson_result(before, after, lesson, n_resamples or stats.n_resamples, stats.seed, stats.alpha)
        e = res.estimates
        row = SeedRow(seed, e["S"], e["utility on deals"], e["deal rate"], e["bad-parse rate"],
                      dict(res.decomposition), res.p_signflip, res.n_paired, res.verdict, round(t1 - t0, 1),
                      round(t2 - t1, 1))
        with rows_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row.to_dict()) + "\n")
        done[seed] = row
        log(f"training seed {seed}: S {_ci(row.s_gain)}, utility on deals {_ci(row.utility_on_deals)}: "
            f"{row.verdict} (training {row.train_seconds:.0f} s, evaluation {row.eval_seconds:.0f} s)")
    return [done[s] for s in seeds]
