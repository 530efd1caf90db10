"""The evaluation protocol: file round-trip, hash, validation, deviation log, pilot gate, resumable runs."""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from negolib.agents.base import Agent, AgentReply
from negolib.core.errors import ValidationError
from negolib.core.transcripts import TranscriptStore
from negolib.games.multi_issue.env import PartyView
from negolib.games.multi_issue.metrics import arm_table
from negolib.games.multi_issue.scripted import make_scripted
from negolib.stats import ClusterResampler
from negolib.study.evaluation import (
    ArmSpec,
    DeviationLog,
    PilotLog,
    Protocol,
    ProtocolError,
    SeedBlock,
    arm_metrics_table,
    build_specs,
    check_protocol_hashes,
    evaluate_arms,
    evaluation_frame,
    freeze,
    load_protocol,
    pilot_gate,
    protocol_from_dict,
    protocol_hash,
    protocol_to_dict,
    stamp,
)

SCRIPTED = {"backend": "scripted"}


def make_protocol(**kw) -> Protocol:
    base = dict(
        name="tiny",
        arms=(ArmSpec("fixed", {**SCRIPTED, "strategy": "fixed_offer"}),
              ArmSpec("boulware", {**SCRIPTED, "strategy": "boulware"}, notes="time-dependent")),
        buyers={"hh": {**SCRIPTED, "strategy": "hardheaded"}, "con": {**SCRIPTED, "strategy": "conceder"}},
        domains=("acquisition", "car"), held_out_domain="car", seeds=SeedBlock(n=2),
        primary=(("boulware", "fixed"),), n_resamples=500,
    )
    base.update(kw)
    return Protocol(**base)


def scripted_agents() -> dict[str, Agent]:
    return {"fixed": make_scripted("fixed_offer"), "boulware": make_scripted("boulware"),
            "hh": make_scripted("hardheaded"), "con": make_scripted("conceder")}


class MalformedAgent(Agent):
    """Always sends a truncated JSON action: every turn is a bad parse."""

    name = "malformed"

    def act_batch(self, views: Sequence[PartyView]) -> list[AgentReply]:
        return [AgentReply('Here is my offer. {"action": "COUNTER", "terms": [') for _ in views]


class DriftingAgent(Agent):
    """Reports sampling settings different from the protocol's declaration."""

    name = "drifting"

    def act_batch(self, views: Sequence[PartyView]) -> list[AgentReply]:
        return [AgentReply('Fine.\n{"action": "ACCEPT"}') for _ in views]

    def settings(self) -> dict:
        return {"backend": "custom", "sampling": {"temperature": 0.7}}


# -- file round-trip and hash ------------------------------------------------------------------

def test_round_trip_preserves_protocol_and_hash(tmp_path):
    p = make_protocol()
    h = freeze(p, tmp_path / "protocol.yaml", date="2025-01-01")
    q = load_protocol(tmp_path / "protocol.yaml")
    assert q == p and protocol_hash(q) == h == protocol_hash(p)
    assert len(h) == 64 and f"# sha256: {h}" in (tmp_path / "protocol.yaml").read_text()
    assert protocol_from_dict(protocol_to_dict(p)) == p


def test_hash_ignores_key_order_and_int_vs_float_sampling():
    lm = ArmSpec("lm", {"backend": "hf", "model": "m"}, {"temperature": 1.0, "top_k": 64})
    p = make_protocol(arms=(lm,), primary=())
    d = protocol_to_dict(p)
    reordered = dict(reversed(list(d.items())))
    reordered["arms"][0]["sampling"] = {"top_k": 64, "temperature": 1}
    assert protocol_hash(protocol_from_dict(yaml.safe_load(yaml.safe_dump(reordered)))) == protocol_hash(p)


