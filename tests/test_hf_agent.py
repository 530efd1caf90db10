"""HFAgent (tiny model): batched seeded generation, token ids and log-probs, chunking, prompt cap,
a real short episode; VLLMAgent with a fake vllm module; sampling drift warnings."""

from __future__ import annotations

import math
import sys
import types
import warnings
from dataclasses import replace

import pytest
from conftest import play_side_by_side

from negolib.agents.hf_agent import HISTORY_DROP_BLOCK, HFAgent, PromptTruncationWarning
from negolib.core.chat_template import encode_chat
from negolib.core.sampling import SamplingConfig, SamplingDriftWarning, derive_seed, drift, warn_drift
from negolib.games.multi_issue.env import EnvConfig, Episode
from negolib.games.multi_issue.prompts import render_messages
from negolib.games.multi_issue.rollout import make_specs, run_episodes
from negolib.games.multi_issue.scenarios import scenario_set
from negolib.games.multi_issue.scripted import make_scripted

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny():
    from negolib.models import tiny_causal_lm

    return tiny_causal_lm(seed=0, hidden=32)


@pytest.fixture(scope="module")
def views():
    return [Episode(s, episode_id=f"ep{i}").view() for i, s in enumerate(scenario_set([1, 2], ["car", "job_offer"]))]


def agent(tiny, **kw):
    model, tok = tiny
    sampling = kw.pop("sampling", SamplingConfig(max_new_tokens=12, seed=7))
    kw.setdefault("render", render_messages)
    return HFAgent(model, tok, sampling, prompt_cap=kw.pop("prompt_cap", 8192), **kw)


def test_batch_replies_carry_ids_and_logprobs(tiny, views):
    a = agent(tiny)
    replies = a.act_batch(views)
    assert len(replies) == len(views)
    for v, r in zip(views, replies):
        ex = r.extra
        assert ex["prompt_ids"] == encode_chat(a.tokenizer, render_messages(v, "evaluation"))
        assert r.input_tokens == len(ex["prompt_ids"]) and r.output_tokens == len(ex["completion_ids"]) > 0
        assert len(ex["logprobs"]) == len(ex["completion_ids"]) <= 12
        assert all(math.isfinite(x) and x <= 0 for x in ex["logprobs"])
        assert ex["finish_reason"] in ("stop", "length") and r.latency_s > 0 and r.error is None
        if ex["finish_reason"] == "stop":
            assert ex["completion_ids"][-1] in a.tags.stop_ids


def test_the_games_render_makes_the_prompt_and_none_is_an_error_naming_it(tiny, views):
    """The agent imports no game: the prompt is whatever the game's render says, and an agent built without one
    refuses to guess."""
    seen = []

    def render(view, scaffold):
        seen.append((view.episode_id, scaffold))
        return [{"role": "user", "content": f"episode {view.episode_id}"}]

    a = agent(tiny, render=render, scaffold="training")
    r = a.act(views[0])
    assert seen == [(views[0].episode_id, "training")]
    assert r.extra["prompt_ids"] == encode_chat(a.tokenizer, render(views[0], "training"))
    with pytest.raises(ValueError, match="has no render: pass render="):
        agent(tiny, render=None).act(views[0])


def test_logprobs_match_a_forward_pass(tiny, views):
    """Recorded log-probs are log_softmax(logits / T) of the sampled tokens (as TRL's trainer computes)."""
    import torch

    a = agent(tiny, sampling=SamplingConfig(temperature=0.7, top_k=20, top_p=0.9, max_new_tokens=8, seed=3))
    for r in a.act_batch(views[:2]):  # left-padded batch of two prompts of different lengths
        p, c = r.extra["prompt_ids"], r.extra["completion_ids"]
        with torch.inference_mode():
            logits = a.model(torch.tensor([p + c])).logits[0, len(p) - 1:-1].float() / 0.7
        ref = torch.log_softmax(logits, -1).gather(1, torch.tensor(c)[:, None]).squeeze(1)
        assert torch.allclose(torch.tensor(r.extra["logprobs"]), ref, atol=1e-4)


def test_seeded_and_reproducible(tiny, views):
    a, b = agent(tiny), agent(tiny)
    assert [r.text for r in a.act_batch(views)] == [r.text for r in b.act_batch(views)]
    other = agent(tiny, sampling=SamplingConfig(max_new_tokens=12, seed=8))
    assert [r.extra["completion_ids"] for r in a.act_batch(views)] != \
        [r.extra["completion_ids"] for r in other.act_batch(views)]
    assert derive_seed(1, ["a", "b"], [1, 1]) != derive_seed(1, ["a", "b"], [1, 3])


