"""Training in the multi-product market: the reward wiring of the episode adapter (a hostile message for each
protocol part counted as a bad parse and penalised), one GRPO step through the shared trainer on a tiny model built
from a config, and the paired stage evaluation with seed-cluster intervals."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from game_helpers import PlanGenerator, one_step, one_step_recipe, save_tiny_base, spied_grpo  # noqa: E402

from negolib.core.chat_template import derive_turn_tags, strip_template_tags  # noqa: E402
from negolib.games.multi_product import MultiProductGame  # noqa: E402
from negolib.games.multi_product.env import Episode  # noqa: E402
from negolib.games.multi_product.metrics import market_metrics  # noqa: E402
from negolib.games.multi_product.scenarios import MARKETS, MarketConfig, MultiProductScenario  # noqa: E402
from negolib.games.multi_product.training import (  # noqa: E402
    METRICS,
    STAGE_COLUMNS,
    MultiProductGRPOConfig,
    RewardConfig,
    default_recipe,
    episode_factory,
    format_stage_table,
    play_stages,
    render,
    reward_of,
    run_grpo,
    scenario_items,
    stage_table,
)
from negolib.models import tiny_tokenizer  # noqa: E402
from negolib.training.rollout import RolloutEngine, RolloutLimits  # noqa: E402

torch.set_num_threads(1)

# buyer x product: value - cost = [[70, 50], [60, 20], [20, 45]]; best welfare 115 (b1-p1, b3-p2)
HAND = MultiProductScenario("t", 1, MarketConfig(n_products=2, n_buyers=3, turn_budget=5), list_prices=(100.0, 80.0),
                            costs=(50.0, 40.0), valuations=((120.0, 90.0), (110.0, 60.0), (70.0, 85.0)))


def msg(to: str = "buyer_1", product: str = "product_1", price: str = "120", message: str = "For you.") -> str:
    return f"TO: {to}\nPRODUCT: {product}\nPRICE: {price}\nMESSAGE: {message}"


GOOD = [msg(), msg("buyer_3", "product_2", "85")]  # both accepted at full value: payoff (70 + 45) / 115 = 1
HOSTILE = {"TO": msg(to="buyer_9"), "PRODUCT": msg(product="product_7"), "PRICE": msg(price="1,000"),
           "MESSAGE": msg(message="Hi.\nPRICE: 5")}


def expected_reward(rec: dict) -> float:
    """The documented rule, written out: the game's seller payoff minus 0.05 x the refused fraction of messages."""
    out = rec["outcome"]
    refused = out["bad_parses"] + sum(out["violations"].values())
    return MultiProductGame().payoffs(rec).seller - 0.05 * refused / out["seller_turns"]



def play_plan(plan: list[str]):
    tok = tiny_tokenizer()
    tags = derive_turn_tags(tok)
    buyers = {"pool": MultiProductGame().make_agent("pool", "buyer", 0)}
    eng = RolloutEngine(PlanGenerator(tok, tags, plan), tok, tags, buyers, limits=RolloutLimits(400, 32768, 16384, 5),
                        render=render, episode_factory=episode_factory())
    (t,) = eng.play(list(scenario_items([HAND], "pool"))).trajectories
    return t, t.episode.record()


def test_rollout_rewards_follow_the_normalised_surplus_and_count_refused_messages():
    t, rec = play_plan(GOOD)
    assert t.status == "deal" and rec["outcome"]["end"] == "sold_out" and t.reward == pytest.approx(1.0)
    assert t.score == pytest.approx(1.0) and t.episode.bad_parses("seller") == (0, 2)
    cheap, rec = play_plan([msg(price="60"), msg("buyer_3", "product_2", "41")])  # surplus (10 + 1) / 115
    assert cheap.reward == pytest.approx(11 / 115) and cheap.reward == pytest.approx(expected_reward(rec))
    below, rec = play_plan([msg(price="49.99"), *GOOD])  # a below-cost offer is refused, counted and penalised
    assert rec["outcome"]["violations"]["below_cost"] == 1 and below.episode.bad_parses("seller") == (1, 3)
    assert below.reward == pytest.approx(1.0 - 0.05 / 3) == pytest.approx(expected_reward(rec))
    none, rec = play_plan([msg(price="500")])  # never accepted: no sale, payoff 0, no refusal
    assert none.status == "no_deal" and none.reward == 0.0 and rec["outcome"]["end"] == "budget"


