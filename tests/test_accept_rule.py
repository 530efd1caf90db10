"""The ACCEPT rule is a protocol field: the paper profile plays the paper's rule in evaluation and training, the
default profile states its rule and why, and the prompt states the rule in force (issue 28, section 4)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from negolib.agents.base import Agent, AgentReply
from negolib.core.errors import ValidationError
from negolib.games.multi_issue.env import EnvConfig, Episode
from negolib.games.multi_issue.prompts import render_messages, system_message
from negolib.games.multi_issue.training import env_config
from negolib.params import load_params, parse_params, train_config
from negolib.study.evaluation import Protocol, protocol_from_dict, protocol_from_params, protocol_hash, protocol_to_dict

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def paper():
    return load_params(ROOT / "params" / "paper.yaml")


def test_paper_profile_evaluates_and_trains_under_the_papers_accept_rule(paper):
    assert paper.evaluation.accept_needs_offer is False
    protocol = protocol_from_params(paper)
    assert protocol.accept_needs_offer is False
    for arm in protocol.arms:
        assert protocol.env_config(arm).accept_needs_offer is False, arm.name
    assert paper.training.runs
    for run in paper.training.runs:
        assert env_config(train_config(paper, run)).accept_needs_offer is False, run
    assert "paper" in paper.evaluation.accept_rule_why.lower()


def test_default_profile_states_its_accept_rule_and_why():
    raw = yaml.safe_load((ROOT / "params" / "default.yaml").read_text())["evaluation"]
    assert raw["accept_needs_offer"] is True  # stated in the file, not left to a default
    assert len(raw["accept_rule_why"]) > 40
    p = load_params(ROOT / "params" / "default.yaml")
    assert protocol_from_params(p).env_config().accept_needs_offer is True
    for run in p.training.runs:
        assert env_config(train_config(p, run)).accept_needs_offer is True


def test_a_run_may_override_the_evaluations_rule():
    data = yaml.safe_load((ROOT / "params" / "smoke.yaml").read_text())
    data["evaluation"]["accept_needs_offer"] = False
    run = next(iter(data["training"]["runs"]))
    data["training"]["runs"][run]["config"]["accept_needs_offer"] = True
    p = parse_params(data, "smoke.yaml")
    assert train_config(p, run).accept_needs_offer is True
    assert protocol_from_params(p).accept_needs_offer is False


def test_accept_rule_fields_are_typed():
    data = yaml.safe_load((ROOT / "params" / "smoke.yaml").read_text())
    data["evaluation"]["accept_needs_offer"] = "no"
    with pytest.raises(ValidationError, match="evaluation.accept_needs_offer"):
        parse_params(data, "smoke.yaml")


def _protocol(**kw) -> Protocol:
    return protocol_from_dict({
        "name": "p", "domains": ["car"], "buyers": {"b": {"backend": "scripted", "strategy": "linear"}},
        "arms": [{"name": "a", "seller": {"backend": "scripted", "strategy": "boulware"}}], **kw})


def test_protocol_carries_the_rule_and_hashes_it():
    ours, theirs = _protocol(), _protocol(accept_needs_offer=False)
    assert ours.env_config().accept_needs_offer is True and theirs.env_config().accept_needs_offer is False
    assert "accept_needs_offer" not in protocol_to_dict(ours)  # protocols frozen before the field keep their hash
    assert protocol_to_dict(theirs)["accept_needs_offer"] is False
    assert protocol_from_dict(protocol_to_dict(theirs)) == theirs
    assert protocol_hash(ours) != protocol_hash(theirs)
    with pytest.raises(ValidationError, match="accept_needs_offer"):
        _protocol(accept_needs_offer="yes")


# -- the prompt states the rule in force ----------------------------------------------------------

def _view(car_scenario, needs_offer: bool, role: str = "seller"):
    ep = Episode(car_scenario, EnvConfig(accept_needs_offer=needs_offer))
    if role == "buyer":
        ep.step('Hello.\n{"action": "COUNTER", "terms": [{"name": "price", "value": 40}]}')
    return ep.view(role)


@pytest.mark.parametrize("role", ["seller", "buyer"])
@pytest.mark.parametrize("scaffold", ["training", "evaluation"])
def test_prompt_states_the_papers_rule(car_scenario, role, scaffold):
    text = render_messages(_view(car_scenario, False, role), scaffold)[0]["content"]
    assert "- ACCEPT closes the deal on the current offer." in text.splitlines()
    assert "only when" not in text and "wrong format" not in text


@pytest.mark.parametrize("role", ["seller", "buyer"])
@pytest.mark.parametrize("scaffold", ["training", "evaluation"])
def test_prompt_states_our_rule(car_scenario, role, scaffold):
    text = render_messages(_view(car_scenario, True, role), scaffold)[0]["content"]
    counterpart = "buyer" if role == "seller" else "seller"
    assert "- ACCEPT closes the deal on the current offer." not in text.splitlines()
    assert (f"ACCEPT closes the deal on the current offer only when the {counterpart}'s last turn proposed terms "
            "(a COUNTER)") in text
    assert "counts as a turn in the wrong format" in text
    assert system_message(_view(car_scenario, True, role)) == text


def test_prompt_rule_matches_what_the_environment_does(car_scenario):
    """Under each rule, an ACCEPT on turn 1 does what that rule's prompt says it does."""
    for needs_offer in (True, False):
        ep = Episode(car_scenario, EnvConfig(accept_needs_offer=needs_offer))
        says_always = "only when" not in system_message(ep.view())
        ep.step('Hi.\n{"action": "ACCEPT"}')
        assert ep.done is says_always is (not needs_offer)


