"""Batched play shared by the games: many episodes advance together, one agent call per wave and role.

Contract: :func:`play_waves` plays episodes that follow :class:`WaveEpisode` to the end, gathering every live
episode's pending view for an agent into one ``act_batch`` call per wave; :func:`play_records` also returns one
JSON-ready record per episode naming the agents. A failure (the agent raising or answering badly for a view, the
environment raising) ends only that episode, as a record with status ``error`` and ``error`` saying where.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from negolib.agents.base import AgentReply, act_contained, error_text, reply_problem
from negolib.core.progress import ProgressBar as tqdm


class WaveEpisode(Protocol):
    """What :func:`play_waves` asks of an episode."""

    @property
    def done(self) -> bool: ...

    @property
    def to_move(self) -> str: ...

    def view(self) -> Any: ...

    def step(self, turn: Any, input_tokens: int = 0, output_tokens: int = 0, latency_s: float = 0.0) -> Any: ...

    def where(self) -> str: ...


def play_waves(episodes: Sequence[WaveEpisode], agents: dict[str, Any], turn_of: Callable[[AgentReply], Any],
               progress: bool = False, desc: str = "episodes") -> dict[int, str]:
    """Play ``episodes`` to the end, one ``act_batch`` call per wave and role (``agents``: role -> agent); each
    reply becomes a turn through ``turn_of``. Returns {episode index: error text} for the episodes that failed."""
    errors: dict[int, str] = {}
    live = [i for i, ep in enumerate(episodes) if not ep.done]
    bar = tqdm(total=len(episodes), initial=len(episodes) - len(live), desc=desc, unit="ep", disable=not progress,
               leave=False)
    try:
        while live:
            groups: dict[str, list[int]] = {role: [] for role in agents}
            views: dict[int, Any] = {}
            for i in live:
                ep = episodes[i]
                try:
                    views[i] = ep.view()
                    groups[ep.to_move].append(i)
                except Exception as exc:  # noqa: BLE001 - contained to this episode
                    errors[i] = error_text(exc, ep.where())
            for role, idx in groups.items():
                if not idx:
                    continue
                replies = act_contained(agents[role], [views[i] for i in idx])
                for i, rep in zip(idx, replies):
                    ep = episodes[i]
                    problem = reply_problem(rep)
                    if problem is not None:
                        errors[i] = f"{ep.where()}: {problem}"
                        continue
                    try:
                        ep.step(turn_of(rep), rep.input_tokens, rep.output_tokens, rep.latency_s)
                    except Exception as exc:  # noqa: BLE001 - contained to this episode
                        errors[i] = error_text(exc, ep.where())
            still = []
            for i in live:
                if i in errors or episodes[i].done:
                    bar.update(1)
                else:
                    still.append(i)
            live = still
    finally:
        bar.close()
    return errors


class RecordedEpisode(WaveEpisode, Protocol):
    """What :func:`play_markets` asks of an episode: the wave protocol, plus its JSON-ready record."""

    def record(self, **extra: Any) -> dict[str, Any]: ...


def play_records(episodes: Sequence[RecordedEpisode], seller: Any, buyer: Any, turn_of: Callable[[AgentReply], Any],
                 progress: bool = False, desc: str = "episodes", **extra: Any) -> list[dict[str, Any]]:
    """Play ``episodes`` (:func:`play_waves`) and return one record per episode, in order, naming the agents;
    ``extra`` goes into every record and a failed episode's record has status ``error`` and ``error``."""
    names = {"seller": getattr(seller, "name", "seller"), "buyer": getattr(buyer, "name", "buyer")}
    errors = play_waves(episodes, {"seller": seller, "buyer": buyer}, turn_of, progress, desc)
    records = []
    for i, ep in enumerate(episodes):
        rec = ep.record(seller=names["seller"], buyer=names["buyer"], **extra)
        if i in errors:
            rec["status"], rec["error"] = "error", errors[i]
        records.append(rec)
    return records
