"""Token-level multi-turn rollouts: ids are concatenated, never re-tokenized; env_mask is aligned."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from negolib.agents.base import Agent, AgentReply  # noqa: E402
from negolib.core.chat_template import derive_turn_tags, encode_chat, encode_text  # noqa: E402
from negolib.core.transcripts import SCHEMA_VERSION  # noqa: E402
from negolib.games.multi_issue.prompts import render_messages  # noqa: E402
from negolib.games.multi_issue.scripted import make_scripted  # noqa: E402
from negolib.games.multi_issue.training import env_config, paper_episodes, scenario_items  # noqa: E402
from negolib.models import tiny_causal_lm, tiny_tokenizer  # noqa: E402
from negolib.training.config import TrainConfig  # noqa: E402
from negolib.training.rollout import (  # noqa: E402
    Generation,
    HFAgentGenerator,
    RolloutEngine,
    RolloutLimits,
)

torch.set_num_threads(1)
CFG = TrainConfig(
    train_seeds_per_domain=1,
    train_domains=("job_offer", "acquisition"),
    max_rounds=3,
    buyer_mixture={"conceder": 0.5, "hardheaded": 0.5},
)
ITEMS = scenario_items(CFG)
BUYERS = {n: make_scripted(n) for n in CFG.buyer_mixture}


class TextGenerator:
    """Emits fixed seller turns (encoded text + the stop token); records every call's batch size."""

    def __init__(self, tokenizer, tags, texts, stop: bool = True) -> None:
        self.tok, self.tags, self.texts, self.stop = tokenizer, tags, texts, stop
        self.calls: list[int] = []
        self.outputs: list[list[int]] = []

    def generate(self, contexts, budgets):
        self.calls.append(len(contexts))
        out = []
        for i, budget in enumerate(budgets):
            text = self.texts(len(self.calls) - 1, i)
            ids = encode_text(self.tok, text) + ([self.tags.stop_ids[0]] if self.stop else [])
            ids = ids[:budget]
            self.outputs.append(ids)
            out.append(
                Generation(
                    ids, [-0.5] * len(ids), self.stop and len(ids) and ids[-1] == self.tags.stop_ids[0]
                )
            )
        return out


def counter_text(call: int, i: int) -> str:
    terms = [{"name": "salary", "value": 150 - 5 * call}] if i % 2 == 0 else [{"name": "price", "value": 90}]
    return f"Happy to talk, round {call}.\n" + json.dumps({"action": "COUNTER", "terms": terms})


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def tags(tok):
    return derive_turn_tags(tok)


def engine(tok, tags, gen, **kw):
    limits = kw.pop("limits", RolloutLimits(256, 16384, 8192, 13))
    env = kw.pop("env", env_config(CFG))
    buyers = kw.pop("buyers", BUYERS)
    kw.setdefault("render", render_messages)
    return RolloutEngine(gen, tok, tags, buyers, paper_episodes(env), limits=limits, **kw)


class StubbornBuyer(Agent):
    """Never accepts and never names terms."""

    name = "stubborn"

    def act_batch(self, views):
        return [AgentReply("I need to think about it.") for _ in views]


def check_alignment(t, tags):
    assert len(t.completion_ids) == len(t.env_mask) == len(t.logprobs)
    flat = [i for _, ids in t.segments for i in ids]
    assert flat == t.completion_ids  # completion = concatenation of the segments, in order
    mask = [1 if k == "seller" else 0 for k, ids in t.segments for _ in ids]
    assert mask == t.env_mask
    assert all(lp == 0.0 for lp, m in zip(t.logprobs, t.env_mask) if m == 0)
    assert t.completion_ids[-1] == tags.assistant_close.ids[0]  # ends on the seller's end-of-turn token


