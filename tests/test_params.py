"""Params profiles: validation errors name the file, field and allowed values; shipped profiles load;
the agent factory builds every backend it can without a network."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
import yaml

from negolib.core.errors import ValidationError
from negolib.params import load_params, parse_params, spec_dict, to_dict

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ("smoke", "default", "course", "paper")


def _smoke_data() -> dict:
    return yaml.safe_load((ROOT / "params" / "smoke.yaml").read_text())


def _write(tmp_path: Path, data: dict, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize("profile", PROFILES)
def test_shipped_profiles_load(profile):
    p = load_params(ROOT / "params" / f"{profile}.yaml")
    assert p.profile == profile
    assert p.out == ROOT / "outputs" / profile
    assert p.paper_reported_path.exists()
    assert p.evaluation.buyers and all(b in p.buyers for b in p.evaluation.buyers)


def test_paper_profile_is_the_papers_grid():
    p = load_params(ROOT / "params" / "paper.yaml")
    ev = p.evaluation
    grid = [a for a, s in p.arms.items() if s.paper_ref]  # the paper's grid; the rest are App. A's limitation arms
    assert len(grid) == 21
    assert len(grid) * ev.seeds_per_domain * 9 * len(ev.buyers) == 24_192
    assert [g.paper for g in p.design.sizes] == ["E2B", "E4B", "12B", "31B"]
    assert len(p.statistics.primary) == 4
    for spec in p.arms.values():  # API keys are named, never given
        if spec.backend in ("openai", "anthropic"):
            assert spec.api_key_env and spec.api_key_env.isupper()
    assert all(spec.sampling.temperature == 1.0 for n, spec in p.arms.items() if spec.backend == "vllm")


def test_default_profile_has_the_embedded_design():
    p = load_params(ROOT / "params" / "default.yaml")
    assert "fixed_offer" in p.scripted_arms()
    assert {p.arms[a].backend for a in p.lm_arms()} == {"hf", "trained"}
    assert len({p.buyers[b].strategy for b in p.evaluation.buyers}) == 2  # two buyer families
    assert p.evaluation.seeds_per_domain == 64
    assert p.evaluation.lm_seeds_per_domain < 64  # a declared LM subset


def test_course_profile_is_the_default_sized_to_detect_learning():
    default, course = (load_params(ROOT / "params" / f"{n}.yaml") for n in ("default", "course"))
    assert set(course.arms) == set(default.arms) and course.evaluation.buyers == default.evaluation.buyers
    assert course.evaluation.max_rounds == default.evaluation.max_rounds  # the same evaluation protocol
    assert course.evaluation.lm_seeds_per_domain > default.evaluation.lm_seeds_per_domain
    run, base = course.training.runs["smollm2_grpo"], default.training.runs["smollm2_grpo"]
    assert run.config["max_steps"] > base.config["max_steps"]
    assert run.warmup == base.warmup and run.init == base.init  # the same starting policy
    assert course.budgets.total_s <= 3 * 3600  # issue 14: at most 3 hours on 2 cores


def test_paper_refs_exist_in_paper_reported():
    reported = yaml.safe_load((ROOT / "params" / "paper_reported.yaml").read_text())
    for profile in PROFILES:
        p = load_params(ROOT / "params" / f"{profile}.yaml")
        for name, spec in p.arms.items():
            assert spec.paper_ref is None or spec.paper_ref in reported["arms"], (profile, name)


def test_unknown_top_level_key_names_file_and_allowed(tmp_path):
    data = _smoke_data()
    data["evalution"] = {}
    path = _write(tmp_path, data)
    with pytest.raises(ValidationError) as e:
        load_params(path)
    msg = str(e.value)
    assert str(path.resolve()) in msg and "evalution" in msg and "evaluation" in msg


def test_unknown_nested_key(tmp_path):
    data = _smoke_data()
    data["evaluation"]["seeds"] = 3
    with pytest.raises(ValidationError, match=r"evaluation.*unknown keys \['seeds'\].*seeds_per_domain"):
        load_params(_write(tmp_path, data))


def test_wrong_type_names_field_and_type(tmp_path):
    data = _smoke_data()
    data["evaluation"]["seeds_per_domain"] = "4"
    with pytest.raises(ValidationError, match=r"evaluation\.seeds_per_domain.*must be int"):
        load_params(_write(tmp_path, data))
    data = _smoke_data()
    data["statistics"]["alpha"] = True
    with pytest.raises(ValidationError, match=r"statistics\.alpha.*must be float"):
        load_params(_write(tmp_path, data))


def test_wrong_literal_lists_allowed_values(tmp_path):
    data = _smoke_data()
    data["evaluation"]["first_mover"] = "both"
    with pytest.raises(ValidationError, match=r"first_mover.*'seller', 'buyer'"):
        load_params(_write(tmp_path, data))


def test_backend_specific_keys(tmp_path):
    data = _smoke_data()
    data["arms"]["boulware"]["model"] = "x"
    with pytest.raises(ValidationError, match=r"arms\.boulware.*unknown keys \['model'\] for backend 'scripted'"):
        load_params(_write(tmp_path, data))
    data = _smoke_data()
    data["arms"]["boulware"]["backend"] = "gguf"
    with pytest.raises(ValidationError, match=r"arms\.boulware\.backend.*must be one of"):
        load_params(_write(tmp_path, data))
    data = _smoke_data()
    data["arms"]["boulware"]["strategy"] = "nope"
    with pytest.raises(ValidationError, match=r"arms\.boulware\.strategy.*must be one of"):
        load_params(_write(tmp_path, data))


def test_api_keys_never_in_params(tmp_path):
    data = _smoke_data()
    data["arms"]["gpt"] = {"backend": "openai", "model": "m", "api_key": "sk-secret"}
    with pytest.raises(ValidationError, match="API keys never go in a params file"):
        load_params(_write(tmp_path, data))
    data["arms"]["gpt"] = {"backend": "openai", "model": "m", "api_key_env": "sk-secret"}
    with pytest.raises(ValidationError, match="environment variable name"):
        load_params(_write(tmp_path, data))
    data["arms"]["gpt"] = {"backend": "openai", "model": "m"}
    with pytest.raises(ValidationError, match=r"arms\.gpt\.api_key_env.*required"):
        load_params(_write(tmp_path, data))


def test_cross_references(tmp_path):
    data = _smoke_data()
    data["arms"]["tiny_grpo"]["run"] = "missing"
    with pytest.raises(ValidationError, match=r"arms\.tiny_grpo\.run.*unknown training run"):
        load_params(_write(tmp_path, data))
    data = _smoke_data()
    data["statistics"]["primary"] = [["tiny_grpo", "nobody"]]
    with pytest.raises(ValidationError, match=r"statistics\.primary\[0\]"):
        load_params(_write(tmp_path, data))
    data = _smoke_data()
    data["evaluation"]["buyers"] = ["ghost"]
    with pytest.raises(ValidationError, match=r"evaluation\.buyers.*unknown buyer 'ghost'"):
        load_params(_write(tmp_path, data))
    data = _smoke_data()
    data["evaluation"]["domains"] = ["mars"]
    with pytest.raises(ValidationError, match=r"evaluation\.domains.*unknown domains \['mars'\]"):
        load_params(_write(tmp_path, data))
    data = _smoke_data()
    data["training"]["runs"]["tiny_grpo"]["buyers"] = {"train_conceder": 0.5}
    with pytest.raises(ValidationError, match="must sum to 1"):
        load_params(_write(tmp_path, data))


def test_training_config_overrides_are_checked(tmp_path):
    data = _smoke_data()
    data["training"]["runs"]["tiny_grpo"]["config"]["lerning_rate"] = 1e-5
    with pytest.raises(ValidationError, match=r"training\.runs\.tiny_grpo\.config.*lerning_rate"):
        load_params(_write(tmp_path, data))


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ValidationError, match="does not exist"):
        load_params(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("profile: [unclosed\n")
    with pytest.raises(ValidationError, match="not valid YAML"):
        load_params(bad)


def test_output_dir_and_dict_views(tmp_path):
    p = load_params(ROOT / "params" / "smoke.yaml")
    q = p.with_output_dir(tmp_path / "o")
    assert q.out == (tmp_path / "o").resolve()
    d = to_dict(p)
    assert d["profile"] == "smoke" and "source" not in d
    assert spec_dict(p.arms["boulware"]) == {"backend": "scripted", "label": "Boulware (e = 0.2)",
                                             "strategy": "boulware"}
    again = parse_params(copy.deepcopy(_smoke_data()), "again")
    assert again.arms == p.arms


# -- the agent factory -------------------------------------------------------------------------

def test_factory_builds_scripted_and_fixed_opening_agents():
    from negolib.agents.factory import FixedOpeningAgent
    from negolib.games.multi_issue.domains import get_domain
    from negolib.games.multi_issue.env import Episode
    from negolib.games.multi_issue.scenarios import make_scenario
    from negolib.games.multi_issue.scripted import TimeDependentAgent
    from negolib.study.runs import build_agents

    p = load_params(ROOT / "params" / "smoke.yaml")
    agents = build_agents(p, ["boulware", "boulware_open_best", "buyer_linear"])
    assert isinstance(agents["boulware"], TimeDependentAgent)
    fixed = agents["boulware_open_best"]
    assert isinstance(fixed, FixedOpeningAgent)
    ep = Episode(make_scenario(get_domain("car"), 5_000_053))
    first = fixed.act(ep.view())
    ep.step(first.text)
    assert set(ep.ledger) == set(get_domain("car").issue_names)  # the best contract, every term
    assert ep.turns[0].action["action"] == "COUNTER"


def test_own_opening_plays_the_named_arms_first_turn_on_the_same_view():
    """An ``own:<arm>`` opening is the first turn that arm writes on the same scenario and buyer; later turns are
    the inner seller's; the opener is required exactly for own openings."""
    from negolib.agents.factory import FixedOpeningAgent
    from negolib.games.multi_issue.domains import get_domain
    from negolib.games.multi_issue.env import Episode
    from negolib.games.multi_issue.scenarios import make_scenario
    from negolib.games.multi_issue.scripted import TimeDependentAgent

    inner = TimeDependentAgent("inner", e=0.2, seed=0)
    opener = TimeDependentAgent("opener", e=5.0, k=0.3, seed=0)
    fixed = FixedOpeningAgent("fx", inner, "own:opener", 0, opener=opener)
    for seed in (5_000_053, 5_000_054):
        ep = Episode(make_scenario(get_domain("car"), seed))
        view = ep.view()
        assert fixed.act(view).text == opener.act(view).text != inner.act(view).text
    assert fixed.settings()["opener"]["name"] == "opener"
    with pytest.raises(ValueError, match="opener="):
        FixedOpeningAgent("fx", inner, "own:opener", 0)
    with pytest.raises(ValueError, match="takes no opener"):
        FixedOpeningAgent("fx", inner, "best", 0, opener=opener)
    with pytest.raises(ValueError, match="needs an arm name"):
        FixedOpeningAgent("fx", inner, "own:", 0, opener=opener)


