"""Memory a laptop has (issue 28, section 7), on a tiny model: the agents of one process share one set of decode
buffers sized to the batch (not the context), prefix-cache entries a prompt moved past are dropped, the local
models play one after another, and none of it changes a token, a log-prob or a record."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from negolib.agents.factory import ModelCache, local_agent
from negolib.agents.hf_agent import HFAgent
from negolib.core.sampling import SamplingConfig
from negolib.games.multi_issue.env import EnvConfig, Episode
from negolib.games.multi_issue.prompts import render_messages
from negolib.games.multi_issue.rollout import make_specs, run_episodes
from negolib.games.multi_issue.scenarios import scenario_set
from negolib.games.multi_issue.scripted import make_scripted
from negolib.params import AgentSpec

pytestmark = pytest.mark.usefixtures("one_torch_thread")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny():
    from negolib.models import tiny_causal_lm

    return tiny_causal_lm(seed=0, hidden=32)


def _play(tiny, legacy: bool):
    """Two evaluation-scaffold arms (two copies of the weights) on the same scenarios against a HardHeaded buyer,
    all episodes advancing together as ``evaluate_arms`` plays them; returns (records, per-turn token ids and
    log-probs, the agents)."""
    from negolib.agents.decode import KVPool

    model, tok = tiny
    pool = KVPool()
    agents = {}
    for i, arm in enumerate(("a", "b")):
        m = model if i == 0 else copy.deepcopy(model)
        agents[arm] = HFAgent(m, tok, SamplingConfig(max_new_tokens=10, seed=3 + i), scaffold="evaluation",
                              name=arm, prompt_cap=8192, render=render_messages, kv_pool=None if legacy else pool)
        agents[arm].prefix_cache.keep_superseded = legacy
    agents["hh"] = make_scripted("hardheaded")
    scenarios = scenario_set([1, 2, 3], ["car"])
    specs = [s for arm in ("a", "b") for s in make_specs(arm, arm, ["hh"], scenarios, EnvConfig(max_rounds=4))]
    turns = []
    alive = []  # how many arms' prefix caches hold entries, after every LM turn
    held: dict[str, int] = {}  # the most entries each arm's cache held after one of its turns

    def on_turn(ep, rep):
        if "completion_ids" in rep.extra:
            turns.append((ep.episode_id, len(ep.turns), rep.extra["completion_ids"], rep.extra["logprobs"]))
            alive.append(sum(bool(agents[a].prefix_cache.entries) for a in ("a", "b")))
            held[ep.episode_id.split("|")[0]] = max(held.get(ep.episode_id.split("|")[0], 0),
                                                    len(agents[ep.episode_id.split("|")[0]].prefix_cache.entries))

    res = run_episodes(specs, agents, progress=False, on_turn=on_turn, one_cache_at_a_time=not legacy)
    agents["alive"], agents["held"] = max(alive), held
    records = [{k: v for k, v in r.items() if k != "turns"} | {"turns": [
        {k: v for k, v in t.items() if k not in ("latency_s",)} for t in r["turns"]]} for r in res.records]
    return records, sorted(turns), agents


def test_the_memory_levers_change_no_token_log_prob_or_record(tiny):
    """The shared pool, dropping superseded prefix-cache entries and playing the arms one after another give the
    same tokens, log-probs and records as the path before them (a pool per agent, superseded entries kept, all
    arms together)."""
    before, turns_before, old = _play(tiny, legacy=True)
    after, turns_after, new = _play(tiny, legacy=False)
    assert turns_after == turns_before and len(turns_after) > 12
    assert json.dumps(after, sort_keys=True, default=str) == json.dumps(before, sort_keys=True, default=str)
    assert new["a"].kv_pool is new["b"].kv_pool and old["a"].kv_pool is not old["b"].kv_pool
    # the lever ran: each arm dropped entries its prompts moved past, and holds at most one entry an episode
    assert all(new[a].prefix_cache.superseded > 0 for a in ("a", "b"))
    assert all(old[a].prefix_cache.superseded == 0 for a in ("a", "b"))
    # ... and freed those entries layer by layer while prefilling the prompts that superseded them
    assert all(new[a].prefix_cache.released > 0 for a in ("a", "b"))
    assert all(old[a].prefix_cache.released == 0 for a in ("a", "b"))
    assert all(new["held"][a] <= 3 < old["held"][a] for a in ("a", "b"))
    assert new["a"].prefix_cache.reused >= old["a"].prefix_cache.reused  # no reuse lost
    # one arm's cache alive at a time (each emptied when its arm's episodes end), against both at once before
    assert (new["alive"], old["alive"]) == (1, 2)
    assert not new["a"].prefix_cache.entries and not new["b"].prefix_cache.entries


def test_the_decode_buffers_are_sized_to_the_batch_not_the_context(tiny):
    """An agent evaluated with an 8k context holds buffers for its batch's longest prompt plus one reply
    (rounded up to the pool's step), not for the context; agents built through one ModelCache share them."""
    model, tok = tiny
    cache = ModelCache()
    cache.models[("tiny", "float32", "cpu")] = (model, tok)
    spec = AgentSpec(backend="hf", model="tiny", batch_size=20)
    a, b = (local_agent(n, "tiny", spec, seed=i, cache=cache) for i, n in enumerate(("a", "b")))
    assert a.kv_pool is b.kv_pool is cache.kv_pool() and a.prompt_cap > 4000
    views = [Episode(s, episode_id=f"e{i}").view() for i, s in enumerate(scenario_set([1, 2, 3], ["car"]))]
    replies = a.act_batch(views)
    width = max(len(r.extra["prompt_ids"]) for r in replies)
    step = a.kv_pool.step
    want = -(-(width + a.sampling.max_new_tokens) // step) * step
    assert [tuple(k.shape[i] for i in (0, 3)) for k, _ in a.kv_pool.buffers] == [(3, want)] * len(a.kv_pool.buffers)
    assert want < a.prompt_cap
    b.act_batch(views[:2])  # a smaller batch of the other arm reuses the same buffers
    assert [k.shape[0] for k, _ in cache.kv_pool().buffers] == [3] * len(a.kv_pool.buffers)


def test_bench_memory_dry_run_prints_both_peaks_and_ratios(tmp_path):
    pytest.importorskip("trl")
    out = tmp_path / "result.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_memory.py"), "--dry-run", "--rounds", "2",
                           "--threads", "1", "--work-dir", str(tmp_path / "w"), "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads(out.read_text())
    assert set(res["phases"]) == {"eval", "grpo"} and set(res["ratios"]) == {"eval", "grpo"}
    assert all(v["peak_gb"] > 0 for p in res["phases"].values() for v in p.values())
    assert proc.stdout.count("MEMORY:") == 2
    # the levers change no result: every record, token and log-prob of the wave; the GRPO step's trained weights
    assert res["identical"] == {"eval": True, "grpo": True}
    assert res["phases"]["grpo"]["fixed"]["gradient_checkpointing"] is True
    assert res["phases"]["grpo"]["legacy"]["gradient_checkpointing"] is False
    grpo = res["phases"]["grpo"]
    assert (grpo["fixed"]["lean_tiles"], grpo["legacy"]["lean_tiles"]) == (True, False)


def test_the_default_profiles_grpo_run_checkpoints_gradients():
    """Notebook 03's run trains micro-batches of four ~1.5k-token episodes: without gradient checkpointing their
    activations alone took ~8 GB."""
    from negolib.params import load_params, train_config

    params = load_params(ROOT / "params" / "default.yaml")
    assert train_config(params, "smollm2_grpo").gradient_checkpointing is True
