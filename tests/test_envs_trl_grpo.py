"""TRL's stock ``GRPOTrainer(..., environment_factory=...)`` trains a tiny model from a config on every game (issue 30,
section 1): no trainer subclass, no ``reward_funcs`` (TRL picks up the environment's ``get_reward``), on CPU."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")

from negolib.envs.trl import dataset, environment_factory  # noqa: E402
from negolib.study.ladder import weight_change  # noqa: E402
from negolib.study.ladder_trl import (  # noqa: E402
    call_text,
    grpo_args,
    load_tool_model,
    save_tool_model,
    tool_tokenizer,
)

CALLS = {  # whole tool calls the tiny model can sample, one token each
    "multi_issue": [call_text("counter", {"terms": {"price": 60}, "message": "Sixty."}),
                    call_text("accept", {"message": "Deal."})],
    "bilateral": [call_text("make_offer", {"price": 50.0, "message": "Fifty."}),
                  call_text("accept_offer", {"message": "Deal."}), call_text("walk_away", {"message": "Bye."})],
    "multi_buyer": [call_text("message_buyer", {"to": "buyer_1", "message": "Fifty?", "offer": 50.0}),
                    call_text("message_buyer", {"to": "buyer_2", "message": "Your price?"})],
    "multi_product": [call_text("make_offer", {"to": f"buyer_{b}", "product": "product_1", "price": p,
                                               "message": "This price?"}) for b, p in ((1, 60.0), (2, 90.0))],
}
OPPONENT = {"multi_issue": "conceder", "bilateral": "conceder", "multi_buyer": "pool", "multi_product": "pool"}


def test_the_tool_tokenizer_passes_trls_tool_checks():
    from trl.chat_template_utils import is_chat_template_prefix_preserving, parse_response, supports_tool_calling

    tok = tool_tokenizer(CALLS["bilateral"])
    assert supports_tool_calling(tok) and is_chat_template_prefix_preserving(tok)
    prompt = tok.apply_chat_template([{"role": "user", "content": "Sell."}], add_generation_prompt=True)
    ids = tok(CALLS["bilateral"][0], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert len(ids) == 2
    parsed = parse_response(tok, ids, prefix=prompt)
    assert parsed["tool_calls"] == [{"type": "function", "function": {
        "name": "make_offer", "arguments": {"price": 50.0, "message": "Fifty."}}}]


@pytest.mark.parametrize("game", sorted(CALLS))
def test_stock_grpo_trainer_trains_a_tiny_model_on_every_game(game, tmp_path):
    initial = save_tool_model(tmp_path / "initial", CALLS[game], seed=1)
    model, tok = load_tool_model(initial)
    env_cls = environment_factory(game, OPPONENT[game], seed=1)
    trainer = trl.GRPOTrainer(model=model, processing_class=tok, train_dataset=dataset(game, 2, "train"),
                              environment_factory=env_cls,
                              args=grpo_args(tmp_path / "run", 8, 4, 2, 1e-2, seed=1, warmup_steps=0,
                                             max_completion_length=48, max_tool_calling_iterations=16))
    assert type(trainer) is trl.GRPOTrainer and trainer.reward_func_names == [env_cls.__name__]
    trainer.train()
    log = [r for r in trainer.state.log_history if "loss" in r]
    assert len(log) == 2
    assert all(math.isfinite(r[f"rewards/{env_cls.__name__}/mean"]) for r in log)
    assert sum(r["tools/call_frequency"] for r in log) > 0  # the sampled calls reached the environment
    played = [e for e in trainer.environments if e.episode is not None and e.episode.turns]
    assert played, "no environment instance played a turn"
    trainer.save_model(str(tmp_path / "final"))
    moved = weight_change(initial, tmp_path / "final") > 0
    assert moved == any(r["reward_std"] > 1e-6 for r in log)  # the update is live exactly when a group's rewards differ
    # the markets' 10-16 turn budgets are rarely spent by a random tiny model in 48 tokens: the multi-product
    # episodes stay unfinished (the driver's floor for all), so GRPO has no signal there
    assert moved or game == "multi_product"
