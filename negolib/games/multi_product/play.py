"""Batched play of the multi-product market: many markets advance together, one agent call per wave and role.

Contract: :func:`play_episodes` plays one seller against one buyer agent (answering for every buyer of every
market) on every scenario and returns one JSON-ready record per scenario, in order, through the multi-buyer
games' wave loop (:func:`negolib.games.waves.play_records`): one ``act_batch`` call per wave and role,
a reply's text is the turn, and a failure ends only its episode as a record with status ``error``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from negolib.agents.base import AgentReply
from negolib.games.multi_product.env import Episode
from negolib.games.multi_product.scenarios import MultiProductScenario
from negolib.games.waves import play_records


def reply_text(reply: AgentReply) -> str:
    """The turn of ``reply``: its text (the four-part protocol is text only)."""
    return reply.text


def play_episodes(seller: Any, buyer: Any, scenarios: Sequence[MultiProductScenario], progress: bool = False,
                  **extra: Any) -> list[dict[str, Any]]:
    """One record per scenario, in order (see the module docstring); ``extra`` goes into every record."""
    episodes = [Episode(sc, f"{sc.key}|{i}") for i, sc in enumerate(scenarios)]
    return play_records(episodes, seller, buyer, reply_text, progress, "markets", **extra)
