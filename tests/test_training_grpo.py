"""GRPO with TRL on a tiny model: masking, LOO advantages, a real tiny run, interrupt and resume."""

from __future__ import annotations

import json
import zlib

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from negolib.agents.base import Agent, AgentReply  # noqa: E402
from negolib.games.multi_issue.training import paper_task  # noqa: E402
from negolib.models import tiny_causal_lm  # noqa: E402
from negolib.training.advantages import loo_advantages  # noqa: E402
from negolib.training.config import TrainConfig  # noqa: E402
from negolib.training.grpo import build_run, train  # noqa: E402
from negolib.training.schedule import WarmupCosine  # noqa: E402

torch.set_num_threads(2)


class CoinBuyer(Agent):
    """Accepts the current ledger when the CRC of the seller's last prose is even, else stalls: the
    outcome (deal 0.5 vs no deal -0.3) varies across rollouts of one scenario, so advantages do too."""

    name = "coin"

    def act_batch(self, views):
        out = []
        for v in views:
            prose = v.history[-1].prose if v.history else ""
            if zlib.crc32(prose.encode("utf-8", "replace")) % 2 == 0:
                out.append(AgentReply('Fine.\n{"action": "ACCEPT"}'))
            else:
                out.append(AgentReply("Not yet."))
        return out


def tiny_config(**kw) -> TrainConfig:
    base = dict(
        scenarios_per_step=2,
        rollouts_per_scenario=4,
        micro_batch_size=4,
        max_steps=3,
        learning_rate=1e-2,
        warmup_steps=1,
        max_rounds=1,
        max_new_tokens=8,
        max_prompt_tokens=96,
        max_context_tokens=512,
        train_seeds_per_domain=2,
        train_domains=("acquisition", "job_offer"),
        validate_every=2,
        validation_seeds_per_domain=1,
        save_every=1,
        buyer_mixture={"coin": 1.0},
        accept_needs_offer=False,  # wiring test: the random tiny seller never writes a COUNTER for
        # CoinBuyer to accept, so the paper's rule (any ACCEPT closes) keeps rewards varying
    )
    base.update(kw)
    return TrainConfig(**base)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    model, tok = tiny_causal_lm(seed=0)
    path = tmp_path_factory.mktemp("tiny-model")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_buyer_tokens_get_no_gradient_and_advantages_are_loo(model_dir, tmp_path):
    cfg = tiny_config()
    run = build_run(cfg, model_dir, tmp_path / "run", buyers={"coin": CoinBuyer()}, progress=False,
                    task=paper_task(cfg))
    trainer = run.trainer
    trainer.model.train()
    ds = trainer.train_dataset
    rows = [dict(ds[i]) for i in (0, 0, 0, 0, 1, 1, 1, 1)]
    out = trainer._generate_and_score_completions(rows)
    mask = out["completion_mask"] * out["tool_mask"]
    # env_mask reached TRL's loss mask: buyer/scaffold tokens (0) are out of the loss
    assert 0 < int(mask.sum()) < int(out["completion_mask"].sum())
    assert int(out["num_items_in_batch"]) == int(mask.sum())  # tokens the dapo loss is normalized by
    # advantages are NeMo-RL's leave-one-out ones, computed from the episode rewards
    rewards = trainer._gathered_rewards[:, 0].numpy()
    assert out["advantages"].numpy() == pytest.approx(loo_advantages(rewards, 4), abs=1e-6)

    out["advantages"] = torch.tensor([1.0, -1.0, 0.5, -0.5, 1.0, -1.0, 0.5, -0.5])  # a signal on every row
    kept = {}
    original = trainer._get_per_token_logps_and_entropies

    def spy(*a, **k):
        logps, ent, aux = original(*a, **k)
        logps.retain_grad()
        kept["logps"] = logps
        return logps, ent, aux

    trainer._get_per_token_logps_and_entropies = spy
    trainer.current_gradient_accumulation_steps = 1
    loss = trainer._compute_loss(trainer.model, out)
    loss.backward()
    grad = kept["logps"].grad
    assert torch.all(grad[mask == 0] == 0)  # no gradient through buyer or padding positions
    assert torch.all(grad[mask == 1] != 0)
    # perturbing the buyer tokens' log-probs would not change the loss: their weight is exactly zero
    weights = grad.abs()
    assert float(weights[mask == 0].sum()) == 0.0


class StopAt:
    """A TrainerCallback that interrupts training after ``step`` (a simulated kill after a checkpoint)."""

    def __new__(cls, step: int):
        from transformers import TrainerCallback

        class _Stop(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):
                if state.global_step >= step:
                    control.should_training_stop = True

        return _Stop()


