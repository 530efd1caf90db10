"""Training in the bilateral game: SFT data from a tournament's best deals, SFT with TRL, GRPO through the shared
trainer on the game's episode adapter, and the three-stage evaluation frame (tiny models built from a config)."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from game_helpers import PlanGenerator, one_step, one_step_recipe, save_tiny_base, spied_grpo  # noqa: E402

from negolib.core.chat_template import derive_turn_tags, encode_chat, strip_template_tags  # noqa: E402
from negolib.games.bilateral.agents import HFBargainer  # noqa: E402
from negolib.games.bilateral.env import BilateralConfig, Episode  # noqa: E402
from negolib.games.bilateral.game import BilateralGame  # noqa: E402
from negolib.games.bilateral.metrics import tier_metrics  # noqa: E402
from negolib.games.bilateral.protocol import Action, format_tool_call, parse_turn  # noqa: E402
from negolib.games.bilateral.scenarios import BilateralScenario, make_scenario  # noqa: E402
from negolib.games.bilateral.scripted import make_scripted  # noqa: E402
from negolib.games.bilateral.training import (  # noqa: E402
    METRICS,
    STAGE_COLUMNS,
    BilateralGRPOConfig,
    BilateralSFTConfig,
    default_recipe,
    encode_conversation,
    episode_factory,
    masked_loss,
    play_stages,
    render,
    run_grpo,
    run_sft,
    scenario_items,
    select_best,
    sft_dataset,
    stage_table,
)
from negolib.games.toolagents import LMOptions  # noqa: E402
from negolib.models import tiny_causal_lm, tiny_tokenizer  # noqa: E402
from negolib.tournament import run_tournament  # noqa: E402
from negolib.training.rollout import RolloutEngine, RolloutLimits  # noqa: E402

torch.set_num_threads(1)
ZONE = make_scenario("1k", 9)  # cost 1066.97, value 1706.00: the conceder's first offer (value / 2) is below cost
NO_ZONE = make_scenario("1k", 4)  # cost 1260.11 > value 1035.02


def offer(price: float, message: str = "My price.") -> str:
    return f"{message}\n{format_tool_call(Action('make_offer', price))}"


def accept(message: str = "Deal.") -> str:
    return f"{message}\n{format_tool_call(Action('accept_offer'))}"


def expected_reward(rec: dict) -> float:
    """The documented rule, written out: the game's payoff; -0.3 for a no deal with a zone; -0.3 - 0.3 x the
    fraction of the cost given away for a sale below cost; -0.05 times the seller's bad-parse fraction."""
    out = rec["outcome"]
    r = BilateralGame().payoffs(rec).seller
    if out["deal"] and out["price"] < rec["cost"]:
        r -= 0.3 + 0.3 * min(1.0, (rec["cost"] - out["price"]) / rec["cost"])
    if not out["deal"] and rec["value"] > rec["cost"]:
        r -= 0.3
    return r - 0.05 * out["seller_bad_parses"] / out["seller_turns"]


# -- SFT data ---------------------------------------------------------------------------------------------------

def played(scenario: BilateralScenario, seller: str, *turns: str, buyer: str = "conceder") -> dict:
    """A tournament match line of a hand-played episode (turns alternate, the seller first)."""
    ep = Episode(scenario)
    for t in turns:
        ep.step(t)
    return {"game": "bilateral", "agent_seed": 0, "n_seeds": 1, "seller": seller, "buyer": buyer,
            "scenario_key": scenario.key, "record": ep.record(seller=seller, buyer=buyer)}


A = BilateralScenario("100", 7, 50.0, 100.0)
C = BilateralScenario("1k", 9, 500.0, 1000.0)
B = BilateralScenario("10k", 3, 5000.0, 4000.0)  # no zone


