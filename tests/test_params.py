"""Params profiles: validation errors name the file, field and allowed values; shipped profiles load;
the agent factory builds every backend it can without a network."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from negolib.errors import ValidationError
from negolib.params import load_params, parse_params, spec_dict, to_dict

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ("smoke", "default", "paper")


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
    assert len(p.arms) == 21
    assert len(p.arms) * ev.seeds_per_domain * 9 * len(ev.buyers) == 24_192
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
    from negolib.agents.factory import FixedOpeningAgent, build_agents
    from negolib.agents.scripted import TimeDependentAgent
    from negolib.domains import get_domain
    from negolib.env import Episode
    from negolib.scenarios import make_scenario

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


def test_factory_api_agent_needs_its_key_before_any_call(monkeypatch):
    from negolib.agents.factory import build_agent

    p = load_params(ROOT / "params" / "paper.yaml")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(Exception, match="OPENAI_API_KEY"):
        build_agent("terra", p.arms["terra"], 0, params=p)


def test_factory_trained_arm_without_checkpoint_is_clear(tmp_path):
    from negolib.agents.factory import build_agent, trained_ready

    p = load_params(ROOT / "params" / "smoke.yaml").with_output_dir(tmp_path)
    ok, why = trained_ready(p, "tiny_grpo")
    assert not ok and "run notebook 03 first" in why
    with pytest.raises(FileNotFoundError, match="tiny_grpo"):
        build_agent("tiny_grpo", p.arms["tiny_grpo"], 0, params=p)