@pytest.mark.parametrize("source, why", [("nobody", "must name a language-model arm"),
                                          ("boulware", "must name a language-model arm")])
def test_own_opening_must_name_a_language_model_arm(source, why):
    data = _smoke_data()
    data["arms"]["tiny_base_open_own"]["opening"] = f"own:{source}"
    with pytest.raises(ValidationError, match=f"arms.tiny_base_open_own.opening.*{why}"):
        parse_params(data, "own.yaml")


def test_factory_api_agent_needs_its_key_before_any_call(monkeypatch):
    from negolib.agents.factory import build_agent

    p = load_params(ROOT / "params" / "paper.yaml")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(Exception, match="OPENAI_API_KEY"):
        build_agent("terra", p.arms["terra"], 0, params=p)


def test_factory_trained_arm_without_checkpoint_is_clear(tmp_path):
    from negolib.study.runs import build_agent, trained_ready

    p = load_params(ROOT / "params" / "smoke.yaml").with_output_dir(tmp_path)
    ok, why = trained_ready(p, "tiny_grpo")
    assert not ok and "run notebook 03 first" in why
    with pytest.raises(FileNotFoundError, match="tiny_grpo"):
        build_agent("tiny_grpo", p.arms["tiny_grpo"], 0, params=p)


# -- strict at load (issue 13 §4) ----------------------------------------------------------------

