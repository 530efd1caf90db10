"""Notebook 04's local-model arms, each in a process of its own (issue 28, section 7): the same records as every
arm played together in one process, and no local model's weights loaded in the caller."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from negolib.params import load_params
from negolib.study.evaluation import evaluate_arms, evaluate_arms_apart, protocol_from_params
from negolib.study.runs import LazyAgents, local_weights

pytestmark = pytest.mark.usefixtures("one_torch_thread")
ROOT = Path(__file__).resolve().parents[1]
ARMS = ["boulware", "tiny_base", "boulware_open_best"]
TIMING = ("latency_s", "seconds", "started", "finished", "time", "timestamp", "wall_s")


def _plain(records: list[dict]) -> str:
    """The records without wall-clock fields, sorted by episode: what must not depend on the process layout."""
    def strip(obj):
        if isinstance(obj, dict):
            return {k: strip(v) for k, v in obj.items() if k not in TIMING}
        if isinstance(obj, list):
            return [strip(v) for v in obj]
        return obj
    rows = sorted((strip(r) for r in records), key=lambda r: (r["arm"], r["buyer"], r["domain"], r["seed"]))
    return json.dumps(rows, sort_keys=True, default=str)


@pytest.fixture(scope="module")
def smoke():
    params = load_params(ROOT / "params" / "smoke.yaml")
    return params, protocol_from_params(params)


def _names(params) -> list[str]:
    return ARMS + list(params.evaluation.buyers)


def test_local_weights_names_the_arms_that_load_a_model_here(smoke):
    params, _ = smoke
    assert [a for a in ARMS if local_weights(params, a)] == ["tiny_base"]
    assert local_weights(params, "tiny_grpo") and local_weights(params, "tiny_grpo_open_none")


def test_lazy_agents_build_on_first_use_with_build_agents_seeds(smoke):
    params, _ = smoke
    agents = LazyAgents(params, _names(params))
    assert list(agents) == _names(params) and "tiny_base" in agents and not agents.built("tiny_base")
    assert agents["boulware"] is agents["boulware"] and agents.built("boulware") and not agents.built("tiny_base")
    with pytest.raises(KeyError):
        agents["no_such_arm"]


@pytest.mark.parametrize("seed", [None, 7])  # 7: not the profile's seed, so the child must be given the caller's
def test_arms_apart_write_the_records_of_arms_together_and_load_no_model_here(smoke, tmp_path, seed):
    params, protocol = smoke
    together = evaluate_arms(protocol, LazyAgents(params, _names(params), seed), tmp_path / "together.jsonl",
                             progress=False, arms=ARMS)
    agents = LazyAgents(params, _names(params), seed)
    apart = evaluate_arms_apart(protocol, agents, tmp_path / "apart.jsonl", progress=False, arms=ARMS)
    assert not agents.built("tiny_base") and agents.built("boulware")  # the model played in a child only
    lm = [r for r in apart.records if r["arm"] == "tiny_base"]
    assert lm and len(apart.records) == len(together.records) and apart.skipped == 0
    assert _plain(apart.records) == _plain(together.records)
    stored = [json.loads(line) for line in (tmp_path / "apart.jsonl").read_text().splitlines()]
    assert _plain(stored) == _plain(together.records)
    again = evaluate_arms_apart(protocol, LazyAgents(params, _names(params)), tmp_path / "apart.jsonl",
                                progress=False, arms=ARMS)
    assert again.records == [] and again.skipped == len(together.records)  # resumable: nothing played twice


def test_a_child_seeded_otherwise_is_caught(smoke, tmp_path):
    """Sabotaged twin: the child building its agents from another name order (other seeds) writes other records,
    and the comparison above finds it."""
    params, protocol = smoke
    together = evaluate_arms(protocol, LazyAgents(params, _names(params)), tmp_path / "together.jsonl",
                             progress=False, arms=ARMS)
    shifted = LazyAgents(params, ["pad"] + _names(params))
    apart = evaluate_arms_apart(protocol, shifted, tmp_path / "apart.jsonl", progress=False, arms=ARMS)
    assert _plain(apart.records) != _plain(together.records)
