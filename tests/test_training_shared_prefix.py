"""A GRPO group's shared prompt computed once (negolib.training.shared_prefix): the completion tokens'
log-probabilities, entropies and the gradients equal TRL's stock path (known answer: the same model, the same
batch, both ways); a sabotaged twin (the prompt's pass without autograd) changes the gradients, so the equality
can fail; a batch whose prompts differ is not shared; and a trainer step with the path on moves the adapters as
one with it off does."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("trl")

from negolib.models import tiny_causal_lm  # noqa: E402
from negolib.training import shared_prefix as sp  # noqa: E402

torch.set_num_threads(2)
ROWS, PROMPT, KEEP, PAD = 4, 12, 7, 3


@pytest.fixture(scope="module")
def lora_model():
    from peft import LoraConfig, get_peft_model
    from trl.trainer.utils import add_fused_lm_head

    torch.manual_seed(0)
    model, _ = tiny_causal_lm(seed=0, kv_heads=2)  # grouped-query attention, as SmolLM2 has
    model.config.use_cache = False
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0))
    for name, p in model.named_parameters():
        if "lora_B" in name:  # non-zero adapters, so the adapted path (and lora_A's gradient) is exercised
            torch.nn.init.normal_(p, std=0.05)
    return model.train()


def _group(seed: int = 0):
    """A group's micro-batch: one left-padded prompt repeated, completions of different lengths (right padding)."""
    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(3, 250, (1, PROMPT), generator=g).repeat(ROWS, 1)
    prompt_mask = torch.ones(ROWS, PROMPT, dtype=torch.long)
    prompt_mask[:, :PAD] = 0
    completion = torch.randint(3, 250, (ROWS, KEEP), generator=g)
    completion_mask = torch.ones(ROWS, KEEP, dtype=torch.long)
    completion_mask[1, 5:] = 0
    completion_mask[2, 2:] = 0
    return torch.cat([prompt, completion], 1), torch.cat([prompt_mask, completion_mask], 1), completion_mask


def _stock(model, ids, mask, keep):
    """TRL 1.16's scoring (GRPOTrainer._get_per_token_logps_and_entropies, one chunk)."""
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-keep] = -100
    out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    return out.log_probs[:, -keep:], out.entropy[:, -keep:]


def _grads(model, score, weights):
    model.zero_grad()
    (score()[0] * weights).sum().backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


def test_logps_entropies_and_gradients_equal_the_stock_path(lora_model):
    ids, mask, completion_mask = _group()
    assert sp.shareable(ids, mask, KEEP)
    logps, entropy = _stock(lora_model, ids, mask, KEEP)
    shared, shared_entropy = sp.shared_prefix_logps(lora_model, ids, mask, KEEP, compute_entropy=True)
    assert shared.shape == (ROWS, KEEP)
    assert torch.allclose(shared, logps, atol=1e-5) and torch.allclose(shared_entropy, entropy, atol=1e-5)
    weights = torch.randn(ROWS, KEEP, generator=torch.Generator().manual_seed(1)) * completion_mask
    stock = _grads(lora_model, lambda: _stock(lora_model, ids, mask, KEEP), weights)
    once = _grads(lora_model, lambda: sp.shared_prefix_logps(lora_model, ids, mask, KEEP), weights)
    assert any(g.abs().max() > 0 for g in stock.values())
    for name, g in stock.items():
        assert torch.allclose(once[name], g, atol=1e-6, rtol=1e-4), name


def test_a_prompt_pass_without_gradient_is_caught(lora_model, monkeypatch):
    """Sabotaged twin: the prompt's pass run without autograd (a tempting shortcut) scores the same log-probs but
    drops the gradient that reaches the adapters through the prompt's keys and values; the gradient equality
    above must then fail."""
    ids, mask, completion_mask = _group()
    real = sp._causal_lm(lora_model)

    class NoGradPrompt:
        def __getattr__(self, name):
            return getattr(real, name)

        @property
        def base_model(self):
            def run(**kw):
                with torch.no_grad():
                    return real.base_model(**kw)
            return run

    monkeypatch.setattr(sp, "_causal_lm", lambda model: NoGradPrompt())
    weights = torch.randn(ROWS, KEEP, generator=torch.Generator().manual_seed(1)) * completion_mask
    logps, _ = _stock(lora_model, ids, mask, KEEP)
    assert torch.allclose(sp.shared_prefix_logps(lora_model, ids, mask, KEEP)[0], logps, atol=1e-5)
    stock = _grads(lora_model, lambda: _stock(lora_model, ids, mask, KEEP), weights)
    cut = _grads(lora_model, lambda: sp.shared_prefix_logps(lora_model, ids, mask, KEEP), weights)
    assert not all(torch.allclose(cut[n], g, atol=1e-6, rtol=1e-4) for n, g in stock.items())


def test_only_identical_prompts_are_shared():
    ids, mask, _ = _group()
    assert sp.shareable(ids, mask, KEEP)
    other = ids.clone()
    other[2, PROMPT - 1] += 1  # one prompt token differs in one row
    assert not sp.shareable(other, mask, KEEP)
    shifted = mask.clone()
    shifted[3, PAD] = 0  # one row's padding differs
    assert not sp.shareable(ids, shifted, KEEP)
    assert not sp.shareable(ids[:1], mask[:1], KEEP)  # one row: nothing to share
    assert not sp.shareable(ids[:, PROMPT - 1:], mask[:, PROMPT - 1:], KEEP)  # prompt shorter than two tokens


def test_a_trainer_step_moves_the_adapters_as_the_stock_path_does(tmp_path):
    from test_training_grpo import CoinBuyer, tiny_config

    from negolib.games.multi_issue.training import paper_task
    from negolib.training.grpo import build_run

    model, tok = tiny_causal_lm(seed=0)
    model_dir = tmp_path / "model"
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    after = {}
    for shared in (True, False):
        cfg = tiny_config(lora_rank=4, max_steps=1, validate_every=0, save_every=1, scenarios_per_step=1,
                          rollouts_per_scenario=4, micro_batch_size=4, shared_prefix=shared)
        setup = build_run(cfg, model_dir, tmp_path / f"run-{shared}", buyers={"coin": CoinBuyer()},
                          progress=False, task=paper_task(cfg))
        before = {n: p.detach().clone() for n, p in setup.trainer.model.named_parameters() if p.requires_grad}
        setup.trainer.train()
        after[shared] = {n: p.detach().clone() for n, p in setup.trainer.model.named_parameters()
                         if p.requires_grad}
        assert getattr(setup.trainer, "shared_prefix_calls", 0) > 0 if shared else \
            getattr(setup.trainer, "shared_prefix_calls", 0) == 0
    assert any(not torch.equal(after[True][n], before[n]) for n in before)  # the step moved something
    for name, value in after[False].items():
        assert torch.allclose(after[True][name], value, atol=1e-5), name