@pytest.fixture(scope="module")
def matches():
    error = played(A, "delta", offer(99.0), accept())
    error["record"]["status"] = "error"
    walk = f"Bye.\n{format_tool_call(Action('walk_away'))}"
    return [
        played(A, "alpha", offer(90.0), accept()),  # share 0.8: the best of A
        played(A, "beta", offer(70.0), accept()),  # 0.4
        played(A, "gamma", offer(95.0), offer(60.0), accept()),  # the seller accepts 60: 0.2
        played(A, "hf:/some/model", offer(99.0), accept()),  # a language model: not a scripted seller
        played(A, "omega", offer(40.0), accept()),  # below cost: an IR violation
        error,
        played(B, "alpha", offer(6000.0), offer(3000.0), walk),
        played(C, "beta", offer(900.0), accept()),  # 0.8: the best of C
        played(C, "alpha", offer(600.0), accept()),  # 0.2
        played(C, "alpha", offer(950.0), accept(), buyer="boulware"),  # 0.9, but against another opponent
    ]


def test_sft_dataset_picks_each_scenarios_best_scripted_deal(matches, tmp_path):
    best = select_best(matches, opponents=["conceder"])
    assert [(m["scenario_key"], m["seller"]) for m in best] == [("100|7", "alpha"), ("1k|9", "beta")]
    assert [(m["scenario_key"], m["seller"]) for m in select_best(matches)] == [("100|7", "alpha"), ("1k|9", "alpha")]
    only_beta = select_best(matches, sellers=["beta"])
    assert [(m["scenario_key"], m["seller"]) for m in only_beta] == [("100|7", "beta"), ("1k|9", "beta")]
    # the top seller by mean payoff against the conceder: beta (0.6) over alpha (0.5, its no deal on B included)
    top = select_best(matches, opponents=["conceder"], select="top_seller")
    assert {m["seller"] for m in top} == {"beta"}
    (tmp_path / "matches.jsonl").write_text("".join(json.dumps(m) + "\n" for m in matches) + '{"torn')
    ds = sft_dataset(tmp_path, opponents=["conceder"])
    assert [(e.scenario_key, e.seller, e.price) for e in ds] == [("100|7", "alpha", 90.0), ("1k|9", "beta", 900.0)]
    assert [e.surplus_share for e in ds] == pytest.approx([0.8, 0.8])
    assert [e.scenario_key for e in sft_dataset(matches, min_share=0.85)] == ["1k|9"]


def test_sft_conversations_are_the_local_agents_prompts_with_text_tool_calls(matches):
    rec = played(A, "gamma", offer(95.0, "Hello."), offer(60.0), accept("Fine."))
    (ex,) = sft_dataset([rec])
    msgs = list(ex.messages)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant"]
    assert "<tools>" in msgs[0]["content"] and "Your cost for the item is $50.00" in msgs[0]["content"]
    call = '<tool_call>\n{"name": "make_offer", "arguments": {"price": 95.0}}\n</tool_call>'
    assert msgs[2]["content"] == "Hello.\n" + call
    assert parse_turn(msgs[4]["content"]).action == Action("accept_offer")
    # each prefix that ends on a user message is exactly the prompt the local agent (text tool format) got then
    model, tok = tiny_causal_lm(seed=0)
    agent = HFBargainer(model, tok, tool_format="text")
    ep, prompts = Episode(A), []
    for t in (offer(95.0, "Hello."), offer(60.0), accept("Fine.")):
        if ep.to_move == "seller":
            prompts.append(agent.messages(ep.view()))
        ep.step(t)
    assert prompts == [msgs[:2], msgs[:4]]


def test_sft_tokens_mask_exactly_the_assistant_turns(matches):
    (ex,) = [e for e in sft_dataset(matches) if e.scenario_key == "100|7"]
    tokenizers = [tiny_tokenizer()]
    try:
        from transformers import AutoTokenizer

        from negolib.models import cache_root

        if (cache_root() / "smollm2-135m-instruct" / "config.json").is_file():
            tokenizers.append(AutoTokenizer.from_pretrained(cache_root() / "smollm2-135m-instruct"))
    except Exception:  # noqa: BLE001 - the packaged model is optional here
        pass
    for tok in tokenizers:
        ids, mask = encode_conversation(tok, ex.messages)
        assert ids == encode_chat(tok, list(ex.messages), add_generation_prompt=False)  # the template's render
        end = tok.decode([derive_turn_tags(tok).stop_ids[0]])
        trained = tok.decode([i for i, m in zip(ids, mask) if m])
        assert trained == "".join(m["content"] + end for m in ex.messages if m["role"] == "assistant")
        runs = sum(1 for k in range(len(mask)) if mask[k] and (k == 0 or not mask[k - 1]))
        assert runs == sum(m["role"] == "assistant" for m in ex.messages) == 1
        untrained = tok.decode([i for i, m in zip(ids, mask) if not m])
        assert "Your cost for the item" in untrained and "<tool_call>" not in untrained.split("<tools>")[0]