def test_model_generation_config_is_not_applied(tiny, views):
    """Sampling is exactly as configured: the model's own generation_config (e.g. a repetition
    penalty) does not leak in, and it is restored afterwards."""
    a = agent(tiny)
    before = [r.extra["completion_ids"] for r in a.act_batch(views[:2])]
    a.model.generation_config.repetition_penalty = 50.0
    try:
        after = [r.extra["completion_ids"] for r in a.act_batch(views[:2])]
        assert a.model.generation_config.repetition_penalty == 50.0
    finally:
        a.model.generation_config.repetition_penalty = None
    assert before == after


def test_chunks_larger_batches(tiny, views, monkeypatch):
    a = agent(tiny, max_batch=3)
    calls = []
    real = a.generate_ids
    monkeypatch.setattr(a, "generate_ids", lambda prompts, seed: calls.append(len(prompts)) or real(prompts, seed))
    assert len(a.act_batch(views + views[:1])) == 5
    assert calls == [3, 2]


def test_prompt_cap_truncates_from_the_left_with_a_warning(tiny, car_scenario):
    ep = Episode(car_scenario, episode_id="long")
    s, b = make_scripted("hardliner"), make_scripted("hardliner")
    for _ in range(8):
        ep.step((s if ep.to_move == "seller" else b).act(ep.view()).text)
    view = ep.view()
    a = agent(tiny, scaffold="training")
    full = len(a.prompt_ids(view)[0])
    capped = agent(tiny, scaffold="training", prompt_cap=full - 200)
    with pytest.warns(PromptTruncationWarning, match=f"dropped the {HISTORY_DROP_BLOCK} oldest"):
        ids, dropped = capped.prompt_ids(view)
    assert dropped == HISTORY_DROP_BLOCK and len(ids) <= full - 200
    assert ids == encode_chat(a.tokenizer, render_messages(replace(view, history=view.history[dropped:]), "training"))
    # A block, not a turn at a time: two turns later the prompt still starts the same way (cached prefix).
    for _ in range(2):
        ep.step((s if ep.to_move == "seller" else b).act(ep.view()).text)
    with pytest.warns(PromptTruncationWarning):
        later, later_dropped = capped.prompt_ids(ep.view())
    assert later_dropped == dropped and later[: len(ids) - 40] == ids[: len(ids) - 40]
    tiny_cap = agent(tiny, prompt_cap=100)
    with pytest.warns(PromptTruncationWarning) as caught:
        r = tiny_cap.act(view)
    assert any("keeping its last 100 tokens" in str(w.message) for w in caught)
    assert r.input_tokens == 100


def test_settings_report_sampling_as_sent(tiny):
    s = SamplingConfig(temperature=0.9, top_p=0.8, top_k=5, max_new_tokens=33, seed=4)
    a = agent(tiny, sampling=s, name="arm-x")
    st = a.settings()
    assert st["backend"] == "hf" and st["name"] == "arm-x" and st["do_sample"] is True
    assert (st["temperature"], st["top_p"], st["top_k"], st["max_new_tokens"]) == (0.9, 0.8, 5, 33)
    assert st["thinking"] is False and st["scaffold"] == "evaluation"
    assert drift(s, st) == []
    gc = a.generation_config()
    assert (gc.temperature, gc.top_p, gc.top_k, gc.max_new_tokens) == (0.9, 0.8, 5, 33)


def test_real_episode_through_the_engine(tiny):
    a = agent(tiny, scaffold="training")
    specs = make_specs("tiny", "tiny", ["conceder"], scenario_set([3], ["car", "acquisition"]), EnvConfig(max_rounds=2))
    ids: list[tuple[int, int]] = []
    res = run_episodes(specs, {"tiny": a, "conceder": make_scripted("conceder")}, progress=False,
                       on_turn=lambda ep, rep: ids.append((len(rep.extra.get("prompt_ids", [])),
                                                           len(rep.extra.get("completion_ids", [])))))
    assert len(res.records) == 2 and not res.errors
    for rec in res.records:
        assert rec["status"] in ("deal", "no_deal")
        seller = [t for t in rec["turns"] if t["role"] == "seller"]
        assert seller and all(t["input_tokens"] > 0 and t["output_tokens"] > 0 for t in seller)
    assert any(p > 0 and c > 0 for p, c in ids)


