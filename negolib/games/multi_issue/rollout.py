"""The rollout engine: advance many episodes together, batching each wave per agent.

At every wave the engine gathers the pending turn of every live episode, groups the views by the
agent that must act, and makes one :meth:`Agent.act_batch` call per agent. Local models therefore
generate for all their episodes in one batch and API agents answer a whole wave concurrently, so
throughput scales with the batch rather than with the episode count. Finished episodes are
written to the transcript store as they complete (in batches), so an interrupted run resumes
where it stopped.

Failures are contained to their episode. An agent's error reply (or a reply whose fields would
make an unreadable record, :func:`reply_problem`), an exception while a view is
built, the agent answers (``act_batch`` raising or answering the wrong number of replies: each view
of that call is then asked alone, so one bad view costs only its own episode), or the environment
steps (parser, ledger, closing) ends that episode as an error row (status ``error``, ``error`` =
turn, role and exception text); the other episodes play on, and a re-run plays error rows again
(:class:`~negolib.core.transcripts.TranscriptStore` counts only ``deal``/``no_deal`` as complete).
Exceptions from the caller's own ``on_turn`` callback, and KeyboardInterrupt, are not caught.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from negolib.agents.base import Agent, AgentReply, act_contained, error_text, reply_problem
from negolib.core.progress import ProgressBar as tqdm
from negolib.core.transcripts import SCHEMA_VERSION, TranscriptStore, record_key
from negolib.games.multi_issue.env import EnvConfig, Episode, PartyView
from negolib.games.multi_issue.scenarios import Scenario


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to play: which seller arm meets which buyer on which scenario."""

    arm: str
    seller: str
    buyer: str
    scenario: Scenario
    config: EnvConfig = field(default_factory=EnvConfig)

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.arm, self.scenario.domain.name, self.scenario.seed, self.buyer)

    @property
    def episode_id(self) -> str:
        return f"{self.arm}|{self.scenario.domain.name}|{self.scenario.seed}|{self.buyer}"


def make_specs(arm: str, seller: str, buyers: Sequence[str], scenarios: Iterable[Scenario],
               config: EnvConfig | None = None) -> list[EpisodeSpec]:
    """The paired episode list of one arm: every scenario against every buyer."""
    cfg = config or EnvConfig()
    return [EpisodeSpec(arm, seller, b, s, cfg) for s in scenarios for b in buyers]


@dataclass
class RolloutResult:
    """Records of the episodes played (complete and error rows) and how many were skipped."""

    records: list[dict[str, Any]]
    skipped: int = 0

    @property
    def errors(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r["status"] == "error"]


def _where(ep: Episode) -> str:
    return f"turn {len(ep.turns) + 1} ({ep.to_move})"


def turn_log(rep: AgentReply) -> dict[str, Any]:
    """What a reply's backend data adds to its turn record: whether the agent's prompt cap bound, and how
    many template tags it stripped from the reply."""
    return {"prompt_capped": bool(rep.extra.get("prompt_capped", False)),
            "tags_stripped": int(rep.extra.get("tags_stripped", 0) or 0)}


def episode_record(spec: EpisodeSpec, ep: Episode, error: str | None = None) -> dict[str, Any]:
    """The transcript record of ``ep``; with ``error`` an error row (status ``error``)."""
    try:
        rec = ep.record(arm=spec.arm, seller=spec.seller, buyer=spec.buyer)
    except Exception as exc:  # noqa: BLE001 - a broken episode still leaves an error row
        s = spec.scenario
        rec = {"schema": SCHEMA_VERSION, "arm": spec.arm, "seller": spec.seller, "buyer": spec.buyer,
               "domain": s.domain.name, "seed": s.seed, "held_out": s.domain.held_out, "status": "error",
               "config": asdict(spec.config), "turns": [], "outcome": None}
        error = "; ".join(e for e in (error, error_text(exc, "record")) if e)
    if error is not None:
        rec["status"], rec["error"] = "error", error
    return rec