# -- SFT, GRPO, evaluation on tiny models ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    return save_tiny_base(tmp_path_factory)


@pytest.fixture(scope="module")
def sft(base_dir, tmp_path_factory):
    tour = tmp_path_factory.mktemp("tournament")
    run_tournament(BilateralGame(), ["boulware", "conceder", "tit_for_tat"], 1, tour, progress=False)
    data = sft_dataset(tour, max_examples=3)
    cfg = BilateralSFTConfig(epochs=3, batch_size=1, learning_rate=3e-3, warmup_ratio=0.0)
    return data, run_sft(base_dir, data, tmp_path_factory.mktemp("sft"), cfg)


def test_sft_lowers_the_loss_and_the_model_loads_as_an_hf_agent(sft):
    from negolib.models import load_causal_lm

    data, res = sft
    assert len(data) == 3 and res.examples == 3 and res.steps == 9
    assert res.loss_after < res.loss_before - 0.3  # a random tiny model starts near ln(259) = 5.56
    model, tok = load_causal_lm(str(res.model_dir))
    reloaded = masked_loss(model, [encode_conversation(tok, e.messages) for e in data])
    assert reloaded == pytest.approx(res.loss_after, rel=2e-3)  # the saved weights (up to the attention kernel)
    game = BilateralGame(BilateralConfig(deadline_turns=2), LMOptions(prompt_cap=8192))
    agent = game.make_agent(f"hf:{res.model_dir}", "seller", 0)
    assert isinstance(agent, HFBargainer) and agent.tool_format == "text"
    (rec,) = game.play(agent, game.make_agent("conceder", "buyer", 0), [ZONE], 0)
    assert rec["status"] != "error" and rec["turns"][0]["role"] == "seller"



def test_sft_without_a_config_trains_with_the_shared_defaults(sft, base_dir, tmp_path):
    """run_sft(config=None) uses negolib's SFTConfig defaults (TRL's class of the same name is imported as another
    name inside run_sft: it once shadowed ours)."""
    from dataclasses import asdict

    from negolib.games.sft import SFTConfig

    data, _ = sft
    res = run_sft(base_dir, data[:1], tmp_path / "defaults")
    summary = json.loads((tmp_path / "defaults" / "sft_summary.json").read_text())
    assert summary["config"] == asdict(SFTConfig()) and res.examples == 1 and res.steps >= 1


def test_rollout_rewards_follow_the_games_payoff_rule():
    tok = tiny_tokenizer()
    tags = derive_turn_tags(tok)
    buyers = {"conceder": make_scripted("conceder", "buyer", 0)}  # structured tool calls, as an API agent's
    high = offer(10_000.0)
    plans = {
        "holdout": [high],  # never accepted: no deal at the deadline
        "early": [high, accept()],  # accepts the conceder's opening (value / 2, below cost): an IR violation
        "late": [high, high, high, accept()],  # accepts the conceder's third offer, above cost
        "bad": ['{"name": "make_offer"}', high, high, accept()],  # a bad parse, then the late deal
        "walk": [f"No.\n{format_tool_call(Action('walk_away'))}"],
        "prose": ["I am still thinking."],  # prose only: no deal, but no bad parse
    }
    got = {}
    for item in scenario_items([ZONE, NO_ZONE], "conceder"):
        for name, plan in plans.items():
            eng = RolloutEngine(PlanGenerator(tok, tags, plan), tok, tags, buyers,
                                limits=RolloutLimits(64, 16384, 8192, 6), render=render,
                                episode_factory=episode_factory())
            (t,) = eng.play([item]).trajectories
            rec = t.episode.record()
            assert t.status in ("deal", "no_deal") and t.reward == pytest.approx(expected_reward(rec))
            assert t.score == pytest.approx(BilateralGame().payoffs(rec).seller)
            got[(item.scenario_id, name)] = (t.reward, rec)
    z = ZONE.key
    assert got[(z, "holdout")][0] == pytest.approx(-0.3) and got[(z, "prose")][0] == pytest.approx(-0.3)
    early = got[(z, "early")][1]["outcome"]
    given_away = (ZONE.cost - early["price"]) / ZONE.cost
    assert early["deal"] and given_away > 0.1 and got[(z, "early")][0] == pytest.approx(-0.3 - 0.3 * given_away)
    late_r, late = got[(z, "late")]
    share = (late["outcome"]["price"] - ZONE.cost) / ZONE.zone
    assert late["outcome"]["deal"] and 0.3 < share < 1 and late_r == pytest.approx(share)
    assert got[(z, "bad")][0] == pytest.approx(share - 0.05 / 4)
    assert got[(NO_ZONE.key, "holdout")][0] == 0.0 and got[(NO_ZONE.key, "walk")][0] == 0.0  # no zone: no penalty
    assert len({round(r, 6) for r, _ in got.values()}) >= 5


