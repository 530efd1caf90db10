"""Training in the multi-buyer market: the reward wiring through the shared rollout engine, one GRPO step through
run_grpo (the shared train()) on a tiny model built from a config, and the stage evaluation frame."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from game_helpers import PlanGenerator, one_step, one_step_recipe, save_tiny_base, spied_grpo  # noqa: E402

from negolib.core.chat_template import derive_turn_tags, strip_template_tags  # noqa: E402
from negolib.games.multi_buyer.agents import HFSeller, LMOptions  # noqa: E402
from negolib.games.multi_buyer.buyers import STYLES, ScriptedBuyers  # noqa: E402
from negolib.games.multi_buyer.env import Episode  # noqa: E402
from negolib.games.multi_buyer.game import MultiBuyerGame  # noqa: E402
from negolib.games.multi_buyer.metrics import market_metrics  # noqa: E402
from negolib.games.multi_buyer.protocol import SellerAction, format_tool_call  # noqa: E402
from negolib.games.multi_buyer.scenarios import make_scenario  # noqa: E402
from negolib.games.multi_buyer.training import (  # noqa: E402
    METRICS,
    STAGE_COLUMNS,
    MultiBuyerGRPOConfig,
    RewardConfig,
    TrainingEpisode,
    default_recipe,
    episode_factory,
    market_scenarios,
    play_stages,
    render,
    run_grpo,
    scenario_items,
    stage_table,
)
from negolib.games.toolcalls import reply_turn  # noqa: E402
from negolib.models import tiny_tokenizer  # noqa: E402
from negolib.training.rollout import RolloutEngine, RolloutLimits  # noqa: E402

torch.set_num_threads(1)


def call(to: int, offer: float | None = None, message: str = "Hello.") -> str:
    return f"{message}\n{format_tool_call(SellerAction(to, offer))}"


def expected_reward(rec: dict) -> float:
    """The documented rule, written out: the game's normalised surplus; a sale below cost costs 0.3 x (1 + the
    fraction of the cost lost); -0.05 times the seller's bad-parse fraction."""
    out, cost = rec["outcome"], rec["cost"]
    r = MultiBuyerGame().payoffs(rec).seller
    loss = sum(max(0.0, cost - d["price"]) for d in out["deals"])
    if loss > 0:
        r -= 0.3 * (1 + min(1.0, loss / cost))
    return r - 0.05 * out["seller_bad_parses"] / out["seller_turns"]



def test_rollout_rewards_follow_the_normalised_surplus():
    tok = tiny_tokenizer()
    tags = derive_turn_tags(tok)
    buyers = {"pool": ScriptedBuyers()}  # structured tool calls, as the game's pool
    got = {}
    for sc in market_scenarios([0, 1], turn_budget=3):
        k = sc.top_buyer
        bid = np.floor(STYLES[sc.styles[k]].open * sc.budgets[k] * 100) / 100  # the top buyer's first bid
        low = round(sc.cost / 2, 2)  # below cost, and below every style's opening bid here
        plans = {
            "hold": [call(0, 10_000.0)],  # never accepted: the budget runs out without a deal
            "top": [call(k, bid)],  # the top buyer's own first bid: accepted at once
            "probe_then_top": [call((k + 1) % 4), call(k, bid)],
            "loss": [call(k, low)],  # accepted below cost
            "bad": ['{"name": "message_buyer"}', call(k, bid)],  # a bad parse, then the sale
            "prose": ["Let me think."],  # no call: every turn wasted
        }
        for name, plan in plans.items():
            eng = RolloutEngine(PlanGenerator(tok, tags, plan), tok, tags, buyers,
                                limits=RolloutLimits(64, 16384, 8192, 4), render=render,
                                episode_factory=episode_factory())
            (t,) = eng.play(scenario_items([sc])).trajectories
            rec = t.episode.record()
            assert t.status in ("deal", "no_deal") and t.reward == pytest.approx(expected_reward(rec))
            assert t.score == pytest.approx(MultiBuyerGame().payoffs(rec).seller)
            got[(sc.seed, name)] = (t.reward, rec)
        share = (bid - sc.cost) / sc.best_surplus
        assert got[(sc.seed, "hold")][0] == 0.0 and got[(sc.seed, "prose")][0] == pytest.approx(-0.05)
        assert got[(sc.seed, "top")][0] == pytest.approx(share) and 0.3 < share < 1
        assert got[(sc.seed, "probe_then_top")][0] == pytest.approx(share)
        assert got[(sc.seed, "bad")][0] == pytest.approx(share - 0.05 / 2)
        lost = (sc.cost - low) / sc.cost
        assert got[(sc.seed, "loss")][1]["outcome"]["deal"]
        assert got[(sc.seed, "loss")][0] == pytest.approx(-0.3 * (1 + lost))
    # a driver cut (fewer seller turns allowed than the market's budget) gets the floor
    eng = RolloutEngine(PlanGenerator(tok, tags, [call(0, 10_000.0)]), tok, tags, buyers,
                        limits=RolloutLimits(64, 16384, 8192, 2), render=render, episode_factory=episode_factory())
    (t,) = eng.play(scenario_items(market_scenarios([0], turn_budget=3))).trajectories
    assert t.status == "truncated" and t.reward == pytest.approx(-RewardConfig().cut_penalty)