def _expect(tmp_path: Path, data: dict, field: str, words: str) -> ValidationError:
    """Loading ``data`` fails naming the file, the dotted ``field`` and ``words``."""
    path = _write(tmp_path, data)
    with pytest.raises(ValidationError) as e:
        load_params(path)
    assert e.value.field == field, str(e.value)
    assert words in str(e.value) and str(path.resolve()) in str(e.value)
    return e.value


def test_duplicate_yaml_key_names_path_and_lines(tmp_path):
    text = (ROOT / "params" / "smoke.yaml").read_text()
    assert text.count("\nseed: 0\n") == 1
    path = tmp_path / "p.yaml"
    path.write_text(text + "seed: 7\n")
    with pytest.raises(ValidationError) as e:
        load_params(path)
    line = text.count("\n", 0, text.index("\nseed: 0\n")) + 2
    assert e.value.field == "seed" and f"line {line} and line {text.count(chr(10)) + 1}" in str(e.value)
    assert str(path.resolve()) in str(e.value)


def test_duplicate_nested_key_and_duplicate_arm_name(tmp_path):
    text = (ROOT / "params" / "smoke.yaml").read_text()
    path = tmp_path / "p.yaml"
    path.write_text(text.replace("  pilot_episodes: 1\n", "  pilot_episodes: 1\n  pilot_episodes: 3\n"))
    with pytest.raises(ValidationError, match="key given twice") as e:
        load_params(path)
    assert e.value.field == "evaluation.pilot_episodes"
    arm = "  conceder:      {backend: scripted, strategy: conceder, label: \"Conceder (e = 2)\"}\n"
    assert arm in text
    path.write_text(text.replace(arm, arm + arm.replace("Conceder (e = 2)", "another conceder")))
    with pytest.raises(ValidationError, match="key given twice") as e:
        load_params(path)
    assert e.value.field == "arms.conceder"


def test_strict_loader_keeps_yaml_merge_keys():
    from negolib.params import StrictLoader

    text = "base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n"
    assert yaml.load(text, Loader=StrictLoader) == {"base": {"x": 1, "y": 2}, "other": {"x": 1, "y": 3}}


def test_arm_names_must_differ_by_more_than_case(tmp_path):
    data = _smoke_data()
    data["arms"]["Boulware"] = dict(data["arms"]["boulware"])
    _expect(tmp_path, data, "arms.Boulware", "same agent as arms.boulware")
    data = _smoke_data()
    data["buyers"]["Boulware"] = dict(data["buyers"]["buyer_linear"])
    _expect(tmp_path, data, "buyers.Boulware", "same agent as arms.boulware")


