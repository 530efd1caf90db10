"""The rollout engine: batching per agent, error rows, resume after a kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from negolib.agents.base import Agent, AgentReply
from negolib.core.transcripts import TranscriptStore, record_key
from negolib.games.multi_issue.rollout import cache_groups, make_specs, play_one, run_episodes
from negolib.games.multi_issue.scenarios import eval_seeds, scenario_set
from negolib.games.multi_issue.scripted import make_scripted

SCEN = scenario_set(eval_seeds(4), ["car", "job_offer"])


class CountingAgent(Agent):
    """Wraps an agent and records the batch sizes it was called with."""

    def __init__(self, inner: Agent) -> None:
        self.inner, self.name, self.sizes = inner, inner.name, []

    def act_batch(self, views):
        self.sizes.append(len(views))
        return self.inner.act_batch(views)


class FlakyAgent(Agent):
    """Fails every turn of the episodes whose seed is in ``bad_seeds``."""

    name = "flaky"

    def __init__(self, inner: Agent, bad_seeds: set[int]) -> None:
        self.inner, self.bad = inner, bad_seeds

    def act_batch(self, views):
        return [AgentReply("", error="HTTP 529 overloaded") if v.seed in self.bad else self.inner.act(v)
                for v in views]


def test_turns_are_batched_across_episodes():
    seller = CountingAgent(make_scripted("boulware"))
    buyer = CountingAgent(make_scripted("conceder"))
    specs = make_specs("arm", "s", ["b"], SCEN)
    run_episodes(specs, {"s": seller, "b": buyer}, progress=False)
    assert seller.sizes[0] == len(specs) and buyer.sizes[0] == len(specs)
    assert len(seller.sizes) <= 12


def test_batched_engine_matches_one_at_a_time():
    agents = {n: make_scripted(n) for n in ("hardheaded", "tit_for_tat")}
    specs = make_specs("arm", "hardheaded", ["tit_for_tat"], SCEN)
    batched = run_episodes(specs, agents, progress=False).records
    assert batched == [play_one(s, agents) for s in specs]
    assert run_episodes(specs, agents, progress=False, max_batch=3).records == batched


def test_failures_become_error_rows_and_a_rerun_completes_them(tmp_path):
    store = TranscriptStore(tmp_path / "t.jsonl")
    good = {"s": make_scripted("boulware"), "b": make_scripted("conceder")}
    bad_seed = SCEN[0].seed
    flaky = {"s": FlakyAgent(good["s"], {bad_seed}), "b": good["b"]}
    specs = make_specs("arm", "s", ["b"], SCEN)
    res = run_episodes(specs, flaky, store, progress=False)
    assert {r["seed"] for r in res.errors} == {bad_seed} and len(res.errors) == 2
    assert len(store.completed_keys()) == len(specs) - 2
    res2 = run_episodes(specs, good, store, progress=False)
    assert res2.skipped == len(specs) - 2 and len(res2.records) == 2
    assert store.completed_keys() == {s.key for s in specs}
    assert len(store.records()) == len(specs)


def test_unknown_agent_and_duplicate_keys_are_errors():
    specs = make_specs("arm", "s", ["b"], SCEN[:1])
    with pytest.raises(KeyError, match="no agent registered"):
        run_episodes(specs, {"s": make_scripted("linear")}, progress=False)
    with pytest.raises(ValueError, match="duplicate"):
        run_episodes(specs * 2, {"s": make_scripted("linear"), "b": make_scripted("linear")}, progress=False)


SLOW_RUN = textwrap.dedent("""
    import sys, time
    from negolib.games.multi_issue.scripted import make_scripted
    from negolib.agents.base import Agent
    from negolib.games.multi_issue.rollout import make_specs, run_episodes
    from negolib.games.multi_issue.scenarios import eval_seeds, scenario_set
    from negolib.core.transcripts import TranscriptStore

    class Slow(Agent):
        name = "slow"
        def __init__(self, inner): self.inner = inner
        def act_batch(self, views):
            time.sleep(0.02)
            return self.inner.act_batch(views)

    specs = make_specs("arm", "s", ["b"], scenario_set(eval_seeds(8)))
    agents = {"s": Slow(make_scripted("boulware")), "b": make_scripted("conceder")}
    run_episodes(specs, agents, TranscriptStore(sys.argv[1]), progress=False, flush_every=4, max_batch=8)