# -- sampling settings ------------------------------------------------------------------------------

def test_sampling_defaults_are_the_papers():
    s = SamplingConfig()
    assert (s.temperature, s.top_p, s.top_k, s.max_new_tokens, s.thinking) == (1.0, 0.95, 64, 768, False)
    with pytest.raises(ValueError, match="top_p"):
        SamplingConfig(top_p=0)
    with pytest.raises(ValueError, match="unknown sampling keys"):
        SamplingConfig.from_mapping({"temp": 1})


def test_drift_and_warning():
    declared = SamplingConfig()
    assert drift(declared, {**declared.as_dict()}) == []
    msgs = drift(declared, {"temperature": 0.7, "top_p": 0.95, "top_k": 64, "max_new_tokens": 768})
    assert msgs == ["temperature: declared 1.0, sent 0.7", "thinking: declared False, not sent (provider default)"]
    with pytest.warns(SamplingDriftWarning, match="arm 'sonnet'.*temperature: rejected by the provider"):
        out = warn_drift("sonnet", declared, declared.as_dict(), rejected=["temperature"])
    assert out == ["temperature: rejected by the provider (runs at its default)"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_drift("ok", declared, declared.as_dict()) == []


# -- vLLM (CPU-testable parts) ----------------------------------------------------------------------

def test_vllm_missing_gives_the_install_hint(monkeypatch):
    from negolib.agents.vllm_agent import VLLMAgent

    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ImportError, match=r"vllm is a GPU-only extra: pip install negolib\[gpu\]"):
        VLLMAgent("some/model")


def _fake_vllm(tokenizer, log):
    mod = types.ModuleType("vllm")

    class SamplingParams:
        def __init__(self, **kw):
            self.kw = kw
            log.setdefault("params", []).append(kw)

    class LLM:
        def __init__(self, model, **kw):
            log["llm"] = (model, kw)

        def get_tokenizer(self):
            return tokenizer

        def generate(self, prompts, sampling_params, use_tqdm=True):
            log["prompts"] = prompts
            stop = sampling_params[0].kw["stop_token_ids"][0]
            outs = []
            for i, _ in enumerate(prompts):
                toks = tokenizer("Hi <|im_start|>there", add_special_tokens=False)["input_ids"] + [stop]
                lps = [{t: types.SimpleNamespace(logprob=-0.5 - i)} for t in toks]
                o = types.SimpleNamespace(token_ids=toks, logprobs=lps, finish_reason="stop", text="")
                outs.append(types.SimpleNamespace(outputs=[o], prompt_token_ids=prompts[i]["prompt_token_ids"]))
            return outs

    mod.SamplingParams, mod.LLM = SamplingParams, LLM
    return mod


def test_vllm_agent_with_a_fake_engine(monkeypatch, views):
    from negolib.agents.vllm_agent import VLLMAgent
    from negolib.models import tiny_tokenizer

    tok, log = tiny_tokenizer(), {}
    monkeypatch.setitem(sys.modules, "vllm", _fake_vllm(tok, log))
    s = SamplingConfig(max_new_tokens=99, seed=2)
    default = VLLMAgent("my/model", s, scaffold="training",
                        render=render_messages)  # the engine's context (the fake's: none), not 2,048
    assert default.prompt_cap == 16_384 - 99
    a = VLLMAgent("my/model", s, scaffold="training", prompt_cap=8192, render=render_messages,
                  llm_kwargs={"gpu_memory_utilization": 0.3}, tensor_parallel_size=2)
    assert log["llm"] == ("my/model", {"logprobs_mode": "processed_logprobs", "seed": 2,
                                       "gpu_memory_utilization": 0.3, "tensor_parallel_size": 2})
    replies = a.act_batch(views[:3])
    assert len(replies) == 3 and len(log["params"]) == 3
    kw = log["params"][0]
    assert (kw["temperature"], kw["top_p"], kw["top_k"], kw["max_tokens"], kw["logprobs"]) == (1.0, 0.95, 64, 99, 0)
    assert kw["stop_token_ids"] == list(a.tags.stop_ids) and kw["repetition_penalty"] == 1.0
    assert len({p["seed"] for p in log["params"]}) == 3  # one seed per (episode, turn)
    for v, r in zip(views, replies):
        assert r.text == "Hi there"  # tags stripped, stop token not decoded
        assert r.extra["prompt_ids"] == encode_chat(tok, render_messages(v, "training"))
        assert len(r.extra["logprobs"]) == len(r.extra["completion_ids"]) == r.output_tokens
        assert r.extra["finish_reason"] == "stop" and r.extra["prompt_capped"] is False
        assert r.extra["tags_stripped"] == 1  # the fake's "<|im_start|>": counted for the template-tag guard
    assert log["prompts"][0] == {"prompt_token_ids": replies[0].extra["prompt_ids"]}
    st = a.settings()
    assert st["backend"] == "vllm" and drift(s, st) == []