@pytest.mark.parametrize("key, words", [("lm_domains", "is empty"), ("domains", "is empty"), ("arms", "is empty")])
def test_empty_list_is_not_all(tmp_path, key, words):
    data = _smoke_data()
    data["evaluation"][key] = []
    _expect(tmp_path, data, f"evaluation.{key}", words)


def test_lists_name_each_thing_once(tmp_path):
    data = _smoke_data()
    data["evaluation"]["buyers"] = ["buyer_linear", "buyer_hardheaded", "buyer_linear"]
    _expect(tmp_path, data, "evaluation.buyers[2]", "listed twice")
    data = _smoke_data()
    data["evaluation"]["lm_domains"] = ["car", "car"]
    _expect(tmp_path, data, "evaluation.lm_domains[1]", "listed twice")
    data = _smoke_data()
    data["training"]["runs"]["tiny_grpo"]["seeds"] = [0, 1, 2, 2]
    _expect(tmp_path, data, "training.runs.tiny_grpo.seeds[3]", "listed twice")


def test_lm_domains_must_be_evaluated(tmp_path):
    data = _smoke_data()
    data["evaluation"]["domains"] = ["acquisition", "car"]
    data["evaluation"]["lm_domains"] = ["job_offer"]
    _expect(tmp_path, data, "evaluation.lm_domains", "not among evaluation.domains")


@pytest.mark.parametrize("section, key, value, field, words", [
    ("evaluation", "batch_size", 0, "evaluation.batch_size", ">= 1"),
    ("evaluation", "batch_size", -4, "evaluation.batch_size", ">= 1"),
    ("evaluation", "pilot_episodes", 0, "evaluation.pilot_episodes", ">= 1"),
    ("budgets", "total_s", 0, "budgets.total_s", "> 0"),
    ("budgets", "total_s", -5.0, "budgets.total_s", "> 0"),
    ("budgets", "cell_timeout_s", 0, "budgets.cell_timeout_s", "> 0"),
    ("statistics", "refine_resamples", 0, "statistics.refine_resamples", ">= 1"),
])
def test_counts_and_budgets_must_be_positive(tmp_path, section, key, value, field, words):
    data = _smoke_data()
    data[section][key] = value
    _expect(tmp_path, data, field, words)


def test_notebook_budgets_name_real_notebooks(tmp_path):
    data = _smoke_data()
    data["budgets"]["notebooks"] = {"03_train": 60}
    _expect(tmp_path, data, "budgets.notebooks.03_train", "no such notebook")
    data["budgets"]["notebooks"] = {"03_training": 0}
    _expect(tmp_path, data, "budgets.notebooks.03_training", "> 0")
    data["budgets"]["notebooks"] = {"03_training": 60}
    assert load_params(_write(tmp_path, data)).budgets.notebooks == {"03_training": 60.0}


@pytest.mark.parametrize("arm, key, value, field, words", [
    ("tiny_base", "batch_size", 0, "arms.tiny_base.batch_size", ">= 1"),
    ("tiny_base", "prompt_cap", -1, "arms.tiny_base.prompt_cap", ">= 1"),
    ("tiny_grpo", "prompt_cap", 0, "arms.tiny_grpo.prompt_cap", ">= 1"),
    ("tiny_grpo", "step", -1, "arms.tiny_grpo.step", ">= 0"),
    ("tiny_base", "dtype", "float33", "arms.tiny_base.dtype", "must be one of"),
    ("boulware_open_best", "opening", "1.5", "arms.boulware_open_best.opening", "utility in [0, 1]"),
    ("boulware", "params", {"tau": 3}, "arms.boulware.params.tau", "not a parameter"),
    ("boulware", "params", {"p_min": 2.0}, "arms.boulware.params.p_min", "in [0, 1]"),
    ("boulware", "params", {"p_min": 0.8, "p_max": 0.5}, "arms.boulware.params.p_min", "<= p_max"),
    ("fixed_offer", "params", {"offer_utility": -0.1}, "arms.fixed_offer.params.offer_utility", "in [0, 1]"),
    ("tit_for_tat", "params", {"min_concession": 5}, "arms.tit_for_tat.params.min_concession", "in [0, 1]"),
    ("hardheaded", "params", {"max_terms": 0}, "arms.hardheaded.params.max_terms", ">= 1"),
])
def test_agent_values_the_builder_rejects_fail_at_load(tmp_path, arm, key, value, field, words):
    data = _smoke_data()
    data["arms"][arm][key] = value
    _expect(tmp_path, data, field, words)


@pytest.mark.parametrize("key, value", [("temperature", 0), ("temperature", -1.0), ("top_p", 0), ("top_p", 1.5),
                                        ("top_k", -1), ("max_new_tokens", 0)])