def test_every_change_changes_the_hash():
    p = make_protocol()
    arm0 = p.arms[0]
    variants = [
        dataclasses.replace(p, name="tiny2"), dataclasses.replace(p, description="x"),
        dataclasses.replace(p, seeds=SeedBlock(start=5_000_001, n=2)),
        dataclasses.replace(p, seeds=SeedBlock(n=3)),
        dataclasses.replace(p, domains=("car", "acquisition")), dataclasses.replace(p, held_out_domain=None),
        dataclasses.replace(p, buyers={**p.buyers, "con": {**SCRIPTED, "strategy": "linear"}}),
        dataclasses.replace(p, arms=(dataclasses.replace(arm0, seller={**SCRIPTED, "strategy": "fixed_offer",
                                                                        "params": {"offer_utility": 0.9}}),
                                     p.arms[1])),
        dataclasses.replace(p, arms=(dataclasses.replace(arm0, sampling={"temperature": 0.7}), p.arms[1])),
        dataclasses.replace(p, arms=(dataclasses.replace(arm0, scaffold="training"), p.arms[1])),
        dataclasses.replace(p, arms=(dataclasses.replace(arm0, notes="n"), p.arms[1])),
        dataclasses.replace(p, arms=(dataclasses.replace(arm0, n_seeds=1), p.arms[1])),
        dataclasses.replace(p, arms=(dataclasses.replace(arm0, first_mover="buyer"), p.arms[1])),
        dataclasses.replace(p, arms=p.arms[::-1]), dataclasses.replace(p, metrics=("score",)),
        dataclasses.replace(p, primary=()), dataclasses.replace(p, alpha=0.01),
        dataclasses.replace(p, n_resamples=10_000), dataclasses.replace(p, bootstrap_seed=1),
        dataclasses.replace(p, accept_applies_terms=True), dataclasses.replace(p, max_rounds=11),
    ]
    hashes = {protocol_hash(v) for v in variants} | {protocol_hash(p)}
    assert len(hashes) == len(variants) + 1
    assert protocol_hash(dataclasses.replace(p, source="elsewhere.yaml")) == protocol_hash(p)


def test_freeze_is_idempotent_refuses_a_different_protocol_and_detects_edits(tmp_path):
    path = tmp_path / "protocol.yaml"
    h = freeze(make_protocol(), path)
    assert freeze(make_protocol(), path) == h
    other = make_protocol(max_rounds=10)
    with pytest.raises(ProtocolError, match="already frozen"):
        freeze(other, path)
    assert freeze(other, path, overwrite=True) == protocol_hash(other)
    path.write_text(path.read_text().replace("max_rounds: 10", "max_rounds: 9"))
    with pytest.raises(ValidationError, match="edited after freezing"):
        load_protocol(path)


def test_protocol_file_with_a_key_given_twice_is_refused(tmp_path):
    path = tmp_path / "protocol.yaml"
    freeze(make_protocol(), path)
    text = path.read_text().replace("max_rounds: 12\n", "max_rounds: 12\nmax_rounds: 2\n")
    assert text.count("max_rounds:") == 2
    path.write_text(text)
    with pytest.raises(ValidationError, match=r"protocol\.yaml.*max_rounds.*given twice"):
        load_protocol(path)


# -- validation ----------------------------------------------------------------------------------

def _mutate(d: dict, fn) -> dict:
    d = json.loads(json.dumps(d))
    fn(d)
    return d


BAD_FILES = [
    (lambda d: d.update(colour="red"), "<top>", "allowed"),
    (lambda d: d.update(alpha="0.05"), "alpha", "must be float"),
    (lambda d: d.update(max_rounds=12.5), "max_rounds", "must be int"),
    (lambda d: d.update(accept_applies_terms="no"), "accept_applies_terms", "must be bool"),
    (lambda d: d["seeds"].update(n="64"), "seeds.n", "must be int"),
    (lambda d: d["seeds"].update(start=10), "seeds.start", "three orders of magnitude"),
    (lambda d: d.update(domains=["acquisition", "moon_base"]), "domains", "allowed"),
    (lambda d: d.update(held_out_domain="job_offer"), "held_out_domain", "must be one of"),
    (lambda d: d["arms"][0].update(colour="red"), "arms[0]", "allowed"),
    (lambda d: d["arms"][0].update(scaffold="chat"), "arms[0] (fixed).scaffold", "'evaluation', 'training'"),
    (lambda d: d["arms"][0].update(sampling={"temp": 1.0}), "arms[0].sampling", "allowed"),
    (lambda d: d["arms"][0].update(sampling={"top_k": "64"}), "arms[0].sampling.top_k", "must be int"),
    (lambda d: d["arms"][0]["seller"].update(backend="gpt"), "arms[0] (fixed).seller.backend", "scripted"),
    (lambda d: d["arms"][0]["seller"].update(api_key="k"), "arms[0] (fixed).seller.api_key", "api_key_env"),
    (lambda d: d["arms"][1].update(name="fixed"), "arms", "duplicate"),
    (lambda d: d["arms"][0].update(n_seeds=5), "arms[0] (fixed).n_seeds", "1..2"),
    (lambda d: d["buyers"]["hh"].update(backend=None), "buyers.hh.backend", "scripted"),
    (lambda d: d.update(primary=[["boulware", "base"]]), "primary[0]", "two different arms"),
    (lambda d: d.update(metrics=["score", "elegance"]), "metrics[1]", "allowed"),
    (lambda d: d.pop("arms"), "arms", "required"),
]


