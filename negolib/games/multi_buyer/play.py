"""Batched play of the multi-buyer market: many markets advance together, one agent call per wave and role.

Contract: :func:`play_episodes` plays one seller against one buyer agent (the whole buyer pool: it answers for
every buyer of every market) on every scenario and returns one JSON-ready record per scenario, in order.
Markets advance together through the shared :func:`negolib.games.waves.play_records`: one ``act_batch`` call per
agent per wave. A failure (the agent raising or answering badly for
a view, the environment raising) ends only that episode, as a record with status ``error`` and ``error`` saying
where.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from negolib.games.multi_buyer.env import Episode
from negolib.games.multi_buyer.scenarios import MultiBuyerScenario
from negolib.games.toolcalls import reply_turn
from negolib.games.waves import play_records


def play_episodes(seller: Any, buyer: Any, scenarios: Sequence[MultiBuyerScenario], progress: bool = False,
                  **extra: Any) -> list[dict[str, Any]]:
    """One record per scenario, in order (see the module docstring); ``extra`` goes into every record."""
    episodes = [Episode(sc, f"{sc.key}|{i}") for i, sc in enumerate(scenarios)]
    return play_records(episodes, seller, buyer, reply_turn, progress, "markets", **extra)