def test_sampling_rejected_at_load_exactly_when_the_agent_would_reject_it(tmp_path, key, value):
    from negolib.agents.factory import sampling_config
    from negolib.core.sampling import Decoding, SamplingConfig

    data = _smoke_data()
    data["arms"]["tiny_base"]["sampling"][key] = value
    _expect(tmp_path, data, f"arms.tiny_base.sampling.{key}", "must be")
    spec = load_params(ROOT / "params" / "smoke.yaml").arms["tiny_base"]
    assert type(spec.sampling) is Decoding  # one schema: the profile's sampling is the agents' Decoding
    with pytest.raises(ValueError, match=f"^Decoding.{key} must be"):  # a bad one cannot be built at all
        dataclasses.replace(spec.sampling, **{key: value})
    sent = sampling_config(spec, seed=5)
    assert isinstance(sent, SamplingConfig) and sent.seed == 5
    assert {k: v for k, v in sent.as_dict().items() if k != "seed"} == spec.sampling.as_dict()


def test_build_agent_runs_the_loaders_checks():
    from negolib.agents.factory import build_agent

    spec = load_params(ROOT / "params" / "smoke.yaml").arms["boulware"]
    with pytest.raises(ValueError, match=r"agent 'b': params\.tau is not a parameter"):
        build_agent("b", dataclasses.replace(spec, params={"tau": 1}))


def test_api_arm_limits_checked_at_load(tmp_path):
    data = yaml.safe_load((ROOT / "params" / "paper.yaml").read_text())
    data["arms"]["terra"]["timeout_s"] = 0
    _expect(tmp_path, data, "arms.terra.timeout_s", "> 0")
    data = yaml.safe_load((ROOT / "params" / "paper.yaml").read_text())
    data["arms"]["terra"]["max_concurrency"] = 0
    _expect(tmp_path, data, "arms.terra.max_concurrency", ">= 1")
    data = yaml.safe_load((ROOT / "params" / "paper.yaml").read_text())
    data["arms"]["sonnet5"]["sampling"]["thinking"] = True
    _expect(tmp_path, data, "arms.sonnet5.sampling.thinking", "thinking off")


def test_training_init_and_mixture_are_checked(tmp_path):
    data = _smoke_data()
    data["training"]["runs"]["tiny_grpo"]["init"] = "tiny_grpo@x"
    _expect(tmp_path, data, "training.runs.tiny_grpo.init", "run@step")
    data["training"]["runs"]["tiny_grpo"]["init"] = "tiny_base@4"  # an arm, not a run
    _expect(tmp_path, data, "training.runs.tiny_grpo.init", "run@step")
    data = _smoke_data()
    data["training"]["runs"]["tiny_grpo"]["buyers"] = {"train_conceder": 1.5, "train_boulware": -0.5}
    _expect(tmp_path, data, "training.runs.tiny_grpo.buyers", ">= 0")


@pytest.fixture
def two_held_out(tmp_path, monkeypatch):
    """The shipped domains with acquisition flagged held out as well as car."""
    import negolib.games.multi_issue.domains as domains

    folder = tmp_path / "domains"
    folder.mkdir()
    for f in domains.DOMAIN_DIR.glob("*.yaml"):
        text = f.read_text()
        if f.stem == "acquisition":
            assert "held_out: false\n" in text
            text = text.replace("held_out: false\n", "held_out: true\n")
        (folder / f.name).write_text(text)
    monkeypatch.setattr(domains, "DOMAIN_DIR", folder)
    assert sorted(d for d, dom in domains.load_domains().items() if dom.held_out) == ["acquisition", "car"]
    return tmp_path


def test_two_held_out_domains_need_the_profile_to_name_one(two_held_out):
    data = _smoke_data()
    _expect(two_held_out, data, "evaluation.held_out_domain", "is required")
    data["evaluation"]["held_out_domain"] = "job_offer"
    _expect(two_held_out, data, "evaluation.held_out_domain", "not flagged held_out")
    data["evaluation"]["held_out_domain"] = "car"
    named = load_params(_write(two_held_out, data))
    assert named.evaluation.held_out_domain == "car"
    from negolib.study.evaluation import protocol_from_params

    data["evaluation"]["held_out_domain"] = "acquisition"  # the protocol holds out the named one
    assert protocol_from_params(load_params(_write(two_held_out, data))).held_out_domain == "acquisition"
    assert protocol_from_params(named).held_out_domain == "car"
    data["evaluation"]["held_out_domain"] = "car"
    data = _smoke_data()
    data["evaluation"]["domains"] = ["acquisition", "job_offer"]  # only one held out among those evaluated
    data["evaluation"]["lm_domains"] = ["acquisition"]
    assert load_params(_write(two_held_out, data)).evaluation.held_out_domain is None


def test_paper_reported_has_no_duplicate_keys():
    from negolib.params import load_yaml

    assert "arms" in load_yaml(ROOT / "params" / "paper_reported.yaml")