def test_generation_with_a_prompt_only_prologue_template(tiny, views):
    """Templates whose generation prompt differs from re-rendered history (App. J) still generate."""
    from negolib.models import tiny_tokenizer

    tok = tiny_tokenizer()
    tok.chat_template = (
        "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n<think>\n\n</think>\n\n' }}{% endif %}")
    a = HFAgent(tiny[0], tok, SamplingConfig(max_new_tokens=4, seed=1), prompt_cap=8192, render=render_messages)
    assert not a.tags.appendable and a.tags.stop_ids == (tok.convert_tokens_to_ids("<|im_end|>"),)
    r = a.act(views[0])
    assert r.extra["prompt_ids"][-12:] == tok("assistant\n<think>\n\n</think>\n\n"[-12:],
                                              add_special_tokens=False)["input_ids"]


def test_prefix_cache_gives_the_same_samples_and_is_invalidated(tiny):
    """Reusing cached prefixes changes nothing but speed; an in-place weight update empties it."""
    import torch

    model, tok = tiny_causal_lm_copy(tiny)
    s = SamplingConfig(max_new_tokens=6, seed=1)
    on = HFAgent(model, tok, s, scaffold="training", prompt_cap=8192,
                 render=render_messages)
    off = HFAgent(model, tok, s, scaffold="training", prompt_cap=8192, prefix_cache_tokens=1,  # keeps nothing
                  render=render_messages)
    eps = [Episode(sc, episode_id=f"e{i}") for i, sc in enumerate(scenario_set([1, 2], ["car"]))]
    play_side_by_side(on, off, eps)
    pc = on.prefix_cache
    assert pc.hits > 0 and pc.reused > pc.computed / 2 and pc.entries
    with torch.no_grad():
        next(model.parameters()).mul_(1.5)  # an optimizer step, as far as the cache can tell
    views = [e.view() for e in eps if not e.done]
    a, b = on.act_batch(views), off.act_batch(views)
    flat = [[x for r in rs for x in r.extra["logprobs"]] for rs in (a, b)]
    assert flat[0] == pytest.approx(flat[1], abs=1e-4)
    assert all(len(e["ids"]) for e in pc.entries) and len(pc.entries) == len(views)
    assert off.prefix_cache.reused == 0


def tiny_causal_lm_copy(tiny):
    import copy

    return copy.deepcopy(tiny[0]), tiny[1]


def test_prefix_cache_eviction():
    import numpy as np

    from negolib.agents.hf_agent import PrefixCache

    pc = PrefixCache(max_tokens=10)
    pc.store(np.arange(4), [])
    pc.store(np.arange(6), [])  # extends the first: replaces it
    assert [len(e["ids"]) for e in pc.entries] == [6]
    pc.store(np.arange(100, 104), [])
    assert pc.lookup(np.array([0, 1, 2, 9]))[0] == 3
    pc.store(np.arange(200, 205), [])  # over budget: the least recently used goes
    assert [len(e["ids"]) for e in pc.entries] == [5]
    pc.check("new weights")
    assert pc.entries == []