def run_episodes(
    specs: Sequence[EpisodeSpec],
    agents: Mapping[str, Agent],
    store: TranscriptStore | None = None,
    progress: bool = True,
    flush_every: int = 64,
    on_turn: Callable[[Episode, AgentReply], None] | None = None,
    max_batch: int | None = None,
    one_cache_at_a_time: bool = True,
) -> RolloutResult:
    """Play every spec to the end, batching turns per agent; skip keys already complete in ``store``.

    ``max_batch`` caps how many episodes advance together (default: all). ``on_turn`` is called
    after every turn (training uses it to collect token ids). A failure in one episode's turn ends
    that episode as an error row and never the run (see the module docstring). When every episode
    advances together, agents that keep caches between calls (local models) play one after another
    (:func:`cache_groups`; ``one_cache_at_a_time=False`` plays all together): the same calls, one model's
    cache alive at a time. Records are returned in spec order; the store receives them as episodes end.
    """
    missing = {n for s in specs for n in (s.seller, s.buyer)} - set(agents)
    if missing:
        raise KeyError(f"no agent registered for {sorted(missing)}; registered: {sorted(agents)}")
    keys = [s.key for s in specs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate episode keys in specs")
    with store.run_lock() if store is not None else contextlib.nullcontext():  # one run per file
        done_keys = store.completed_keys() if store is not None else set()
        todo = [s for s in specs if s.key not in done_keys]
        together = max_batch is None or max_batch >= len(todo)
        groups = cache_groups(todo, agents) if together and one_cache_at_a_time else [todo]
        bar = tqdm(total=len(todo), desc="episodes", unit="ep", disable=not progress, leave=False)
        records: list[dict[str, Any]] = []
        try:
            for group in groups:
                records += _play_all(group, agents, store, bar, flush_every, on_turn, max_batch)
                for agent in {id(a): a for a in _group_agents(group, agents)}.values():
                    agent.release_caches()
        finally:
            bar.close()
    order = {spec.key: i for i, spec in enumerate(specs)}
    records.sort(key=lambda r: order[record_key(r)])  # spec order, whatever order episodes ended in
    return RolloutResult(records, len(specs) - len(todo))


def _group_agents(specs: Sequence[EpisodeSpec], agents: Mapping[str, Agent]) -> list[Agent]:
    return [agents[n] for s in specs for n in (s.seller, s.buyer) if agents[n].keeps_caches]


def cache_groups(specs: Sequence[EpisodeSpec], agents: Mapping[str, Agent]) -> list[list[EpisodeSpec]]:
    """``specs`` split into the groups to play one after another, each in spec order: first every episode whose
    parties keep no caches, then one group per connected set of cache-keeping agents (an agent object in two
    groups' episodes joins them, so it never plays in two groups). Played with every episode of a group
    together, each agent gets exactly the calls it would get with everything together: its own episodes'
    views, wave by wave (scripted agents answer each view on its own). So results are those of one run, and
    only one group's caches are alive at a time (notebook 04's three SmolLM2 arms held ~1.4 GB of prefix cache
    each, all at once)."""
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    keyed = []
    for s in specs:
        ids = [id(agents[n]) for n in (s.seller, s.buyer) if agents[n].keeps_caches]
        for other in ids[1:]:
            parent[root(other)] = root(ids[0])
        keyed.append((s, ids[0] if ids else None))
    groups: dict[int | None, list[EpisodeSpec]] = {None: []}
    for s, first in keyed:
        groups.setdefault(None if first is None else root(first), []).append(s)
    return [g for g in groups.values() if g]


def _play_all(specs: Sequence[EpisodeSpec], agents: Mapping[str, Agent], store: TranscriptStore | None,
              bar: Any, flush_every: int, on_turn: Callable[[Episode, AgentReply], None] | None,
              max_batch: int | None) -> list[dict[str, Any]]:
    """Play ``specs`` (none complete in ``store``) to their ends, as :func:`run_episodes` does, while the store's
    run lock is held; records in the order episodes ended."""
    todo = list(specs)
    records: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    batch = max_batch or max(1, len(todo))
    queue = list(todo)
    live: list[tuple[EpisodeSpec, Episode]] = []

    def finish(spec: EpisodeSpec, ep: Episode, error: str | None) -> None:
        rec = episode_record(spec, ep, error)
        records.append(rec)
        pending.append(rec)
        bar.update(1)
        if store is not None and len(pending) >= flush_every:
            store.append(pending)
            pending.clear()

    gc_thresholds = gc.get_threshold()
    gc.set_threshold(max(gc_thresholds[0], 50_000), *gc_thresholds[1:])  # many live episodes: fewer GC passes
    try:
        while queue or live:
            while queue and len(live) < batch:
                spec = queue.pop(0)
                live.append((spec, Episode(spec.scenario, spec.config, spec.episode_id)))
            groups: dict[str, list[int]] = {}
            failed: dict[int, str] = {}
            views: dict[int, PartyView] = {}
            for i, (spec, ep) in enumerate(live):
                try:
                    views[i] = ep.view()
                except Exception as exc:  # noqa: BLE001 - contained to this episode
                    failed[i] = error_text(exc, _where(ep))
                    continue
                name = spec.seller if ep.to_move == "seller" else spec.buyer
                groups.setdefault(name, []).append(i)
            for name, idx in groups.items():
                replies = act_contained(agents[name], [views[i] for i in idx])
                for i, rep in zip(idx, replies):
                    ep = live[i][1]
                    problem = reply_problem(rep)
                    if problem is not None:
                        failed[i] = problem
                        continue
                    try:
                        ep.step(rep.text, rep.input_tokens, rep.output_tokens, rep.latency_s, **turn_log(rep))
                    except Exception as exc:  # noqa: BLE001 - parser/environment: contained to this episode
                        failed[i] = error_text(exc, _where(ep))
                        continue
                    if on_turn is not None:
                        on_turn(ep, rep)
            still = []
            for i, (spec, ep) in enumerate(live):
                if i in failed:
                    finish(spec, ep, failed[i])
                elif ep.done:
                    finish(spec, ep, None)
                else:
                    still.append((spec, ep))
            live = still
    finally:
        gc.set_threshold(*gc_thresholds)
        if store is not None and pending:
            store.append(pending)
    return records


def play_one(spec: EpisodeSpec, agents: Mapping[str, Agent]) -> dict[str, Any]:
    """Play a single episode turn by turn with no batching (the baseline the benchmark compares).
    Failures end the episode as an error row, as in :func:`run_episodes`."""
    ep = Episode(spec.scenario, spec.config, spec.episode_id)
    while not ep.done:
        agent = agents[spec.seller if ep.to_move == "seller" else spec.buyer]
        where = _where(ep)
        try:
            view = ep.view()
        except Exception as exc:  # noqa: BLE001 - contained to this episode
            return episode_record(spec, ep, error_text(exc, where))
        rep = act_contained(agent, [view])[0]
        problem = reply_problem(rep)
        if problem is not None:
            return episode_record(spec, ep, problem)
        try:
            ep.step(rep.text, rep.input_tokens, rep.output_tokens, rep.latency_s, **turn_log(rep))
        except Exception as exc:  # noqa: BLE001 - contained to this episode
            return episode_record(spec, ep, error_text(exc, where))
    return episode_record(spec, ep)


__all__ = ["EpisodeSpec", "RolloutResult", "act_contained", "episode_record", "error_text", "make_specs",
           "play_one", "record_key", "reply_problem", "run_episodes"]