""")


def test_resume_after_kill_loses_and_duplicates_nothing(tmp_path):
    path = tmp_path / "t.jsonl"
    script = tmp_path / "run.py"
    script.write_text(SLOW_RUN)
    proc = subprocess.Popen([sys.executable, str(script), str(path)], start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and (not path.exists() or path.stat().st_size < 20_000):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    store = TranscriptStore(path)
    partial = store.completed_keys()
    assert 0 < len(partial) < 72, "the run should have been killed part-way"
    proc = subprocess.run([sys.executable, str(script), str(path)], check=True, timeout=120)
    keys = [record_key(r) for r in store.iter_raw()]
    assert len(keys) == len(set(keys)) == 72


# -- failures are contained to their episode (issue 13 §3) ----------------------------------------

SCEN40 = scenario_set(eval_seeds(20), ["car"])  # x 2 buyers = 40 episodes


class HugeNumberSeller(Agent):
    """A scripted seller that, in the episodes of ``bad_seeds``, names a 400-digit price."""

    name = "huge"

    def __init__(self, inner: Agent, bad_seeds: set[int], digits: int = 400) -> None:
        self.inner, self.bad, self.digits = inner, bad_seeds, digits

    def act_batch(self, views):
        out = self.inner.act_batch(views)
        for i, v in enumerate(views):
            if v.seed in self.bad and v.turn == 3:
                out[i] = AgentReply('Take it. {"action": "COUNTER", "terms": [{"name": "price", "value": %s}]}'
                                    % ("9" * self.digits))
        return out


class RaisingAgent(Agent):
    """Raises from ``act_batch`` whenever a view of ``bad_seeds`` is in the batch."""

    name = "raising"

    def __init__(self, inner: Agent, bad_seeds: set[int]) -> None:
        self.inner, self.bad, self.calls = inner, bad_seeds, 0

    def act_batch(self, views):
        self.calls += 1
        if any(v.seed in self.bad for v in views):
            raise RuntimeError("CUDA error: device-side assert for one prompt")
        return self.inner.act_batch(views)


def _two_buyers():
    return make_specs("arm", "s", ["b1", "b2"], SCEN40)


def test_a_huge_number_is_an_invalid_term_and_the_batch_completes(tmp_path):
    bad = SCEN40[3].seed
    for digits in (400, 5000):
        agents = {"s": HugeNumberSeller(make_scripted("boulware"), {bad}, digits), "b1": make_scripted("conceder"),
                  "b2": make_scripted("hardheaded")}
        store = TranscriptStore(tmp_path / f"{digits}.jsonl")
        res = run_episodes(_two_buyers(), agents, store, progress=False)
        assert len(res.records) == 40 and not res.errors and len(store.completed_keys()) == 40
        hit = [t for r in res.records if r["seed"] == bad for t in r["turns"] if t["turn"] == 3]
        assert len(hit) == 2
        if digits == 400:
            assert all(t["invalid_terms"] == ["price"] for t in hit)
        else:
            assert all(t["action"] is None and "too many digits" in t["parse_error"] for t in hit)


def test_an_environment_exception_is_an_error_row_and_the_rest_are_stored(tmp_path, monkeypatch):
    from negolib.games.multi_issue.env import Episode

    specs = _two_buyers()
    bad_id = specs[7].episode_id
    real_step = Episode.step

    def step(self, text, *a, **kw):
        if self.episode_id == bad_id and len(self.turns) == 2:
            raise OverflowError("int too large to convert to float")
        return real_step(self, text, *a, **kw)

    monkeypatch.setattr(Episode, "step", step)
    store = TranscriptStore(tmp_path / "t.jsonl")
    agents = {"s": make_scripted("boulware"), "b1": make_scripted("conceder"), "b2": make_scripted("hardheaded")}
    res = run_episodes(specs, agents, store, progress=False, flush_every=4)
    assert len(res.records) == 40 and [r["status"] for r in res.errors] == ["error"]
    err = res.errors[0]
    assert record_key(err) == specs[7].key and len(err["turns"]) == 2
    assert err["error"] == "turn 3 (seller): OverflowError: int too large to convert to float"
    assert len(store.completed_keys()) == 39
    assert play_one(specs[7], agents)["error"] == err["error"]  # the loop engine contains it too
    monkeypatch.setattr(Episode, "step", real_step)
    res2 = run_episodes(specs, agents, store, progress=False)  # the re-run plays the error row again
    assert res2.skipped == 39 and len(res2.records) == 1 and not res2.errors
    assert store.completed_keys() == {s.key for s in specs}


def test_an_agent_that_raises_costs_only_the_episodes_it_fails(tmp_path):
    bad = SCEN40[5].seed
    seller = RaisingAgent(make_scripted("boulware"), {bad})
    agents = {"s": seller, "b1": make_scripted("conceder"), "b2": make_scripted("hardheaded")}
    res = run_episodes(_two_buyers(), agents, TranscriptStore(tmp_path / "t.jsonl"), progress=False)
    assert len(res.records) == 40 and {r["seed"] for r in res.errors} == {bad} and len(res.errors) == 2
    assert all("RuntimeError: CUDA error" in r["error"] and "'raising'" in r["error"] for r in res.errors)
    clean = run_episodes(_two_buyers(), {**agents, "s": make_scripted("boulware")}, progress=False).records
    assert [r for r in res.records if r["seed"] != bad] == [r for r in clean if r["seed"] != bad]


def test_a_wrong_number_of_replies_is_contained():
    class Short(Agent):
        name = "short"

        def act_batch(self, views):
            return make_scripted("boulware").act_batch(views)[: max(1, len(views) - 1)] if len(views) > 1 \
                else make_scripted("boulware").act_batch(views)

    specs = make_specs("arm", "s", ["b"], SCEN)
    res = run_episodes(specs, {"s": Short(), "b": make_scripted("conceder")}, progress=False)
    assert not res.errors  # each view was asked alone
    assert res.records == run_episodes(specs, {"s": make_scripted("boulware"), "b": make_scripted("conceder")},
                                       progress=False).records


@pytest.mark.parametrize("bad", [
    AgentReply(None),  # type: ignore[arg-type]
    AgentReply("ok", input_tokens=None),  # type: ignore[arg-type]
    AgentReply("ok", output_tokens=-1),
    AgentReply("ok", latency_s=float("nan")),
    "just a string",
])
def test_a_malformed_reply_is_an_error_row_not_an_unreadable_record(tmp_path, bad):
    class Malformed(Agent):
        name = "malformed"

        def act_batch(self, views):
            out = make_scripted("boulware").act_batch(views)
            return [bad if v.seed == SCEN[1].seed else r for v, r in zip(views, out)]

    store = TranscriptStore(tmp_path / "t.jsonl")
    specs = make_specs("arm", "s", ["b"], SCEN)
    res = run_episodes(specs, {"s": Malformed(), "b": make_scripted("conceder")}, store, progress=False)
    assert {r["seed"] for r in res.errors} == {SCEN[1].seed} and len(res.records) == len(specs)
    assert len(store.records(include_errors=True)) == len(specs)  # every line reads back
    assert play_one(specs[1], {"s": Malformed(), "b": make_scripted("conceder")})["status"] == "error"


def test_run_episodes_holds_the_run_lock_of_its_store(tmp_path):
    """A direct caller of run_episodes is protected too: a second run on the same file refuses."""
    from negolib.core.transcripts import RunLockedError, TranscriptStore
    from negolib.games.multi_issue.domains import get_domain
    from negolib.games.multi_issue.env import EnvConfig
    from negolib.games.multi_issue.rollout import make_specs, run_episodes
    from negolib.games.multi_issue.scenarios import make_scenario
    from negolib.games.multi_issue.scripted import make_scripted

    path = tmp_path / "t.jsonl"
    holder = TranscriptStore(path)
    specs = make_specs("a", "boulware", ["conceder"], [make_scenario(get_domain("car"), 5_000_000)],
                       EnvConfig(max_rounds=2))
    agents = {"boulware": make_scripted("boulware"), "conceder": make_scripted("conceder")}
    with holder.run_lock():
        with pytest.raises(RunLockedError, match="another run"):
            run_episodes(specs, agents, TranscriptStore(path), progress=False)
        assert run_episodes(specs, agents, holder, progress=False).records  # re-entrant for its holder
    assert len(run_episodes(specs, agents, TranscriptStore(path), progress=False).records) == 0  # resumed


class _CachingAgent(Agent):
    """A scripted seller that says it keeps caches, and logs which of its calls found another one's alive."""

    keeps_caches = True

    def __init__(self, name: str, alive: dict[str, bool], log: list[tuple[str, list[str]]]) -> None:
        self.name, self.inner, self.alive, self.log = name, make_scripted("linear"), alive, log

    def act_batch(self, views):  # noqa: ANN001, ANN201
        self.alive[self.name] = True
        self.log.append((self.name, sorted(v.episode_id for v in views), sorted(k for k, v in self.alive.items() if v)))
        return self.inner.act_batch(views)

    def release_caches(self) -> None:
        self.alive[self.name] = False