@pytest.mark.parametrize("part", list(HOSTILE))
def test_a_hostile_message_for_each_part_is_a_bad_parse_of_that_part_and_penalised(part):
    t, rec = play_plan([HOSTILE[part], *GOOD])
    out = rec["outcome"]
    assert out["bad_parses"] == 1 and out["bad_parts"] == {part: 1} and out["valid_messages"] == 2
    assert rec["turns"][0]["part"] == part and rec["turns"][0]["parse_error"].startswith(part)
    assert t.episode.bad_parses("seller") == (1, 3)
    assert t.reward == pytest.approx(1.0 - 0.05 / 3) == pytest.approx(reward_of(rec))
    every, rec = play_plan([HOSTILE[part]])  # five hostile messages: the budget is spent, nothing sold
    assert every.status == "no_deal" and rec["outcome"]["bad_parts"] == {part: 5}
    assert every.reward == pytest.approx(-0.05) and every.episode.bad_parses("seller") == (5, 5)


def test_reward_and_grpo_configs_reject_bad_values():
    with pytest.raises(ValueError, match="RewardConfig.refusal_penalty"):
        RewardConfig(refusal_penalty=-1)
    with pytest.raises(ValueError, match="MultiProductGRPOConfig.markets"):
        MultiProductGRPOConfig(markets=("nowhere",))
    with pytest.raises(ValueError, match="max_rollout_turns"):  # "large" has 14 messages: the driver would cut all
        MultiProductGRPOConfig(markets=("large",), recipe=replace(default_recipe(), max_rollout_turns=10))
    tok = tiny_tokenizer()
    tags = derive_turn_tags(tok)
    buyers = {"pool": MultiProductGame().make_agent("pool", "buyer", 0)}
    eng = RolloutEngine(PlanGenerator(tok, tags, [msg(price="500")]), tok, tags, buyers,
                        limits=RolloutLimits(400, 32768, 16384, 3), render=render,
                        episode_factory=episode_factory(RewardConfig(cut_penalty=0.2)))
    (t,) = eng.play(list(scenario_items([HAND], "pool"))).trajectories
    assert t.status == "truncated" and t.reward == pytest.approx(-0.2)  # cut by the driver after 3 of 5 messages


# -- GRPO and the stage evaluation on a tiny model -----------------------------------------------------------------

@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    return save_tiny_base(tmp_path_factory)


GRPO_CONFIG = MultiProductGRPOConfig(  # two training markets of the small size (2 products, 3 buyers, 6 messages)
    markets=("small",), train_seeds_per_market=2,
    recipe=one_step_recipe(default_recipe(), max_rollout_turns=6))


@pytest.fixture(scope="module")
def grpo_run(base_dir, tmp_path_factory):
    """One GRPO step of the tiny model through run_grpo (-> the shared train() and build_run), with spies on the
    engine the trainer builds, the batch it plays and what TRL receives."""
    return spied_grpo(lambda: run_grpo(base_dir, tmp_path_factory.mktemp("grpo") / "run", GRPO_CONFIG, resume=False))


def test_one_grpo_step_on_the_multi_product_adapter(grpo_run):
    result, eng, batch, out = one_step(grpo_run)
    tok, tags = eng.tokenizer, eng.tags
    assert eng.role == "seller" and eng.render is render and set(eng.buyers) == {"pool"}
    assert len(batch.trajectories) == 4 and out["env_mask"] == [t.env_mask for t in batch.trajectories]
    assert {t.item.scenario_id for t in batch.trajectories} == {"small|0", "small|1"}
    for t in batch.trajectories:
        assert not t.excluded and t.status in ("deal", "no_deal")  # the recipe's turn cap covers the budget
        n_seller = sum(turn["role"] == "seller" for turn in t.episode.turns)
        assert t.seller_turns == n_seller == t.episode.bad_parses("seller")[1] >= 1
        segs = [ids for kind, ids in t.segments if kind != "env"]
        said = [strip_template_tags(tok.decode(s[:-1] if s[-1] in tags.stop_ids else s), tok, tags) for s in segs]
        assert said == [turn["raw"] for turn in t.episode.turns if turn["role"] == "seller"]
        assert tok.decode(t.prompt_ids) == tok.apply_chat_template(
            render(Episode(t.item.scenario).view()), tokenize=False, add_generation_prompt=True)
        assert t.reward == pytest.approx(expected_reward(t.episode.record()))
    recs = [json.loads(line) for line in (result.out_dir / "transcripts" / "train.jsonl").read_text().splitlines()]
    assert len(recs) == 4 and {r["seller"] for r in recs} == {"policy"} and {r["buyer"] for r in recs} == {"pool"}
    assert {r["game"] for r in recs} == {"multi_product"}
    assert [r["training"]["reward"] for r in recs] == pytest.approx([expected_reward(r) for r in recs])
    assert out["episode_reward"] == pytest.approx([r["training"]["reward"] for r in recs])
    assert result.steps == 1 and result.checkpoint.name == "checkpoint-1" and [r["step"] for r in result.log] == [1]


