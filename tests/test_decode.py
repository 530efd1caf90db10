"""Batched decoding internals: grouped-query SDPA without copies and the preallocated KV cache,
checked against transformers' own attention function and its default cache."""

from __future__ import annotations

import copy

import pytest
from conftest import play_side_by_side

from negolib.agents.hf_agent import HFAgent
from negolib.core.sampling import SamplingConfig
from negolib.games.multi_issue.env import Episode
from negolib.games.multi_issue.prompts import render_messages
from negolib.games.multi_issue.scenarios import scenario_set
from negolib.games.multi_issue.scripted import make_scripted

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


class _Attn(torch.nn.Module):
    def __init__(self, groups: int) -> None:
        super().__init__()
        self.num_key_value_groups, self.is_causal, self.training = groups, True, False


@pytest.mark.parametrize("masked", [True, False])
def test_grouped_sdpa_equals_transformers_sdpa(masked):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from negolib.agents.decode import grouped_sdpa

    g = torch.Generator().manual_seed(0)
    batch, kv_heads, groups, length, dim = 3, 2, 3, 17, 8
    q = torch.randn(batch, kv_heads * groups, 1, dim, generator=g)
    k, v = (torch.randn(batch, kv_heads, length, dim, generator=g) for _ in range(2))
    mask = None
    if masked:  # left padding of different widths, as a batched decode step has
        mask = torch.ones(batch, 1, 1, length, dtype=torch.bool)
        mask[0, ..., :5] = False
        mask[2, ..., :1] = False
    module = _Attn(groups)
    ours, _ = grouped_sdpa(module, q, k, v, mask, scaling=0.3)
    theirs, _ = sdpa_attention_forward(module, q, k, v, mask, scaling=0.3)
    assert ours.shape == theirs.shape == (batch, 1, kv_heads * groups, dim)
    assert torch.allclose(ours, theirs, atol=1e-6)


def test_grouped_sdpa_hands_prefill_to_transformers(monkeypatch):
    import transformers.integrations.sdpa_attention as sdpa

    from negolib.agents.decode import grouped_sdpa

    calls = []
    monkeypatch.setattr(sdpa, "sdpa_attention_forward", lambda *a, **kw: calls.append(a[1].shape) or ("x", None))
    q, k = torch.zeros(1, 4, 5, 8), torch.zeros(1, 2, 5, 8)
    assert grouped_sdpa(_Attn(2), q, k, k, None)[0] == "x" and calls == [q.shape]


def test_decode_attention_in_bfloat16_stays_close_to_float32():
    """A bf16 cache (GPU runs): the written-out decode attention keeps the dtype and stays as close to
    the float32 result as bf16 inputs allow."""
    from negolib.agents.decode import _decode_attention

    g = torch.Generator().manual_seed(9)
    q = torch.randn(2, 6, 1, 16, generator=g)
    k = torch.randn(2, 2, 16, 300, generator=g).transpose(-1, -2) * 3  # a transposed view, as the cache holds
    v = torch.randn(2, 2, 300, 16, generator=g)
    exact = _decode_attention(q, k, v, None, 0.25)
    half = _decode_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), None, 0.25)
    assert half.dtype == torch.bfloat16 and torch.allclose(half.float(), exact, atol=0.03)


def test_preallocated_layer_appends_in_place():
    from negolib.agents.decode import PreallocatedLayer

    kb, vb = torch.zeros(2, 1, 4, 6), torch.zeros(2, 1, 6, 4)  # keys transposed: (batch, heads, dim, capacity)
    kb[..., :3], vb[:, :, :3] = 1.0, 2.0
    layer = PreallocatedLayer(kb, vb, 3)
    assert layer.get_seq_length() == 3 and layer.keys.shape == layer.values.shape == (2, 1, 3, 4)
    k, v = layer.update(torch.full((2, 1, 2, 4), 5.0), torch.full((2, 1, 2, 4), 6.0))
    assert k.shape == v.shape == (2, 1, 5, 4) and layer.get_seq_length() == 5
    assert k.data_ptr() == kb.data_ptr() and float(kb[0, 0, 0, 4]) == 5.0 and float(vb[1, 0, 3, 1]) == 6.0
    assert float(k[0, 0, 4, 2]) == 5.0 and float(k[1, 0, 2, 3]) == 1.0
    with pytest.raises(RuntimeError, match="capacity 6"):
        layer.update(torch.zeros(2, 1, 2, 4), torch.zeros(2, 1, 2, 4))