@pytest.mark.parametrize("mutate, field, allowed", BAD_FILES)
def test_validation_errors_name_file_field_and_allowed_values(tmp_path, mutate, field, allowed):
    path = tmp_path / "bad_protocol.yaml"
    path.write_text(yaml.safe_dump(_mutate(protocol_to_dict(make_protocol()), mutate)))
    with pytest.raises(ValidationError) as err:
        load_protocol(path)
    msg = str(err.value)
    assert str(path) in msg and f"'{field}" in msg and allowed in msg, msg


def test_direct_construction_is_validated_too():
    with pytest.raises(ValidationError, match="max_rounds"):
        make_protocol(max_rounds=0)


# -- deviation and pilot logs --------------------------------------------------------------------

def test_deviation_log_appends_and_reads_back(tmp_path):
    log = DeviationLog.for_protocol(tmp_path / "protocol.yaml")
    assert log.path.name == "protocol.deviations.jsonl" and log.deviations_frame().empty
    log.log_deviation(["lr3_e2b"], "read at step 56 (upload failure)", True, date="2025-01-02",
                      protocol_hash="ab" * 32)
    with open(log.path, "a") as fh:
        fh.write('{"date": "2025-01-03", "arms": [')  # a crash mid-write
    log.log_deviation([], "held-out extension not run", False, date="2025-01-04")
    df = log.deviations_frame()
    assert list(df["arms"]) == ["lr3_e2b", "(all)"] and list(df["material"]) == [True, False]
    assert list(df.columns) == ["date", "arms", "description", "material", "protocol_hash"]
    assert df["protocol_hash"].iloc[0] == "ab" * 6
    assert log.covers("lr3_e2b") and not log.covers("base")
    with pytest.raises(ValidationError, match="material"):
        log.log_deviation(["x"], "y", "yes")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="description"):
        log.log_deviation(["x"], "  ", True)


def test_pilot_gate_passes_scripted_agents_and_logs_every_cell(tmp_path):
    p = make_protocol()
    res = pilot_gate(p, scripted_agents(), 2, log=tmp_path / "pilot.jsonl", date="2025-01-01")
    assert res.passed and res.failed_cells.empty
    cells = res.to_frame()
    assert len(cells) == 4 and (cells["n_episodes"] == 2).all() and (cells["bad_parses"] == 0).all()
    assert set(cells["arm"]) == {"fixed", "boulware"} and set(cells["buyer"]) == {"hh", "con"}
    # the pilot spreads over domains: the two episodes of a cell are on different domains
    doms = {(r["arm"], r["buyer"]): set() for r in res.records}
    for r in res.records:
        doms[(r["arm"], r["buyer"])].add(r["domain"])
    assert all(len(v) == 2 for v in doms.values())
    logged = PilotLog(tmp_path / "pilot.jsonl").frame()
    assert len(logged) == 4 and logged["passed"].all() and (logged["protocol_hash"] == protocol_hash(p)).all()


def test_pilot_gate_fails_a_malformed_agent_without_aborting(tmp_path):
    p = make_protocol(arms=(ArmSpec("fixed", {**SCRIPTED, "strategy": "fixed_offer"}),
                            ArmSpec("broken", {"backend": "custom"})), primary=())
    agents = {**scripted_agents(), "broken": MalformedAgent()}
    res = pilot_gate(p, agents, 1, log=PilotLog(tmp_path / "pilot.jsonl"))
    assert not res.passed
    failed = res.failed_cells
    assert set(failed["arm"]) == {"broken"} and len(failed) == 2
    assert (failed["seller_bad_parses"] == failed["n_seller_turns"]).all()
    assert (failed["bad_parses"] > 0).all()
    seller_only = pilot_gate(p, agents, 1, count="seller")
    assert set(seller_only.failed_cells["arm"]) == {"broken"}
    log = DeviationLog(tmp_path / "dev.jsonl")
    devs = res.log_failures(log, protocol_hash=protocol_hash(p))
    assert len(devs) == 2 and all(d.arms == ("broken",) and d.material for d in devs)
    first = failed.iloc[0]
    assert f"{first.bad_parses} bad parses in {first.n_turns} turns" in devs[0].description
    assert "ran regardless" in devs[0].description


