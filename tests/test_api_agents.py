"""API agents over real HTTP with the real ``openai`` and ``anthropic`` SDKs (no mocked clients).

Every server listens on 127.0.0.1 (see ``tests/servers.py``): a small OpenAI-compatible or
Anthropic Messages server with a deterministic or real-local-model responder and fault injection,
and, in one test, the real ``transformers serve``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import warnings
from pathlib import Path

import pytest
from game_helpers import APIS, KEY_ENV
from servers import DEFAULT_TURN, ChatReply, ChatServer, Fault, LocalModelResponder, TransformersServe

from negolib.agents.anthropic_agent import AnthropicAgent, to_messages_api
from negolib.agents.api_agent import RetryPolicy, as_sampling_config, classify_error
from negolib.agents.openai_agent import OpenAIAgent
from negolib.core.sampling import Decoding, SamplingConfig, SamplingDriftWarning
from negolib.core.secrets import REDACTED, MissingKeyError
from negolib.core.transcripts import TranscriptStore
from negolib.games.multi_issue.env import EnvConfig, Episode
from negolib.games.multi_issue.prompts import render_messages
from negolib.games.multi_issue.rollout import make_specs, run_episodes
from negolib.games.multi_issue.scenarios import scenario_set
from negolib.games.multi_issue.scripted import make_scripted
from negolib.study.cost import cost_frame, dry_run, price_table

SENTINEL = "sk-test-SENTINEL-7f3a9c2e5b1d4086aa"
FAST = RetryPolicy(max_retries=8, base_delay_s=0.01, max_delay_s=0.05, timeout_s=2.0)  # more retries: the
# retry and backoff tests count them


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SENTINEL)
    return SENTINEL


def make_agent(api, server, name="seller", **kw):
    cls = OpenAIAgent if api == "openai" else AnthropicAgent
    kw.setdefault("retry", FAST)
    kw.setdefault("render", render_messages)
    return cls(name, "test-model", api_key_env=KEY_ENV, base_url=server.base_url, **kw)


def specs_for(domains=("car",), n_seeds=2, rounds=2, arm="api_arm", seller="seller", buyer="buyer"):
    scen = scenario_set(range(5_000_000, 5_000_000 + n_seeds), list(domains))
    return make_specs(arm, seller, [buyer], scen, EnvConfig(max_rounds=rounds))


def play(seller, specs, store=None, buyer=None):
    agents = {"seller": seller, "buyer": buyer or make_scripted("hardliner", "buyer")}
    return run_episodes(specs, agents, store=store, progress=False)


def views(n, domain="car"):
    return [Episode(s.scenario, s.config).view() for s in specs_for((domain,), n_seeds=n)]


# -- units ----------------------------------------------------------------------------------------
def test_retry_policy_full_jitter_is_seeded_bounded_and_honours_retry_after():
    pol = RetryPolicy(max_retries=5, base_delay_s=0.5, max_delay_s=4.0)
    a = [pol.delay(n, random.Random(7)) for n in range(8)]
    assert a == [pol.delay(n, random.Random(7)) for n in range(8)]  # seeded
    rng = random.Random(1)
    for n in range(8):
        d = [pol.delay(n, rng) for _ in range(200)]
        assert 0 <= min(d) and max(d) <= min(4.0, 0.5 * 2 ** n)
    assert pol.delay(0, random.Random(0), retry_after=2.0) >= 2.0  # the server's floor
    assert pol.delay(0, random.Random(0), retry_after=100.0) == 4.0  # capped
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)


def test_to_messages_api_moves_system_and_merges_turns():
    system, turns = to_messages_api([{"role": "system", "content": "S"}, {"role": "user", "content": "a"},
                                     {"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}])
    assert system == "S" and turns == [{"role": "user", "content": "a\n\nb"}, {"role": "assistant", "content": "c"}]
    system, turns = to_messages_api([{"role": "system", "content": "S"}])
    assert turns[0]["role"] == "user" and turns[0]["content"]


def test_an_arms_sampling_in_any_of_its_forms_becomes_one_sampling_config():
    declared = Decoding(temperature=0.7, top_p=0.9, top_k=0, max_new_tokens=64)
    expected = SamplingConfig(0.7, 0.9, 0, 64)
    assert as_sampling_config(declared) == expected
    assert as_sampling_config(declared.as_dict()) == expected
    assert as_sampling_config(expected) is expected and as_sampling_config(None) == SamplingConfig()
    with pytest.raises(ValueError, match="unknown sampling keys"):
        as_sampling_config({"temprature": 0.7})
    with pytest.raises(TypeError, match="sampling must be"):
        as_sampling_config(0.7)


def test_classify_error_sorts_status_codes():
    class Fake(Exception):
        def __init__(self, status, body):
            super().__init__(f"Error code: {status}")
            self.status_code, self.body, self.response = status, body, None

    assert classify_error(Fake(429, {})).kind == "transient"
    assert classify_error(Fake(503, {})).kind == "transient"
    assert classify_error(Fake(400, {"message": "overloaded, try later"})).kind == "transient"
    rej = classify_error(Fake(400, {"message": "x", "param": "top_k"}), ["temperature", "top_k"])
    assert rej.kind == "rejected" and rej.params == ("top_k",)
    assert classify_error(Fake(400, {"param": "top_k"}), ["temperature"]).kind == "fatal"  # not sent
    assert classify_error(Fake(401, {})).kind == "fatal"
    assert classify_error(asyncio.TimeoutError()).reason == "timeout"


# -- retries, error rows, concurrency -------------------------------------------------------------
@pytest.mark.parametrize("api", APIS)
def test_retry_survives_each_injected_fault(api, api_key):
    kinds = ("429", "500", "529", "hang", "truncated", "drop")
    faults = [Fault(k, retry_after=0.05, hang_s=3.0) for k in kinds]
    with ChatServer(api, faults=faults) as srv:
        agent = make_agent(api, srv, retry=RetryPolicy(8, 0.01, 0.05, timeout_s=1.0), max_concurrency=2)
        res = play(agent, specs_for(("car", "job_offer"), n_seeds=2))
    assert srv.stats.faults == {k: 1 for k in kinds}
    assert [r["status"] for r in res.records if r["status"] == "error"] == []
    assert len(res.records) == 4 and agent.usage.retries == 6 and agent.usage.failed == 0
    seller_turns = [t for r in res.records for t in r["turns"] if t["role"] == "seller"]
    assert len(seller_turns) == agent.usage.succeeded and all(t["output_tokens"] > 0 for t in seller_turns)
    assert srv.stats.requests == agent.usage.attempts == agent.usage.succeeded + 6


@pytest.mark.parametrize("api", APIS)
def test_exhausted_retries_become_an_error_row_that_a_rerun_completes(api, api_key, tmp_path):
    store = TranscriptStore(tmp_path / "transcripts.jsonl")
    specs = specs_for(("car", "job_offer"), n_seeds=1)
    car_key = next(s.key for s in specs if s.scenario.domain.name == "car")
    # every request of the car episode (its prompt names the car-only term trade_in) fails with 500
    with ChatServer(api, faults=[Fault("500", count=None, match="trade_in")]) as srv:
        agent = make_agent(api, srv, retry=RetryPolicy(2, 0.01, 0.02, 2.0))
        first = play(agent, specs, store)
        assert srv.stats.faults["500"] == 3  # 1 attempt + 2 retries, then the episode is given up
        assert [r["status"] for r in first.errors] == ["error"]
        err = first.errors[0]
        assert "gave up after 3 attempts" in err["error"] and "HTTP 500" in err["error"]
        assert store.completed_keys() == {s.key for s in specs} - {car_key}
        assert {r["status"] for r in store.records(include_errors=True)} >= {"error"}

        srv.faults.clear()  # the outage is over: re-run the same specs into the same store
        before = srv.stats.requests
        second = play(agent, specs, store)
        assert second.skipped == 1 and len(second.records) == 1 and not second.errors
        assert srv.stats.requests - before == len(second.records[0]["turns"]) // 2 + len(
            second.records[0]["turns"]) % 2  # only the car episode's seller turns were sent
    recs = store.records(include_errors=True)
    assert len(recs) == 2 and all(r["status"] in ("deal", "no_deal") for r in recs)
    assert store.completed_keys() == {s.key for s in specs}
    raw = list(store.iter_raw())
    complete = [r for r in raw if r["status"] != "error"]
    assert len(raw) == 3 and len({(r["domain"], r["seed"]) for r in complete}) == len(complete) == 2


@pytest.mark.parametrize("api", APIS)
def test_concurrency_bound_is_respected(api, api_key):
    with ChatServer(api, latency_s=0.2) as srv:
        agent = make_agent(api, srv, max_concurrency=3)
        replies = agent.act_batch(views(10))
        assert all(r.error is None for r in replies) and len(replies) == 10
        assert srv.stats.max_in_flight == 3 and agent.usage.max_in_flight == 3
        wide = make_agent(api, srv, max_concurrency=10)
        srv.stats.max_in_flight = 0
        wide.act_batch(views(10))
        assert srv.stats.max_in_flight > 3  # the wave really is concurrent


def test_a_bad_view_gets_an_error_reply_and_the_wave_goes_on(api_key):
    with ChatServer("openai") as srv:
        agent = make_agent("openai", srv)
        msgs = [{"role": "user", "content": "hello"}]
        replies = agent.complete_batch([ValueError("cannot render"), msgs])
    assert "cannot render" in (replies[0].error or "") and replies[1].error is None
    assert srv.stats.requests == 1


def test_act_batch_works_inside_a_running_event_loop(api_key):
    with ChatServer("anthropic") as srv:
        agent = make_agent("anthropic", srv)

        async def notebook_cell():  # Jupyter runs cells inside an event loop
            return agent.act_batch(views(2))

        replies = asyncio.run(notebook_cell())
    assert [r.error for r in replies] == [None, None]


# -- usage, cost, rejected parameters -------------------------------------------------------------
def test_usage_and_latency_recorded_and_costed(api_key):
    with ChatServer("openai", responder=lambda req: ChatReply(DEFAULT_TURN, 321, 12), latency_s=0.01) as srv:
        agent = make_agent("openai", srv)
        specs = specs_for(("car",), n_seeds=2, rounds=2)
        est = dry_run(specs, {"seller": "frontier"}, price_table({"frontier": [2.0, 10.0]}),
                      turns_per_episode=4, tokens_per_turn=(321, 12), echo=False)
        res = play(agent, specs)
    seller = [t for r in res.records for t in r["turns"] if t["role"] == "seller"]
    assert all((t["input_tokens"], t["output_tokens"]) == (321, 12) and t["latency_s"] > 0 for t in seller)
    assert all(t["input_tokens"] == 0 for r in res.records for t in r["turns"] if t["role"] == "buyer")
    assert agent.usage.input_tokens == 321 * len(seller) and agent.usage.output_tokens == 12 * len(seller)
    assert agent.usage.latency_s > 0
    df = cost_frame(res.records, price_table({"frontier": [2.0, 10.0]}), {"seller": "frontier"})
    assert df["usd"].sum() == pytest.approx(len(seller) * (321 * 2.0 + 12 * 10.0) / 1e6)
    assert est.calls >= len(seller) / 2 and est.max_calls >= len(seller)
    seeds = [b["seed"] for b in srv.stats.bodies]  # one derived seed per (episode, turn), reproducible
    assert len(set(seeds)) == len(seeds) == len(seller) and all(0 <= x < 2**31 for x in seeds)
    with ChatServer("openai") as srv2:
        play(make_agent("openai", srv2), specs)
    assert sorted(b["seed"] for b in srv2.stats.bodies) == sorted(seeds)


@pytest.mark.parametrize(("api", "param"), [("openai", "top_k"), ("anthropic", "temperature"),
                                            ("anthropic", "top_k")])
def test_rejected_parameter_is_recorded_dropped_and_warned(api, param, api_key):
    with ChatServer(api, reject_params=(param,)) as srv:
        agent = make_agent(api, srv, max_concurrency=1, sampling=SamplingConfig(temperature=0.7))
        assert param in agent.settings()["sent"]
        with pytest.warns(SamplingDriftWarning, match=param):
            replies = agent.act_batch(views(3))
        assert all(r.error is None for r in replies)
        assert [param in b for b in srv.stats.bodies] == [True, False, False, False]
        st = agent.settings()
        assert param in st["rejected"] and param not in st["sent"] and st["sampling"][param] is None
        assert st["declared"]["temperature"] == 0.7
        with warnings.catch_warnings():
            warnings.simplefilter("error", SamplingDriftWarning)
            assert all(r.error is None for r in agent.act_batch(views(2)))  # no new drift, no new warning
        assert not any(param in b for b in srv.stats.bodies[4:])
        assert agent.usage.retries == 0  # a rejection does not spend the retry budget


def test_openai_max_tokens_rejection_switches_to_max_completion_tokens(api_key):
    with ChatServer("openai", reject_params=("max_tokens",)) as srv:
        agent = make_agent("openai", srv, sampling=SamplingConfig(max_new_tokens=99))
        with pytest.warns(SamplingDriftWarning, match="max_tokens"):
            assert agent.act(views(1)[0]).error is None
        assert srv.stats.bodies[-1]["max_completion_tokens"] == 99 and "max_tokens" not in srv.stats.bodies[-1]
        assert agent.settings()["sampling"]["max_new_tokens"] == 99


# -- keys ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("api", APIS)
def test_missing_key_is_a_clear_error_before_any_request(api, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with ChatServer(api) as srv:
        with pytest.raises(MissingKeyError, match=f"{KEY_ENV} is not set"):
            make_agent(api, srv)
        assert srv.stats.requests == 0


def test_sentinel_key_never_leaks_into_outputs_reprs_or_logs(api_key, tmp_path):
    out = tmp_path / "outputs"
    out.mkdir()
    handler = logging.FileHandler(out / "run.log")
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    names = ("", "openai", "anthropic", "httpx", "httpx2", "httpcore", "negolib")
    levels = {n: logging.getLogger(n).level for n in names}
    root.addHandler(handler)
    for n in names:
        logging.getLogger(n).setLevel(logging.DEBUG)
    store = TranscriptStore(out / "transcripts.jsonl")
    # the car episode meets a provider that echoes the key in a 401; the others see 429s and resets
    s_faults = [Fault("401", count=None, match="trade_in"), Fault("429", count=2, retry_after=0.01),
                Fault("drop", count=1)]
    try:
        with ChatServer("openai", faults=s_faults) as s_srv, \
                ChatServer("anthropic", faults=[Fault("529", count=2)]) as b_srv:
            seller = make_agent("openai", s_srv, name="seller")
            buyer = make_agent("anthropic", b_srv, name="buyer")
            handler.addFilter(seller.log_filter())  # what a run does with its log handlers
            res = play(seller, specs_for(("car", "job_offer"), n_seeds=2), store, buyer=buyer)
            logging.getLogger("negolib.careless").error("auth header seen: %s", s_srv.stats.auth[0])
    finally:
        root.removeHandler(handler)
        handler.close()
        for n, lvl in levels.items():
            logging.getLogger(n).setLevel(lvl)
    assert any(SENTINEL in a for a in s_srv.stats.auth) and any(SENTINEL in a for a in b_srv.stats.auth)
    errors = [r for r in res.records if r["status"] == "error"]
    assert len(errors) == 2 and all("401" in r["error"] and "not retryable" in r["error"] for r in errors)
    assert all(REDACTED in r["error"] for r in errors)  # the echoed key was scrubbed
    assert s_srv.stats.faults["401"] == 2  # fatal: not retried
    store.to_parquet(out / "episodes.parquet")
    (out / "settings.json").write_text(json.dumps({"seller": seller.settings(), "buyer": buyer.settings()}))
    (out / "reprs.txt").write_text("\n".join([repr(seller), repr(buyer), str(vars(seller)), str(vars(buyer)),
                                              repr(seller.usage), str(res.records)]))
    log_text = (out / "run.log").read_text()
    assert "HTTP Request" in log_text and f"auth header seen: Bearer {REDACTED}" in log_text
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 5
    for p in files:
        assert SENTINEL.encode() not in p.read_bytes(), f"key leaked into {p.name}"


def test_an_api_arm_built_from_params_scrubs_its_key_from_the_runs_log_handlers(api_key, tmp_path):
    """build_agent attaches the agent's redaction to the root logger's handlers (a notebook kernel's
    or a CLI's) and to logging's last resort, once per key."""
    from negolib.agents.factory import build_agent
    from negolib.params import AgentSpec

    handler = logging.FileHandler(tmp_path / "run.log")
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        spec = AgentSpec(backend="openai", model="m", base_url="http://127.0.0.1:9/v1", api_key_env=KEY_ENV)
        build_agent("seller", spec, role="seller")
        build_agent("seller2", spec, role="seller")  # the same key: no second filter
        logging.getLogger("negolib.careless").error("key is %s", SENTINEL)
        assert sum(type(f).__name__ == "RedactingFilter" for f in handler.filters) == 1
        assert any(type(f).__name__ == "RedactingFilter" for f in logging.lastResort.filters)
    finally:
        root.removeHandler(handler)
        handler.close()
        for h in (handler, logging.lastResort):
            for f in [f for f in h.filters if type(f).__name__ == "RedactingFilter"]:
                h.removeFilter(f)
    text = (tmp_path / "run.log").read_text()
    assert SENTINEL not in text and f"key is {REDACTED}" in text


# -- real local models -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smollm2_dir():
    from negolib.models import ModelUnavailable, local_model_dir

    try:
        return local_model_dir("smollm2-135m-instruct")
    except ModelUnavailable as exc:
        pytest.skip(str(exc))


def test_anthropic_agent_with_a_real_local_model_behind_the_messages_api(api_key, smollm2_dir, tmp_path):
    responder = LocalModelResponder(smollm2_dir, max_new_tokens=12, max_prompt_tokens=192).load()
    store = TranscriptStore(tmp_path / "transcripts.jsonl")
    with ChatServer("anthropic", responder=responder) as srv:
        agent = make_agent("anthropic", srv, sampling=SamplingConfig(max_new_tokens=12),
                           retry=RetryPolicy(2, 0.01, 0.05, timeout_s=60.0))
        res = play(agent, specs_for(("car",), n_seeds=1, rounds=1), store)
    (rec,) = res.records
    assert rec["status"] in ("deal", "no_deal"), rec.get("error")
    seller = rec["turns"][0]
    assert seller["role"] == "seller" and seller["raw"].strip()
    assert 0 < seller["output_tokens"] <= 12 and seller["input_tokens"] > 200  # real tokenizer counts
    assert store.completed_keys() == {("api_arm", "car", 5_000_000, "buyer")}
    assert srv.stats.bodies[0]["system"] and srv.stats.bodies[0]["messages"][0]["role"] == "user"


@pytest.mark.timeout(180)
def test_openai_agent_plays_an_episode_against_transformers_serve(api_key, smollm2_dir, tmp_path):
    store = TranscriptStore(tmp_path / "transcripts.jsonl")
    with TransformersServe(smollm2_dir, tmp_path / "serve.log") as server:
        agent = OpenAIAgent("seller", str(smollm2_dir), api_key_env=KEY_ENV, base_url=server.base_url,
                            sampling=SamplingConfig(max_new_tokens=12), render=render_messages,
                            retry=RetryPolicy(2, 0.5, 2.0, timeout_s=90.0))
        with pytest.warns(SamplingDriftWarning, match="top_k"):  # transformers serve rejects top_k (422)
            res = play(agent, specs_for(("car",), n_seeds=1, rounds=1), store)
    (rec,) = res.records
    assert rec["status"] in ("deal", "no_deal"), rec.get("error")
    seller = [t for t in rec["turns"] if t["role"] == "seller"]
    assert seller and all(t["raw"].strip() and 0 < t["output_tokens"] <= 12 for t in seller)
    assert all(t["input_tokens"] > 200 for t in seller)
    assert "top_k" in agent.settings()["rejected"] and "top_k" not in agent.settings()["sent"]
    assert store.completed_keys() == {rec_key(rec)}
    for p in Path(tmp_path).rglob("*"):
        if p.is_file():
            assert SENTINEL.encode() not in p.read_bytes(), p.name


def rec_key(rec):
    return (rec["arm"], rec["domain"], rec["seed"], rec["buyer"])