GRPO_CONFIG = BilateralGRPOConfig(  # training seeds 3 (a zone) and 4 (none) of the $1k tier
    tiers=("1k",), train_seeds_per_tier=2, train_seed_offset=3,
    recipe=one_step_recipe(default_recipe()))


@pytest.fixture(scope="module")
def grpo_run(sft, tmp_path_factory):
    """One GRPO step of the SFT model through run_grpo (-> the shared train() and build_run), with spies on the
    engines the trainer builds, the batches they play and what TRL receives."""
    _, res = sft
    out = tmp_path_factory.mktemp("grpo") / "run"
    return spied_grpo(lambda: run_grpo(res.model_dir, out, GRPO_CONFIG, resume=False))


def test_one_grpo_step_on_the_bilateral_adapter(grpo_run):
    result, eng, batch, out = one_step(grpo_run)
    tok, tags = eng.tokenizer, eng.tags
    assert eng.role == "seller" and eng.render is render and set(eng.buyers) == {"conceder"}
    assert len(batch.trajectories) == 4 and out["env_mask"] == [t.env_mask for t in batch.trajectories]
    assert {t.item.scenario_id for t in batch.trajectories} == {"1k|3", "1k|4"}
    for t in batch.trajectories:
        assert not t.excluded and t.seller_turns == t.episode.bad_parses("seller")[1] >= 1
        policy = [i for i, m in zip(t.completion_ids, t.env_mask) if m]
        segs = [ids for kind, ids in t.segments if kind != "env"]
        assert policy == [i for s in segs for i in s] and len(segs) == t.seller_turns
        # the masked tokens are exactly what the seller said: each segment decodes to its turn's raw text
        said = [strip_template_tags(tok.decode(s[:-1] if s[-1] in tags.stop_ids else s), tok, tags) for s in segs]
        assert said == [turn.raw for turn in t.episode.turns if turn.role == "seller"]
        env_text = tok.decode([i for i, m in zip(t.completion_ids, t.env_mask) if not m])
        last = max(turn.turn for turn in t.episode.turns if turn.role == "seller")
        seen = [turn.message for turn in t.episode.turns if turn.role == "buyer" and turn.turn < last]
        assert seen and all(f'The buyer wrote: "{m}"' in env_text for m in seen)
        assert tok.decode(t.prompt_ids) == tok.apply_chat_template(render(Episode(t.item.scenario).view("seller")),
                                                                   tokenize=False, add_generation_prompt=True)
        assert t.reward == pytest.approx(expected_reward(t.episode.record()))
    recs = [json.loads(line) for line in (result.out_dir / "transcripts" / "train.jsonl").read_text().splitlines()]
    assert len(recs) == 4 and {r["seller"] for r in recs} == {"policy"} and {r["game"] for r in recs} == {"bilateral"}
    assert [r["training"]["reward"] for r in recs] == pytest.approx([expected_reward(r) for r in recs])
    assert out["episode_reward"] == pytest.approx([r["training"]["reward"] for r in recs])
    assert result.steps == 1 and result.checkpoint.name == "checkpoint-1" and [r["step"] for r in result.log] == [1]
    game = BilateralGame(BilateralConfig(deadline_turns=2), LMOptions(prompt_cap=8192))
    agent = game.make_agent(f"hf:{result.checkpoint}", "seller", 0)
    assert isinstance(agent, HFBargainer)
    (rec,) = game.play(agent, game.make_agent("conceder", "buyer", 0), [NO_ZONE], 0)
    assert rec["status"] != "error"