def test_trajectory_equals_the_templates_render_of_the_dialogue(tok, tags):
    gen = TextGenerator(tok, tags, counter_text)
    batch = engine(tok, tags, gen).play([ITEMS[0], ITEMS[0], ITEMS[1], ITEMS[1]])
    assert gen.calls[0] == 4  # one batched generate call per wave
    for t in batch.trajectories:
        check_alignment(t, tags)
        assert t.done and t.status in ("deal", "no_deal")
        assert t.reward == pytest.approx(t.episode.outcome.reward)
        # the seller's segments are exactly what the generator sampled
        seller = [ids for k, ids in t.segments if k == "seller"]
        assert all(s in gen.outputs for s in seller) and len(seller) == t.seller_turns
        # prompt + completion is the chat template's render of the seller's dialogue (App. J)
        messages = render_messages(t.episode.view("seller"), "training")
        if messages[-1]["role"] == "user":
            messages = messages[:-1]
        expected = encode_chat(tok, messages, add_generation_prompt=False)
        assert t.prompt_ids + t.completion_ids + list(tags.assistant_close.ids[1:]) == expected
        assert t.prompt_ids == encode_chat(tok, messages[:2], add_generation_prompt=True)
    m = batch.metrics()
    assert m["tokens_generated"] == sum(sum(t.env_mask) for t in batch.trajectories)
    assert m["tokens_trained"] == sum(len(t.prompt_ids) + len(t.completion_ids) for t in batch.trajectories)
    out = batch.trl_output()
    assert set(out) >= {"prompt_ids", "completion_ids", "logprobs", "env_mask", "episode_reward"}
    rec = batch.trajectories[0].record(arm="a", seller="policy", buyer=ITEMS[0].buyer)
    assert rec["schema"] == SCHEMA_VERSION and rec["training"]["seller_tokens"] == sum(batch.trajectories[0].env_mask)


class CounteringBuyer(Agent):
    """Counters a fixed salary every turn (so the seller has an offer of the buyer's to accept)."""

    name = "countering"

    def act_batch(self, views):
        return [AgentReply("How about this?\n" + json.dumps({"action": "COUNTER",
                                                             "terms": [{"name": "salary", "value": 100}]}))
                for _ in views]


def test_training_env_applies_terms_attached_to_an_accept(tok, tags):
    def accept_with_terms(call, i):
        if call == 0:  # an opening ACCEPT has nothing to accept (fair ACCEPT, ours): counter first
            return counter_text(call, i)
        return "Deal.\n" + json.dumps({"action": "ACCEPT", "terms": [{"name": "salary", "value": 200}]})

    gen = TextGenerator(tok, tags, accept_with_terms)
    buyers = {name: CounteringBuyer() for name in BUYERS}
    batch = engine(tok, tags, gen, buyers=buyers, limits=RolloutLimits(256, 16384, 8192, 13)).play([ITEMS[0]])
    t = batch.trajectories[0]
    assert t.status == "deal" and t.episode.outcome.accept_with_terms
    assert t.episode.outcome.final_ledger["salary"] == 200 and t.seller_turns == 2
    assert t.completion_ids[-1] == tags.stop_ids[0] and t.env_mask[-1] == 1  # ends on the sampled stop token


def test_training_env_opening_accept_is_invalid(tok, tags):
    def accept_at_once(call, i):
        return "Deal.\n" + json.dumps({"action": "ACCEPT", "terms": [{"name": "salary", "value": 200}]})

    gen = TextGenerator(tok, tags, accept_at_once)
    env = env_config(CFG)
    batch = engine(tok, tags, gen, env=env).play([ITEMS[0]])
    ep = batch.trajectories[0].episode
    assert ep.turns[0].invalid_accept and "salary" not in ep.turns[0].ledger


def test_budget_hit_appends_the_end_of_turn_as_environment_token(tok, tags):
    gen = TextGenerator(tok, tags, counter_text, stop=False)
    batch = engine(tok, tags, gen, limits=RolloutLimits(8, 16384, 8192, 13)).play([ITEMS[0]])
    assert batch.trajectories[0].episode.turns[0].action is None  # cut mid-text: a bad parse
    t = batch.trajectories[0]
    check_alignment(t, tags)
    assert t.env_mask[-1] == 0 and t.completion_ids[-1] == tags.assistant_close.ids[0]
    first_seller = t.segments[0]
    assert first_seller[0] == "seller" and len(first_seller[1]) == 8
    assert t.segments[1][1][: len(tags.assistant_close.ids)] == list(tags.assistant_close.ids)  # full close