def _caching_run(one_at_a_time: bool):  # noqa: ANN202
    alive: dict[str, bool] = {}
    log: list = []
    agents = {"m1": _CachingAgent("m1", alive, log), "m2": _CachingAgent("m2", alive, log),
              "lin": make_scripted("linear"), "buyer": make_scripted("hardheaded")}
    scenarios = scenario_set([1, 2, 3], ["car", "software_license"])
    specs = [s for arm in ("m1", "lin", "m2") for s in make_specs(arm, arm, ["buyer"], scenarios)]
    res = run_episodes(specs, agents, progress=False, one_cache_at_a_time=one_at_a_time)
    return res, log


def test_local_models_play_one_after_another_with_the_same_calls():
    """Cache-keeping agents play one group at a time (the scripted arms first), each call holding the views it
    holds when everything plays together, so every record is the same; before, both caches were alive at once."""
    grouped, log_grouped = _caching_run(True)
    together, log_together = _caching_run(False)
    assert grouped.records == together.records
    calls = {name: [views for n, views, _ in log_together if n == name] for name in ("m1", "m2")}
    assert {name: [views for n, views, _ in log_grouped if n == name] for name in ("m1", "m2")} == calls
    assert max(len(alive) for *_, alive in log_grouped) == 1
    assert max(len(alive) for *_, alive in log_together) == 2


def test_cache_groups_join_agents_that_share_episodes():
    """An agent in two arms' episodes (a local-model buyer) joins them into one group; cache-free episodes first."""
    scripted = make_scripted("linear")

    class Keeps(Agent):
        keeps_caches = True

        def act_batch(self, views):  # noqa: ANN001, ANN201
            return []

    a, b, buyer = Keeps(), Keeps(), Keeps()
    agents = {"a": a, "b": b, "c": Keeps(), "lin": scripted, "lm_buyer": buyer, "hh": make_scripted("hardheaded")}
    sc = scenario_set([1], ["car"])
    specs = (make_specs("a", "a", ["lm_buyer"], sc) + make_specs("c", "c", ["hh"], sc)
             + make_specs("lin", "lin", ["hh"], sc) + make_specs("b", "b", ["lm_buyer"], sc))
    groups = cache_groups(specs, agents)
    assert [[s.arm for s in g] for g in groups] == [["lin"], ["a", "b"], ["c"]]
