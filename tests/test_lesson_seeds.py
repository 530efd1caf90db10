"""negolib.study.lesson_seeds: the matched lesson at several training seeds from one start (known answers with
fake training and evaluation; the real calls run in notebook 03's smoke test)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from negolib.cli import _seed_list, main
from negolib.core.errors import ValidationError
from negolib.params import load_params
from negolib.study.lesson import NO_DEAL_SCORE, LessonRun
from negolib.study.lesson_seeds import START_EVAL, eval_seed, lesson_seed_sweep, sweep_markdown, sweep_summary

ROOT = Path(__file__).resolve().parents[1]
N = 40


def _records(deal_p: float, util: float, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    deals = rng.random(N) < deal_p
    utils = np.clip(rng.normal(util, 0.05, N), 0, 1)
    return [{"domain": "software_license", "seed": 5_000_000 + i, "status": "deal" if d else "no_deal",
             "outcome": {"score": float(u) if d else NO_DEAL_SCORE, "deal": bool(d),
                         "seller_utility": float(u) if d else None, "turns": 2, "seller_bad_parses": 0,
                         "seller_turns": 1}, "turns": []}
            for i, (d, u) in enumerate(zip(deals, utils))]


# trained policies by training seed: 0 learns (more deals, same price), 1 does nothing (the sabotaged twin:
# the start's own weights), 2 closes more at a lower price
TRAINED = {0: (0.9, 0.5), 1: None, 2: (0.9, 0.3)}
START = (0.3, 0.5)


class Fakes:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def train(self, lesson, start, out_dir, seed=0):
        self.calls.append(f"train {seed}")
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        return LessonRun(str(start) if TRAINED[seed] is None else f"ckpt-{seed}", [], str(out_dir))

    def evaluate(self, weights, lesson, seed, path=None):
        self.calls.append(f"evaluate {Path(str(path)).name} {seed}")
        if path is not None and Path(path).is_file():
            return json.loads(Path(path).read_text())
        deal_p, util = START if not str(weights).startswith("ckpt-") else TRAINED[int(str(weights)[5:])]
        recs = _records(deal_p, util, 7 if not str(weights).startswith("ckpt-") else 11)
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(json.dumps(recs))
        return recs


@pytest.fixture
def params():
    return load_params(ROOT / "params" / "smoke.yaml")


def test_each_seed_gets_its_verdict_and_the_summary_counts_them(tmp_path, params):
    fakes = Fakes()
    rows = lesson_seed_sweep(params, [0, 1, 2], tmp_path, start=tmp_path / "start", isolate=False,
                             n_resamples=500, train=fakes.train, evaluate=fakes.evaluate, log=lambda _: None)
    assert [r.seed for r in rows] == [0, 1, 2]
    assert rows[0].gained and rows[0].learned
    assert not rows[1].gained and rows[1].s_gain.diff == 0  # the twin: the start itself shows no gain
    assert rows[2].gained and not rows[2].learned and rows[2].utility_on_deals.ci_high < 0
    summary = sweep_summary(rows)
    assert (summary.n_seeds, summary.n_gained, summary.n_learned, summary.n_lower_price) == (3, 2, 1, 1)
    assert "2 of 3 training seeds" in summary.line()
    table = sweep_markdown(rows)
    assert len(table) == 2 + 3 and table[2].startswith("| 0 |") and "closes more" in table[4]
    # one start evaluation, every seed evaluated under the book's sampling seed
    assert fakes.calls.count(f"evaluate {START_EVAL} {eval_seed(params)}") == 1
    assert all(c.endswith(str(eval_seed(params))) for c in fakes.calls if c.startswith("evaluate"))
    assert (tmp_path / START_EVAL).is_file()


def test_an_interrupted_sweep_resumes_without_training_a_finished_seed_again(tmp_path, params):
    fakes = Fakes()
    kw = dict(start=tmp_path / "start", isolate=False, n_resamples=200, evaluate=fakes.evaluate, log=lambda _: None)
    first = lesson_seed_sweep(params, [0], tmp_path, train=fakes.train, **kw)
    fakes.calls.clear()
    rows = lesson_seed_sweep(params, [0, 2], tmp_path, train=fakes.train, **kw)
    assert [c for c in fakes.calls if c.startswith("train")] == ["train 2"]
    assert rows[0] == first[0]  # read back from seeds.jsonl, equal field by field
    fakes.calls.clear()
    again = lesson_seed_sweep(params, [2, 0], tmp_path, train=fakes.train, **kw)  # all done: nothing runs
    assert fakes.calls == [] and [r.seed for r in again] == [2, 0]
    other = dataclasses.replace(params, lesson=dataclasses.replace(params.lesson, learning_rate=0.5))
    with pytest.raises(ValueError, match="another lesson .*learning_rate"):  # never another lesson's rows
        lesson_seed_sweep(other, [0], tmp_path, train=fakes.train, **kw)


def test_a_profile_without_a_lesson_and_bad_seed_lists_are_refused(tmp_path, params):
    with pytest.raises(ValidationError, match="lesson"):
        lesson_seed_sweep(dataclasses.replace(params, lesson=None), [0], tmp_path)
    with pytest.raises(ValueError, match="each once"):
        lesson_seed_sweep(params, [1, 1], tmp_path)
    assert _seed_list("0-3,7") == [0, 1, 2, 3, 7] and _seed_list("5") == [5]
    assert main(["lesson-seeds", "--params", str(ROOT / "params" / "smoke.yaml"), "--seeds", "a-b"]) == 2