def test_driver_limits_cut_the_episode_with_the_floor(tok, tags):
    stubborn = {n: StubbornBuyer() for n in CFG.buyer_mixture}
    gen = TextGenerator(tok, tags, counter_text)
    t = (
        engine(tok, tags, gen, buyers=stubborn, limits=RolloutLimits(256, 16384, 8192, max_seller_turns=1))
        .play([ITEMS[0]])
        .trajectories[0]
    )
    assert t.status == "truncated" and t.seller_turns == 1 and t.reward == pytest.approx(-0.3)
    check_alignment(t, tags)
    assert t.record(arm="a", seller="p", buyer="b")["status"] == "truncated"
    cap = len(encode_chat(tok, render_messages(_first_view(), "training"))) + 150
    t = (
        engine(
            tok,
            tags,
            TextGenerator(tok, tags, counter_text),
            buyers=stubborn,
            limits=RolloutLimits(100, cap, 8192, 13),
        )
        .play([ITEMS[0]])
        .trajectories[0]
    )
    assert t.status == "truncated" and t.reward == pytest.approx(-0.3)
    assert len(t.prompt_ids) + len(t.completion_ids) <= cap
    check_alignment(t, tags)
    # without limits the same episode runs to the round cap: a no-deal
    t = (
        engine(tok, tags, TextGenerator(tok, tags, counter_text), buyers=stubborn)
        .play([ITEMS[0]])
        .trajectories[0]
    )
    assert (
        t.status == "no_deal" and t.seller_turns == 3 and t.reward == pytest.approx(t.episode.outcome.reward)
    )


def _first_view():
    from negolib.games.multi_issue.env import Episode

    return Episode(ITEMS[0].scenario, env_config(CFG)).view("seller")


def test_trained_turns_last_masks_every_seller_turn_but_the_last(tok, tags):
    stubborn = {n: StubbornBuyer() for n in CFG.buyer_mixture}
    gen = TextGenerator(tok, tags, counter_text)
    batch = engine(tok, tags, gen, buyers=stubborn).play([ITEMS[0], ITEMS[1]])
    for t in batch.trajectories:
        check_alignment(t, tags)
        assert t.seller_turns == CFG.max_rounds  # the buyer never closes: every round has a seller turn
        assert t.loss_mask("all") == t.env_mask
        last = t.loss_mask("last")
        starts = [0]
        for _, ids in t.segments:
            starts.append(starts[-1] + len(ids))
        seller = [i for i, (kind, _) in enumerate(t.segments) if kind == "seller"]
        on = [p for p, m in enumerate(last) if m]
        assert on == list(range(starts[seller[-1]], starts[seller[-1] + 1]))  # exactly the last seller turn
        assert 0 < sum(last) < sum(t.env_mask)  # the earlier seller turns are masked
        assert all(t.env_mask[p] for p in on)  # never a buyer or scaffold token
    out = batch.trl_output("last")
    assert out["env_mask"] == [t.loss_mask("last") for t in batch.trajectories]
    assert batch.trl_output()["env_mask"] == [t.env_mask for t in batch.trajectories]
    with pytest.raises(ValueError, match="trained_turns"):
        batch.trajectories[0].loss_mask("first")


def test_trained_turns_is_checked_and_reaches_the_lesson_recipe():
    from negolib.core.errors import ValidationError
    from negolib.training.config import LessonConfig

    with pytest.raises(ValidationError, match="trained_turns"):
        TrainConfig(trained_turns="first")
    from negolib.study.lesson import train_config

    lesson = LessonConfig(start_run="r", trained_turns="last")
    assert train_config(lesson).trained_turns == "last"
    assert train_config(LessonConfig(start_run="r")).trained_turns == "all"


def test_prompt_cap_keeps_the_end(tok, tags):
    gen = TextGenerator(tok, tags, counter_text)
    t = engine(tok, tags, gen, limits=RolloutLimits(256, 16384, 100, 13)).play([ITEMS[0]]).trajectories[0]
    full = encode_chat(tok, render_messages(_first_view(), "training"))
    assert t.prompt_truncated and t.prompt_ids == full[-100:]


