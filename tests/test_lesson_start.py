"""Where the matched lesson starts (issue 27): the start run's warm-up, or its recipe rebuilt on the lesson's own task
(its domain's training seeds above GRPO's, its buyer, rules, horizon and scaffold), cached by what it depends on."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from negolib.core.errors import ValidationError
from negolib.games.multi_issue.scenarios import eval_seeds
from negolib.games.multi_issue.training import scenario_items
from negolib.games.multi_issue.warmup import warmup_dir
from negolib.params import parse_params
from negolib.study.lesson import buyer_name, preregister, train_config
from negolib.study.lesson_start import lesson_start, own_warmup_dir, own_warmup_items, own_warmup_plan
from negolib.training.config import OWN_WARMUP_SEED_OFFSET


def _smoke(tmp_path, **lesson):
    with open("params/smoke.yaml") as f:
        data = yaml.safe_load(f)
    data["output_dir"] = str(tmp_path / "out")
    data["lesson"].update(lesson)
    return parse_params(data, "smoke.yaml")


def test_own_warmup_plays_the_lessons_task_on_seeds_grpo_and_evaluation_never_play(tmp_path):
    params = _smoke(tmp_path, start="own_warmup", buyer="conceder", rounds=4, start_warmup_scenarios=6)
    lesson = params.lesson
    items = own_warmup_items(lesson, seed=0)
    grpo = scenario_items(train_config(lesson, 0))
    assert [it.scenario.seed for it in items] == list(range(OWN_WARMUP_SEED_OFFSET, OWN_WARMUP_SEED_OFFSET + 6))
    assert {it.scenario.domain.name for it in items} == {lesson.domain}
    assert {it.buyer for it in items} == {buyer_name(lesson)} == {it.buyer for it in grpo}
    warm_seeds = {it.scenario.seed for it in items}
    assert not warm_seeds & {it.scenario.seed for it in grpo} and not warm_seeds & set(eval_seeds(64))
    init, warm = own_warmup_plan(params, lesson)
    assert warm.scaffolds == (lesson.scaffold,) and warm.demonstrations == 4  # smoke's tiny_grpo recipe
    assert init.endswith("tiny")


def test_own_warmup_folder_follows_the_task_and_the_recipe_but_not_the_evaluation(tmp_path):
    params = _smoke(tmp_path, start="own_warmup")
    lesson = params.lesson
    here = own_warmup_dir(params, lesson, tmp_path)
    assert own_warmup_dir(params, dataclasses.replace(lesson, eval_episodes=8), tmp_path) == here
    assert own_warmup_dir(params, dataclasses.replace(lesson, learning_rate=1e-2), tmp_path) == here
    for change in ({"buyer": "conceder"}, {"rounds": 3}, {"domain": "saas_contract"}, {"scaffold": "evaluation"},
                   {"start_warmup_scenarios": 7}, {"accept_applies_terms": True},
                   {"start_warmup_strategies": ("hardliner", "boulware")}):
        assert own_warmup_dir(params, dataclasses.replace(lesson, **change), tmp_path) != here, change


def test_own_warmup_imitates_the_named_sellers_or_else_the_runs(tmp_path):
    params = _smoke(tmp_path, start="own_warmup", start_warmup_strategies=["hardliner", "linear"])
    assert params.lesson.start_warmup_strategies == ("hardliner", "linear")
    assert own_warmup_plan(params, params.lesson)[1].strategies == ("hardliner", "linear")
    plain = _smoke(tmp_path, start="own_warmup")
    run_recipe = own_warmup_plan(plain, dataclasses.replace(plain.lesson, start="run_warmup"))[1]
    assert own_warmup_plan(plain, plain.lesson)[1].strategies == run_recipe.strategies  # the run's recipe


@pytest.mark.parametrize("lesson,message", [
    ({"start": "scratch"}, "must be one of"),
    ({"start": "own_warmup", "start_warmup_scenarios": 0}, "must be >= 1"),
    ({"start": "own_warmup", "start_warmup_scenarios": 4000}, "at most 3096"),
    ({"steps": 501, "scenarios_per_step": 2}, "must stay below 1000"),
    ({"start": "own_warmup", "start_warmup_strategies": ["hardliner", "bulldozer"]}, r"unknown scripted.*bulldozer"),
    ({"start": "run_warmup", "start_warmup_strategies": ["hardliner"]}, "only the own warm-up"),
])
def test_start_errors_name_file_and_field(tmp_path, lesson, message):
    with pytest.raises(ValidationError, match=message) as exc:
        _smoke(tmp_path, **lesson)
    field = ("steps" if "steps" in lesson else "start_warmup_strategies" if "start_warmup_strategies" in lesson
             else "start" if len(lesson) == 1 else "start_warmup_scenarios")
    assert f"lesson.{field}" in str(exc.value) and "smoke.yaml" in str(exc.value)


def test_own_warmup_of_a_continued_run_is_refused(tmp_path):
    with open("params/smoke.yaml") as f:
        data = yaml.safe_load(f)
    data["output_dir"] = str(tmp_path / "out")
    data["lesson"]["start"] = "own_warmup"
    data["training"]["runs"]["tiny_grpo"]["init"] = "tiny_evalscaffold@2"
    with pytest.raises(ValidationError, match="continues another") as exc:
        parse_params(data, "smoke.yaml")
    assert "lesson.start" in str(exc.value)
    data["lesson"]["start"] = "run_warmup"  # control: the same profile loads when the lesson starts from the run's
    assert parse_params(data, "smoke.yaml").lesson.start == "run_warmup"  # own warm-up, whatever the run continues


def test_preregistration_states_the_start(tmp_path):
    own = "\n".join(preregister(_smoke(tmp_path, start="own_warmup").lesson).lines())
    run = "\n".join(preregister(_smoke(tmp_path).lesson).lines())
    assert "rebuilt on this task (48 training scenarios" in own and "step 0 of run tiny_grpo" in run
    assert "at most 8 new tokens a turn" in own


def test_run_warmup_start_is_the_runs_step_0_and_a_missing_one_is_named(tmp_path):
    params = _smoke(tmp_path)
    with pytest.raises(FileNotFoundError, match="tiny_grpo"):
        lesson_start(params, params.lesson, tmp_path / "lesson")
    model = params.out / "training" / "tiny_grpo" / "seed-0" / "warmup" / "model"
    model.mkdir(parents=True)
    assert lesson_start(params, params.lesson, tmp_path / "lesson") == model


def test_own_warmup_is_built_once_on_the_lessons_task(tmp_path):
    params = _smoke(tmp_path, start="own_warmup", start_warmup_scenarios=4)
    root = tmp_path / "lesson"
    path = lesson_start(params, params.lesson, root, isolate=False)
    assert path == warmup_dir(own_warmup_dir(params, params.lesson, root)) and (path / "config.json").is_file()
    demos = [json.loads(line) for line in (path.parent / "demonstrations.jsonl").read_text().splitlines()]
    assert demos and all(d["domain"] == "software_license" for d in demos)
    stamp = (path / "config.json").stat().st_mtime_ns
    assert lesson_start(params, params.lesson, root, isolate=False) == path
    assert (path / "config.json").stat().st_mtime_ns == stamp  # read back, not rebuilt