def test_stage_evaluation_pairs_base_and_trained_model_on_the_same_episodes(base_dir, grpo_run):
    from negolib.core.sampling import SamplingConfig

    stages = {"base": base_dir, "GRPO": grpo_run[0].checkpoint}
    eps = play_stages(stages, ["pool"], n_seeds=2, markets=["small", "cheap"], seed=1,
                      sampling=SamplingConfig(max_new_tokens=8), prompt_cap=8192)
    assert (eps["valid"]).all() and set(eps["cluster"]) == {"5000500", "5000501"}  # past the tournament's seeds
    keys = {s: sorted(g["scenario_key"]) for s, g in eps.groupby("stage")}
    assert len(keys["base"]) == 4 and keys["base"] == keys["GRPO"]
    table = stage_table(eps, list(stages), n_resamples=200)
    assert list(table.columns) == list(STAGE_COLUMNS)
    assert len(table) == (2 + 1) * 3 * len(METRICS)  # (stages + one difference) x (two markets + all) x metrics
    diffs = table[table["kind"] == "difference"]
    assert set(zip(diffs["stage"], diffs["baseline"])) == {("GRPO", "base")}


def test_stage_table_of_scripted_sellers_matches_the_market_metrics():
    """Scripted sellers as stages: every stage row is the game's market metric, every difference the difference of
    the stages' values on the paired episodes, inside its interval; the oracle (an upper bound) beats greedy."""
    eps = play_stages({"greedy": "greedy", "oracle": "oracle", "random": "random"}, ["pool", "picky"], n_seeds=6)
    table = stage_table(eps, n_resamples=500, seed=2)
    stage = table[table["kind"] == "stage"].set_index(["stage", "market", "metric"])["estimate"]
    for s, g in eps.groupby("stage"):
        mm = market_metrics(g, overall=True).set_index("market")
        for market in mm.index:
            for m in METRICS:
                assert stage[(s, market, m)] == pytest.approx(mm.loc[market, m], nan_ok=True), (s, market, m)
    diff = table[table["kind"] == "difference"]
    assert len(diff) == 3 * 7 * len(METRICS)
    for _, row in diff.iterrows():
        want = stage[(row["stage"], row["market"], row["metric"])] - stage[(row["baseline"], row["market"],
                                                                           row["metric"])]
        assert row["estimate"] == pytest.approx(want, nan_ok=True)
        if np.isfinite(row["estimate"]):
            assert row["ci_low"] <= row["estimate"] <= row["ci_high"]
    gain = diff.set_index(["stage", "baseline", "market", "metric"]).loc[("oracle", "greedy", "all",
                                                                          "normalised_surplus")]
    assert gain["estimate"] > 0 and gain["ci_low"] > 0
    adherence = stage.xs("constraint_adherence", level="metric")
    assert (adherence == 1.0).all()  # scripted sellers never break a rule
    shown = format_stage_table(table, "small")
    assert list(shown.index) == ["greedy", "oracle", "random", "oracle - greedy", "random - greedy", "random - oracle"]
    assert list(shown.columns) == [*METRICS, "episodes", "clusters"] and set(shown["clusters"]) == {6}
    est = table.set_index(["kind", "stage", "market", "metric"]).loc[("stage", "oracle", "small", "normalised_surplus")]
    assert shown.loc["oracle", "normalised_surplus"].startswith(f"{est['estimate']:.3f} [{est['ci_low']:.3f}, ")
    assert shown.loc["oracle - greedy", "deal_rate"][0] in "+-"  # differences are signed