def test_trained_step_must_be_a_checkpoint_the_run_writes(tmp_path):
    data = _smoke_data()  # tiny_grpo: max_steps 2, save_every 1
    data["arms"]["tiny_grpo"]["step"] = 3
    _expect(tmp_path, data, "arms.tiny_grpo.step", "step 3 is never written")
    data = _smoke_data()
    data["training"]["runs"]["tiny_grpo"]["config"].update(max_steps=5, save_every=2)
    data["arms"]["tiny_grpo"]["step"] = 3
    _expect(tmp_path, data, "arms.tiny_grpo.step", "every 2 steps")
    for ok in (2, 4, 5):
        data["arms"]["tiny_grpo"]["step"] = ok
        assert load_params(_write(tmp_path, data)).arms["tiny_grpo"].step == ok
    data = _smoke_data()
    data["training"]["runs"]["cont"] = {**copy.deepcopy(data["training"]["runs"]["tiny_grpo"]), "init": "tiny_grpo@9"}
    _expect(tmp_path, data, "training.runs.cont.init", "step 9 is never written")


def test_prices_use_the_cost_tables_check(tmp_path):
    data = _smoke_data()
    data["prices"] = {"m": {"input": -1.0, "output": 2.0}}
    _expect(tmp_path, data, "prices.m.input", "finite number >= 0")
    data["prices"] = {"m": {"input": 1.0, "output": float("inf")}}
    _expect(tmp_path, data, "prices.m.output", "finite number >= 0")


# -- games: the other games of the harness (notebook 10) --------------------------------------------------------

_LM = {"base": {"backend": "hf", "model": "tiny", "prompt_cap": 384,
                "sampling": {"temperature": 1.0, "top_p": 0.95, "top_k": 64, "max_new_tokens": 24}},
       "opponent": "boulware"}


def _games_data() -> dict:
    data = _smoke_data()
    data["games"] = {"bilateral": {"tournament": {"agents": ["fixed_price", "boulware", "linear"],
                                                  "seeds_per_tier": 2},
                                   "lm": copy.deepcopy(_LM), "sft": {"max_examples": 4, "config": {"epochs": 1}}}}
    return data


@pytest.mark.parametrize("profile", PROFILES)
def test_shipped_profiles_name_the_bilateral_games_agents(profile):
    from negolib.games import get_game
    from negolib.games.bilateral.training import BilateralGRPOConfig, BilateralSFTConfig

    p = load_params(ROOT / "params" / f"{profile}.yaml")  # every name checked against the game's own list at load
    g = p.games.bilateral
    assert g is not None and len(g.tournament.agents) >= 2
    assert set(get_game("bilateral").scripted_strategies()) <= set(g.tournament.agents)  # the five families play
    assert isinstance(g.sft.config, BilateralSFTConfig) and isinstance(g.grpo, BilateralGRPOConfig)  # built at load


def test_games_section_loads_and_is_optional(tmp_path):
    p = load_params(_write(tmp_path, _games_data()))
    g = p.games.bilateral
    assert g.tournament.agents == ["fixed_price", "boulware", "linear"] and g.tournament.seeds_per_tier == 2
    assert g.lm.base.backend == "hf" and g.lm.base.sampling.max_new_tokens == 24 and g.lm.eval_tiers is None
    data = _smoke_data()
    data.pop("games", None)
    assert load_params(_write(tmp_path, data)).games.bilateral is None


