"""Training / validation scenario sets of the paper's game: eight domains, buyers fixed per scenario."""

from __future__ import annotations

import pytest

from negolib.errors import ValidationError
from negolib.training.config import TrainConfig
from negolib.training.data import buyer_shares
from negolib.training.paper_game import (
    draw_buyer,
    env_config,
    item_from_row,
    scenario_items,
    to_rows,
    training_domains,
)


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


def test_rows_carry_a_conversational_prompt_and_rebuild_the_scenario():
    cfg = TrainConfig(train_seeds_per_domain=1, train_domains=("job_offer",))
    items = scenario_items(cfg)
    rows = to_rows(items, env_config(cfg), "training")
    assert rows[0]["prompt"][0]["role"] == "system" and rows[0]["prompt"][-1]["role"] == "user"
    assert {"domain", "seed", "buyer", "scenario_id"} <= set(rows[0])
    back = item_from_row(rows[0])
    assert back.scenario == items[0].scenario and back.buyer == items[0].buyer
    assert env_config(cfg).accept_applies_terms


def test_build_dataset():
    pytest.importorskip("datasets")
    from negolib.training.paper_game import build_dataset

    ds = build_dataset(TrainConfig(train_seeds_per_domain=1))
    assert len(ds) == 8 and "prompt" in ds.column_names and "buyer" in ds.column_names
