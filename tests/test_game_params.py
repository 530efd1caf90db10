"""The games' profile sections (``games.bilateral``, ``games.multi_buyer``, ``games.multi_product``) are typed and
checked when the profile loads: a name a game does not know, a recipe value its class refuses or an unknown key is a
:class:`~negolib.core.errors.ValidationError` naming the file and the dotted field, never a failure minutes into
notebooks 10-12; the notebooks hold no validation code of their own."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from negolib.core.errors import ValidationError
from negolib.params import load_params

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ("smoke", "default", "course", "paper")
GAME_NOTEBOOKS = ("10_bilateral_trade", "11_multi_buyer", "12_multi_product")


def _smoke() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "params" / "smoke.yaml").read_text())


def _refused(tmp_path: Path, edit: Any, field: str, words: str) -> None:
    """``edit`` on the smoke profile's ``games`` section makes loading fail, naming the file, ``field`` and
    ``words``."""
    data = _smoke()
    edit(data["games"])
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ValidationError) as e:
        load_params(path)
    assert e.value.field == field, str(e.value)
    assert words in str(e.value) and str(path.resolve()) in str(e.value), str(e.value)


# -- what the games know --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("edit, field, words", [
    # a name of the paper's game, not of this one
    (lambda g: g["bilateral"]["tournament"]["agents"].append("hardheaded"),
     "games.bilateral.tournament.agents[5]", "no agent 'hardheaded'"),
    (lambda g: g["bilateral"]["lm"].update(opponent="tough_guy"), "games.bilateral.lm.opponent",
     "no agent 'tough_guy'"),
    (lambda g: g["bilateral"]["lm"].update(eval_tiers=["1m"]), "games.bilateral.lm.eval_tiers[0]",
     "unknown tier '1m'"),
    (lambda g: g["multi_buyer"]["tournament"]["agents"].append("nobody"),
     "games.multi_buyer.tournament.agents[4]", "no agent 'nobody'"),
    (lambda g: g["multi_buyer"]["tournament"]["agents"].append("pool"),
     "games.multi_buyer.tournament.agents[4]", "'pool' is a buyer"),
    (lambda g: g["multi_buyer"]["lm"].update(opponent="tough_guy"), "games.multi_buyer.lm.opponent",
     "no buyer agent 'tough_guy'"),
    (lambda g: g["multi_buyer"]["lm"].update(opponent="greedy"), "games.multi_buyer.lm.opponent",
     "no buyer agent 'greedy'"),  # a seller is not a buyer
    (lambda g: g["multi_buyer"]["lm"].update(eval_tiers=["nowhere"]), "games.multi_buyer.lm.eval_tiers[0]",
     "unknown market 'nowhere'"),
    (lambda g: g["multi_product"]["tournament"]["agents"].append("picky"),
     "games.multi_product.tournament.agents[3]", "'picky' is a buyer"),
    (lambda g: g["multi_product"]["tournament"]["agents"].append("boulware"),
     "games.multi_product.tournament.agents[3]", "no agent 'boulware'"),
    (lambda g: g["multi_product"]["lm"].update(opponent="greedy"), "games.multi_product.lm.opponent",
     "no buyer agent 'greedy'"),
    (lambda g: g["multi_product"]["lm"].update(eval_tiers=["nowhere"]), "games.multi_product.lm.eval_tiers[0]",
     "unknown market 'nowhere'"),
    # the evaluation must not replay the tournament's scenarios (SFT learns from them)
    (lambda g: g["bilateral"]["tournament"].update(seeds_per_tier=1000), "games.bilateral.lm.eval_seeds_per_tier",
     "played in the tournament"),
    (lambda g: g["multi_product"]["tournament"].update(seeds_per_tier=600),
     "games.multi_product.lm.eval_seeds_per_tier", "played in the tournament"),
    (lambda g: g["multi_buyer"]["lm"].update(eval_seeds_per_tier=600), "games.multi_buyer.lm.eval_seeds_per_tier",
     "too many reserved evaluation seeds"),
])
def test_names_a_game_does_not_know_are_refused_at_load(tmp_path, edit, field, words):
    _refused(tmp_path, edit, field, words)


# -- the recipes ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("edit, field, words", [
    (lambda g: g["bilateral"]["sft"]["config"].update(epochs=0), "games.bilateral.sft.config.epochs", ">= 1"),
    (lambda g: g["bilateral"]["sft"]["config"].update(batch_size=0), "games.bilateral.sft.config.batch_size",
     ">= 1"),
    (lambda g: g["multi_buyer"]["sft"]["config"].update(epochs=0), "games.multi_buyer.sft.config.epochs", ">= 1"),
    (lambda g: g["multi_product"]["sft"]["config"].update(batch_size=0),
     "games.multi_product.sft.config.batch_size", ">= 1"),
    (lambda g: g["multi_product"]["sft"]["config"].update(epoch=2), "games.multi_product.sft.config",
     "unknown keys ['epoch']"),
    (lambda g: g["multi_buyer"]["grpo"].update(turn_budget=0), "games.multi_buyer.grpo.turn_budget", "1..1000"),
    (lambda g: g["bilateral"]["grpo"]["recipe"].update(max_steps=0), "games.bilateral.grpo.recipe.max_steps",
     ">= 1"),
    (lambda g: g["multi_buyer"]["grpo"]["recipe"].update(max_steps=0), "games.multi_buyer.grpo.recipe.max_steps",
     ">= 1"),
    (lambda g: g["multi_product"]["grpo"]["recipe"].update(max_steps=0),
     "games.multi_product.grpo.recipe.max_steps", ">= 1"),
    (lambda g: g["bilateral"]["grpo"].update(tier=["1k"]), "games.bilateral.grpo", "unknown keys ['tier']"),
    (lambda g: g["multi_buyer"]["grpo"].update(turns=3), "games.multi_buyer.grpo", "unknown keys ['turns']"),
    (lambda g: g["multi_product"]["grpo"].update(seeds=3), "games.multi_product.grpo", "unknown keys ['seeds']"),
    (lambda g: g["bilateral"]["grpo"]["recipe"].update(max_step=2), "games.bilateral.grpo.recipe.max_step",
     "unknown key"),
    (lambda g: g["multi_product"]["grpo"].update(markets=["nowhere"]), "games.multi_product.grpo.markets",
     "unknown"),
    (lambda g: g["bilateral"]["grpo"].update(reward={"ir_penalty": -1}), "games.bilateral.grpo.reward.ir_penalty",
     ">= 0"),
])
def test_recipe_values_are_refused_at_load(tmp_path, edit, field, words):
    _refused(tmp_path, edit, field, words)


# -- the shipped profiles -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("profile", PROFILES)
def test_shipped_profiles_load_with_typed_game_sections(profile):
    """Every profile loads; its game sections hold the recipes the notebooks train with (the game's defaults under
    the profile's overrides), seeded as the notebooks seeded them."""
    from negolib.games.bilateral.training import BilateralGRPOConfig, BilateralSFTConfig
    from negolib.games.multi_buyer.training import MultiBuyerGRPOConfig
    from negolib.games.multi_product.training import MultiProductGRPOConfig
    from negolib.games.sft import SFTConfig

    p = load_params(ROOT / "params" / f"{profile}.yaml")
    g = p.games
    assert isinstance(g.bilateral.grpo, BilateralGRPOConfig) and isinstance(g.bilateral.sft.config, BilateralSFTConfig)
    assert g.bilateral.sft.config.seed == p.seed
    assert isinstance(g.multi_buyer.grpo, MultiBuyerGRPOConfig) and g.multi_buyer.grpo.recipe.seed == p.seed
    assert isinstance(g.multi_product.grpo, MultiProductGRPOConfig)
    for market in (g.multi_buyer, g.multi_product):
        assert market.sft is None or (isinstance(market.sft.config, SFTConfig) and market.sft.config.seed == p.seed)


def test_recipes_apply_the_profiles_overrides_over_the_games_defaults():
    from negolib.games.bilateral.training import BilateralGRPOConfig, BilateralSFTConfig
    from negolib.games.multi_buyer.training import default_recipe

    g = load_params(ROOT / "params" / "smoke.yaml").games
    assert g.bilateral.sft.config.epochs == 1 and g.bilateral.sft.config.batch_size == 2
    assert g.bilateral.sft.config.learning_rate == BilateralSFTConfig().learning_rate  # the rest: the game's
    grpo, base = g.bilateral.grpo, BilateralGRPOConfig()
    assert grpo.tiers == ("1k",) and grpo.recipe.max_steps == 1 and grpo.reward == base.reward
    assert grpo.recipe.learning_rate == base.recipe.learning_rate  # a nested override keeps the game's recipe
    assert g.multi_buyer.grpo.turn_budget == 2 and g.multi_buyer.grpo.recipe.max_rollout_turns == 3
    assert g.multi_buyer.grpo.recipe.buyer_mixture == default_recipe().buyer_mixture


def test_a_missing_game_section_is_named_when_asked_for(tmp_path):
    data = _smoke()
    data.pop("games")
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    p = load_params(path)
    assert p.games.bilateral is None
    with pytest.raises(ValidationError) as e:
        p.game("bilateral", "notebook 10")
    assert e.value.field == "games.bilateral" and "notebook 10" in str(e.value) and str(path.resolve()) in str(e.value)
    assert load_params(ROOT / "params" / "smoke.yaml").game("multi_product", "notebook 12").train


# -- the notebooks ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", GAME_NOTEBOOKS)
def test_game_notebooks_hold_no_validation_code(name):
    """Notebooks 10-12 read their checked sections; every check of the profile is the loader's."""
    cells = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())["cells"]
    paired = (ROOT / "notebooks" / f"{name}.py").read_text()
    for source in [*("".join(c["source"]) for c in cells if c["cell_type"] == "code"), paired]:
        for pattern in (r"\bValidationError\b", r"\bcheck_game_agents\b", r"\brecipe\(P\b",
                        r"raise (ValueError|ValidationError)\(f?\"?\{?P\.source"):
            assert not re.search(pattern, source), f"{name}: validation code ({pattern}) in a cell"