@pytest.mark.parametrize("edit, field, words", [
    (lambda g: g.update(chess={}), "games", "unknown keys ['chess']"),
    (lambda g: g["bilateral"].update(tourney={}), "games.bilateral", "unknown keys ['tourney']"),
    (lambda g: g["bilateral"].pop("tournament"), "games.bilateral.tournament", "is required"),
    (lambda g: g["bilateral"]["tournament"].update(seeds=3), "games.bilateral.tournament", "unknown keys ['seeds']"),
    (lambda g: g["bilateral"]["tournament"].update(agents=["boulware"]), "games.bilateral.tournament.agents",
     "at least two agents"),
    (lambda g: g["bilateral"]["tournament"].update(agents=["boulware", "linear", "boulware"]),
     "games.bilateral.tournament.agents[2]", "listed twice"),
    (lambda g: g["bilateral"]["tournament"].update(agents=["boulware", "gpt:x"]),
     "games.bilateral.tournament.agents[1]", "not a language-model agent"),
    (lambda g: g["bilateral"]["tournament"].update(agents=["boulware", "openai:"]),
     "games.bilateral.tournament.agents[1]", "not a language-model agent"),
    (lambda g: g["bilateral"]["tournament"].update(agents=["boulware", "two words"]),
     "games.bilateral.tournament.agents[1]", "letters, digits"),
    (lambda g: g["bilateral"]["tournament"].update(agents="boulware,linear"), "games.bilateral.tournament.agents",
     "must be a list"),
    (lambda g: g["bilateral"]["tournament"].update(seeds_per_tier=0), "games.bilateral.tournament.seeds_per_tier",
     "1..1000"),
    (lambda g: g["bilateral"]["tournament"].update(seeds_per_tier="4"), "games.bilateral.tournament.seeds_per_tier",
     "must be int"),
    (lambda g: g["bilateral"]["tournament"].update(agent_seed=-1), "games.bilateral.tournament.agent_seed", ">= 0"),
    (lambda g: g["bilateral"]["lm"].pop("opponent"), "games.bilateral.lm.opponent", "is required"),
    (lambda g: g["bilateral"]["lm"].update(opponent="claude:x"), "games.bilateral.lm.opponent",
     "not a language-model agent"),
    (lambda g: g["bilateral"]["lm"].update(eval_tiers=[]), "games.bilateral.lm.eval_tiers", "is empty"),
    (lambda g: g["bilateral"]["lm"].update(eval_tiers=["1k", "1k"]), "games.bilateral.lm.eval_tiers[1]",
     "listed twice"),
    (lambda g: g["bilateral"]["sft"].update(max_examples=0), "games.bilateral.sft.max_examples", ">= 1"),
    (lambda g: g["bilateral"]["sft"].update(min_share=1.5), "games.bilateral.sft.min_share", "[0, 1]"),
    (lambda g: g["bilateral"]["sft"].update(select="worst"), "games.bilateral.sft.select", "'best_deal'"),
    (lambda g: g["bilateral"]["sft"].update(epochs=1), "games.bilateral.sft", "unknown keys ['epochs']"),
    (lambda g: g["bilateral"]["lm"].update(eval_seeds_per_tier=0), "games.bilateral.lm.eval_seeds_per_tier",
     "1..1000"),
    (lambda g: g["bilateral"]["lm"].update(base={"backend": "scripted", "strategy": "boulware"}),
     "games.bilateral.lm.base.backend", "must be 'hf'"),
    (lambda g: g["bilateral"]["lm"]["base"].update(backend="gguf"), "games.bilateral.lm.base.backend",
     "must be one of"),
    (lambda g: g["bilateral"]["lm"]["base"].update(run="x"), "games.bilateral.lm.base", "unknown keys ['run']"),
    (lambda g: g["bilateral"]["lm"]["base"].pop("model"), "games.bilateral.lm.base.model", "is required"),
    (lambda g: g["bilateral"]["lm"]["base"]["sampling"].update(top_p=1.5), "games.bilateral.lm.base.sampling.top_p",
     "top_p"),
    (lambda g: g["bilateral"]["lm"]["base"].update(prompt_cap=0), "games.bilateral.lm.base.prompt_cap", ">= 1"),
    (lambda g: g["bilateral"]["lm"]["base"].update(dtype="int3"), "games.bilateral.lm.base.dtype", "must be one of"),
    (lambda g: g["bilateral"]["lm"]["base"].update(path_env="not a var"), "games.bilateral.lm.base.path_env",
     "environment variable name"),
    (lambda g: g["bilateral"]["lm"]["base"].update(api_key="sk-1"), "games.bilateral.lm.base.api_key",
     "API keys never go in a params file"),
    (lambda g: g["bilateral"].pop("lm"), "games.bilateral.lm", "is required"),
    (lambda g: g["bilateral"].update(grpo=["tiers"]), "games.bilateral.grpo", "must be a mapping"),
])
def test_games_section_errors_name_the_dotted_field(tmp_path, edit, field, words):
    data = _games_data()
    edit(data["games"])
    _expect(tmp_path, data, field, words)


def test_game_agents_are_checked_against_the_games_own_list(tmp_path):
    data = _games_data()
    data["games"]["bilateral"]["tournament"]["agents"] = ["boulware", "hardheaded", "hf:/models/x", "openai:gpt"]
    e = _expect(tmp_path, data, "games.bilateral.tournament.agents[1]", "no agent 'hardheaded'")  # the paper's game's
    assert "tit_for_tat" in str(e)
    data = _games_data()
    data["games"]["bilateral"]["lm"]["opponent"] = "tough_guy"
    _expect(tmp_path, data, "games.bilateral.lm.opponent", "no agent 'tough_guy'")


def test_game_agents_opponent_list_is_strict(tmp_path):
    """The market's lm.opponent is one of its buyer agents, not a seller: the buyer pool passes, a seller's name or a
    name that is neither fails naming its field; tournament agents are checked first."""
    from negolib.games import get_game

    game = get_game("multi_buyer")
    p = load_params(ROOT / "params" / "smoke.yaml")
    assert p.games.multi_buyer.lm.opponent in game.buyer_names()
    data = _smoke_data()
    data["games"]["multi_buyer"]["lm"]["opponent"] = game.scripted_strategies()[0]
    _expect(tmp_path, data, "games.multi_buyer.lm.opponent", "no buyer agent")
    data["games"]["multi_buyer"]["lm"]["opponent"] = "tough_guy"
    _expect(tmp_path, data, "games.multi_buyer.lm.opponent", "no buyer agent 'tough_guy'")
    data["games"]["multi_buyer"]["tournament"]["agents"][0] = "nobody"  # agents are checked first
    _expect(tmp_path, data, "games.multi_buyer.tournament.agents[0]", "no agent 'nobody'")