def test_run_grpo_resumes_a_finished_run(grpo_run, sft):
    """run_grpo goes through the shared train(): a run already at max_steps returns its checkpoint at once."""
    result, _, _, _ = grpo_run
    _, res = sft
    again = run_grpo(res.model_dir, result.out_dir, GRPO_CONFIG)
    assert again.checkpoint == result.checkpoint and again.steps == 1 and [r["step"] for r in again.log] == [1]


def test_stage_evaluation_frame_pairs_every_stage_on_the_same_episodes(base_dir, sft, grpo_run):
    from negolib.core.sampling import SamplingConfig

    _, res = sft
    stages = {"base": base_dir, "sft": res.model_dir, "grpo": grpo_run[0].checkpoint}
    eps = play_stages(stages, ["conceder", "boulware"], n_seeds=2, tiers=["10", "1k"], seed=1,
                      sampling=SamplingConfig(max_new_tokens=8), config=BilateralConfig(deadline_turns=4),
                      prompt_cap=8192)
    keys = {s: sorted(zip(g["opponent"], g["scenario_key"])) for s, g in eps.groupby("stage")}
    assert len(keys["base"]) == 8 and keys["base"] == keys["sft"] == keys["grpo"]
    assert set(eps["cluster"]) == {"5000500", "5000501"}  # past the tournament's seeds
    table = stage_table(eps, list(stages), n_resamples=200)
    assert list(table.columns) == list(STAGE_COLUMNS)
    assert len(table) == (3 + 3) * 3 * len(METRICS)  # (stages + differences) x (two tiers + all) x metrics
    diffs = table[table["kind"] == "difference"]
    assert set(zip(diffs["stage"], diffs["baseline"])) == {("sft", "base"), ("grpo", "sft"), ("grpo", "base")}
    n = table[table["kind"] == "stage"].groupby("tier")["n_episodes"].max().to_dict()
    assert n == {"10": 4, "1k": 4, "all": 8}


def test_stage_table_estimates_and_paired_intervals():
    """Scripted sellers as stages: every stage row is the game's tier metric, every difference the difference of
    the stages' values on the paired episodes, inside its interval."""
    eps = play_stages({"a": "conceder", "b": "boulware", "c": "fixed_price"}, ["conceder", "linear"], n_seeds=6)
    table = stage_table(eps, n_resamples=500, seed=2)
    stage = table[table["kind"] == "stage"].set_index(["stage", "tier", "metric"])["estimate"]
    for s, g in eps.groupby("stage"):
        tm = tier_metrics(g, overall=True).set_index("tier")
        for tier in tm.index:
            assert stage[(s, tier, "deal_rate")] == pytest.approx(tm.loc[tier, "deal_rate"])
            assert stage[(s, tier, "surplus_share")] == pytest.approx(tm.loc[tier, "surplus_share"], nan_ok=True)
            assert stage[(s, tier, "ir_violations")] == tm.loc[tier, "ir_violations"]
    diff = table[table["kind"] == "difference"]
    assert len(diff) == 3 * 6 * len(METRICS)
    for _, row in diff[diff["metric"] != "ir_violations"].iterrows():
        want = stage[(row["stage"], row["tier"], row["metric"])] - stage[(row["baseline"], row["tier"], row["metric"])]
        assert row["estimate"] == pytest.approx(want, nan_ok=True)
        if np.isfinite(row["estimate"]):
            assert row["ci_low"] <= row["estimate"] <= row["ci_high"]
    boulware_gain = diff.set_index(["stage", "baseline", "tier", "metric"]).loc[("b", "a", "all", "surplus_share")]
    assert boulware_gain["estimate"] > 0 and boulware_gain["ci_low"] > 0  # Boulware holds out for more than Conceder
