"""The stage contract (:func:`negolib.games.training.run_stages`): which stages run, from what, into where, in which
order they are evaluated, and, on the scripted path of each game (sellers that are agent names, no training), that the
contract's table is exactly the game's own stage evaluation."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from negolib.book.context import open_book
from negolib.games import training as shared
from negolib.games.base import StudyTable
from negolib.games.bilateral import study as bilateral_study
from negolib.games.bilateral import training as bilateral_training
from negolib.games.multi_buyer import study as multi_buyer_study
from negolib.games.multi_buyer import training as multi_buyer_training
from negolib.games.multi_product import study as multi_product_study
from negolib.games.multi_product import training as multi_product_training
from negolib.games.sft import SFTConfig, SFTResult
from negolib.params import load_params
from negolib.study.report.booktable import BookTable
from negolib.training.grpo import TrainResult

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "params" / "smoke.yaml"


class FakeStages(shared.GameStages):
    """A game that records what the contract asks of it: SFT and GRPO write nothing, and each stage 'scores' its
    position in the evaluation order on every scenario (so every paired difference is known exactly)."""

    name = "fake"

    def __init__(self, checkpoint: bool = True) -> None:
        self.calls: list[tuple] = []
        self.checkpoint = checkpoint

    def sft_examples(self, sft: shared.SFTStage) -> list:
        self.calls.append(("examples", sft.tournament, sft.max_examples))
        return ["chat-1", "chat-2"]

    def fine_tune(self, start_dir, examples, out_dir, config, progress) -> SFTResult:
        self.calls.append(("sft", str(start_dir), out_dir, tuple(examples)))
        return SFTResult(out_dir / "model", 2.0, 1.0, 3, 0.1, len(examples), [])

    def train_grpo(self, start_dir, out_dir, config, opponent, progress, resume) -> TrainResult:
        self.calls.append(("grpo", str(start_dir), out_dir, config, opponent, resume))
        return TrainResult(out_dir, out_dir / "checkpoint-1" if self.checkpoint else None, 1, [{"step": 1}])

    def evaluate(self, stages, evaluation, progress):
        self.calls.append(("evaluate", dict(stages), evaluation))
        rows = [{"stage": s, "tier": "t", "scenario_key": f"k{seed}", "cluster": str(seed), "valid": True,
                 "score": float(i)} for i, s in enumerate(stages) for seed in range(evaluation.seeds_per_group)]
        episodes = pd.DataFrame(rows)

        def terms(df: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
            return {"score": (df["score"].to_numpy(float), np.ones(len(df)))}

        table = shared.stage_table(episodes, terms, ["score"], "tier", ["t"], "scenario_key", list(stages),
                                   evaluation.n_resamples, evaluation.bootstrap_seed, evaluation.alpha)
        return episodes, table


def _spec(game: shared.GameStages, tmp_path: Path, sft: bool = True, grpo: bool = True,
          references: dict[str, str] | None = None) -> shared.StageSpec:
    return shared.StageSpec(
        game=game, base_model="/models/base", training_dir=tmp_path / "training", opponent="conceder",
        evaluation=shared.StageEvaluation(("conceder",), None, 4, 0, n_resamples=100),
        sft=shared.SFTStage(SFTConfig(), tmp_path / "tournament", max_examples=2) if sft else None,
        grpo={"recipe": "grpo"} if grpo else None, references=references or {})


def test_all_stages_run_in_order_each_from_the_one_before(tmp_path):
    game = FakeStages()
    out = shared.run_stages(_spec(game, tmp_path, references={"boulware (scripted)": "boulware"}))
    training = tmp_path / "training"
    assert list(out.stages) == ["base", "SFT", "SFT+GRPO", "boulware (scripted)"] and out.trained == "SFT+GRPO"
    assert out.stages == {"base": "/models/base", "SFT": training / "sft" / "model",
                          "SFT+GRPO": training / "grpo" / "checkpoint-1", "boulware (scripted)": "boulware"}
    assert [c[0] for c in game.calls] == ["examples", "sft", "grpo", "evaluate"]
    assert game.calls[1] == ("sft", "/models/base", training / "sft", ("chat-1", "chat-2"))
    assert game.calls[2] == ("grpo", str(training / "sft" / "model"), training / "grpo", {"recipe": "grpo"},
                             "conceder", False)  # GRPO starts afresh from the SFT model
    assert out.sft_examples == ["chat-1", "chat-2"] and out.sft.steps == 3 and out.grpo.steps == 1
    # the known answer: stage i scores i on every scenario, so every difference is its position gap, exactly
    diff = out.table[(out.table["kind"] == "difference") & (out.table["tier"] == "all")]
    want = {(s, b): float(i - j) for i, s in enumerate(out.stages) for j, b in enumerate(out.stages) if j < i}
    assert {(r.stage, r.baseline): r.estimate for r in diff.itertuples()} == want
    assert (diff["ci_low"] == diff["estimate"]).all() and (diff["ci_high"] == diff["estimate"]).all()
    assert set(diff["n_episodes"]) == {4}


def test_grpo_without_sft_is_named_grpo_and_starts_from_the_base(tmp_path):
    game = FakeStages()
    out = shared.run_stages(_spec(game, tmp_path, sft=False))
    assert list(out.stages) == ["base", "GRPO"] and out.trained == "GRPO" and out.sft is None
    assert game.calls[0][:2] == ("grpo", "/models/base") and out.sft_examples == []


def test_base_alone_is_evaluated_alone(tmp_path):
    game = FakeStages()
    out = shared.run_stages(_spec(game, tmp_path, sft=False, grpo=False))
    assert list(out.stages) == ["base"] and out.trained is None and out.grpo is None
    assert [c[0] for c in game.calls] == ["evaluate"]
    assert shared.grpo_log(out).empty and "not run" in shared.grpo_line(out, "conceder", "fake")


def test_grpo_without_a_checkpoint_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no checkpoint"):
        shared.run_stages(_spec(FakeStages(checkpoint=False), tmp_path))


# ---------------------------------------------------------------------------------------------
# The scripted path of each game: the contract's table is the game's own evaluation
# ---------------------------------------------------------------------------------------------


def _scripted(study, name: str, seller: str, scripted: str, tmp_path: Path, **extra) -> shared.StageSpec:
    """The game's spec from the smoke profile's section, with a scripted seller as the base, no training and the
    scripted seller ``scripted`` as the reference."""
    p = load_params(SMOKE)
    section = p.game(name, "test")
    spec = study.stage_spec(section, p.statistics, base_model=seller, sampling=None, seed=p.seed,
                            training_dir=tmp_path, tournament=tmp_path, progress=False, **extra)
    return replace(spec, sft=None, grpo=None, references={f"{scripted} (scripted)": scripted},
                   evaluation=replace(spec.evaluation, n_resamples=200))


def test_bilateral_scripted_stages_match_the_games_evaluation(tmp_path):
    spec = _scripted(bilateral_study, "bilateral", "boulware", "linear", tmp_path)
    e = spec.evaluation
    assert e.opponents == ("conceder",) and e.groups == ("1k",) and e.seeds_per_group == 2
    out = shared.run_stages(spec)
    want = bilateral_training.evaluate_stages(out.stages, e.opponents, e.seeds_per_group, e.groups, e.seed,
                                              n_resamples=200, alpha=e.alpha, max_batch=e.max_batch,
                                              prompt_cap=e.prompt_cap)
    pd.testing.assert_frame_equal(out.table, want)
    assert list(out.stages) == ["base", "linear (scripted)"] and len(out.episodes) == 2 * 2


def test_multi_buyer_scripted_stages_match_the_games_evaluation(tmp_path):
    spec = _scripted(multi_buyer_study, "multi_buyer", "greedy", "probe_all", tmp_path, reference="probe_all")
    e, budget = spec.evaluation, spec.game.turn_budget
    assert spec.references == {"probe_all (scripted)": "probe_all"} and e.groups == ("base", "heldout_styles")
    out = shared.run_stages(spec)
    want = multi_buyer_training.evaluate_stages(out.stages, e.groups, e.seeds_per_group, e.seed, None, budget,
                                                e.opponents[0], 200, e.alpha, e.max_batch, e.prompt_cap)
    pd.testing.assert_frame_equal(out.table, want)


def test_multi_product_scripted_stages_match_the_games_evaluation(tmp_path):
    spec = _scripted(multi_product_study, "multi_product", "greedy", "random", tmp_path)
    e = spec.evaluation
    out = shared.run_stages(spec)
    want = multi_product_training.evaluate_stages(out.stages, e.opponents, e.seeds_per_group, e.groups, e.seed,
                                                  n_resamples=200, alpha=e.alpha, max_batch=e.max_batch,
                                                  prompt_cap=e.prompt_cap)
    pd.testing.assert_frame_equal(out.table, want)
    assert set(out.table["market"]) == {"small", "all"}
    refused = multi_product_study.refusals(out)
    assert list(refused.index) == ["base", "random (scripted)"] and (refused["messages"] > 0).all()


@pytest.mark.parametrize("study, training, name", [
    (bilateral_study, bilateral_training, "bilateral"),
    (multi_buyer_study, multi_buyer_training, "multi_buyer"),
    (multi_product_study, multi_product_training, "multi_product"),
])
def test_each_game_trains_with_its_own_runner_and_reads_the_profiles_sections(study, training, name, tmp_path,
                                                                              monkeypatch):
    """The shared GRPO default calls the game's own runner with the contract's arguments; the spec's evaluation and
    SFT stage come from the section's checked ``lm`` and ``sft`` parts."""
    p = load_params(SMOKE)
    section = p.game(name, "test")
    spec = study.stage_spec(section, p.statistics, base_model="base-dir", sampling=None, seed=p.seed,
                            training_dir=tmp_path, tournament=tmp_path / "t", progress=False)
    e, lm = spec.evaluation, section.lm
    assert e.opponents == (lm.opponent,) and e.seeds_per_group == lm.eval_seeds_per_tier and e.seed == p.seed
    assert (e.n_resamples, e.bootstrap_seed, e.alpha) == (p.statistics.n_resamples, p.statistics.seed,
                                                          p.statistics.alpha)
    if section.sft is not None:
        assert spec.sft.tournament == tmp_path / "t" and spec.sft.config == section.sft.config
    calls = []
    monkeypatch.setattr(type(spec.game), "run_grpo", staticmethod(lambda *a, **k: calls.append((a, k)) or "ran"))
    assert spec.game.train_grpo("start", tmp_path / "g", "cfg", "opp", False, True) == "ran"
    assert calls == [(("start", tmp_path / "g", "cfg"), {"opponent": "opp", "progress": False, "resume": True})]
    assert type(spec.game).__dict__["stage_table"].__func__ is training.stage_table  # the game's own table


def test_the_book_saves_a_study_table_as_a_book_table(tmp_path):
    book = open_book(SMOKE, tmp_path)
    frame = pd.DataFrame({"x": [1, 2]}, index=pd.Index(["a", "b"], name="row"))
    shown = book.save_table(StudyTable("study_t", "A study table", frame, "its caption"))
    assert isinstance(shown, BookTable) and shown.caption == "its caption"
    assert pd.read_csv(tmp_path / "tables" / "study_t.csv", index_col=0).equals(frame)