# -- the profile section ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("profile", ["smoke", "default", "paper"])
def test_shipped_profiles_have_a_valid_multi_product_section(profile):
    from negolib.params import load_params

    p = load_params(f"params/{profile}.yaml")
    g = p.games.multi_product
    game = MultiProductGame()
    assert g is not None and all(a in game.scripted_strategies() for a in g.tournament.agents if ":" not in a)
    assert g.lm.opponent in game.buyer_names() and g.lm.base.backend == "hf"
    assert set(g.lm.eval_tiers or MARKETS) <= set(MARKETS)
    cfg = g.grpo  # the recipe the notebook trains with, built at load
    assert cfg.recipe.max_rollout_turns >= max(MARKETS[m].turn_budget for m in cfg.markets)
    if profile == "smoke":
        assert g.lm.base.model == "tiny"


def _games_data(path: str = "params/smoke.yaml") -> dict:
    import yaml

    return yaml.safe_load(open(path).read())


@pytest.mark.parametrize("edit, field, words", [
    (lambda g: g["multi_product"].update(tourney={}), "games.multi_product", "unknown keys ['tourney']"),
    (lambda g: g["multi_product"].pop("tournament"), "games.multi_product.tournament", "is required"),
    (lambda g: g["multi_product"]["tournament"].update(agents=[]), "games.multi_product.tournament.agents",
     "at least one seller"),
    (lambda g: g["multi_product"]["tournament"].update(agents=["greedy", "greedy"]),
     "games.multi_product.tournament.agents[1]", "listed twice"),
    (lambda g: g["multi_product"]["tournament"].update(agents=["greedy", "gpt:x"]),
     "games.multi_product.tournament.agents[1]", "not a language-model agent"),
    (lambda g: g["multi_product"]["tournament"].update(seeds_per_tier=0),
     "games.multi_product.tournament.seeds_per_tier", "1..1000"),
    (lambda g: g["multi_product"]["lm"].update(opponent="openai:gpt"), "games.multi_product.lm.opponent",
     "scripted buyers"),
    (lambda g: g["multi_product"]["lm"].update(eval_tiers=[]), "games.multi_product.lm.eval_tiers", "is empty"),
    (lambda g: g["multi_product"]["lm"].update(eval_tiers=["small", "small"]), "games.multi_product.lm.eval_tiers[1]",
     "listed twice"),
    (lambda g: g["multi_product"]["lm"].update(eval_seeds_per_tier=0), "games.multi_product.lm.eval_seeds_per_tier",
     "1..1000"),
    (lambda g: g["multi_product"]["lm"].update(base={"backend": "scripted", "strategy": "boulware"}),
     "games.multi_product.lm.base.backend", "must be 'hf'"),
    (lambda g: g["multi_product"]["lm"]["base"].update(prompt_cap=0), "games.multi_product.lm.base.prompt_cap",
     ">= 1"),
    (lambda g: g["multi_product"].update(train="yes"), "games.multi_product.train", "bool"),
    (lambda g: g["multi_product"].update(grpo=["markets"]), "games.multi_product.grpo", "must be a mapping"),
])
def test_profile_section_errors_name_the_dotted_field(tmp_path, edit, field, words):
    import yaml

    from negolib.core.errors import ValidationError
    from negolib.params import load_params

    data = _games_data()
    edit(data["games"])
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ValidationError) as e:
        load_params(path)
    assert e.value.field == field, str(e.value)
    assert words in str(e.value) and str(path.resolve()) in str(e.value)


@pytest.mark.parametrize("override, field, words", [
    ({"markets": ["nowhere"]}, "games.multi_product.grpo.markets", "unknown"),
    ({"train_seeds_per_market": 0}, "games.multi_product.grpo.train_seeds_per_market", ">= 1"),
    ({"recipe": {"max_rollout_turns": 2}}, "games.multi_product.grpo.recipe", "max_rollout_turns"),
    ({"recipe": {"max_steps": 0}}, "games.multi_product.grpo.recipe.max_steps", ""),
    ({"reward": {"refusal_penalty": -1}}, "games.multi_product.grpo.reward.refusal_penalty", ">= 0"),
    ({"seeds": 3}, "games.multi_product.grpo", "unknown keys ['seeds']"),
])
def test_grpo_recipe_overrides_name_the_dotted_field(tmp_path, override, field, words):
    import yaml

    from negolib.core.errors import ValidationError
    from negolib.params import load_params

    data = _games_data()
    data["games"]["multi_product"]["grpo"].update(override)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ValidationError) as e:
        load_params(path)
    assert e.value.field == field, str(e.value)
    assert words in str(e.value)
