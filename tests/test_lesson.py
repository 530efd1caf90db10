"""The matched lesson (issue 27): one task for training and evaluation, a pre-registered power calculation, the
paired result with its decomposition, and the run's headline. Known answers and sabotaged twins; the end-to-end
path (GRPO on a tiny model, both evaluations) runs in the notebook smoke test."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import yaml

from negolib.core.errors import ValidationError
from negolib.core.headline import headline_markdown, headline_rows, read_headline, update_headline
from negolib.games.multi_issue.training import env_config
from negolib.params import load_params, parse_params
from negolib.study.ladder import BUYER
from negolib.study.lesson import (
    NO_DEAL_SCORE,
    Episodes,
    decompose,
    episode_text,
    lesson_buyer,
    lesson_env,
    lesson_result,
    preregister,
    train_config,
)
from negolib.training.config import LessonConfig

LESSON = LessonConfig(start_run="run", eval_episodes=40)


def _records(scores, deals, utils, seeds=None):
    """Minimal evaluation records: one per scenario, in order."""
    seeds = list(range(5_000_000, 5_000_000 + len(scores))) if seeds is None else seeds
    return [{"domain": "software_license", "seed": s, "status": "deal" if d else "no_deal",
             "outcome": {"score": sc, "deal": bool(d), "seller_utility": u if d else None, "turns": 2,
                         "seller_bad_parses": 0, "seller_turns": 1}, "turns": []}
            for sc, d, u, s in zip(scores, deals, utils, seeds)]


def _arm(rng, n, p_deal, util_mean):
    deals = rng.random(n) < p_deal
    utils = np.clip(rng.normal(util_mean, 0.1, n), 0, 1)
    scores = np.where(deals, utils, NO_DEAL_SCORE)
    return _records(scores.tolist(), deals.tolist(), utils.tolist())


# -- one task for training and evaluation --------------------------------------------------------

def test_training_and_evaluation_share_rules_horizon_buyer_scaffold_and_domain():
    for accept in (True, False):
        lesson = dataclasses.replace(LESSON, rounds=3, accept_applies_terms=accept, scaffold="evaluation",
                                     temperature=0.7)
        config = train_config(lesson)
        assert config.temperature == 0.7  # the evaluation samples with train_config(lesson)'s decoding too
        assert env_config(config) == lesson_env(lesson)  # the training episodes' environment is the evaluation's
        assert config.scaffold == lesson.scaffold and config.max_rounds == lesson.rounds
        assert config.max_rollout_turns == lesson.rounds
        assert config.train_domains == (lesson.domain,) and dict(config.buyer_mixture) == {BUYER: 1.0}
        assert lesson_buyer(lesson).min_valid_terms == lesson.min_valid_terms


def test_train_config_accept_rule_reaches_the_training_environment():
    """The TrainConfig field decides how ACCEPT terms count in training (sabotaged twin: the other value)."""
    paper = train_config(dataclasses.replace(LESSON, accept_applies_terms=True))
    matched = train_config(LESSON)
    assert env_config(paper).accept_applies_terms is True
    assert env_config(matched).accept_applies_terms is False
    assert env_config(paper) != lesson_env(LESSON)


# -- pre-registration ----------------------------------------------------------------------------

def test_preregistered_mde_matches_statsmodels_paired_t_power():
    from statsmodels.stats.power import TTestPower

    lesson = dataclasses.replace(LESSON, eval_episodes=64, planning_sd=0.4, expected_gain=0.2)
    pre = preregister(lesson, alpha=0.05)
    effect = TTestPower().solve_power(nobs=64, alpha=0.05, power=0.8, alternative="two-sided")
    assert pre.mde == pytest.approx(effect * 0.4, rel=1e-4)
    assert pre.powered is (pre.mde < 0.2)
    assert any("minimum detectable effect" in line for line in pre.lines())
    weak = preregister(dataclasses.replace(lesson, expected_gain=0.05))
    assert not weak.powered and "NOT powered" in " ".join(weak.lines())


# -- the result ----------------------------------------------------------------------------------

def test_decomposition_is_exact_on_records():
    rng = np.random.default_rng(0)
    before, after = _arm(rng, 200, 0.6, 0.5), _arm(rng, 200, 0.8, 0.6)
    sb, sa = Episodes.from_records(before).summary(), Episodes.from_records(after).summary()
    parts = decompose(sb, sa)
    assert parts["deal rate part"] + parts["deal utility part"] == pytest.approx(sa["S"] - sb["S"], abs=1e-12)
    assert parts["deal rate part"] > 0 and parts["deal utility part"] > 0


def test_identical_arms_show_no_gain():
    """Sabotaged twin of a learning result: the trained arm is the start (no gain can be shown)."""
    rng = np.random.default_rng(1)
    arm = _arm(rng, 40, 0.7, 0.5)
    res = lesson_result(arm, arm, LESSON, n_resamples=2000)
    assert res.estimates["S"].diff == 0 and res.changed == 0
    assert res.verdict.startswith("no gain shown")
    assert res.estimates["S"].p_value >= 1 / 2001  # never below 1/(B+1)
    assert res.p_signflip == 1.0


def test_better_deals_are_learning_and_more_deals_alone_are_named_as_such():
    rng = np.random.default_rng(2)
    start = _arm(rng, 60, 0.9, 0.45)
    better = _arm(np.random.default_rng(3), 60, 0.9, 0.75)
    res = lesson_result(start, better, LESSON, n_resamples=2000)
    assert res.estimates["S"].ci_low > 0 and res.estimates["utility on deals"].diff > 0
    assert res.verdict == "learned: S rose and utility on deals rose (both intervals exclude zero)"
    assert res.estimates["utility on deals"].ci_low > 0
    # more deals at the same utility: S rises, utility on deals neither falls nor rises
    few = _records([0.5] * 20 + [-0.3] * 40, [True] * 20 + [False] * 40, [0.5] * 20 + [0.0] * 40)
    all_closed = _records([0.5] * 60, [True] * 60, [0.5] * 60)
    flat = lesson_result(few, all_closed, LESSON, n_resamples=2000)
    assert flat.estimates["S"].ci_low > 0 and flat.estimates["utility on deals"].diff == 0
    assert flat.verdict == "learned: S rose (interval excludes zero) and utility on deals did not fall"
    assert res.p_signflip < 0.05 and res.p_signflip_min == pytest.approx(1 / 2001)  # 60 clusters: Monte Carlo
    # more deals at worse utility: S rises, utility on deals falls
    low = _records([0.1] * 20 + [-0.3] * 40, [True] * 20 + [False] * 40, [0.1] * 20 + [0.0] * 40)
    more = _records([0.05] * 60, [True] * 60, [0.05] * 60)
    res2 = lesson_result(low, more, LESSON, n_resamples=2000)
    assert res2.estimates["S"].ci_low > 0 and res2.estimates["utility on deals"].diff < 0
    assert res2.verdict.startswith("closes more")
    assert res2.estimates["deal rate"].diff == pytest.approx(2 / 3)
    res3 = lesson_result(more, low, LESSON, n_resamples=2000)  # the same arms the other way round
    assert res3.verdict.startswith("worse")


def test_utility_on_common_deals_is_the_price_without_selection():
    """The start closes the 20 easy scenarios at 0.6; the trained seller closes all 60, the same 20 at 0.7 and 40
    harder ones at 0.3: utility on deals falls (0.6 -> 0.433) while the price on the common deals rose (+0.1)."""
    start = _records([0.6] * 20 + [-0.3] * 40, [True] * 20 + [False] * 40, [0.6] * 20 + [0.0] * 40)
    trained = _records([0.7] * 20 + [0.3] * 40, [True] * 60, [0.7] * 20 + [0.3] * 40)
    res = lesson_result(start, trained, LESSON, n_resamples=2000)
    common = res.estimates["utility on common deals"]
    assert res.estimates["utility on deals"].diff < 0
    assert common.start == pytest.approx(0.6) and common.trained == pytest.approx(0.7)
    assert common.diff == pytest.approx(0.1) and common.ci_low == pytest.approx(0.1)
    none = lesson_result(start, _records([-0.3] * 60, [False] * 60, [0.0] * 60), LESSON, n_resamples=2000)
    assert math.isnan(none.estimates["utility on common deals"].diff)  # no scenario closed by both


def test_arms_on_different_scenarios_are_refused():
    a = _records([0.5], [True], [0.5], seeds=[1])
    b = _records([0.5], [True], [0.5], seeds=[2])
    with pytest.raises(ValueError, match="same scenarios"):
        lesson_result(a, b, LESSON, n_resamples=100)


# -- the profile section --------------------------------------------------------------------------

def _smoke_data():
    with open("params/smoke.yaml") as f:
        return yaml.safe_load(f)


@pytest.mark.parametrize("field,value,message", [
    ("start_run", "nope", "no training run"),
    ("domain", "car", "held out"),
    ("domain", "moon", "unknown domain"),
    ("rollouts_per_scenario", 1, ">= 2 rollouts"),
    ("planning_sd", 0, "must be > 0"),
    ("temperature", 0, "must be a finite number > 0"),
    ("trained_turns", "first", "must be one of"),
])
def test_lesson_section_errors_name_file_and_field(field, value, message):
    data = _smoke_data()
    data["lesson"][field] = value
    with pytest.raises(ValidationError, match=message) as exc:
        parse_params(data, "smoke.yaml")
    assert f"lesson.{field}" in str(exc.value) and "smoke.yaml" in str(exc.value)


def test_lesson_needs_a_run_with_a_warmup():
    data = _smoke_data()
    data["training"]["runs"]["tiny_grpo"].pop("warmup")
    for arm in ("tiny_warmup",):
        data["arms"].pop(arm)
    data["design"]["sizes"][0]["extra"] = []
    with pytest.raises(ValidationError, match="no format warm-up"):
        parse_params(data, "smoke.yaml")


@pytest.mark.parametrize("profile", ["params/smoke.yaml", "params/default.yaml", "params/course.yaml"])
def test_cpu_profiles_state_the_accept_rule_and_floor_the_std(profile):
    p = load_params(profile)
    for run in p.training.runs.values():
        assert "accept_applies_terms" in run.config and run.config.get("loo_std_floor", 0) > 0
    assert p.lesson is not None
    assert preregister(p.lesson).powered is (p.profile != "smoke")  # smoke's 4 episodes check the pipeline only


# -- the headline -----------------------------------------------------------------------------------

def test_headline_merges_sections_and_makes_table_rows(tmp_path):
    path = tmp_path / "headline.json"
    update_headline(path, lesson={"arms": ["t", "s"], "estimate": 0.2, "ci_low": 0.1, "ci_high": math.nan,
                                  "mde": 0.15, "n_paired": 64, "n_clusters": 64,
                                  "utility_on_deals": {"estimate": 0.05, "ci_low": 0.01, "ci_high": 0.09}})
    update_headline(path, profile="default", commit="abcdef0123", minutes=31.5,
                    primary=[{"arms": ["g", "w"], "estimate": -0.01, "ci_low": -0.1, "ci_high": 0.08}])
    h = read_headline(path)
    assert h["lesson"]["ci_high"] is None and h["profile"] == "default"  # NaN is written as null
    rows = headline_rows([path])
    assert [r["contrast"] for r in rows] == ["matched lesson", "primary"]
    assert rows[0]["utility on deals"] == "+0.050 [+0.010, +0.090]" and rows[0]["commit"] == "abcdef0"
    assert rows[1]["95% interval"] == "[-0.100, +0.080]"
    assert headline_markdown([path]).count("\n") == 4


def test_headline_that_is_not_an_object_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "headline.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="headline.json"):
        read_headline(path)


def test_headline_command_prints_the_table_and_refuses_a_missing_file(tmp_path, capsys):
    from negolib.cli import main

    path = tmp_path / "headline.json"
    update_headline(path, profile="smoke", minutes=1.0,
                    lesson={"arms": ["t", "s"], "estimate": 0.1, "ci_low": 0.01, "ci_high": 0.2})
    assert main(["headline", str(path)]) == 0
    assert "| smoke |" in capsys.readouterr().out
    assert main(["headline", str(tmp_path / "missing.json")]) == 2
    assert "no such headline file" in capsys.readouterr().err


def test_a_scripted_buyer_plays_the_lesson_in_training_and_evaluation():
    lesson = dataclasses.replace(LESSON, buyer="conceder", rounds=4)
    config = train_config(lesson)
    buyer = lesson_buyer(lesson)
    assert dict(config.buyer_mixture) == {buyer.name: 1.0} and buyer.name == "lesson_conceder"
    assert "scripted conceder buyer" in " ".join(preregister(lesson).lines())
    data = _smoke_data()
    data["lesson"]["buyer"] = "nobody"
    with pytest.raises(ValidationError, match="lesson.buyer"):
        parse_params(data, "smoke.yaml")


def test_the_lesson_folder_changes_with_any_setting(tmp_path):
    from negolib.study.lesson import lesson_key

    key = lesson_key(LESSON, tmp_path, 0)
    assert key == lesson_key(LESSON, tmp_path, 0)
    assert key != lesson_key(dataclasses.replace(LESSON, min_valid_terms=2), tmp_path, 0)
    assert key != lesson_key(LESSON, tmp_path / "other", 0) and key != lesson_key(LESSON, tmp_path, 1)


def test_lora_lesson_reaches_the_trainer_and_the_preregistration():
    """LoRA is a lesson field: its rank and alpha reach TrainConfig (and so peft), the pre-registration names it,
    and full fine-tuning (rank 0) is named as such; a negative rank is refused naming the field."""
    from negolib.training.grpo_args import lora_config

    lora = dataclasses.replace(LESSON, lora_rank=16, lora_alpha=32)
    config = train_config(lora)
    assert (config.lora_rank, config.lora_alpha) == (16, 32)
    assert lora_config(config).r == 16 and lora_config(train_config(LESSON)) is None
    assert "LoRA rank 16 (alpha 32)" in preregister(lora).lines()[-1]
    assert "full fine-tuning" in preregister(LESSON).lines()[-1]
    assert ("lora_rank", "must be >= 0, got -1") in dataclasses.replace(LESSON, lora_rank=-1).problems()
    assert load_params("params/default.yaml").lesson.lora_rank > 0  # the default lesson trains adapters


def test_trained_turns_is_named_in_the_preregistration():
    last = dataclasses.replace(LESSON, trained_turns="last")
    assert "seller's last turn only" in preregister(last).lines()[-1]
    assert "last turn" not in preregister(LESSON).lines()[-1]


def _turn(n: int, role: str, action: str | None, terms: dict[str, object] | None = None) -> dict[str, object]:
    act = None if action is None else {"action": action, "terms": [{"name": k, "value": v}
                                                                    for k, v in (terms or {}).items()]}
    return {"turn": n, "role": role, "raw": f"{role} says {n}", "action": act,
            "parse_error": None if action else "no JSON object"}


def test_episode_text_shows_every_later_turn_of_a_multi_round_episode():
    deal = {"deal": True, "seller_utility": 0.61, "score": 0.61}
    one = {"turns": [_turn(1, "seller", "COUNTER", {"seats": 240})], "outcome": deal}
    assert episode_text(one) == "seller says 1\n-> deal, seller utility 0.610; S = +0.610"
    four = {"turns": [_turn(1, "seller", "COUNTER", {"seats": 240}), _turn(2, "buyer", "COUNTER", {"seats": 100}),
                      _turn(3, "seller", None), _turn(4, "buyer", "ACCEPT")],
            "outcome": {"deal": False, "score": -0.3}}
    lines = episode_text(four).splitlines()
    assert lines == ["seller says 1", "turn 2, buyer: COUNTER seats=100",
                     "turn 3, seller: bad parse (no JSON object)", "turn 4, buyer: ACCEPT",
                     "-> no deal; S = -0.300"]
    assert episode_text({"turns": [], "outcome": {"deal": False, "score": -0.3}}).startswith("(no turn)")


# -- the deadline buyer (the course lesson's: holding firm is paid at the deadline) ---------------------------

def _play_deadline(seller, lesson, n=8, buyer=None):
    from negolib.games.multi_issue.rollout import make_specs, run_episodes
    from negolib.study.lesson import buyer_name, eval_scenarios

    scenarios = eval_scenarios(dataclasses.replace(lesson, eval_episodes=n))
    name = buyer_name(lesson)
    res = run_episodes(make_specs("s", "s", [name], scenarios, lesson_env(lesson)),
                       {"s": seller, name: buyer or lesson_buyer(lesson)}, progress=False)
    return [r["outcome"] for r in res.records]


def test_the_deadline_buyer_pays_holding_firm_at_its_last_turn_and_accepts_nothing_earlier():
    from negolib.games.multi_issue.scripted import make_scripted

    lesson = dataclasses.replace(LESSON, buyer="deadline", rounds=4)
    assert lesson_buyer(lesson).name == "lesson_deadline"
    firm = _play_deadline(make_scripted("fixed_offer", name="s"), lesson)  # names its best contract every turn
    assert all(o["deal"] and o["closed_by"] == "buyer" and o["turns"] == 8 for o in firm)
    assert min(o["score"] for o in firm) > 0.99
    soft = _play_deadline(make_scripted("conceder", name="s"), lesson)  # takes one of the buyer's counters
    assert all(o["closed_by"] == "seller" or o["turns"] == 8 for o in soft)  # the buyer accepts only at turn 8
    assert any(o["closed_by"] == "seller" and o["turns"] < 8 for o in soft)
    assert np.mean([o["score"] for o in soft]) < np.mean([o["score"] for o in firm]) - 0.1
    # twin: the same firm seller against the Conceder without a deadline (its reservation binds): mostly no deal
    plain = _play_deadline(make_scripted("fixed_offer", name="s"), lesson,
                           buyer=make_scripted("conceder", name="lesson_deadline"))
    assert sum(o["deal"] for o in plain) < len(plain) / 2


def test_the_deadline_buyer_accepts_no_deal_when_the_sellers_last_turn_does_not_parse():
    from negolib.agents.base import Agent, AgentReply
    from negolib.games.multi_issue.scripted import make_scripted

    firm = make_scripted("fixed_offer", name="s")

    class BreaksLast(Agent):
        name, backend = "s", "scripted"

        def act_batch(self, views):
            return [AgentReply("I will think about it.") if v.turn == 7 else firm.act_batch([v])[0] for v in views]

    lesson = dataclasses.replace(LESSON, buyer="deadline", rounds=4)
    assert not any(o["deal"] for o in _play_deadline(BreaksLast(), lesson))


def test_a_profile_may_name_the_deadline_buyer():
    data = _smoke_data()
    data["lesson"].update(buyer="deadline", rounds=4)
    params = parse_params(data, "smoke.yaml")
    assert params.lesson.buyer == "deadline"
    assert "accepts only at its last turn (round 4)" in " ".join(preregister(params.lesson).lines())


def test_the_evaluation_shows_the_seller_the_context_training_shows():
    """Training appends every round to one context (cap ``max_context_tokens``); the evaluation's prompt cap is
    that cap, not the opening prompt's (twin: ``max_prompt_tokens`` alone cannot hold a 4-round history)."""
    from negolib.study.lesson import eval_prompt_cap

    lesson = dataclasses.replace(LESSON, rounds=4, max_new_tokens=192, max_prompt_tokens=1024)
    assert eval_prompt_cap(lesson) == train_config(lesson).max_context_tokens - 1
    assert eval_prompt_cap(lesson) >= lesson.max_prompt_tokens + 3 * (lesson.max_new_tokens + 96)
    one_round = dataclasses.replace(lesson, rounds=1)
    assert eval_prompt_cap(one_round) < eval_prompt_cap(lesson)


def test_the_deadline_buyer_buys_only_a_last_counter_that_sets_its_stated_number_of_terms():
    from negolib.games.multi_issue.scripted import make_scripted

    lesson = dataclasses.replace(LESSON, buyer="deadline", rounds=4, min_valid_terms=3)
    assert lesson_buyer(lesson).min_valid_terms == 3
    two = _play_deadline(make_scripted("fixed_offer", name="s", max_terms=2), lesson)  # sets 2 terms a counter
    assert not any(o["deal"] for o in two)
    # twin: the same seller against the rule it meets (2 terms) closes every episode at the deadline
    met = _play_deadline(make_scripted("fixed_offer", name="s", max_terms=2),
                         dataclasses.replace(lesson, min_valid_terms=2))
    assert all(o["deal"] and o["turns"] == 8 for o in met)
    assert "set >= 3 contract term(s) in range" in " ".join(preregister(lesson).lines())
