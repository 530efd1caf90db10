"""Batched play of bilateral price bargaining: many episodes advance together, one agent call per wave and role.

Contract: :func:`play_episodes` plays one seller against one buyer on every scenario and returns one JSON-ready
record per scenario, in order, through the games' shared wave loop (:func:`negolib.games.waves.play_records`).
A reply carrying ``extra["tool_calls"]`` is a structured turn (message = its text), else its text is parsed
(:func:`negolib.games.toolcalls.reply_turn`). A failure ends only that episode, as a record with status
``error`` and ``error`` saying where; the other episodes play on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from negolib.games.bilateral.env import BilateralConfig, Episode
from negolib.games.bilateral.scenarios import BilateralScenario
from negolib.games.toolcalls import reply_turn
from negolib.games.waves import play_records


def play_episodes(seller: Any, buyer: Any, scenarios: Sequence[BilateralScenario],
                  config: BilateralConfig | None = None, progress: bool = False,
                  **extra: Any) -> list[dict[str, Any]]:
    """One record per scenario, in order (see the module docstring); ``extra`` goes into every record."""
    cfg = config or BilateralConfig()
    episodes = [Episode(sc, cfg, f"{sc.key}|{i}") for i, sc in enumerate(scenarios)]
    return play_records(episodes, seller, buyer, reply_turn, progress, **extra)


__all__ = ["play_episodes", "reply_turn"]