def test_evaluation_scaffold_and_buyer_opens(tok, tags):
    gen = TextGenerator(tok, tags, counter_text)
    t = engine(tok, tags, gen, scaffold="evaluation").play([ITEMS[1]]).trajectories[0]
    check_alignment(t, tags)
    assert t.seller_turns >= 1
    env = env_config(TrainConfig(max_rounds=3, first_mover="buyer"))
    t = engine(tok, tags, TextGenerator(tok, tags, counter_text), env=env).play([ITEMS[1]]).trajectories[0]
    check_alignment(t, tags)
    assert t.episode.turns[0].role == "buyer"
    assert t.env_mask[0] == 1  # the buyer's opening is in the prompt; the completion starts with the seller
    assert t.episode.turns[0].prose in tok.decode(t.prompt_ids)


def test_real_model_generation_is_kept_as_sampled(tok, tags):
    from negolib.agents.hf_agent import HFAgent
    from negolib.core.sampling import SamplingConfig

    model, tok2 = tiny_causal_lm(seed=1)
    agent = HFAgent(model, tok2, SamplingConfig(max_new_tokens=6, seed=3), scaffold="training", render=render_messages)
    inner = HFAgentGenerator(agent)
    seen = []

    class Spy:
        def generate(self, contexts, budgets):
            out = inner.generate(contexts, budgets)
            seen.extend(g.ids for g in out)
            return out

    eng = RolloutEngine(
        Spy(), tok2, derive_turn_tags(tok2), BUYERS, paper_episodes(env_config(CFG)), render_messages,
        RolloutLimits(6, 4096, 200, 13)
    )
    batch = eng.play([ITEMS[0], ITEMS[0]])
    for t in batch.trajectories:
        check_alignment(t, tags)
        seller = [ids for k, ids in t.segments if k == "seller"]
        assert all(s in seen for s in seller)  # sampled ids, not re-tokenized text
        assert all(lp < 0 for lp, m in zip(t.logprobs, t.env_mask) if m == 1)


# -- failures are contained to their trajectory and excluded from the update (issue 13 §3) ---------


def huge_price_for(bad: set[int], digits: int = 400):
    """Seller turns: the contexts in ``bad`` (index within the first call) name a ``digits``-digit price."""
    def texts(call: int, i: int) -> str:
        if call == 0 and i in bad:
            return 'Take it.\n{"action": "COUNTER", "terms": [{"name": "price", "value": %s}]}' % ("9" * digits)
        return counter_text(call, i)
    return texts


def test_a_huge_number_from_the_policy_is_an_invalid_term(tok, tags):
    assert ITEMS[1].scenario.domain.lookup("price") is not None
    for digits in (400, 5000):
        gen = TextGenerator(tok, tags, huge_price_for({1}, digits))
        batch = engine(tok, tags, gen, limits=RolloutLimits(8192, 65536, 8192, 13)).play([ITEMS[1]] * 4)
        assert all(t.status in ("deal", "no_deal") for t in batch.trajectories)
        first = batch.trajectories[1].episode.turns[0]
        if digits == 400:
            assert first.action is not None and first.invalid_terms == ["price"]
        else:
            assert first.action is None and "too many digits" in first.parse_error


def _raise_in_step(monkeypatch, bad_ids: set[str], turn: int = 2):
    from negolib.games.multi_issue.env import Episode

    real_step = Episode.step

    def step(self, text, *a, **kw):
        if self.episode_id in bad_ids and len(self.turns) == turn - 1:
            raise OverflowError("int too large to convert to float")
        return real_step(self, text, *a, **kw)

    monkeypatch.setattr(Episode, "step", step)