def test_preallocated_layer_from_rows_left_pads_with_zeros():
    from negolib.agents.decode import PreallocatedLayer

    g = torch.Generator().manual_seed(0)
    rows = [(torch.randn(1, 2, n, 3, generator=g), torch.randn(1, 2, n, 3, generator=g)) for n in (4, 1, 0)]
    layer = PreallocatedLayer.from_rows(rows, end=5, capacity=9)
    assert layer.get_seq_length() == 5 and layer.k_buf.shape == (3, 2, 3, 9)
    for i, (k, v) in enumerate(rows):
        n = k.shape[2]
        assert torch.equal(layer.keys[i, :, 5 - n:], k[0]) and torch.equal(layer.values[i, :, 5 - n:], v[0])
        assert not layer.keys[i, :, :5 - n].any() and not layer.values[i, :, :5 - n].any()


def test_kv_pool_reuses_its_buffers_and_grows_when_asked_for_more():
    from negolib.agents.decode import KVPool, PreallocatedLayer

    g = torch.Generator().manual_seed(1)

    def rows(batch, n):  # [row][layer] -> (keys, values), two layers
        return [[(torch.randn(1, 2, n - i, 3, generator=g), torch.randn(1, 2, n - i, 3, generator=g))
                 for _ in range(2)] for i in range(batch)]

    pool = KVPool(step=8)
    r = rows(3, 5)
    first = pool.layers(r, end=5, capacity=9)
    assert [tuple(b[0].shape) for b in pool.buffers] == [(3, 2, 3, 16)] * 2
    ptr = first[0].k_buf.data_ptr()
    for layer, got in enumerate(first):
        want = PreallocatedLayer.from_rows([x[layer] for x in r], 5, 9)
        assert torch.equal(got.keys, want.keys) and torch.equal(got.values, want.values)
    r = rows(2, 4)  # smaller: the same memory, filled afresh
    second = pool.layers(r, end=4, capacity=12)
    assert second[0].k_buf.data_ptr() == ptr and second[0].k_buf.shape == (2, 2, 3, 12)
    assert torch.equal(second[1].values, PreallocatedLayer.from_rows([x[1] for x in r], 4, 12).values)
    pool.layers(rows(4, 5), end=5, capacity=20)  # larger: grows to (4, 24)
    assert [tuple(b[0].shape) for b in pool.buffers] == [(4, 2, 3, 24)] * 2


@pytest.mark.parametrize("keep, order", [([True, False, True, True], [0, 3, 2]), ([False, False, True], [2]),
                                         ([True, True, False], [0, 1]), ([True, True], [0, 1])])
def test_compaction_order_fills_freed_slots_from_the_end(keep, order):
    from negolib.agents.decode import compaction_order

    assert compaction_order(keep) == order


def test_compact_moves_kept_rows_without_touching_the_others():
    from negolib.agents.decode import PreallocatedLayer, compaction_order

    kb = torch.arange(5.0)[:, None, None, None].expand(5, 1, 2, 4).clone()
    vb = torch.arange(5.0)[:, None, None, None].expand(5, 1, 4, 2).clone() + 10
    layer = PreallocatedLayer(kb, vb, 3)
    order = compaction_order([False, True, False, True, True])
    layer.compact(order)
    assert order == [3, 1, 4]
    assert layer.keys[:, 0, 0, 0].tolist() == [3.0, 1.0, 4.0]
    assert layer.values[:, 0, 0, 0].tolist() == [13.0, 11.0, 14.0]
    assert layer.k_buf.data_ptr() == kb.data_ptr()  # narrowed in place, not copied
    layer.update(torch.zeros(3, 1, 1, 2), torch.zeros(3, 1, 1, 2))
    assert layer.keys.shape == (3, 1, 4, 2)


