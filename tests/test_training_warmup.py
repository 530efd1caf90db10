"""Format warm-up: demonstrations, the supervised loss, the saved model, params validation."""

from __future__ import annotations

import json

import pytest

from negolib.agents.hf_agent import fit_prompt
from negolib.core.progress import PROGRESS_ENV
from negolib.games.multi_issue.env import Episode
from negolib.games.multi_issue.prompts import render_messages
from negolib.games.multi_issue.protocol import parse_action
from negolib.games.multi_issue.scripted import make_scripted
from negolib.games.multi_issue.training import env_config, scenario_items
from negolib.games.multi_issue.warmup import (
    WarmupConfig,
    _example_loss,
    demonstrations,
    format_warmup,
    run_format_warmup,
    warmup_dir,
    warmup_ready,
)
from negolib.training.config import TrainConfig

CFG = TrainConfig.from_params({"train_seeds_per_domain": 1, "buyer_mixture": {"conceder": 1.0}})
BUYERS = {"conceder": make_scripted("conceder")}
SMALL = WarmupConfig(demonstrations=6, batch_size=2, prompt_cap=384, learning_rate=1e-3, max_terms=3)


@pytest.fixture(scope="module")
def tiny():
    from negolib.models import tiny_causal_lm

    return tiny_causal_lm(seed=0)


def test_config_from_params_checks_keys_and_types():
    c = WarmupConfig.from_params({"demonstrations": 8, "strategies": ["linear"], "warmup_fraction": 0})
    assert c.demonstrations == 8 and c.strategies == ("linear",) and c.warmup_fraction == 0.0
    with pytest.raises(ValueError, match="unknown warm-up keys"):
        WarmupConfig.from_params({"demos": 3})
    with pytest.raises(ValueError, match="must be int"):
        WarmupConfig.from_params({"epochs": 1.5})
    with pytest.raises(ValueError, match="scaffolds"):
        WarmupConfig.from_params({"scaffolds": ["chat"]})


def test_compact_scripted_counters_name_at_most_max_terms(car_scenario):
    agent = make_scripted("boulware", max_terms=3)
    ep = Episode(car_scenario)
    act = parse_action(agent.act(ep.view()).text).action
    assert act.kind == "COUNTER" and len(act.terms) == 3
    w = dict(zip(car_scenario.domain.issue_names, car_scenario.seller.weights))
    named = [t.name for t in act.terms]
    assert named == sorted(named, key=lambda n: -w[n])  # heaviest first
    with pytest.raises(ValueError):
        make_scripted("boulware", max_terms=0)


def test_demonstrations_are_the_sellers_prompts_and_parseable_turns(tiny):
    _, tok = tiny
    demos = demonstrations(tok, scenario_items(CFG), BUYERS, SMALL, env_config(CFG))
    assert len(demos) == SMALL.demonstrations
    assert {d.scaffold for d in demos} == {"training", "evaluation"}
    for d in demos:
        act = parse_action(d.text).action
        assert act is not None and (act.kind == "ACCEPT" or len(act.terms) <= SMALL.max_terms)
        assert tok.decode(list(d.completion_ids[:-1])) == d.text  # end-of-turn tag appended once
        assert len(d.prompt_ids) <= SMALL.prompt_cap
    first = demos[0]
    item = scenario_items(CFG)[0]
    ids, _ = fit_prompt(Episode(item.scenario, env_config(CFG)).view(), tok, render_messages, first.scaffold,
                        SMALL.prompt_cap)
    assert list(first.prompt_ids) == ids and first.turn == 1


def test_cached_prompt_loss_equals_full_loss(tiny):
    import torch

    model, tok = tiny
    demo = demonstrations(tok, scenario_items(CFG), BUYERS, SMALL, env_config(CFG))[1]
    with torch.no_grad():
        full, n1 = _example_loss(model, demo, prompt_grad=True)
        cached, n2 = _example_loss(model, demo, prompt_grad=False)
    assert n1 == n2 == len(demo.completion_ids)
    assert float(cached) == pytest.approx(float(full), rel=1e-4)


def test_format_warmup_lowers_the_loss(tiny, tmp_path, monkeypatch):
    import copy

    model, tok = tiny
    model = copy.deepcopy(model)
    demos = demonstrations(tok, scenario_items(CFG), BUYERS, SMALL, env_config(CFG))
    config = WarmupConfig(**{**SMALL.__dict__, "epochs": 6, "learning_rate": 5e-3})
    heartbeat = tmp_path / "progress.txt"  # what the book runner's heartbeat reads (negolib.core.progress)
    monkeypatch.setenv(PROGRESS_ENV, str(heartbeat))
    rows = format_warmup(model, demos, config, progress=False)
    assert len(rows) == 6 * 3
    assert heartbeat.read_text().startswith("format warm-up step 18/18: loss ")  # reported with the bar hidden
    assert rows[-1]["loss"] < 0.85 * rows[0]["loss"]
    assert all(r["lr"] > 0 for r in rows) and not model.training


def test_run_format_warmup_saves_once(tmp_path, tiny):
    from negolib.agents.factory import tiny_model_dir

    init = tiny_model_dir(tmp_path / "tiny")
    out = run_format_warmup(init, tmp_path / "run", SMALL, scenario_items(CFG), BUYERS, env_config(CFG))
    assert out == warmup_dir(tmp_path / "run") and (out / "config.json").is_file()
    assert warmup_ready(tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "warmup" / "warmup_complete.json").read_text())
    assert summary["demonstrations"] == SMALL.demonstrations
    stamp = (out / "config.json").stat().st_mtime_ns
    assert run_format_warmup(init, tmp_path / "run", SMALL, scenario_items(CFG), BUYERS) == out
    assert (out / "config.json").stat().st_mtime_ns == stamp  # not redone
