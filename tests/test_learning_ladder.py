"""The learning ladder's CI rung and its sabotaged twins (issue 14, item 1).

The rung trains a tiny model through the real GRPO path on a one-turn counter whose reward rises with the
price named (:mod:`negolib.study.ladder`) and must learn: the late steps' reward exceeds the early steps'
with a bootstrap interval above zero, and the reloaded checkpoint outscores the initial weights on paired
scenarios. Each twin breaks one wire (env_mask all zero, rewards shuffled within the group, learning rate 0,
the evaluated arm pointed at the initial weights) and must fail that same criterion: if a twin learns, the
test fails, so the rung is shown able to fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from negolib.study.ladder import (  # noqa: E402
    SABOTAGES,
    AcceptingBuyer,
    RungSpec,
    action_texts,
    evaluate_rung,
    ladder_tokenizer,
    train_rung,
)

SEED = 0  # one fixed seed; the rung learned and every twin failed on seeds 0-11 (see the ladder module)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return train_rung(tmp_path_factory.mktemp("rung"), seed=SEED)


@pytest.fixture(scope="module")
def rung(trained):
    return evaluate_rung(trained)


def test_every_ladder_token_is_a_whole_counter_and_prompts_read_as_tags():
    from negolib.core.chat_template import assert_roundtrip, derive_turn_tags
    from negolib.games.multi_issue.protocol import parse_action

    spec = RungSpec()
    texts = action_texts(spec)
    tok = ladder_tokenizer(texts)
    assert len(tok) == 3 + spec.levels
    prices = []
    for i, text in enumerate(texts):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert ids == [3 + i] and tok.decode(ids) == text
        parsed = parse_action(tok.decode(ids))
        assert parsed.action is not None and parsed.action.kind == "COUNTER"
        prices.append(dict((t.name, t.value) for t in parsed.action.terms)["price"])
    assert prices == sorted(prices) and prices[0] < prices[-1]  # the top level names the seller's best price
    chat = [{"role": "system", "content": "You sell."}, {"role": "user", "content": "Hello."},
            {"role": "assistant", "content": texts[0]}, {"role": "user", "content": "Lower?"}]
    tags = derive_turn_tags(tok)
    assert assert_roundtrip(tok, tags, chat) == [1, 2, 1, 2, 1, 3, 2, 1, 2, 1]


def test_buyer_accepts_only_a_parsed_seller_offer():
    from negolib.games.multi_issue.domains import load_domains
    from negolib.games.multi_issue.env import EnvConfig, Episode
    from negolib.games.multi_issue.scenarios import make_scenario

    spec = RungSpec()
    scenario = make_scenario(load_domains()[spec.domain], 0)
    buyer = AcceptingBuyer()
    for text, deal in ((action_texts(spec)[-1], True), ("no action here", False)):
        ep = Episode(scenario, EnvConfig(max_rounds=1))
        ep.step(text)
        ep.step(buyer.act(ep.view()).text)
        assert ep.done and ep.outcome.deal is deal


def test_buyer_with_min_valid_terms_refuses_an_offer_that_changes_nothing():
    from negolib.games.multi_issue.domains import load_domains
    from negolib.games.multi_issue.env import EnvConfig, Episode
    from negolib.games.multi_issue.scenarios import make_scenario

    domain = load_domains()["software_license"]
    scenario = make_scenario(domain, 0)
    buyer = AcceptingBuyer(min_valid_terms=1)
    off_schema = 'Deal?\n{"action": "COUNTER", "terms": [{"name": "terms", "value": "all"}]}'
    top = domain.issues[0]
    valid = "Deal?\n" + json.dumps({"action": "COUNTER", "terms": [{"name": top.name, "value": top.hi}]})
    for text, deal in ((off_schema, False), (valid, True)):
        ep = Episode(scenario, EnvConfig(max_rounds=1))
        ep.step(text)
        ep.step(buyer.act(ep.view()).text)
        assert ep.done and ep.outcome.deal is deal, text
    with pytest.raises(ValueError, match="min_valid_terms"):
        AcceptingBuyer(min_valid_terms=-1)


def test_rung_learns_through_the_real_path(rung):
    t = rung.training
    print(rung.summary())
    assert len(t.step_rewards) == t.spec.steps
    assert all(len(r) == t.spec.scenarios * t.spec.rollouts for r in t.step_rewards)
    assert t.log[0]["kl"] == 0.0 and max(r["kl"] for r in t.log) > 1e-3  # the KL term is live
    assert all("advantage_abs_max" in r for r in t.log)  # leave-one-out advantages replaced TRL's
    assert t.train_gain.positive, f"late-minus-early reward gain {t.train_gain} does not exclude zero"
    assert rung.eval_gain.positive, f"trained-minus-initial score gain {rung.eval_gain} does not exclude zero"
    early, late = t.window_means()  # learning heads for the known optimum: over half the gap to it is closed
    assert late > early + 0.5 * (t.train_optimum - early)
    assert t.weight_change > 1e-3
    assert rung.evaluated_dir == t.checkpoint
    cfg = json.loads((Path(t.checkpoint).parents[1] / "config.json").read_text())
    assert cfg["train"]["kl_beta"] == t.spec.kl_beta and cfg["train"]["advantage"] == "loo"


@pytest.mark.parametrize("sabotage", ["env_mask_zero", "shuffle_rewards", "lr_zero"])
def test_training_twin_does_not_learn(sabotage, tmp_path):
    twin = evaluate_rung(train_rung(tmp_path, seed=SEED, sabotage=sabotage))
    print(twin.summary())
    assert not twin.train_gain.positive, f"{sabotage}: the twin's reward rose {twin.train_gain}"
    assert not twin.eval_gain.positive, f"{sabotage}: the twin's checkpoint improved {twin.eval_gain}"
    log, moved = twin.training.log, twin.training.weight_change
    if sabotage == "env_mask_zero":  # no token is in the loss: no gradient, only weight decay moves weights
        assert all(r["loss"] == 0.0 and r["grad_norm"] == 0.0 for r in log) and moved < 1e-3
    elif sabotage == "lr_zero":  # gradients flow but no step is taken
        assert all(r["lr"] == 0.0 for r in log) and all(r["grad_norm"] > 0 for r in log) and moved == 0.0
        assert twin.eval_trained == twin.eval_initial
    else:  # shuffled rewards: the weights move as much as the rung's, in no useful direction
        assert moved > 1e-3 and max(r["kl"] for r in log) > 1e-3


def test_eval_twin_pointed_at_initial_weights_shows_no_gain(trained, rung):
    twin = evaluate_rung(trained, sabotage="eval_initial")
    print(twin.summary())
    assert twin.train_gain.positive  # the training itself worked ...
    assert twin.evaluated_dir == trained.initial_dir
    assert not twin.eval_gain.positive  # ... but an arm served from the initial weights shows nothing
    assert twin.eval_trained == twin.eval_initial == rung.eval_initial


def test_every_sabotage_has_a_twin():
    assert set(SABOTAGES) == {"env_mask_zero", "shuffle_rewards", "lr_zero", "eval_initial"}


# -- the TRL rung: TRL's stock GRPOTrainer with our environment_factory (negolib.study.ladder_trl) ------------


def test_trl_rung_learns_through_trls_environment_factory(tmp_path):
    from negolib.study.ladder_trl import train_trl_rung

    t = train_trl_rung(tmp_path, seed=SEED)
    print(f"TRL rung: gain {t.train_gain}; step rewards {' '.join(f'{m:+.2f}' for m in t.step_means)}")
    assert len(t.step_rewards) == t.spec.steps and all(len(r) == 32 for r in t.step_rewards)
    assert t.train_gain.positive, f"late-minus-early reward gain {t.train_gain} does not exclude zero"
    early, late = t.window_means()
    assert late > early + 0.5 * (t.train_optimum - early)
    assert max(r["kl"] for r in t.log) > 1e-3 and t.weight_change > 1e-3


def test_trl_rung_lr_zero_twin_does_not_learn(tmp_path):
    from negolib.study.ladder_trl import train_trl_rung

    twin = train_trl_rung(tmp_path, seed=SEED, sabotage="lr_zero")
    assert not twin.train_gain.positive, f"the lr-0 twin's reward rose {twin.train_gain}"
    assert all(r["learning_rate"] == 0.0 for r in twin.log) and twin.weight_change == 0.0