@pytest.mark.parametrize("reuse", [True, False])
def test_generation_stats_split_prefill_from_decode(tiny, views, reuse):
    """Phase counters: decoded tokens are the completions' lengths; prefilled tokens are the prompt
    tokens the prefix cache did not hold (none counted when generate prefills)."""
    a = agent(tiny, prefix_cache_tokens=32_768 if reuse else 0)
    first = a.act_batch(views)
    after_first = a.stats.prefill_tokens
    second = a.act_batch(views)  # the same prompts: all but each one's last token is cached
    st = a.stats
    assert st.calls == 2 and st.decode_s > 0
    assert st.decode_tokens == sum(len(r.extra["completion_ids"]) for r in first + second)
    if reuse:  # the shared system message is prefilled once, so fewer than all prompt tokens
        assert st.prefill_tokens == after_first == a.prefix_cache.computed
        assert 0 < after_first < sum(r.input_tokens - 1 for r in first)
        assert st.prefill_s > 0 and st.rates()["prefill_tok_s"] > 0
    else:
        assert st.prefill_tokens == 0 and st.prefill_s == 0 and st.rates()["prefill_tok_s"] == 0


# -- the evaluation prompt cap (issue 16 §1) -------------------------------------------------------------

def test_evaluation_prompt_cap_is_the_arms_context_not_the_training_drivers(tiny):
    """With no cap given, a self-served seller's cap is its context (the model's, at most 16,384) less one
    reply's max_new_tokens: never the training driver's 2,048."""
    from negolib.agents.hf_agent import EVAL_CONTEXT_TOKENS, TRAINING_PROMPT_CAP, context_prompt_cap

    a = HFAgent(tiny[0], tiny[1], SamplingConfig(max_new_tokens=100))
    assert tiny[0].config.max_position_embeddings == 8192
    assert a.prompt_cap == 8192 - 100 != TRAINING_PROMPT_CAP and a.settings()["prompt_cap"] == 8092
    assert context_prompt_cap(None, 768) == context_prompt_cap(131_072, 768) == EVAL_CONTEXT_TOKENS - 768
    assert HFAgent(tiny[0], tiny[1], prompt_cap=300).prompt_cap == 300


def test_factory_passes_no_training_cap(tiny, monkeypatch):
    """A spec without ``prompt_cap`` builds an agent with the arm's context cap; one with a cap keeps it."""
    from negolib.agents import factory
    from negolib.params import AgentSpec, Sampling

    class Cache:  # ModelCache's interface: the model, and the shared decode buffers (None: the agent's own)
        def get(self, *a):
            return tiny

        def kv_pool(self):
            return None

    spec = AgentSpec(backend="hf", model="x", sampling=Sampling(max_new_tokens=50))
    assert factory.local_agent("s", "x", spec, cache=Cache()).prompt_cap == 8192 - 50
    assert factory.local_agent("s", "x", replace(spec, prompt_cap=256), cache=Cache()).prompt_cap == 256


def test_a_binding_prompt_cap_is_logged_per_turn_and_counted_per_arm(tiny):
    """A cap that binds is in the transcript record (``prompt_capped`` per turn), in the episode table
    (``n_prompt_capped_turns``, seller turns) and in the per-arm count of the prompt-cap table."""
    from negolib.core.transcripts import episodes_frame, validate_record
    from negolib.study.analysis.serving import serving_frame
    from negolib.study.report.evaluation import prompt_cap_table

    sc = scenario_set([3], ["car"])
    cfg = EnvConfig(max_rounds=2)
    wide, narrow = agent(tiny, name="wide"), agent(tiny, name="narrow", prompt_cap=100)
    recs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PromptTruncationWarning)
        for arm, a in (("wide", wide), ("narrow", narrow)):
            recs += run_episodes(make_specs(arm, arm, ["conceder"], sc, cfg),
                                 {arm: a, "conceder": make_scripted("conceder")}, progress=False).records
    for rec in recs:
        validate_record(rec)
        seller = [t for t in rec["turns"] if t["role"] == "seller"]
        assert all(t["prompt_capped"] is (rec["arm"] == "narrow") for t in seller)
        assert not any(t["prompt_capped"] for t in rec["turns"] if t["role"] == "buyer")  # scripted: no cap
    df = episodes_frame(recs)
    sv = serving_frame(df).set_index("arm")
    n_seller = {r["arm"]: sum(t["role"] == "seller" for t in r["turns"]) for r in recs}
    assert sv.loc["narrow", "n_prompt_capped_turns"] == n_seller["narrow"] > 0
    assert sv.loc["wide", "n_prompt_capped_turns"] == 0 and sv.loc["narrow", "n_prompt_capped_episodes"] == 1
    t = prompt_cap_table(serving_frame(df))
    assert t.frame.loc["narrow", "turns capped"] == n_seller["narrow"] and t.frame.loc["wide", "turns capped"] == 0
    assert t.paper_columns == ["paper: context"]