def test_the_adapter_gives_the_view_of_the_party_to_move_only():
    ep = TrainingEpisode(Episode(make_scenario("base", 0)))
    assert ep.to_move == "seller" and ep.view("seller").role == "seller"
    with pytest.raises(ValueError, match="the seller moves"):
        ep.view("buyer")
    ep.step(call(2, 150.0))
    assert ep.view("buyer").buyer == 2 and ep.bad_parses("seller") == (0, 1)


def test_config_checks():
    with pytest.raises(ValueError, match="unknown"):
        MultiBuyerGRPOConfig(markets=("nowhere",))
    with pytest.raises(ValueError, match="max_rollout_turns"):
        MultiBuyerGRPOConfig(recipe=replace(default_recipe(), max_rollout_turns=4))
    assert MultiBuyerGRPOConfig(turn_budget=3, recipe=replace(default_recipe(), max_rollout_turns=4)).turn_budget == 3
    with pytest.raises(ValueError, match="below_cost_penalty"):
        RewardConfig(below_cost_penalty=-1)
    short = market_scenarios([5], ["base", "bimodal"], turn_budget=2)
    assert [s.key for s in short] == ["base|5", "bimodal|5"] and {s.config.turn_budget for s in short} == {2}
    assert short[0].budgets == make_scenario("base", 5).budgets  # the budget changes no draw


# -- GRPO and the stage evaluation on a tiny model ---------------------------------------------------------------

@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    return save_tiny_base(tmp_path_factory)


GRPO_CONFIG = MultiBuyerGRPOConfig(  # training seeds 0 and 1 of the base market, 2 seller turns each
    train_seeds_per_market=2, turn_budget=2,
    recipe=one_step_recipe(default_recipe(), max_rollout_turns=3))


@pytest.fixture(scope="module")
def grpo_run(base_dir, tmp_path_factory):
    """One GRPO step of the tiny model through run_grpo (-> the shared train() and build_run), with spies on the
    engines the trainer builds, the batches they play and what TRL receives."""
    return spied_grpo(lambda: run_grpo(base_dir, tmp_path_factory.mktemp("grpo") / "run", GRPO_CONFIG, resume=False))


def test_one_grpo_step_on_the_multi_buyer_adapter(grpo_run):
    result, eng, batch, out = one_step(grpo_run)
    tok, tags = eng.tokenizer, eng.tags
    assert eng.role == "seller" and eng.render is render and set(eng.buyers) == {"pool"}
    assert len(batch.trajectories) == 4 and out["env_mask"] == [t.env_mask for t in batch.trajectories]
    assert {t.item.scenario_id for t in batch.trajectories} == {"base|0", "base|1"}
    for t in batch.trajectories:
        assert not t.excluded and t.seller_turns == t.episode.bad_parses("seller")[1] == 2  # the budget of 2
        segs = [ids for kind, ids in t.segments if kind != "env"]
        policy = [i for i, m in zip(t.completion_ids, t.env_mask) if m]
        assert policy == [i for s in segs for i in s] and len(segs) == t.seller_turns
        said = [strip_template_tags(tok.decode(s[:-1] if s[-1] in tags.stop_ids else s), tok, tags) for s in segs]
        assert said == [turn["raw"] for turn in t.episode.turns if turn["role"] == "seller"]
        env_text = tok.decode([i for i, m in zip(t.completion_ids, t.env_mask) if not m])
        assert "Turn 2 of 2" in env_text  # the second turn's user message was appended as environment tokens
        first = render(Episode(t.item.scenario).view())
        assert tok.decode(t.prompt_ids) == tok.apply_chat_template(first, tokenize=False, add_generation_prompt=True)
        assert t.reward == pytest.approx(expected_reward(t.episode.record()))
    recs = [json.loads(line) for line in (result.out_dir / "transcripts" / "train.jsonl").read_text().splitlines()]
    assert len(recs) == 4 and {r["game"] for r in recs} == {"multi_buyer"}
    assert [r["training"]["reward"] for r in recs] == pytest.approx([expected_reward(r) for r in recs])
    assert out["episode_reward"] == pytest.approx([r["training"]["reward"] for r in recs])
    assert out["episode_score"] == pytest.approx([MultiBuyerGame().payoffs(r).seller for r in recs])
    assert result.steps == 1 and result.checkpoint.name == "checkpoint-1" and [r["step"] for r in result.log] == [1]
    again = run_grpo(base_dir, result.out_dir, GRPO_CONFIG)  # a finished run returns its checkpoint at once
    assert again.checkpoint == result.checkpoint and again.steps == 1


