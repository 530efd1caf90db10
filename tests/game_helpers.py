"""What the games' tests share: a tiny base model on disk, and one GRPO run through a game's ``run_grpo`` with spies
on the engines the shared trainer builds, the batches they play and what TRL receives."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from negolib.agents.api_agent import RetryPolicy

KEY_ENV = "NEGOBOOK_TEST_API_KEY"
"""The environment variable the API tests set to their file's own key sentinel."""
FAST = RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=0.05, timeout_s=5.0)
"""Retries of the games' API agents against the local test servers (short delays)."""
APIS = ("openai", "anthropic")
"""The API families every API test runs against (their local servers speak real HTTP)."""


def save_tiny_base(tmp_path_factory: Any, seed: int = 0) -> Path:
    """A tiny random causal LM and its tokenizer (:func:`negolib.models.tiny_causal_lm`) saved to a fresh folder."""
    from negolib.models import tiny_causal_lm

    model, tok = tiny_causal_lm(seed=seed)
    path = tmp_path_factory.mktemp("tiny-base")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def spied_grpo(run: Callable[[], Any]) -> tuple[Any, list[Any], list[Any], list[Any]]:
    """``run()`` (a game's ``run_grpo`` call -> the shared train() and build_run) with spies: (its result, the
    engines the trainer built, the batches they played, the TRL outputs of those batches)."""
    from negolib.training import grpo
    from negolib.training.rollout import RolloutBatch, RolloutEngine

    engines, batches, outputs = [], [], []
    real_engine, real_play, real_output = grpo.EngineFactory.engine, RolloutEngine.play, RolloutBatch.trl_output

    def engine(self, *a, **k):
        engines.append(real_engine(self, *a, **k))
        return engines[-1]

    def play(self, *a, **k):
        batches.append(real_play(self, *a, **k))
        return batches[-1]

    def trl_output(self, *a, **k):
        outputs.append(real_output(self, *a, **k))
        return outputs[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(grpo.EngineFactory, "engine", engine)
        mp.setattr(RolloutEngine, "play", play)
        mp.setattr(RolloutBatch, "trl_output", trl_output)
        result = run()
    return result, engines, batches, outputs


def registered_game(name: str, cls: type) -> Any:
    """The game registered as ``name``, checked to be a ``cls``."""
    from negolib.games import get_game

    game = get_game(name)
    assert isinstance(game, cls)
    return game


def check_seed_blocks(scenarios: Any, key: str) -> None:
    """A game's scenarios module: training, validation and evaluation seed blocks disjoint and in order; ``key``
    (``"stratum|seed"``) parses back; an unknown market is refused."""
    assert set(scenarios.train_seeds(len(scenarios.TRAIN_SEED_BLOCK))).isdisjoint(scenarios.VALIDATION_SEED_BLOCK)
    assert min(scenarios.eval_seeds(1000)) > max(scenarios.VALIDATION_SEED_BLOCK)
    stratum, seed = key.split("|")
    assert scenarios.parse_key(key) == (stratum, int(seed))
    with pytest.raises(ValueError, match="unknown market"):
        scenarios.make_scenario("nowhere", 1)


def one_step(grpo_run: tuple[Any, list[Any], list[Any], list[Any]]) -> tuple[Any, Any, Any, Any]:
    """(result, engine, batch, TRL output) of a :func:`spied_grpo` run that built one engine and played one batch."""
    result, engines, batches, outputs = grpo_run
    (eng,) = engines
    (batch,) = batches
    (out,) = outputs
    return result, eng, batch, out


class PlanGenerator:
    """A rollout engine's generator of seller turns from a plan: call k (the seller's turn k + 1) answers
    ``plan[min(k, len(plan) - 1)]`` for every context."""

    def __init__(self, tok: Any, tags: Any, plan: list[str]) -> None:
        self.tok, self.tags, self.plan, self.calls = tok, tags, plan, 0

    def generate(self, contexts: list[Any], budgets: Any) -> list[Any]:
        from negolib.core.chat_template import encode_text
        from negolib.training.rollout import Generation

        text = self.plan[min(self.calls, len(self.plan) - 1)]
        self.calls += 1
        ids = encode_text(self.tok, text) + [self.tags.stop_ids[0]]
        return [Generation(list(ids), [-0.1] * len(ids), True) for _ in contexts]


def play_api_seller(monkeypatch: Any, game: Any, api: str, responder: Any, failing: str, buyer: str,
                    scenarios: Any, cls: type, key: str) -> tuple[Any, list[dict[str, Any]], Any]:
    """``api``'s seller of ``game`` (checked to be a ``cls``; its key ``key``) playing ``scenarios`` against
    ``buyer`` through a local chat server (``responder``) that answers requests holding ``failing`` with a 401
    echoing the key: (seller, records, server); the records, settings, repr and vars are printed."""
    from servers import ChatServer, Fault

    prefix = "OPENAI" if api == "openai" else "ANTHROPIC"
    monkeypatch.setenv(f"{prefix}_API_KEY", key)
    with ChatServer(api, responder=responder, faults=[Fault("401", count=None, match=failing)]) as srv:
        monkeypatch.setenv(f"{prefix}_BASE_URL", srv.base_url)
        seller = game.make_agent(f"{api}:test-model", "seller", 0)
        assert isinstance(seller, cls)
        records = game.play(seller, game.make_agent(buyer, "buyer", 0), scenarios, seed=0)
    print(records, seller.settings(), repr(seller), vars(seller))
    return seller, records, srv


def check_failed_request(game: Any, record: dict[str, Any]) -> None:
    """``record`` failed on a 401 whose echoed key was redacted, and scores as invalid."""
    from negolib.core.secrets import REDACTED

    assert record["status"] == "error" and "401" in record["error"] and REDACTED in record["error"]
    assert not game.payoffs(record).valid


def check_key_kept(key: str, srv: Any, records: Any, seller: Any, capsys: Any, tmp_path: Path, word: str) -> None:
    """The key was sent to the server and appears nowhere else: not in what was printed (which holds ``word``), the
    records, the seller's settings or its repr."""
    import json

    assert any(key in a for a in srv.stats.auth)  # the key was sent, and goes nowhere else
    (tmp_path / "records.json").write_text(json.dumps(records))
    (tmp_path / "settings.json").write_text(json.dumps(seller.settings()))
    printed = capsys.readouterr()
    assert word in printed.out
    for text in (printed.out, printed.err, (tmp_path / "records.json").read_text(),
                 (tmp_path / "settings.json").read_text(), repr(seller)):
        assert key not in text


def one_step_recipe(recipe: Any, **over: Any) -> Any:
    """``recipe`` (a game's default GRPO recipe) cut to the games' tests' one step: 2 scenarios x 2 rollouts, 12 new
    tokens a turn, seed 3; ``over``: more fields (e.g. the driver's ``max_rollout_turns``)."""
    from dataclasses import replace

    return replace(recipe, scenarios_per_step=2, rollouts_per_scenario=2, micro_batch_size=4, max_steps=1,
                   save_every=1, max_new_tokens=12, max_prompt_tokens=4096, max_context_tokens=8192,
                   learning_rate=1e-3, seed=3, **over)


def text_agents(game: str, kit: Any, seed: int) -> tuple[Any, Any]:
    """A scripted seller and buyer of ``game`` whose turns are plain text (as a language model writes them)."""
    g = kit.game
    if game == "bilateral":
        from negolib.games.bilateral.scripted import make_scripted

        return make_scripted("linear", "seller", seed, surface="text"), make_scripted("boulware", "buyer", seed,
                                                                                     surface="text")
    if game == "multi_buyer":
        from negolib.games.multi_buyer.buyers import ScriptedBuyers
        from negolib.games.multi_buyer.sellers import make_seller

        return make_seller("probe_all", seed, surface="text"), ScriptedBuyers("pool@buyer", None, seed, surface="text")
    if game == "multi_issue":
        return g.make_agent("linear", "seller", seed), g.make_agent("boulware", "buyer", seed)
    return g.make_agent("greedy", "seller", seed), g.make_agent("pool", "buyer", seed)