@pytest.fixture(scope="module")
def resumed_run(model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "tiny"
    cfg = tiny_config()
    first = train(cfg, model_dir, out, buyers={"coin": CoinBuyer()}, progress=False, callbacks=[StopAt(2)],
                  task=paper_task(cfg))
    second = train(cfg, model_dir, out, buyers={"coin": CoinBuyer()}, progress=False, task=paper_task(cfg))
    return cfg, out, first, second


def test_tiny_run_moves_the_policy(resumed_run):
    cfg, out, first, second = resumed_run
    log = second.log
    assert [r["step"] for r in log] == [1, 2, 3]
    assert log[0]["kl"] == 0.0  # the first update starts at the reference policy
    assert all(r["kl"] > 1e-6 for r in log[1:])  # KL to the initial policy moves away from 0 once lr > 0
    assert log[0]["lr"] == pytest.approx(1e-2)  # warmup of one step: the peak at step 1
    assert [r["lr"] for r in log] == pytest.approx(WarmupCosine(cfg.peak_lr, 3, 1, 0.1).values())
    for key in (
        "reward",
        "score",
        "deal_rate",
        "entropy",
        "grad_norm",
        "tokens_generated",
        "tokens_trained",
        "time_generation_s",
        "time_buyer_s",
        "time_update_s",
        "wall_time_s",
        "advantage_abs_max",
    ):
        assert key in log[-1], key
    assert (out / "train_log.csv").is_file() and (out / "validation_log.csv").is_file()


def test_interrupt_and_resume(resumed_run):
    cfg, out, first, second = resumed_run
    assert first.steps == 2 and second.steps == 3
    ckpts = out / "checkpoints"
    assert sorted(p.name for p in ckpts.iterdir() if p.is_dir()) == [
        "checkpoint-1",
        "checkpoint-2",
        "checkpoint-3",
    ]
    assert second.checkpoint == ckpts / "checkpoint-3"
    opt2 = torch.load(ckpts / "checkpoint-2" / "optimizer.pt", weights_only=False)
    opt3 = torch.load(ckpts / "checkpoint-3" / "optimizer.pt", weights_only=False)
    assert opt2["state"].keys() == opt3["state"].keys() and len(opt3["state"]) > 0
    assert {float(s["step"]) for s in opt2["state"].values()} == {2.0}
    assert {float(s["step"]) for s in opt3["state"].values()} == {3.0}
    assert opt3["param_groups"][0]["betas"] == (0.9, 0.95) and opt3["param_groups"][0]["weight_decay"] == 0.01
    state = json.loads((ckpts / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3
    assert [r["step"] for r in second.validation] == [0, 2]  # step 0 once, not redone on resume
    steps = [
        json.loads(line)["step"] for line in (out / "transcripts" / "train.jsonl").read_text().splitlines()
    ]
    assert sorted(steps) == [1] * 8 + [2] * 8 + [3] * 8
    # re-running a finished run is a no-op that returns the same result
    again = train(cfg, "unused-when-resuming", out, buyers={"coin": CoinBuyer()}, progress=False,
                  task=paper_task(cfg))
    assert again.steps == 3 and [r["step"] for r in again.log] == [1, 2, 3]


def test_checkpoint_is_a_loadable_policy(resumed_run):
    from negolib.models import load_causal_lm

    _, out, _, second = resumed_run
    model, tok = load_causal_lm(second.checkpoint)
    assert model.config.num_hidden_layers == 2 and tok.eos_token == "<|im_end|>"


def test_continuation_restarts_its_schedule_from_the_checkpoint(resumed_run, tmp_path):
    cfg, _, _, second = resumed_run
    cont = tiny_config(max_steps=2, warmup_steps=2, continue_from=str(second.checkpoint), validate_every=0)
    res = train(
        cont, "ignored-when-continuing", tmp_path / "cont", buyers={"coin": CoinBuyer()}, progress=False,
        task=paper_task(cont),
    )
    assert [r["lr"] for r in res.log] == pytest.approx([cfg.peak_lr / 2, cfg.peak_lr])  # its own warmup again
    assert res.log[0]["kl"] == 0.0  # the continuation's reference is the checkpoint it starts from
    recorded = json.loads((tmp_path / "cont" / "config.json").read_text())
    assert recorded["init"] == str(second.checkpoint)


def test_lora_run_trains_only_adapters(model_dir, tmp_path):
    pytest.importorskip("peft")
    from negolib.training.grpo_args import lora_config

    assert lora_config(tiny_config()) is None
    cfg = tiny_config(lora_rank=4, max_steps=2, validate_every=0, save_every=2)
    setup = build_run(cfg, model_dir, tmp_path / "lora", buyers={"coin": CoinBuyer()}, progress=False,
                      task=paper_task(cfg))
    model = setup.trainer.model
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    frozen_before = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    lora_before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    setup.trainer.train()
    after = dict(model.named_parameters())
    assert all(torch.equal(after[n], v) for n, v in frozen_before.items())
    assert any(not torch.equal(after[n], v) for n, v in lora_before.items())


def _live_trainers() -> int:
    import gc

    return sum(any(c.__name__ == "GRPOTrainer" for c in type(o).__mro__) for o in gc.get_objects())


@pytest.mark.parametrize("release", [True, False], ids=["released", "sabotaged"])
def test_a_finished_run_leaves_no_trainer_alive(model_dir, tmp_path, monkeypatch, release):
    """A notebook kernel trains several runs in turn: a finished run's trainer (its model, gradients and Adam
    moments) must be freed when :func:`train` returns, not left in reference cycles for a collection nothing
    schedules, where its memory stacks under the next phase's peak. The sabotaged twin skips the release and
    finds the trainer still alive, so the check can fail."""
    import gc

    import negolib.training.grpo as grpo_module

    if not release:
        monkeypatch.setattr(grpo_module, "release_memory", lambda: 0)
    cfg = tiny_config(max_steps=1, validate_every=0, save_every=1)
    gc.collect()
    before = _live_trainers()
    gc.disable()  # only the release may collect
    try:
        train(cfg, model_dir, tmp_path / "run", buyers={"coin": CoinBuyer()}, progress=False, task=paper_task(cfg))
        alive = _live_trainers() - before
    finally:
        gc.enable()
    assert (alive == 0) if release else (alive > 0)


def test_release_memory_collects_cycles():
    import gc
    import weakref

    from negolib.training.release import release_memory

    class Node:
        pass

    gc.disable()
    try:
        a, b = Node(), Node()
        a.peer, b.peer, a.weights = b, a, torch.zeros(1024)
        ref = weakref.ref(a)
        del a, b
        assert ref() is not None  # a cycle: reference counting alone keeps it
        assert release_memory() >= 2
        assert ref() is None
    finally:
        gc.enable()
