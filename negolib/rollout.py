"""The rollout engine: advance many episodes together, batching each wave per agent.

At every wave the engine gathers the pending turn of every live episode, groups the views by the
agent that must act, and makes one :meth:`Agent.act_batch` call per agent. Local models therefore
generate for all their episodes in one batch and API agents answer a whole wave concurrently, so
throughput scales with the batch rather than with the episode count. Finished episodes are
written to the transcript store as they complete (in batches), so an interrupted run resumes
where it stopped.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from negolib.agents.base import Agent, AgentReply
from negolib.env import EnvConfig, Episode
from negolib.scenarios import Scenario
from negolib.transcripts import TranscriptStore, record_key


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


def run_episodes(
    specs: Sequence[EpisodeSpec],
    agents: Mapping[str, Agent],
    store: TranscriptStore | None = None,
    progress: bool = True,
    flush_every: int = 64,
    on_turn: Callable[[Episode, AgentReply], None] | None = None,
    max_batch: int | None = None,
) -> RolloutResult:
    """Play every spec to the end, batching turns per agent; skip keys already complete in ``store``.

    ``max_batch`` caps how many episodes advance together (default: all). ``on_turn`` is called
    after every turn (training uses it to collect token ids).
    """
    missing = {n for s in specs for n in (s.seller, s.buyer)} - set(agents)
    if missing:
        raise KeyError(f"no agent registered for {sorted(missing)}; registered: {sorted(agents)}")
    keys = [s.key for s in specs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate episode keys in specs")
    done_keys = store.completed_keys() if store is not None else set()
    todo = [s for s in specs if s.key not in done_keys]
    skipped = len(specs) - len(todo)
    records: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    bar = tqdm(total=len(todo), desc="episodes", unit="ep", disable=not progress, leave=False)
    batch = max_batch or max(1, len(todo))
    queue = list(todo)
    live: list[tuple[EpisodeSpec, Episode]] = []

    def finish(spec: EpisodeSpec, ep: Episode, error: str | None) -> None:
        rec = ep.record(arm=spec.arm, seller=spec.seller, buyer=spec.buyer)
        if error is not None:
            rec["status"], rec["error"] = "error", error
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
            for i, (spec, ep) in enumerate(live):
                name = spec.seller if ep.to_move == "seller" else spec.buyer
                groups.setdefault(name, []).append(i)
            failed: dict[int, str] = {}
            for name, idx in groups.items():
                views = [live[i][1].view() for i in idx]
                try:
                    replies = agents[name].act_batch(views)
                except Exception as exc:  # a whole-batch failure must not lose the other agents' work
                    replies = [AgentReply("", error=f"{type(exc).__name__}: {exc}") for _ in idx]
                if len(replies) != len(idx):
                    raise RuntimeError(f"agent {name!r} returned {len(replies)} replies for {len(idx)} views")
                for i, rep in zip(idx, replies):
                    ep = live[i][1]
                    if rep.error is not None:
                        failed[i] = rep.error
                        continue
                    ep.step(rep.text, rep.input_tokens, rep.output_tokens, rep.latency_s)
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
        bar.close()
    order = {spec.key: i for i, spec in enumerate(specs)}
    records.sort(key=lambda r: order[record_key(r)])  # spec order, whatever order episodes ended in
    return RolloutResult(records, skipped)


def play_one(spec: EpisodeSpec, agents: Mapping[str, Agent]) -> dict[str, Any]:
    """Play a single episode turn by turn with no batching (the baseline the benchmark compares)."""
    ep = Episode(spec.scenario, spec.config, spec.episode_id)
    while not ep.done:
        agent = agents[spec.seller if ep.to_move == "seller" else spec.buyer]
        rep = agent.act(ep.view())
        if rep.error is not None:
            rec = ep.record(arm=spec.arm, seller=spec.seller, buyer=spec.buyer)
            rec["status"], rec["error"] = "error", rep.error
            return rec
        ep.step(rep.text, rep.input_tokens, rep.output_tokens, rep.latency_s)
    return ep.record(arm=spec.arm, seller=spec.seller, buyer=spec.buyer)


__all__ = ["EpisodeSpec", "RolloutResult", "make_specs", "run_episodes", "play_one", "record_key"]