@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("groups", [1, 3])
def test_decode_attention_on_transposed_keys_equals_transformers_sdpa(masked, groups):
    """The written-out decode attention over a PreallocatedLayer's transposed keys (any group size,
    a boolean or an additive mask) equals transformers' SDPA on the same values."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from negolib.agents.decode import PreallocatedLayer, grouped_sdpa

    g = torch.Generator().manual_seed(groups)
    batch, kv_heads, length, dim = 3, 2, 17, 8
    q = torch.randn(batch, kv_heads * groups, 1, dim, generator=g)
    rows = [(torch.randn(1, kv_heads, length, dim, generator=g), torch.randn(1, kv_heads, length, dim, generator=g))
            for _ in range(batch)]
    layer = PreallocatedLayer.from_rows(rows, end=length, capacity=length + 4)
    k, v = layer.keys, layer.values
    assert k.stride(-2) == 1
    masks = [None]
    if masked:
        mask = torch.ones(batch, 1, 1, length, dtype=torch.bool)
        mask[0, ..., :5] = False
        mask[2, ..., :1] = False
        masks = [mask, torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))]
    module = _Attn(groups)
    for mask in masks:
        ours, _ = grouped_sdpa(module, q, k, v, mask, scaling=0.3)
        theirs, _ = sdpa_attention_forward(module, q, k.contiguous(), v, mask, scaling=0.3)
        assert ours.shape == theirs.shape == (batch, 1, kv_heads * groups, dim)
        assert torch.allclose(ours, theirs, atol=1e-6)


def test_grouped_attention_switches_only_sdpa_models_and_restores():
    from negolib.agents.decode import ATTENTION_NAME, grouped_attention
    from negolib.models import tiny_causal_lm

    model, _ = tiny_causal_lm(hidden=64, kv_heads=2)
    before = model.config._attn_implementation
    with grouped_attention(model) as switched:
        assert switched == (before == "sdpa")
        if switched:
            assert model.model.layers[0].self_attn.config._attn_implementation == ATTENTION_NAME
    assert model.config._attn_implementation == before
    model.set_attn_implementation("eager")
    with grouped_attention(model) as switched:
        assert not switched and model.config._attn_implementation == "eager"


def test_grouped_query_model_samples_the_same_with_and_without_the_fast_path():
    """A GQA model (4 query heads on 2 key/value heads, like SmolLM2's 9 on 3): grouped SDPA with
    prefix reuse samples exactly what eager attention (transformers' reference) without reuse does."""
    from negolib.models import tiny_causal_lm

    model, tok = tiny_causal_lm(seed=2, hidden=64, kv_heads=2)
    assert model.config.num_attention_heads == 4 and model.config.num_key_value_heads == 2
    s = SamplingConfig(max_new_tokens=6, seed=4)
    fast = HFAgent(model, tok, s, scaffold="evaluation", prompt_cap=8192, render=render_messages)
    plain = HFAgent(copy.deepcopy(model), tok, s, scaffold="evaluation", prompt_cap=8192, prefix_cache_tokens=1,
                    render=render_messages)
    plain.model.set_attn_implementation("eager")  # transformers' reference attention: repeat_kv, no SDPA
    play_side_by_side(fast, plain, [Episode(sc, episode_id=f"e{i}")
                                    for i, sc in enumerate(scenario_set([1, 2, 3], ["car"]))])
    assert fast.prefix_cache.hits > 0


@pytest.mark.parametrize("top_k, top_p", [(64, 0.95), (5, 1.0), (0, 0.8), (0, 1.0), (3, 0.3)])
def test_candidates_match_transformers_warpers(top_k, top_p):
    """Our top-k-first candidate set and probabilities equal transformers' temperature -> top-k ->
    top-p warpers followed by a softmax over the whole vocabulary (the oracle)."""
    from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    from negolib.agents.decode import candidates

    g = torch.Generator().manual_seed(top_k)
    logits = torch.randn(4, 300, generator=g) * 3
    temperature = 0.7
    warpers = [TemperatureLogitsWarper(temperature)]
    if top_k:
        warpers.append(TopKLogitsWarper(top_k))
    if top_p < 1:
        warpers.append(TopPLogitsWarper(top_p))
    reference = LogitsProcessorList(warpers)(None, logits.clone()).softmax(-1)
    probs, index = candidates(logits / temperature, top_k, top_p)
    ours = torch.zeros_like(reference).scatter(-1, index, probs)
    assert torch.allclose(ours, reference, atol=1e-6)


def test_sample_tokens_log_probs_and_seeding():
    from negolib.agents.decode import sample_tokens

    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(1))
    draw = [sample_tokens(logits, 0.9, 10, 0.9, torch.Generator().manual_seed(7)) for _ in range(2)]
    assert torch.equal(draw[0][0], draw[1][0])
    tokens, lps = draw[0]
    assert torch.allclose(lps, torch.log_softmax(logits / 0.9, -1).gather(-1, tokens[:, None]).squeeze(-1))
    top10 = torch.topk(logits, 10).indices
    assert all(int(t) in top10[i].tolist() for i, t in enumerate(tokens))
    # frequencies follow the candidate distribution (a chi-square-sized tolerance on 4,000 draws)
    from negolib.agents.decode import candidates

    g = torch.Generator().manual_seed(3)
    row = logits[:1].expand(4000, -1)
    counts = torch.bincount(sample_tokens(row, 1.0, 10, 0.9, g)[0], minlength=50).float() / 4000
    probs, index = candidates(logits[:1], 10, 0.9)
    expected = torch.zeros(50).scatter(0, index[0], probs[0])
    assert float((counts - expected).abs().max()) < 0.03


def test_decode_drops_finished_rows_and_keeps_their_tokens():
    """Rows that stop early leave the batch; each row's tokens are what it decodes alone (greedy),
    through its first stop token."""
    from negolib.agents.decode import decode, grouped_attention
    from negolib.models import tiny_causal_lm

    model, tok = tiny_causal_lm(seed=5, hidden=64, kv_heads=2)
    a = HFAgent(model, tok, SamplingConfig(max_new_tokens=12, seed=0), prefix_cache_tokens=1, render=render_messages)

    def greedy(logits):
        return logits.argmax(-1), torch.zeros(logits.shape[0])

    def run(prompts, stops):
        width = max(map(len, prompts))
        cache = a._prefilled_cache(prompts, width, torch.device("cpu"))
        with torch.inference_mode(), grouped_attention(model):
            return decode(model, cache, [p[-1] for p in prompts], list(map(len, prompts)), width, 12, greedy, stops)

    prompts = [list(range(10 + 7 * i, 40 + 9 * i)) for i in range(8)]
    alone = [run([p], {-1})[0][0] for p in prompts]
    assert all(len(x) == 12 for x in alone)
    stops = {alone[0][2], alone[1][3]}  # rows 0 and 1 stop early and leave the batch
    comps, _, fins = run(prompts, stops)
    for c, f, solo in zip(comps, fins, alone):
        cut = next((j + 1 for j, t in enumerate(solo) if t in stops), len(solo))
        assert c == solo[:cut] and f == (cut < len(solo) or solo[-1] in stops)
    assert len(comps[0]) <= 3 and len(comps[1]) <= 4 and fins[0] and fins[1]


def test_decode_hands_each_leaving_row_its_keys_and_values():
    """``on_leave`` gets, per row, the keys/values of its prompt and its new tokens but the last:
    what a fresh prefill of those tokens computes (rows that stop early and rows that run out)."""
    from transformers import DynamicCache

    from negolib.agents.decode import decode, grouped_attention
    from negolib.models import tiny_causal_lm

    model, tok = tiny_causal_lm(seed=6, hidden=64, kv_heads=2)
    a = HFAgent(model, tok, SamplingConfig(max_new_tokens=10, seed=0), prefix_cache_tokens=1, render=render_messages)

    def greedy(logits):
        return logits.argmax(-1), torch.zeros(logits.shape[0])

    prompts = [list(range(10 + 5 * i, 30 + 8 * i)) for i in range(5)]
    width = max(map(len, prompts))
    cache = a._prefilled_cache(prompts, width, torch.device("cpu"))
    with torch.inference_mode(), grouped_attention(model):
        probe = decode(model, a._prefilled_cache(prompts, width, torch.device("cpu")), [p[-1] for p in prompts],
                       list(map(len, prompts)), width, 10, greedy, {-1})[0]
    stops = {probe[1][3], probe[3][0]}
    left = {}
    with torch.inference_mode(), grouped_attention(model):
        comps, _, _ = decode(model, cache, [p[-1] for p in prompts], list(map(len, prompts)), width, 10, greedy,
                             stops, on_leave=lambda row, new, kv: left.setdefault(
                                 row, (list(new), [(k.clone(), v.clone()) for k, v in kv])))
    assert sorted(left) == list(range(5))
    for row, (new, kv) in left.items():
        assert new == comps[row]
        ids = prompts[row] + new[:-1]
        fresh = DynamicCache(config=model.config)
        with torch.inference_mode():
            model(input_ids=torch.tensor([ids]), past_key_values=fresh, use_cache=True)
        for (k, v), layer in zip(kv, fresh.layers):
            assert k.shape == layer.keys.shape == (1, 2, len(ids), k.shape[-1])
            assert torch.allclose(k, layer.keys, atol=1e-5) and torch.allclose(v, layer.values, atol=1e-5)
    assert len(comps[1]) <= 4 and len(comps[3]) == 1 and any(len(c) == 10 for c in comps)


def test_replies_enter_the_prefix_cache_and_samples_stay_as_without_reuse():
    """After a turn the prefix cache holds each prompt with its reply (but the last token), which
    the training scaffold's next prompt extends; samples equal those of a run without reuse."""
    import numpy as np

    from negolib.models import tiny_causal_lm

    model, tok = tiny_causal_lm(seed=3, hidden=64, kv_heads=2)
    s = SamplingConfig(max_new_tokens=8, seed=5)
    fast = HFAgent(model, tok, s, scaffold="training", prompt_cap=8192,
                   render=render_messages)
    plain = HFAgent(copy.deepcopy(model), tok, s, scaffold="training", prompt_cap=8192, prefix_cache_tokens=1,
                    render=render_messages)
    eps = [Episode(sc, episode_id=f"t{i}") for i, sc in enumerate(scenario_set([4, 5], ["car"]))]
    buyer = make_scripted("hardliner")
    for _ in range(2):
        views = [e.view() for e in eps if not e.done]
        a, b = fast.act_batch(views), plain.act_batch(views)
        assert [r.extra["completion_ids"] for r in a] == [r.extra["completion_ids"] for r in b]
        for r in a:
            ids = np.asarray(r.extra["prompt_ids"] + r.extra["completion_ids"][:-1])
            n, entry = fast.prefix_cache.lookup(ids)
            assert n == len(ids) and entry["kv"][0][0].shape[2] == len(entry["ids"])
        for e, r in zip(eps, a):
            e.step(r.text)
            if not e.done:
                e.step(buyer.act(e.view()).text)
