"""Scenario items and dataset rows of any game the shared GRPO trainer plays.

A :class:`ScenarioItem` is one scenario and the opponent it is always played against (a data field, fixed
before training, identical across arms); :func:`item_rows` makes TRL's dataset rows of a game's items
(``prompt``: the policy's first chat messages; ``item``: the item's index, by which the rollout finds it
again). The paper's scenario sets are :mod:`negolib.games.multi_issue.training`'s; this module imports no game.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ScenarioItem:
    """One row of a scenario set: the scenario and the opponent it is always played against (``buyer``: the
    buyer while the policy sells). ``key`` names another game's scenario (None: the paper's ``domain|seed``)."""

    scenario: Any
    buyer: str
    key: str | None = None

    @property
    def scenario_id(self) -> str:
        if self.key is not None:
            return self.key
        return f"{self.scenario.domain.name}|{self.scenario.seed}"


def item_rows(items: Sequence[ScenarioItem], prompts: Sequence[list[dict[str, str]]]) -> list[dict[str, Any]]:
    """Dataset rows of a caller's scenario items (any game): ``prompt`` (the policy's first chat messages),
    ``buyer``, ``scenario_id`` and ``item``, the item's index, by which the rollout finds it again."""
    if len(items) != len(prompts):
        raise ValueError(f"{len(items)} items but {len(prompts)} prompts")
    return [{"prompt": list(p), "buyer": it.buyer, "scenario_id": it.scenario_id, "item": i}
            for i, (it, p) in enumerate(zip(items, prompts))]


def buyer_shares(items: Sequence[ScenarioItem]) -> dict[str, float]:
    """Realized share of each buyer in a scenario set."""
    out: dict[str, float] = {}
    for it in items:
        out[it.buyer] = out.get(it.buyer, 0.0) + 1.0 / len(items)
    return out