class SilentAgent(Agent):
    """Raises if asked to play (the rollout records the episode as an error row, so a gate that played would fail
    its cells): the gate read after the evaluation must play nothing."""

    name = "silent"

    def act_batch(self, views: Sequence[PartyView]) -> list[AgentReply]:
        raise AssertionError("the pilot gate played an episode the evaluation had already played")


def test_pilot_gate_read_from_the_evaluations_own_episodes_plays_nothing(tmp_path):
    """``evaluation.pilot_ahead: false`` (notebook 04): after the evaluation, the gate over the evaluation's store
    reads the first episode of every cell back, catches the malformed arm, and calls no agent; the same gate over
    a fresh store (the twin) plays, so the reading is what saves the episodes."""
    p = make_protocol(arms=(ArmSpec("fixed", {**SCRIPTED, "strategy": "fixed_offer"}),
                            ArmSpec("broken", {"backend": "custom"})), primary=())
    evaluate_arms(p, {**scripted_agents(), "broken": MalformedAgent()}, tmp_path / "eval.jsonl", progress=False)
    silent = {name: SilentAgent() for name in ("fixed", "broken", "hh", "con")}
    read = pilot_gate(p, silent, 1, store=TranscriptStore(tmp_path / "eval.jsonl"), log=tmp_path / "log.jsonl")
    assert len(read.records) == 4 and (read.to_frame()["n_episodes"] == 1).all()
    assert set(read.failed_cells["arm"]) == {"broken"} and len(read.failed_cells) == 2
    played = pilot_gate(p, {**scripted_agents(), "broken": MalformedAgent()}, 1,
                        store=TranscriptStore(tmp_path / "pilot.jsonl"))
    cols = ["arm", "buyer", "n_episodes", "n_turns", "bad_parses", "passed"]
    assert read.to_frame()[cols].equals(played.to_frame()[cols])  # the same episodes, the same cells
    fresh = pilot_gate(p, silent, 1, store=TranscriptStore(tmp_path / "fresh.jsonl"))  # asks the silent agents
    assert (fresh.to_frame()["errors"] == 1).all() and not fresh.passed


# -- evaluation runs -----------------------------------------------------------------------------

def test_evaluate_arms_resumes_stamps_and_pairs_every_arm(tmp_path):
    p = make_protocol()
    store = TranscriptStore(tmp_path / "transcripts.jsonl")
    first = evaluate_arms(p, scripted_agents(), store, progress=False)
    assert len(first.records) == 2 * 2 * 2 * 2 and first.skipped == 0
    second = evaluate_arms(p, scripted_agents(), store, progress=False)
    assert second.records == [] and second.skipped == 16
    recs = store.records()
    assert len(recs) == 16 and {r["protocol_hash"] for r in recs} == {protocol_hash(p)}
    assert all(r["config"]["accept_applies_terms"] is False and r["config"]["max_rounds"] == 12 for r in recs)
    keys = {arm: sorted((r["domain"], r["seed"], r["buyer"]) for r in recs if r["arm"] == arm)
            for arm in p.arm_names}
    assert keys["fixed"] == keys["boulware"] and len(keys["fixed"]) == 8


def test_declared_subset_arm_plays_only_its_scenarios():
    p = make_protocol(arms=(ArmSpec("fixed", {**SCRIPTED, "strategy": "fixed_offer"}),
                            ArmSpec("lm", {"backend": "hf", "model": "m"}, n_seeds=1, domains=("car",))),
                      primary=())
    specs = build_specs(p)
    lm = {(s.scenario.domain.name, s.scenario.seed, s.buyer) for s in specs if s.arm == "lm"}
    fixed = {(s.scenario.domain.name, s.scenario.seed, s.buyer) for s in specs if s.arm == "fixed"}
    assert lm == {("car", 5_000_000, "hh"), ("car", 5_000_000, "con")} and lm < fixed


