"""Batched play of the multi-buyer market: many markets advance together, one agent call per wave and role.

Contract: :func:`play_episodes` plays one seller against one buyer agent (the whole buyer pool: it answers for
every buyer of every market) on every scenario and returns one JSON-ready record per scenario, in order. Each
wave gathers every live episode's pending view for an agent into one ``act_batch`` call (seller turns in one,
buyer answers in the other). A failure (the agent raising or answering badly for a view, the environment
raising) ends only that episode, as a record with status ``error`` and ``error`` saying where.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tqdm.auto import tqdm

from negolib.games.bilateral.play import reply_turn
from negolib.games.multi_buyer.env import Episode
from negolib.games.multi_buyer.scenarios import MultiBuyerScenario
from negolib.rollout import act_contained, error_text, reply_problem


def play_episodes(seller: Any, buyer: Any, scenarios: Sequence[MultiBuyerScenario], progress: bool = False,
                  **extra: Any) -> list[dict[str, Any]]:
    """One record per scenario, in order (see the module docstring); ``extra`` goes into every record."""
    names = {"seller": getattr(seller, "name", "seller"), "buyer": getattr(buyer, "name", "buyer")}
    agents = {"seller": seller, "buyer": buyer}
    episodes = [Episode(sc, f"{sc.key}|{i}") for i, sc in enumerate(scenarios)]
    errors: dict[int, str] = {}
    live = list(range(len(episodes)))
    bar = tqdm(total=len(episodes), desc="markets", unit="ep", disable=not progress, leave=False)
    try:
        while live:
            groups: dict[str, list[int]] = {"seller": [], "buyer": []}
            views: dict[int, Any] = {}
            for i in live:
                ep = episodes[i]
                try:
                    views[i] = ep.view()
                except Exception as exc:  # noqa: BLE001 - contained to this episode
                    errors[i] = error_text(exc, _where(ep))
                    continue
                groups[ep.to_move].append(i)
            for role, idx in groups.items():
                if not idx:
                    continue
                replies = act_contained(agents[role], [views[i] for i in idx])
                for i, rep in zip(idx, replies):
                    ep = episodes[i]
                    problem = reply_problem(rep)
                    if problem is not None:
                        errors[i] = f"{_where(ep)}: {problem}"
                        continue
                    try:
                        ep.step(reply_turn(rep), rep.input_tokens, rep.output_tokens, rep.latency_s)
                    except Exception as exc:  # noqa: BLE001 - contained to this episode
                        errors[i] = error_text(exc, _where(ep))
            still = []
            for i in live:
                if i in errors or episodes[i].done:
                    bar.update(1)
                else:
                    still.append(i)
            live = still
    finally:
        bar.close()
    records = []
    for i, ep in enumerate(episodes):
        rec = ep.record(seller=names["seller"], buyer=names["buyer"], **extra)
        if i in errors:
            rec["status"], rec["error"] = "error", errors[i]
        records.append(rec)
    return records


def _where(ep: Episode) -> str:
    who = "seller" if ep.pending is None else f"buyer_{ep.pending.to + 1}"
    return f"{ep.scenario.key} turn {ep.seller_turns + (ep.pending is None)} ({who})"