def test_stage_evaluation_pairs_base_and_grpo_on_the_same_markets(base_dir, grpo_run):
    from negolib.core.sampling import SamplingConfig

    stages = {"base": base_dir, "GRPO": grpo_run[0].checkpoint, "probe_all": "probe_all"}
    eps = play_stages(stages, ["base", "heldout_styles"], n_seeds=2, seed=1, sampling=SamplingConfig(max_new_tokens=8),
                      turn_budget=2, prompt_cap=8192)
    keys = {s: sorted(g["scenario_key"]) for s, g in eps.groupby("stage")}
    assert len(keys["base"]) == 4 and keys["base"] == keys["GRPO"] == keys["probe_all"]
    assert set(eps["cluster"]) == {"5000500", "5000501"} and set(eps["turn_budget"]) == {2}
    assert eps["valid"].all()
    table = stage_table(eps, list(stages), n_resamples=200)
    assert list(table.columns) == list(STAGE_COLUMNS)
    assert len(table) == (3 + 3) * 3 * len(METRICS)  # (stages + differences) x (two markets + all) x metrics
    game = MultiBuyerGame(lm=LMOptions(prompt_cap=8192, tool_format="text"))
    agent = game.make_agent(f"hf:{grpo_run[0].checkpoint}", "seller", 0)
    assert isinstance(agent, HFSeller) and agent.tool_format == "text"
    ep = Episode(make_scenario("base", 3))  # the evaluated agent is prompted exactly as the policy was trained
    for turn in (call(1), "No call at all.", call(0, 150.0)):
        assert agent.messages(ep.view()) == render(ep.view())
        ep.step(turn)
        if not ep.done and ep.to_move == "buyer":
            ep.step(reply_turn(ScriptedBuyers().act_batch([ep.view()])[0]))
    chat = render(ep.view())
    assert agent.messages(ep.view()) == chat and [m["role"] for m in chat].count("assistant") == 3


def test_stage_table_estimates_match_the_market_metrics_and_intervals_cover_them():
    eps = play_stages({"greedy": "greedy", "probe_all": "probe_all", "fixed_price": "fixed_price"},
                      ["base", "bimodal"], n_seeds=8)
    table = stage_table(eps, n_resamples=500, seed=2)
    stage = table[table["kind"] == "stage"].set_index(["stage", "market", "metric"])["estimate"]
    for s, g in eps.groupby("stage"):
        mm = market_metrics(g, overall=True).set_index("market")
        for market in mm.index:
            for ours, theirs in (("normalised_surplus", "normalised_surplus"), ("deal_rate", "deal_rate"),
                                 ("top_buyer_share", "top_buyer_share"), ("exploration", "exploration"),
                                 ("turns_used", "turns_used"), ("overshoots", "overshoots")):
                assert stage[(s, market, ours)] == pytest.approx(mm.loc[market, theirs], nan_ok=True)
    diff = table[table["kind"] == "difference"]
    for _, row in diff[diff["metric"] != "overshoots"].iterrows():
        want = stage[(row["stage"], row["market"], row["metric"])] - stage[(row["baseline"], row["market"],
                                                                             row["metric"])]
        assert row["estimate"] == pytest.approx(want, nan_ok=True)
        if np.isfinite(row["estimate"]) and row["ci_low"] < row["ci_high"]:
            assert row["ci_low"] <= row["estimate"] <= row["ci_high"]
    gain = diff.set_index(["stage", "baseline", "market", "metric"]).loc[("probe_all", "greedy", "all",
                                                                         "normalised_surplus")]
    assert gain["estimate"] > 0 and gain["ci_low"] > 0  # probing every buyer first beats selling to the first bid


# -- the profile section ------------------------------------------------------------------------------------------

def _profile(tmp_path, edit=None):
    import yaml

    from negolib.params import load_params

    data = yaml.safe_load((Path(__file__).resolve().parent.parent / "params" / "smoke.yaml").read_text())
    if edit is not None:
        edit(data["games"]["multi_buyer"])
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_params(path)