def test_variant_of_the_other_rule_is_played_and_logged(tmp_path):
    """A beyond-paper variant replays sellers under the other ACCEPT rule (a logged deviation, the beyond store)."""
    from negolib.book.context import open_book
    from negolib.study.evaluation import freeze

    B = open_book(ROOT / "params" / "smoke.yaml", tmp_path)
    freeze(protocol_from_params(B.params, arms=["boulware"]), B.paths.protocol)
    v = B.evaluate_variant(["boulware"], "seller", ".accept_rule", accept_needs_offer=False)
    assert v == ["boulware.accept_rule"]
    recs = B.records(beyond=True)
    assert recs and all(r["config"]["accept_needs_offer"] is False for r in recs)
    assert dataclasses.asdict(EnvConfig())["accept_needs_offer"] is True


# -- the beyond-paper arm: what the rule changes (notebook 09) -------------------------------------

class _AcceptAtOnce(Agent):
    """A seller that accepts the empty ledger on its first turn (the exploit our rule refuses), then counters."""

    name = backend = "accept_at_once"

    def act_batch(self, views):
        return [AgentReply('Deal.\n{"action": "ACCEPT"}' if v.turn == 1 else
                           'Fine.\n{"action": "COUNTER", "terms": [{"name": "price", "value": 45}]}') for v in views]


def test_accept_rule_contrasts_show_what_the_rule_changes(car_scenario, tmp_path):
    from negolib.core.transcripts import episodes_frame
    from negolib.games.multi_issue.rollout import make_specs, run_episodes
    from negolib.games.multi_issue.scenarios import eval_seeds, scenario_set
    from negolib.games.multi_issue.scripted import make_scripted
    from negolib.study.analysis.beyond import accept_rule_contrasts
    from negolib.study.analysis.resamplers import Analysis
    from negolib.study.report.beyond import accept_rule_table

    agents = {"s": _AcceptAtOnce(), "b": make_scripted("linear")}
    scen = scenario_set(eval_seeds(6), ["car", "job_offer"])
    recs = []
    for arm, needs_offer in (("s", True), ("s.accept_rule", False)):
        recs += run_episodes(make_specs(arm, "s", ["b"], scen, EnvConfig(max_rounds=3, accept_needs_offer=needs_offer)),
                             agents, progress=False).records
    an = Analysis(episodes_frame(recs), n_resamples=200, seed=0)
    c = accept_rule_contrasts(an, ["s.accept_rule"]).set_index("metric")
    assert set(c.index) == {"score", "deal_rate", "seller_bad_parse_rate", "invalid_accept_rate"}
    assert c.loc["invalid_accept_rate", "estimate"] < 0 and c.loc["seller_bad_parse_rate", "estimate"] < 0
    assert c.loc["deal_rate", "estimate"] != 0 and c.loc["score", "estimate"] != 0
    t = accept_rule_table(c.reset_index(), ["s.accept_rule"], protocol_needs_offer=True)
    assert t.frame.index.tolist() == ["s"] and "the paper's (any ACCEPT closes) minus ours" in t.title
    assert t.frame.loc["s", "Δ invalid-accept rate"].startswith("-")
    assert t.save(tmp_path)
    flipped = accept_rule_table(c.reset_index(), ["s.accept_rule"], protocol_needs_offer=False)
    assert "ours (an ACCEPT closes only on a COUNTER) minus the paper's" in flipped.title


def test_beyond_accept_rule_names_known_arms_and_notebook_09_shows_it():
    data = yaml.safe_load((ROOT / "params" / "smoke.yaml").read_text())
    data["beyond"]["accept_rule"] = ["nobody"]
    with pytest.raises(ValidationError, match="beyond.accept_rule"):
        parse_params(data, "smoke.yaml")
    src = (ROOT / "notebooks" / "09_beyond.py").read_text()
    assert "accept_needs_offer=not params.evaluation.accept_needs_offer" in src and "accept_rule_table(" in src