def test_an_exception_in_one_turn_is_an_excluded_error_trajectory(tok, tags, monkeypatch):
    from negolib.training.advantages import loo_advantages

    items = [ITEMS[0]] * 4 + [ITEMS[1]] * 4
    ids = [f"ep{i}" for i in range(len(items))]
    _raise_in_step(monkeypatch, {"ep1"}, turn=2)  # the buyer's first turn
    _raise_in_step(monkeypatch, {"ep6"}, turn=3)  # the seller's second turn
    batch = engine(tok, tags, TextGenerator(tok, tags, counter_text)).play(items, ids)
    ts = batch.trajectories
    assert [t.status == "error" for t in ts] == [i in (1, 6) for i in range(8)]
    assert ts[1].error == "turn 2 (buyer): OverflowError: int too large to convert to float"
    assert ts[6].error.startswith("turn 3 (seller): OverflowError")
    for i in (1, 6):
        check_alignment(ts[i], tags)
        assert ts[i].excluded and ts[i].seller_turns >= 1 and sum(ts[i].env_mask) > 0
    out = batch.trl_output()
    assert [sum(m) == 0 for m in out["env_mask"]] == [t.excluded for t in ts]  # no token of it is trained
    rewards = out["episode_reward"]
    valid0 = [ts[i].reward for i in (0, 2, 3)]
    assert rewards[1] == pytest.approx(sum(valid0) / 3)  # the mean of its group's valid rewards
    assert all(r == pytest.approx(ts[i].reward) for i, r in enumerate(rewards) if i not in (1, 6))
    adv = loo_advantages(rewards, 4)
    assert adv[1] == pytest.approx(0.0) and adv[6] == pytest.approx(0.0)
    m = batch.metrics()
    assert m["error_rate"] == pytest.approx(2 / 8)
    assert m["episode_reward"] == pytest.approx(sum(t.reward for t in ts if not t.excluded) / 6)
    rec = ts[1].record(arm="a", seller="policy", buyer=ITEMS[0].buyer)
    assert rec["status"] == "error" and "OverflowError" in rec["error"]
    assert rec["training"]["excluded"] and rec["training"]["reward"] is None
    json.dumps(rec, allow_nan=False)


def test_a_failing_buyer_or_generator_costs_only_its_episode(tok, tags):
    class RaisingBuyer(Agent):
        name = "raising"

        def act_batch(self, views):
            if any(v.episode_id == "ep2" for v in views):
                raise RuntimeError("buyer backend down for one view")
            return BUYERS["conceder"].act_batch(views)

    class RaisingGenerator(TextGenerator):
        def generate(self, contexts, budgets):
            if any(list(c) == self.poison for c in contexts):  # alone or in a batch
                raise RuntimeError("CUDA error for one prompt")
            return super().generate(contexts, budgets)

    items = [ITEMS[0]] * 4
    ids = [f"ep{i}" for i in range(4)]
    buyers = {name: RaisingBuyer() for name in BUYERS}
    batch = engine(tok, tags, TextGenerator(tok, tags, counter_text), buyers=buyers).play(items, ids)
    assert [t.status == "error" for t in batch.trajectories] == [False, False, True, False]
    assert "RuntimeError: buyer backend down" in batch.trajectories[2].error

    gen = RaisingGenerator(tok, tags, counter_text)
    first = engine(tok, tags, TextGenerator(tok, tags, counter_text)).play([ITEMS[1]])
    gen.poison = first.trajectories[0].prompt_ids  # every episode of ITEMS[1] opens with this context
    batch = engine(tok, tags, gen).play([ITEMS[0], ITEMS[1], ITEMS[0]], ["a", "b", "c"])
    assert [t.status == "error" for t in batch.trajectories] == [False, True, False]
    assert "generate: RuntimeError: CUDA error" in batch.trajectories[1].error


def test_a_batch_where_every_trajectory_errors_warns_and_trains_nothing(tok, tags, monkeypatch):
    _raise_in_step(monkeypatch, {"x", "y"}, turn=1)
    with pytest.warns(RuntimeWarning, match="every trajectory"):
        batch = engine(tok, tags, TextGenerator(tok, tags, counter_text)).play([ITEMS[0]] * 2, ["x", "y"])
    out = batch.trl_output()
    assert all(sum(m) == 0 for m in out["env_mask"]) and out["episode_reward"] == [0.0, 0.0]
