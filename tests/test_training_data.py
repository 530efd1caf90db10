"""Training / validation scenario sets of the paper's game: eight domains, buyers fixed per scenario."""

from __future__ import annotations

import pytest

from negolib.core.errors import ValidationError
from negolib.games.multi_issue.training import draw_buyer, env_config, scenario_items, training_domains
from negolib.training.config import TrainConfig
from negolib.training.data import buyer_shares, item_rows


def test_eight_training_domains_without_the_held_out_car():
    names = training_domains()
    assert len(names) == 8 and "car" not in names
    with pytest.raises(ValidationError, match="held-out"):
        training_domains(["car"])
    with pytest.raises(ValidationError, match="unknown"):
        training_domains(["spaceship"])


def test_buyer_is_a_pure_function_of_the_scenario():
    small = scenario_items(TrainConfig(train_seeds_per_domain=4))
    big = scenario_items(TrainConfig(train_seeds_per_domain=64, lr_multiplier=3.0))  # another arm, more data
    by_key = {it.scenario_id: it.buyer for it in big}
    assert all(by_key[it.scenario_id] == it.buyer for it in small)
    assert draw_buyer({"a": 0.8, "b": 0.2}, "job_offer", 3) == draw_buyer(
        {"a": 0.8, "b": 0.2}, "job_offer", 3
    )


def test_mixture_shares():
    items = scenario_items(
        TrainConfig(train_seeds_per_domain=128, buyer_mixture={"conceder": 0.8, "hardheaded": 0.2})
    )
    assert len(items) == 1024
    shares = buyer_shares(items)
    assert shares["conceder"] == pytest.approx(0.8, abs=0.04)


def test_validation_set_is_fixed_and_disjoint():
    cfg = TrainConfig(train_seeds_per_domain=8, validation_seeds_per_domain=2)
    val = scenario_items(cfg, "validation")
    assert len(val) == 16
    assert {it.scenario.seed for it in val}.isdisjoint({it.scenario.seed for it in scenario_items(cfg)})
    assert [it.scenario_id for it in val] == [it.scenario_id for it in scenario_items(cfg, "validation")]


def test_the_paper_task_rows_carry_a_conversational_prompt_and_name_their_item():
    from negolib.games.multi_issue.training import paper_task, roundtrip_dialogue

    cfg = TrainConfig(train_seeds_per_domain=1, train_domains=("job_offer",), validation_seeds_per_domain=1)
    task = paper_task(cfg)
    assert task.train_items == tuple(scenario_items(cfg)) and task.role == "seller"
    first = task.first_prompt(task.train_items[0], "training")
    assert first[0]["role"] == "system" and first[-1]["role"] == "user"
    rows = item_rows(task.train_items, [first])
    assert rows[0]["item"] == 0 and rows[0]["scenario_id"] == task.train_items[0].scenario_id
    assert env_config(cfg).accept_applies_terms
    assert task.roundtrip_dialogue("training") == roundtrip_dialogue(task.train_items[0], cfg)
    assert "assistant" in {m["role"] for m in task.roundtrip_dialogue("training")}  # a multi-turn chat
    assert set(task.default_opponents()) == set(cfg.buyer_mixture)


def test_the_paper_task_dataset():
    pytest.importorskip("datasets")
    from negolib.games.multi_issue.training import paper_task

    ds = paper_task(TrainConfig(train_seeds_per_domain=1)).dataset("training")
    assert len(ds) == 8 and "prompt" in ds.column_names and "buyer" in ds.column_names
