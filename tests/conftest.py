"""Shared fixtures: scenarios and small helpers for writing turns by hand."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def play_side_by_side(agent_a: Any, agent_b: Any, episodes: list[Any], turns: int = 2) -> None:
    """Let two language-model sellers answer the same views for ``turns`` seller turns (a scripted
    hardliner buyer replies to ``agent_a``'s moves) and assert they sample the same tokens with the
    same log-probs (to 1e-4)."""
    from negolib.games.multi_issue.scripted import make_scripted

    buyer = make_scripted("hardliner")
    for _ in range(turns):
        views = [e.view() for e in episodes if not e.done]
        a, b = agent_a.act_batch(views), agent_b.act_batch(views)
        assert [r.extra["completion_ids"] for r in a] == [r.extra["completion_ids"] for r in b]
        for x, y in zip(a, b):
            assert max(abs(p - q) for p, q in zip(x.extra["logprobs"], y.extra["logprobs"])) < 1e-4
        for e, r in zip([e for e in episodes if not e.done], a):
            e.step(r.text)
            if not e.done:
                e.step(buyer.act(e.view()).text)


def counter(*terms: tuple[str, Any], prose: str = "Here is my proposal.") -> str:
    """A well-formed COUNTER turn naming ``terms``."""
    return prose + "\n" + json.dumps({"action": "COUNTER", "terms": [{"name": n, "value": v} for n, v in terms]})


def accept(*terms: tuple[str, Any], prose: str = "Deal.") -> str:
    """A well-formed ACCEPT turn, optionally with attached terms."""
    act: dict[str, Any] = {"action": "ACCEPT"}
    if terms:
        act["terms"] = [{"name": n, "value": v} for n, v in terms]
    return prose + "\n" + json.dumps(act)


@pytest.fixture
def car_scenario():
    from negolib.games.multi_issue.domains import get_domain
    from negolib.games.multi_issue.scenarios import make_scenario

    return make_scenario(get_domain("car"), 5_000_053)


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models gain nothing from threads, and on a shared 2-core machine thread spin-waits
    can slow them tenfold; restored after the module (use with ``pytest.mark.usefixtures``)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# The tiers (README, "Tests"): `make test-fast` leaves out the notebook executions (the smoke book and the games'
# notebooks, minutes of CPU); `make test` (CI) runs them as before.
NOTEBOOK_FIXTURES = {"smoke_book", "bilateral_book", "multi_buyer_book", "multi_product_book"}
NOTEBOOK_TESTS = {"test_executed_notebook_has_tables_and_no_errors"}


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Mark every test that executes a book notebook ``notebook``."""
    for item in items:
        if NOTEBOOK_FIXTURES & set(getattr(item, "fixturenames", ())) or \
                getattr(item, "originalname", item.name) in NOTEBOOK_TESTS:
            item.add_marker(pytest.mark.notebook)
