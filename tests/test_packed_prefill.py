"""Packed multi-row prefill: the same keys/values as transformers' own forward, row by row, and the
same samples from an agent that uses it as from one that does not."""

from __future__ import annotations

import copy

import pytest
from conftest import play_side_by_side

from negolib.agents.hf_agent import HFAgent
from negolib.core.sampling import SamplingConfig
from negolib.games.multi_issue.env import Episode
from negolib.games.multi_issue.prompts import render_messages
from negolib.games.multi_issue.scenarios import scenario_set

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _reference_states(model, ids):
    """Per layer (keys, values) of ``ids`` from transformers' own forward (the oracle)."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True)
    return [(layer.keys, layer.values) for layer in cache.layers]


@pytest.mark.parametrize("budget", [4096, 16])
def test_packed_prefill_equals_transformers_forward_row_by_row(monkeypatch, budget):
    """Rows with and without a cached prefix, of one and of many new tokens, and a row with nothing
    new: each row's states equal a plain forward over its whole prompt. A budget of 16 tokens splits
    the rows over several packed forwards."""
    from negolib.agents import packed
    from negolib.models import tiny_causal_lm

    monkeypatch.setattr(packed, "MAX_PACKED_TOKENS", budget)
    model, _ = tiny_causal_lm(seed=7, hidden=64, kv_heads=2)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, 250, (n,), generator=g).tolist() for n in (9, 13, 35, 6, 21)]
    starts = [0, 12, 20, 6, 0]  # tokens already cached per row (row 3: all of them)
    rows = []
    for ids, start in zip(prompts, starts):
        cached = [(k[:, :, :start].clone(), v[:, :, :start].clone())
                  for k, v in _reference_states(model, ids[:start])] if start else None
        rows.append(packed.PrefillRow(cached, start, ids[start:]))
    with torch.inference_mode():
        states = packed.packed_prefill(model, rows)
    assert len(states) == len(prompts)
    for ids, got in zip(prompts, states):
        want = _reference_states(model, ids)
        assert len(got) == len(want) == model.config.num_hidden_layers
        for (k, v), (rk, rv) in zip(got, want):
            assert k.shape == rk.shape == (1, 2, len(ids), rk.shape[-1])
            assert torch.allclose(k, rk, atol=1e-5) and torch.allclose(v, rv, atol=1e-5)


def test_a_released_prefix_gives_the_same_states_and_is_freed_layer_by_layer():
    """``release``: the row's cached layers are dropped (None) as the forward reads them, its states are
    bitwise those of the same prefill without release, and a row without release keeps its cache."""
    from negolib.agents import packed
    from negolib.models import tiny_causal_lm

    model, _ = tiny_causal_lm(seed=7, hidden=64, kv_heads=2)
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(3, 250, (n,), generator=g).tolist() for n in (30, 24)]
    caches = [[(k[:, :, :10].clone(), v[:, :, :10].clone()) for k, v in _reference_states(model, ids[:10])]
              for ids in prompts]
    results = []
    for release in (False, True):
        kept = [list(c) for c in caches]
        rows = [packed.PrefillRow(kept[0], 10, prompts[0][10:], release),
                packed.PrefillRow(kept[1], 10, prompts[1][10:])]
        with torch.inference_mode():
            results.append(packed.packed_prefill(model, rows))
        assert all(layer is None for layer in kept[0]) is release
        assert all(layer is not None for layer in kept[1])
    for plain_row, released_row in zip(*results):
        for (k, v), (k2, v2) in zip(plain_row, released_row):
            assert torch.equal(k, k2) and torch.equal(v, v2)


def test_packed_prefill_rejects_an_empty_row():
    from negolib.agents.packed import PrefillRow, packed_prefill
    from negolib.models import tiny_causal_lm

    model, _ = tiny_causal_lm(seed=1)
    with pytest.raises(ValueError, match="cached states or new tokens"):
        packed_prefill(model, [PrefillRow(None, 0, [])])


def test_which_models_take_the_packed_path():
    from transformers import GPT2Config, GPT2LMHeadModel

    from negolib.agents.packed import supports_packed_prefill
    from negolib.models import tiny_causal_lm

    model, _ = tiny_causal_lm(seed=1, kv_heads=2)
    assert supports_packed_prefill(model)
    model.train()
    assert not supports_packed_prefill(model)  # dropout, gradient checkpointing: the model's own forward
    model.eval()
    model.set_attn_implementation("eager")
    assert not supports_packed_prefill(model)  # the reference attention stays the reference
    other = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=300)).eval()
    assert not supports_packed_prefill(other)


@pytest.mark.parametrize("scaffold", ["evaluation", "training"])
def test_agent_samples_the_same_with_packed_and_row_by_row_prefill(scaffold, monkeypatch):
    from negolib.agents import packed as packed_module
    from negolib.models import tiny_causal_lm

    forward, rows_per_pass = packed_module._packed_forward, []

    def counting(model, rows):
        rows_per_pass.append(len(rows))
        return forward(model, rows)

    monkeypatch.setattr(packed_module, "_packed_forward", counting)

    model, tok = tiny_causal_lm(seed=2, hidden=64, kv_heads=2)
    s = SamplingConfig(max_new_tokens=6, seed=4)
    big = 10**6  # no eviction (byte-level prompts are long), so both reuse the same prefixes
    packed = HFAgent(model, tok, s, scaffold=scaffold, prompt_cap=8192, prefix_cache_tokens=big, render=render_messages)
    rows = HFAgent(copy.deepcopy(model), tok, s, scaffold=scaffold, prompt_cap=8192, prefix_cache_tokens=big,
                   packed_prefill=False, render=render_messages)
    eps = [Episode(sc, episode_id=f"e{i}") for i, sc in enumerate(scenario_set([1, 2, 3], ["car", "job_offer"]))]
    play_side_by_side(packed, rows, eps)
    assert max(rows_per_pass) > 1  # rows really were packed together
    assert packed.prefix_cache.computed == rows.prefix_cache.computed > 0
    assert packed.prefix_cache.reused == rows.prefix_cache.reused > 0


def test_shared_uncached_tokens_are_prefilled_once():
    """A GRPO group: eight rollouts of one scenario send the same first prompt. Packed, the first
    row is prefilled and the other seven read it from the prefix cache, as row by row; a row of
    another scenario shares only the system message with them."""
    from negolib.models import tiny_causal_lm

    model, tok = tiny_causal_lm(seed=3, hidden=64, kv_heads=2)
    s = SamplingConfig(max_new_tokens=4, seed=1)
    a, b = scenario_set([1, 2], ["car"])
    eps = [Episode(a, episode_id=f"g{i}") for i in range(8)] + [Episode(b, episode_id="other")]
    agents = [HFAgent(copy.deepcopy(model), tok, s, prompt_cap=8192, packed_prefill=p,
                      render=render_messages) for p in (True, False)]
    for agent in agents:
        agent.act_batch([e.view() for e in eps])
    prompts = [agents[0].prompt_ids(e.view())[0] for e in (eps[0], eps[-1])]
    shared = next(i for i, (x, y) in enumerate(zip(*prompts)) if x != y)
    unique_tokens = (len(prompts[0]) - 1) + (len(prompts[1]) - 1 - shared)
    assert agents[0].prefix_cache.computed == agents[1].prefix_cache.computed == unique_tokens
    assert agents[0].prefix_cache.hits == agents[1].prefix_cache.hits == 8