@pytest.mark.parametrize("where, overrides, field, words", [
    ("sft.config", {"epoch": 1}, "games.bilateral.sft.config", "unknown keys ['epoch']"),
    ("sft.config", {"epochs": "2"}, "games.bilateral.sft.config.epochs", "must be int"),
    ("sft.config", {"learning_rate": 3}, "games.bilateral.sft.config.learning_rate", "(0, 1)"),
    ("grpo", {"tiers": "1k"}, "games.bilateral.grpo.tiers", "must be a list of str"),
    ("grpo", {"tiers": ["2k"]}, "games.bilateral.grpo.tiers", "unknown ['2k']"),
    ("grpo", {"reward": {"ir_pen": 1}}, "games.bilateral.grpo.reward", "unknown keys ['ir_pen']"),
    ("grpo", {"reward": {"ir_penalty": -1}}, "games.bilateral.grpo.reward.ir_penalty", ">= 0"),
    ("grpo", {"recipe": {"max_step": 2}}, "games.bilateral.grpo.recipe.max_step", "unknown key"),
    ("grpo", {"recipe": {"max_steps": "x"}}, "games.bilateral.grpo.recipe.max_steps", "must be int"),
    ("grpo", {"recipe": {"micro_batch_size": 3}}, "games.bilateral.grpo.recipe.micro_batch_size", "must divide"),
    ("grpo", {"recipe": 4}, "games.bilateral.grpo.recipe", "TrainConfig overrides"),
])
def test_game_recipes_are_checked_at_load(tmp_path, where, overrides, field, words):
    """A game's SFT and GRPO recipes are its own classes, built from the profile's overrides when it loads; errors
    name the profile and the dotted field."""
    data = _games_data()
    section = data["games"]["bilateral"]
    for key in where.split("."):
        section = section.setdefault(key, {})
    section.update(overrides)
    _expect(tmp_path, data, field, words)


def test_game_recipes_apply_the_profiles_overrides(tmp_path):
    from negolib.games.bilateral.training import BilateralGRPOConfig, BilateralSFTConfig

    data = _games_data()
    data["games"]["bilateral"]["grpo"] = {"tiers": ["1k"], "recipe": {"max_steps": 2, "save_every": 2}}
    g = load_params(_write(tmp_path, data)).games.bilateral
    assert g.sft.config.epochs == 1 and g.sft.config.learning_rate == BilateralSFTConfig().learning_rate  # the game's
    base = BilateralGRPOConfig()
    assert g.grpo.tiers == ("1k",) and g.grpo.recipe.max_steps == 2
    assert g.grpo.recipe.max_new_tokens == base.recipe.max_new_tokens and g.grpo.reward == base.reward
    data["games"]["bilateral"].pop("grpo")
    assert load_params(_write(tmp_path, data)).games.bilateral.grpo == base  # absent: the game's defaults


# ---------------------------------------------------------------------------------------------
# Profile inheritance: `extends: other.yaml`
# ---------------------------------------------------------------------------------------------


def test_extends_lays_the_profile_over_its_base(tmp_path):
    import shutil

    from negolib.params import load_params

    base = tmp_path / "params"
    shutil.copytree(Path(__file__).resolve().parent.parent / "params", base)
    (base / "child.yaml").write_text(
        "extends: smoke.yaml\nprofile: child\nstatistics: {n_resamples: 123}\n")
    parent, child = load_params(base / "smoke.yaml"), load_params(base / "child.yaml")
    assert child.profile == "child" and parent.profile == "smoke"
    assert child.statistics.n_resamples == 123
    assert child.statistics.alpha == parent.statistics.alpha  # merged key by key, not replaced
    assert set(child.arms) == set(parent.arms)


def test_extends_errors_name_the_file_and_field(tmp_path):
    from negolib.core.errors import ValidationError
    from negolib.params import load_params

    (tmp_path / "a.yaml").write_text("extends: b.yaml\nprofile: a\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\nprofile: b\n")
    with pytest.raises(ValidationError, match=r"a\.yaml.*extends.*cycle|b\.yaml.*extends.*cycle"):
        load_params(tmp_path / "a.yaml")
    (tmp_path / "c.yaml").write_text("extends: missing.yaml\n")
    with pytest.raises(ValidationError, match=r"c\.yaml.*extends.*does not exist"):
        load_params(tmp_path / "c.yaml")
    (tmp_path / "d.yaml").write_text("extends: 3\n")
    with pytest.raises(ValidationError, match=r"d\.yaml.*extends.*must name a profile file"):
        load_params(tmp_path / "d.yaml")


def test_merge_overrides_replaces_lists_and_scalars():
    from negolib.core.files import merge_overrides

    assert merge_overrides({"a": {"x": 1, "y": [1, 2]}, "b": 2}, {"a": {"y": [3]}, "c": 4}) == \
        {"a": {"x": 1, "y": [3]}, "b": 2, "c": 4}