def test_records_of_another_protocol_are_not_mixed_without_a_deviation(tmp_path):
    store = TranscriptStore(tmp_path / "t.jsonl")
    evaluate_arms(make_protocol(), scripted_agents(), store, progress=False)
    changed = make_protocol(description="a later revision")
    with pytest.raises(ProtocolError, match="another protocol"):
        evaluate_arms(changed, scripted_agents(), store, progress=False)
    with pytest.raises(ProtocolError):
        check_protocol_hashes(store.records(), protocol_hash(changed))
    devs = DeviationLog(tmp_path / "dev.jsonl")
    devs.log_deviation(["fixed", "boulware"], "description revised after the first run", False)
    res = evaluate_arms(changed, scripted_agents(), store, progress=False, deviations=devs)
    assert res.records == [] and res.skipped == 16
    summary = check_protocol_hashes(store.records(), protocol_hash(changed), devs)
    assert (~summary["matches"] & summary["deviation_logged"]).all()


def test_extra_arm_runs_only_with_a_logged_deviation(tmp_path):
    p = make_protocol()
    extra = ArmSpec("conceder_seller", {**SCRIPTED, "strategy": "conceder"})
    agents = {**scripted_agents(), "conceder_seller": make_scripted("conceder")}
    store = TranscriptStore(tmp_path / "t.jsonl")
    devs = DeviationLog(tmp_path / "dev.jsonl")
    with pytest.raises(ProtocolError, match="not in the frozen protocol"):
        evaluate_arms(p, agents, store, progress=False, arms=[], extra_arms=[extra], deviations=devs)
    devs.log_deviation(["conceder_seller"], "added after freezing; same seeds, buyers and domains", True)
    res = evaluate_arms(p, agents, store, progress=False, arms=[], extra_arms=[extra], deviations=devs)
    assert {r["arm"] for r in res.records} == {"conceder_seller"} and len(res.records) == 8


def test_sampling_drift_warns(tmp_path):
    p = make_protocol(arms=(ArmSpec("lm", {"backend": "custom"}, {"temperature": 1.0}),), primary=(),
                      seeds=SeedBlock(n=1), domains=("car",))
    agents = {**scripted_agents(), "lm": DriftingAgent()}
    with pytest.warns(UserWarning, match="temperature is 0.7"):
        evaluate_arms(p, agents, TranscriptStore(tmp_path / "t.jsonl"), progress=False)


def test_stamp_and_evaluation_frame_carry_the_hash(tmp_path):
    p = make_protocol()
    store = TranscriptStore(tmp_path / "t.jsonl")
    evaluate_arms(p, scripted_agents(), store, progress=False)
    h = protocol_hash(p)
    df = evaluation_frame(store.records(), h)
    assert df.attrs["protocol_hash"] == h and (df["protocol_hash"] == h).all()
    stamped = stamp(df.drop(columns="protocol_hash"), "x" * 64)
    assert (stamped["protocol_hash"] == "x" * 64).all() and stamped.attrs["protocol_hash"] == "x" * 64
    recs = stamp([{"arm": "a"}], h)
    assert recs[0]["protocol_hash"] == h


def test_arm_metrics_table_is_tidy_and_matches_point_estimates(tmp_path):
    p = make_protocol()
    store = TranscriptStore(tmp_path / "t.jsonl")
    evaluate_arms(p, scripted_agents(), store, progress=False)
    df = evaluation_frame(store.records(), protocol_hash(p))
    res = ClusterResampler.from_frame(df, 200, seed=0)
    table = arm_metrics_table(df, res)
    assert len(table) == 2 * (len(p.metrics) + 1)  # + buyer split
    assert set(table["metric"]) == set(p.metrics) | {"buyer_split"}
    point = arm_table(df)
    for row in table.itertuples():
        want = point.loc[row.arm, row.metric]
        assert row.estimate == pytest.approx(want, nan_ok=True)
        if row.n_undefined < 200:
            assert row.ci_low <= row.ci_high
    assert (table["protocol_hash"] == protocol_hash(p)).all()


def test_protocol_from_params_builds_a_valid_protocol():
    from negolib.params import parse_params
    from negolib.study.evaluation import protocol_from_params

    params = parse_params({
        "profile": "t",
        "evaluation": {"buyers": ["hh", "con"], "seeds_per_domain": 3, "domains": ["acquisition", "car"],
                       "lm_seeds_per_domain": 1},
        "arms": {"fixed": {"backend": "scripted", "strategy": "fixed_offer"},
                 "lm": {"backend": "hf", "model": "m", "sampling": {"temperature": 0.7}}},
        "buyers": {"hh": {"backend": "scripted", "strategy": "hardheaded"},
                   "con": {"backend": "scripted", "strategy": "conceder"}},
        "statistics": {"primary": [["lm", "fixed"]]},
    })
    p = protocol_from_params(params)
    assert p.arm_names == ["fixed", "lm"] and p.held_out_domain == "car" and p.seeds.n == 3
    assert p.arm("lm").n_seeds == 1 and p.arm("lm").sampling["temperature"] == 0.7
    assert p.arm("fixed").sampling == {} and p.primary == (("lm", "fixed"),)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert protocol_from_dict(protocol_to_dict(p)) == p