@pytest.mark.parametrize("edit, field, words", [
    (lambda g: g.update(tourney={}), "games.multi_buyer", "unknown keys ['tourney']"),
    (lambda g: g.pop("tournament"), "games.multi_buyer.tournament", "is required"),
    (lambda g: g["tournament"].update(agents=[]), "games.multi_buyer.tournament.agents", "at least one"),
    (lambda g: g["tournament"].update(agents=["greedy", "greedy"]), "games.multi_buyer.tournament.agents[1]",
     "listed twice"),
    (lambda g: g["tournament"].update(agents=["greedy", "gpt:x"]), "games.multi_buyer.tournament.agents[1]",
     "not a language-model agent"),
    (lambda g: g["tournament"].update(seeds_per_tier=0), "games.multi_buyer.tournament.seeds_per_tier", "1..1000"),
    (lambda g: g["lm"].update(opponent="openai:x"), "games.multi_buyer.lm.opponent", "scripted buyers"),
    (lambda g: g["lm"].update(eval_tiers=[]), "games.multi_buyer.lm.eval_tiers", "is empty"),
    (lambda g: g["lm"].update(eval_seeds_per_tier=0), "games.multi_buyer.lm.eval_seeds_per_tier", "1..1000"),
    (lambda g: g["lm"].update(base={"backend": "scripted", "strategy": "boulware"}),
     "games.multi_buyer.lm.base.backend", "must be 'hf'"),
    (lambda g: g.update(train="yes"), "games.multi_buyer.train", "bool"),
    (lambda g: g.update(grpo=["markets"]), "games.multi_buyer.grpo", "must be a mapping"),
    (lambda g: g["sft"].update(max_examples="2"), "games.multi_buyer.sft.max_examples", "must be int"),
    (lambda g: g["sft"].update(select="worst"), "games.multi_buyer.sft.select", "one of 'best_deal'"),
    (lambda g: g["sft"].update(epochs=1), "games.multi_buyer.sft", "unknown keys ['epochs']"),
])
def test_profile_section_errors_name_the_dotted_field(tmp_path, edit, field, words):
    from negolib.core.errors import ValidationError

    with pytest.raises(ValidationError) as e:
        _profile(tmp_path, edit)
    assert e.value.field == field and words in str(e.value)


@pytest.mark.parametrize("overrides, field, words", [
    ({"markets": ["nowhere"]}, "games.multi_buyer.grpo.markets", "unknown ['nowhere']"),
    ({"turn_budget": 12}, "games.multi_buyer.grpo", "max_rollout_turns"),  # the smoke recipe allows 3 turns
    ({"reward": {"below_cost_penalty": -1}}, "games.multi_buyer.grpo.reward.below_cost_penalty", ">= 0"),
    ({"recipe": {"max_steps": "x"}}, "games.multi_buyer.grpo.recipe.max_steps", "must be int"),
])
def test_grpo_overrides_are_checked_at_load(tmp_path, overrides, field, words):
    from negolib.core.errors import ValidationError

    built = _profile(tmp_path).games.multi_buyer.grpo  # the profile's own overrides build, over the game's defaults
    assert isinstance(built, MultiBuyerGRPOConfig) and built.turn_budget == 2 and built.recipe.max_rollout_turns == 3
    with pytest.raises(ValidationError) as e:
        _profile(tmp_path, lambda g: g["grpo"].update(overrides))
    assert e.value.field.startswith(field) and words in str(e.value)


@pytest.mark.parametrize("overrides, field, words", [
    ({"epoch": 1}, "games.multi_buyer.sft.config", "unknown keys ['epoch']; allowed: ['batch_size'"),
    ({"learning_rate": 3}, "games.multi_buyer.sft.config.learning_rate", "must be in (0, 1)"),
    ({"max_length": "long"}, "games.multi_buyer.sft.config.max_length", "must be int"),
])
def test_sft_overrides_are_checked_at_load(tmp_path, overrides, field, words):
    """The market's SFT recipe (the shared SFTConfig) is built like every game recipe: errors name the dotted field."""
    from negolib.core.errors import ValidationError

    built = _profile(tmp_path).games.multi_buyer.sft.config  # the smoke profile's own overrides build
    assert built.max_length == 8192 and built.epochs == 1
    with pytest.raises(ValidationError) as e:
        _profile(tmp_path, lambda g: g["sft"]["config"].update(overrides))
    assert e.value.field.startswith(field) and words in str(e.value), str(e.value)