def test_load_missing_file_names_it(tmp_path):
    with pytest.raises(ValidationError, match="does not exist"):
        load_protocol(Path(tmp_path) / "nope.yaml")


# -- resume checks, run lock, checked analysis -----------------------------------------------------

def test_a_deviation_never_reuses_episodes_played_under_other_settings(tmp_path):
    from negolib.core.transcripts import SettingsMismatchError

    store = TranscriptStore(tmp_path / "t.jsonl")
    evaluate_arms(make_protocol(), scripted_agents(), store, progress=False)
    assert all(r["settings"]["protocol_hash"] == r["protocol_hash"] for r in store.records())
    shorter = make_protocol(max_rounds=2)
    devs = DeviationLog(tmp_path / "dev.jsonl")
    devs.log_deviation(["fixed", "boulware"], "rounds cut to 2", True)
    before = store.path.read_bytes()
    with pytest.raises(SettingsMismatchError) as err:
        evaluate_arms(shorter, scripted_agents(), store, progress=False, deviations=devs)
    msg = str(err.value)
    assert "16 complete episode(s)" in msg and "config.max_rounds: 12 in the file, 2 in this run" in msg
    assert "protocol_hash" not in msg  # excused by the logged deviation; the rounds are not
    assert store.path.read_bytes() == before


def test_a_changed_buyer_spec_is_not_resumed(tmp_path):
    from negolib.core.transcripts import SettingsMismatchError

    store = TranscriptStore(tmp_path / "t.jsonl")
    p = make_protocol()
    evaluate_arms(p, scripted_agents(), store, progress=False)
    q = make_protocol(buyers={**p.buyers, "con": {**SCRIPTED, "strategy": "conceder", "params": {"e": 3.0}}})
    devs = DeviationLog(tmp_path / "dev.jsonl")
    devs.log_deviation(["fixed", "boulware"], "buyer con made softer", True)
    with pytest.raises(SettingsMismatchError, match=r"buyer.params.e: \(absent\) in the file, 3.0 in this run"):
        evaluate_arms(q, scripted_agents(), store, progress=False, deviations=devs)


def test_evaluate_arms_refuses_while_another_run_holds_the_file(tmp_path):
    from negolib.core.transcripts import RunLockedError

    path = tmp_path / "t.jsonl"
    with TranscriptStore(path).run_lock():
        with pytest.raises(RunLockedError, match="another run is writing"):
            evaluate_arms(make_protocol(), scripted_agents(), path, progress=False)
        with pytest.raises(RunLockedError):
            pilot_gate(make_protocol(), scripted_agents(), 1, store=TranscriptStore(path))
    assert not path.exists()
    res = pilot_gate(make_protocol(), scripted_agents(), 1, store=TranscriptStore(path))
    assert len(TranscriptStore(path).records()) == len(res.records) == 4


def test_analysis_refuses_forged_or_foreign_records(tmp_path):
    from negolib.core.transcripts import TranscriptError

    p = make_protocol()
    store = TranscriptStore(tmp_path / "t.jsonl")
    evaluate_arms(p, scripted_agents(), store, progress=False)
    recs = store.records()
    foreign = [dict(recs[0], protocol_hash="f" * 64)] + recs[1:]
    with pytest.raises(ProtocolError, match="another protocol"):
        evaluation_frame(foreign, protocol_hash(p))
    deal = next(i for i, r in enumerate(recs) if r["status"] == "deal")
    forged = json.loads(json.dumps(recs))
    forged[deal]["outcome"].update(seller_utility=5.0, score=5.0)
    with pytest.raises(TranscriptError, match=rf"records\[{deal}\]: field 'outcome.seller_utility'"):
        evaluation_frame(forged, protocol_hash(p))
    # the store refuses a file that mixes protocols (the book's episode table reads through it)
    with store.path.open("a") as fh:
        fh.write(json.dumps({**recs[0], "arm": "fixed_copy", "protocol_hash": "f" * 64}) + "\n")
    with pytest.raises(TranscriptError, match="one analysis never mixes protocols"):
        store.to_dataframe()
