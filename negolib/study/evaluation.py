"""Playing the evaluation protocol, its logs and its per-arm table [paper §4, App. K].

The protocol itself (:class:`Protocol`, its file, hash and freezing) is :mod:`negolib.study.eval_protocol`; its names
are re-exported here.


* :class:`Protocol` holds everything fixed before any arm runs: the arms (a seller, its sampling
  and scaffold), the seed block, domains and held-out domain, the buyers, the metrics, the
  prespecified primary family, the bootstrap settings and the environment's evaluation config
  (terms attached to an accept ignored, 12 rounds, the ACCEPT rule). It round-trips through a YAML file validated
  on load: an unknown key or a wrong type is a :class:`~negolib.core.errors.ValidationError` naming the
  file, the field and the allowed keys or values.
* :func:`freeze` writes the protocol and returns its SHA-256 over a canonical serialization
  (sorted-key compact JSON of :func:`protocol_to_dict`); :func:`protocol_hash` computes it
  without writing. A frozen file is never silently replaced, and a file edited after freezing
  fails to load.
* Every record played under a protocol carries its hash (``protocol_hash``): :func:`evaluate_arms`
  stamps records as they are written, :func:`stamp` stamps records or tables, and
  :func:`check_protocol_hashes` refuses to mix records of different protocols unless a
  deviation naming the arm is logged.
* :class:`DeviationLog` is the append-only JSONL log of departures the book prints [App. K];
  :class:`PilotLog` records every pilot-gate cell. :func:`pilot_gate` plays a few episodes per
  arm x buyer cell and requires zero bad parses per cell; a failed cell is reported and logged,
  it does not abort by itself (the paper ran one regardless and logged it).
* :func:`arm_metrics_table` is the per-arm table with seed-cluster intervals, computed
  on one shared set of resamples (:mod:`negolib.stats`).
"""

from __future__ import annotations

import fcntl
import json
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from negolib.agents.base import Agent
from negolib.core.errors import ValidationError
from negolib.core.formatting import fmt_ci
from negolib.core.isolate import run_isolated
from negolib.core.transcripts import (
    RunSettings,
    TranscriptStore,
    episode_settings,
    episodes_frame,
    record_key,
    validate_record,
)
from negolib.games.multi_issue.metrics import ARM_TABLE_METRICS, Metric, buyer_split, get_metric, infer_buyers
from negolib.games.multi_issue.rollout import EpisodeSpec, RolloutResult, make_specs, run_episodes
from negolib.games.multi_issue.scenarios import (
    scenario_set,
)
from negolib.params import Params
from negolib.stats import ClusterResampler, RatioStat, resample_stats, summarize
from negolib.study.eval_protocol import (  # noqa: F401 (re-exported: the protocol is part of this module's API)
    BACKENDS,
    FIRST_MOVERS,
    HASH_FIELD,
    HELD_OUT_EXTENSION,
    MIN_EVAL_SEED,
    SAMPLING_TYPES,
    SCAFFOLDS,
    SECRET_KEYS,
    ArmSpec,
    Protocol,
    ProtocolError,
    SeedBlock,
    _now,
    _plain,
    canonical_json,
    freeze,
    held_out_extension_protocol,
    load_protocol,
    protocol_from_dict,
    protocol_from_params,
    protocol_hash,
    protocol_to_dict,
    short_hash,
)
from negolib.study.paired import cluster_sums
from negolib.study.runs import LazyAgents, local_weights

# ---------------------------------------------------------------------------------------------
# Append-only logs: deviations and pilot cells
# ---------------------------------------------------------------------------------------------

class _JsonlLog:
    """An append-only JSONL file: one locked ``write`` + ``fsync`` per entry; a partial last line
    (a crash mid-write) is ignored by readers."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def _append(self, obj: Mapping[str, Any]) -> None:
        line = (json.dumps(_plain(obj), allow_nan=False, separators=(",", ":")) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.lseek(fd, 0, os.SEEK_END)
            if size and os.pread(fd, 1, size - 1) != b"\n":
                os.write(fd, b"\n")  # never glue a new entry onto a partial line
            os.write(fd, line)
            os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines(keepends=True):
            if not line.endswith("\n") or not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a partial line left by a crash
        return out


@dataclass(frozen=True)
class Deviation:
    """One logged departure from the frozen protocol [App. K]. ``arms`` empty: protocol-wide."""

    date: str
    arms: tuple[str, ...]
    description: str
    material: bool
    protocol_hash: str | None = None


class DeviationLog(_JsonlLog):
    """Append-only log of departures from the frozen protocol, printed by the book."""

    @classmethod
    def for_protocol(cls, protocol_path: str | Path) -> DeviationLog:
        """The log next to a protocol file: ``<stem>.deviations.jsonl``."""
        p = Path(protocol_path)
        return cls(p.with_name(f"{p.stem}.deviations.jsonl"))

    def log_deviation(self, arms: Sequence[str], description: str, material: bool,
                      date: str | None = None, protocol_hash: str | None = None) -> Deviation:
        """Append one departure; ``arms`` are the arms it applies to (empty: all)."""
        if isinstance(arms, str) or not all(isinstance(a, str) for a in arms):
            raise ValidationError(str(self.path), "arms", f"must be a list of arm names, got {arms!r}")
        if not isinstance(description, str) or not description.strip():
            raise ValidationError(str(self.path), "description", "must be a non-empty string")
        if not isinstance(material, bool):
            raise ValidationError(str(self.path), "material", f"must be true or false, got {material!r}")
        dev = Deviation(date or _now(), tuple(arms), description.strip(), material, protocol_hash)
        self._append(dev.__dict__)
        return dev

    def entries(self) -> list[Deviation]:
        return [Deviation(d["date"], tuple(d["arms"]), d["description"], bool(d["material"]),
                          d.get("protocol_hash")) for d in self._read()]

    def covers(self, arm: str) -> bool:
        """True when a logged deviation names ``arm``."""
        return any(arm in d.arms for d in self.entries())

    def deviations_frame(self) -> pd.DataFrame:
        """One row per deviation, in log order: date, arms, description, material, protocol hash."""
        cols = ["date", "arms", "description", "material", "protocol_hash"]
        rows = [{"date": d.date, "arms": ", ".join(d.arms) or "(all)", "description": d.description,
                 "material": d.material, "protocol_hash": short_hash(d.protocol_hash or "")}
                for d in self.entries()]
        return pd.DataFrame(rows, columns=cols)


class PilotLog(_JsonlLog):
    """Append-only log of pilot-gate cells (one entry per arm x buyer cell per pilot)."""

    def log_cell(self, cell: Mapping[str, Any]) -> None:
        self._append(cell)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self._read())


# ---------------------------------------------------------------------------------------------
# Hash stamping and the no-mixing check
# ---------------------------------------------------------------------------------------------

def stamp(obj: Any, hash_: str) -> Any:
    """Stamp the protocol hash: on each record dict (in place; the list is returned) or on a
    DataFrame (a copy with a ``protocol_hash`` column and ``attrs['protocol_hash']``)."""
    if isinstance(obj, pd.DataFrame):
        out = obj.copy()
        out[HASH_FIELD] = hash_
        out.attrs[HASH_FIELD] = hash_
        return out
    records = list(obj) if not isinstance(obj, list) else obj
    for rec in records:
        rec[HASH_FIELD] = hash_
    return records


def check_protocol_hashes(records: Iterable[Mapping[str, Any]], expected: str,
                          deviations: DeviationLog | None = None) -> pd.DataFrame:
    """Per (arm, hash) counts; raises :class:`ProtocolError` if any record of an arm carries a
    different (or no) hash and no logged deviation names that arm."""
    counts: dict[tuple[str, str | None], int] = {}
    for rec in records:
        key = (str(rec["arm"]), rec.get(HASH_FIELD))
        counts[key] = counts.get(key, 0) + 1
    covered = {d for dev in (deviations.entries() if deviations else []) for d in dev.arms}
    rows = [{"arm": a, HASH_FIELD: h, "n_records": n, "matches": h == expected,
             "deviation_logged": a in covered} for (a, h), n in sorted(counts.items(), key=str)]
    df = pd.DataFrame(rows, columns=["arm", HASH_FIELD, "n_records", "matches", "deviation_logged"])
    bad = df[~df["matches"] & ~df["deviation_logged"]]
    if len(bad):
        what = "; ".join(f"{r.arm}: {r.n_records} record(s) with {short_hash(r.protocol_hash or 'no hash')}"
                         for r in bad.itertuples())
        raise ProtocolError(f"records of another protocol (expected {short_hash(expected)}): {what}; "
                            "they are not mixed unless a deviation naming the arm is logged")
    return df


def evaluation_frame(records: Sequence[Mapping[str, Any]], expected: str,
                     deviations: DeviationLog | None = None) -> pd.DataFrame:
    """The episode table of checked records (each validated, see
    :func:`negolib.core.transcripts.validate_record`; every hash must be ``expected`` unless a logged
    deviation names the arm), with each record's ``protocol_hash`` column and
    ``attrs['protocol_hash'] = expected``."""
    for i, rec in enumerate(records):
        validate_record(rec, f"records[{i}]")
    check_protocol_hashes(records, expected, deviations)
    df = episodes_frame(records)  # type: ignore[arg-type]
    df[HASH_FIELD] = [r.get(HASH_FIELD) for r in records]
    df.attrs[HASH_FIELD] = expected
    return df


class _StampingStore(TranscriptStore):
    """A transcript store that stamps the protocol hash (when there is one) on every record it
    appends, and checks the run's settings on resume."""

    def __init__(self, path: str | Path, hash_: str | None, settings: RunSettings | None = None) -> None:
        super().__init__(path, settings)
        self.hash = hash_

    def append(self, records: Iterable[dict[str, Any]]) -> int:
        recs = list(records)
        return super().append(stamp(recs, self.hash) if self.hash is not None else recs)


def arm_settings(protocol: Protocol, arm: ArmSpec, buyer: str, hash_: str) -> dict[str, Any]:
    """What shapes an arm's episodes against ``buyer`` (checked when a run resumes): the evaluation
    environment, the seller spec with its sampling and scaffold, the buyer spec, the protocol hash."""
    seller = {"spec": _plain(arm.seller), "sampling": _plain(arm.sampling), "scaffold": arm.scaffold}
    return episode_settings(protocol.env_config(arm), seller, _plain(protocol.buyers[buyer]), protocol_hash=hash_)


def run_settings(protocol: Protocol, arms: Sequence[ArmSpec], hash_: str,
                 deviations: DeviationLog | None = None) -> RunSettings:
    """The :class:`~negolib.core.transcripts.RunSettings` of ``arms`` x the protocol's buyers; an arm
    named by a logged deviation may resume records stamped with another protocol hash (the rest of
    its settings must still match)."""
    cells = {(a.name, b): arm_settings(protocol, a, b, hash_) for a in arms for b in protocol.buyers}
    covered = {a.name for a in arms if deviations is not None and deviations.covers(a.name)}
    return RunSettings(cells, {a: frozenset({"protocol_hash"}) for a in covered})


def _spec_settings(specs: Sequence[EpisodeSpec]) -> RunSettings:
    """Settings of a bare spec list: the environment config and the agent names of each cell."""
    return RunSettings({(s.arm, s.buyer): episode_settings(s.config, {"agent": s.seller}, {"agent": s.buyer})
                        for s in specs})


# ---------------------------------------------------------------------------------------------
# Specs, the pilot gate, the evaluation run
# ---------------------------------------------------------------------------------------------

def build_specs(protocol: Protocol, arms: Sequence[str] | None = None,
                extra_arms: Sequence[ArmSpec] = ()) -> list[EpisodeSpec]:
    """The paired episode list: every arm on the same (domain, seed) scenarios against every buyer,
    in the evaluation configuration (an arm's declared subset, if any, restricts its scenarios)."""
    chosen = [protocol.arm(a) for a in arms] if arms is not None else list(protocol.arms)
    chosen += list(extra_arms)
    seeds = protocol.seeds.seeds
    buyers = list(protocol.buyers)
    cache: dict[tuple, list] = {}
    specs: list[EpisodeSpec] = []
    for arm in chosen:
        key = (arm.n_seeds, arm.domains)
        if key not in cache:
            cache[key] = scenario_set(seeds[:arm.n_seeds], arm.domains or protocol.domains, protocol.genius)
        specs += make_specs(arm.name, arm.name, buyers, cache[key], protocol.env_config(arm))
    return specs


def check_sampling(protocol: Protocol, agents: Mapping[str, Agent], arms: Sequence[str] | None = None,
                   warn: bool = True, extra_arms: Sequence[ArmSpec] = ()) -> pd.DataFrame:
    """Declared vs actual sampling per arm (from ``agent.settings()['sampling']`` where the agent
    reports one); warns on every drift [App. A "Sampling"]."""
    rows = []
    names = arms if arms is not None else protocol.arm_names
    for arm in [protocol.arm(a) for a in names] + list(extra_arms):
        agent = agents.get(arm.name)
        actual = (agent.settings().get("sampling") or {}) if agent is not None else {}
        for k, declared in arm.sampling.items():
            got = actual.get(k) if isinstance(actual, Mapping) else None
            drift = got is not None and got != declared
            rows.append({"arm": arm.name, "setting": k, "declared": declared, "actual": got, "drift": drift})
            if drift and warn:
                warnings.warn(f"arm {arm.name!r}: sampling {k} is {got!r}, the protocol declares "
                              f"{declared!r}", stacklevel=2)
    return pd.DataFrame(rows, columns=["arm", "setting", "declared", "actual", "drift"])


@dataclass
class PilotResult:
    """Per-cell pilot outcome (``cells``: one row per arm x buyer) and the pilot's records."""

    cells: pd.DataFrame
    records: list[dict[str, Any]]

    @property
    def passed(self) -> bool:
        return bool(self.cells["passed"].all()) if len(self.cells) else False

    @property
    def failed_cells(self) -> pd.DataFrame:
        return self.cells[~self.cells["passed"]].reset_index(drop=True)

    def to_frame(self) -> pd.DataFrame:
        return self.cells.copy()

    def log_failures(self, deviations: DeviationLog, decision: str = "ran regardless",
                     protocol_hash: str | None = None, material: bool = True,
                     date: str | None = None) -> list[Deviation]:
        """Log each failed cell as a deviation with the decision taken (e.g. 'ran regardless')."""
        out = []
        for c in self.failed_cells.itertuples():
            desc = (f"pilot gate failed for {c.arm} x {c.buyer}: {c.bad_parses} bad parses in {c.n_turns} "
                    f"turns and {c.errors} error rows over {c.n_episodes} episodes, where the gate requires "
                    f"zero; {decision}")
            out.append(deviations.log_deviation([c.arm], desc, material, date, protocol_hash))
        return out


def _pilot_specs(specs: Sequence[EpisodeSpec], n: int) -> list[EpisodeSpec]:
    """The first ``n`` specs of every (arm, buyer) cell, spread across domains (seed-major)."""
    cells: dict[tuple[str, str], list[EpisodeSpec]] = {}
    for s in specs:
        cells.setdefault((s.arm, s.buyer), []).append(s)
    out = []
    for cell in cells.values():
        dom_order = {d: i for i, d in enumerate(dict.fromkeys(s.scenario.domain.name for s in cell))}
        cell = sorted(cell, key=lambda s: (s.scenario.seed, dom_order[s.scenario.domain.name]))
        out += cell[:n]
    return out


def _cell_row(arm: str, buyer: str, recs: list[dict[str, Any]], count: str) -> dict[str, Any]:
    turns = [t for r in recs for t in r["turns"]]
    seller = [t for t in turns if t["role"] == "seller"]
    bad_all = sum(t["action"] is None for t in turns)
    bad_seller = sum(t["action"] is None for t in seller)
    errors = sum(r["status"] == "error" for r in recs)
    bad = bad_all if count == "all" else bad_seller
    return {"arm": arm, "buyer": buyer, "n_episodes": len(recs), "n_turns": len(turns),
            "n_seller_turns": len(seller), "bad_parses": bad_all, "seller_bad_parses": bad_seller,
            "errors": errors, "mean_turns": len(turns) / len(recs) if recs else float("nan"),
            "deals": sum(r["status"] == "deal" for r in recs),
            "passed": bool(recs) and bad == 0 and errors == 0}


def pilot_gate(target: Protocol | Sequence[EpisodeSpec], agents: Mapping[str, Agent],
               n_episodes_per_cell: int = 2, store: TranscriptStore | None = None,
               log: PilotLog | str | Path | None = None, arms: Sequence[str] | None = None,
               count: str = "all", progress: bool = False, date: str | None = None) -> PilotResult:
    """Play ``n_episodes_per_cell`` episodes per arm x buyer cell and require zero bad parses.

    ``target`` is a protocol (its paired specs, optionally only ``arms``) or a spec list. The
    pilot's episodes spread over domains. A cell passes with zero bad parses (``count='all'``:
    every turn of the cell; ``'seller'``: the seller's own) and zero error rows. Every cell is
    appended to ``log``; a failed cell is reported, not raised: decide, then record the decision
    with :meth:`PilotResult.log_failures`. ``store`` (a separate pilot file is advised) keeps the
    transcripts.
    """
    if count not in ("all", "seller"):
        raise ValueError(f"count must be 'all' or 'seller', got {count!r}")
    if n_episodes_per_cell < 1:
        raise ValueError(f"n_episodes_per_cell must be >= 1, got {n_episodes_per_cell}")
    hash_ = protocol_hash(target) if isinstance(target, Protocol) else None
    specs = build_specs(target, arms) if isinstance(target, Protocol) else list(target)
    chosen = _pilot_specs(specs, n_episodes_per_cell)
    if store is None:
        res = run_episodes(chosen, agents, None, progress=progress)
    else:
        if isinstance(target, Protocol):
            names = arms if arms is not None else target.arm_names
            settings = run_settings(target, [target.arm(a) for a in names], protocol_hash(target))
        else:
            settings = _spec_settings(chosen)
        run_store = _StampingStore(store.path, hash_, settings)
        with run_store.run_lock():
            res = run_episodes(chosen, agents, run_store, progress=progress)
        if res.skipped:  # a resumed pilot: its cells also hold the episodes complete in the store before
            keys, new = {s.key for s in chosen}, {record_key(r) for r in res.records}
            res.records[:0] = [r for r in run_store.records(mixed_protocols=True)
                               if record_key(r) in keys and record_key(r) not in new]
    by_cell: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in chosen:
        by_cell.setdefault((s.arm, s.buyer), [])
    for r in res.records:
        by_cell[(r["arm"], r["buyer"])].append(r)
    rows = [_cell_row(a, b, recs, count) for (a, b), recs in by_cell.items()]
    cells = pd.DataFrame(rows)
    if log is not None:
        plog = log if isinstance(log, PilotLog) else PilotLog(log)
        when = date or _now()
        for row in rows:
            plog.log_cell({"date": when, HASH_FIELD: hash_, "count": count, **row})
    return PilotResult(cells, res.records)


def evaluate_arms(protocol: Protocol, agents: Mapping[str, Agent], store: TranscriptStore | str | Path,
                  progress: bool = True, *, arms: Sequence[str] | None = None,
                  extra_arms: Sequence[ArmSpec] = (), deviations: DeviationLog | None = None,
                  max_batch: int | None = None, flush_every: int = 64) -> RolloutResult:
    """Play every arm's paired specs into ``store`` (resumable), stamping the protocol hash.

    Keys already complete in ``store`` are skipped, so a second call plays nothing new; complete
    records of these arms played under other settings (environment, agent specs, sampling, protocol
    hash: :func:`arm_settings`) raise :class:`~negolib.core.transcripts.SettingsMismatchError`. Arms not
    in the protocol (``extra_arms``) run only when a logged deviation names them [App. K], and
    records of another protocol already in the store for these arms raise
    :class:`ProtocolError` unless a deviation names the arm. The run holds the store's run lock
    from start to end (a second run on the same file refuses). Sampling drift warns at start.
    """
    h = protocol_hash(protocol)
    for arm in extra_arms:
        if arm.name in protocol.arm_names:
            raise ProtocolError(f"extra arm {arm.name!r} is already in the protocol")
        if deviations is None or not deviations.covers(arm.name):
            raise ProtocolError(f"arm {arm.name!r} is not in the frozen protocol ({short_hash(h)}); log a "
                                "deviation naming it before it runs")
    path = store.path if isinstance(store, TranscriptStore) else Path(store)
    chosen = [protocol.arm(a) for a in (arms if arms is not None else protocol.arm_names)] + list(extra_arms)
    stamped = _StampingStore(path, h, run_settings(protocol, chosen, h, deviations))
    names = {a.name for a in chosen}
    with stamped.run_lock():
        check_protocol_hashes([r for r in stamped.records(mixed_protocols=True) if r["arm"] in names], h,
                              deviations)
        check_sampling(protocol, agents, arms, extra_arms=extra_arms)
        specs = build_specs(protocol, arms, extra_arms)
        res = run_episodes(specs, agents, stamped, progress=progress, flush_every=flush_every,
                           max_batch=max_batch)
    stamp(res.records, h)
    return res


def _evaluate_arm(params: Params, seeds: Mapping[str, int], arm: str, protocol: Protocol, store: Path,
                  deviations: DeviationLog | None, max_batch: int | None, progress: bool) -> RolloutResult:
    """:func:`evaluate_arms` for ``arm`` alone, its agents built here with the caller's ``seeds``
    (:meth:`LazyAgents.from_seeds`): what a child process of :func:`evaluate_arms_apart` runs."""
    return evaluate_arms(protocol, LazyAgents.from_seeds(params, seeds), store, progress, arms=[arm],
                         deviations=deviations, max_batch=max_batch)


def evaluate_arms_apart(protocol: Protocol, agents: LazyAgents, store: TranscriptStore | str | Path,
                        progress: bool = True, *, arms: Sequence[str] | None = None,
                        deviations: DeviationLog | None = None, max_batch: int | None = None) -> RolloutResult:
    """:func:`evaluate_arms`, with each arm whose weights would load into this process (``hf``/``trained``,
    :func:`~negolib.study.runs.local_weights`) and that ``agents`` has not built yet played in a fresh process
    of its own (:func:`~negolib.core.isolate.run_isolated`), one after another; the other arms play here, first.

    The records are those :func:`evaluate_arms` writes with every arm together (each local model already plays
    its episodes on its own, :func:`~negolib.games.multi_issue.rollout.cache_groups`; the child builds its agents
    with the seeds ``agents`` would give them); only their order in the store differs. Each child's peak memory
    is one model's and ends with it, so a notebook's peak is that of its largest arm, not of all of them.
    """
    path = store.path if isinstance(store, TranscriptStore) else Path(store)
    names = list(arms if arms is not None else protocol.arm_names)
    apart = [a for a in names if local_weights(agents.params, a) and not agents.built(a)]
    here = [a for a in names if a not in apart]
    results = [evaluate_arms(protocol, agents, path, progress, arms=here, deviations=deviations,
                             max_batch=max_batch)] if here else []
    results += [run_isolated(_evaluate_arm, agents.params, agents.seeds, arm, protocol, path, deviations,
                             max_batch, progress) for arm in apart]
    return RolloutResult([r for res in results for r in res.records], sum(res.skipped for res in results))

def run_held_out_extension(protocol: Protocol, agents: Mapping[str, Agent], store: TranscriptStore | str | Path,
                           protocol_file: str | Path, *, enabled: bool, fires: bool | None,
                           arms: Sequence[str] | None = None, progress: bool = True, max_batch: int | None = None,
                           date: str | None = None) -> RolloutResult | None:
    """Run App. C's held-out-panel extension of the main ``protocol`` when it is due, else play nothing (None).

    Due when the profile asks for it (``enabled``: ``evaluation.held_out_extension``) and the prespecified
    trigger fired on the main evaluation (``fires``: :func:`negolib.study.analysis.contrasts.extension_fires`; None,
    not evaluable, never runs). Then :func:`held_out_extension_protocol` is frozen at ``protocol_file`` (its own
    file: a different protocol already there raises :class:`ProtocolError`) and ``arms`` (default all; arms
    that did not play the held-out domain are skipped) play into ``store``, the extension's own transcript
    file, resumably as in :func:`evaluate_arms` (deviations: the log beside ``protocol_file``).
    """
    if not enabled or fires is not True:
        return None
    ext = held_out_extension_protocol(protocol)
    freeze(ext, protocol_file, date=date)
    chosen = [a for a in (arms if arms is not None else ext.arm_names) if a in ext.arm_names]
    return evaluate_arms(ext, agents, store, progress, arms=chosen,
                         deviations=DeviationLog.for_protocol(protocol_file), max_batch=max_batch)


# ---------------------------------------------------------------------------------------------
# The per-arm table
# ---------------------------------------------------------------------------------------------

def arm_metrics_table(df: pd.DataFrame, resampler: ClusterResampler,
                      metrics: Iterable[str | Metric] | None = None, alpha: float = 0.05,
                      buyers: Sequence[str] | None = None, arms: Sequence[str] | None = None) -> pd.DataFrame:
    """Tidy per-arm metrics with seed-cluster percentile intervals: one row per (arm, metric).

    Default metrics are :data:`negolib.games.multi_issue.metrics.ARM_TABLE_METRICS` plus the buyer split when the
    table has exactly two buyers (or ``buyers=(A, B)``: S vs A minus S vs B). All intervals share
    ``resampler``'s resamples (one matrix product per batch). A ``protocol_hash`` in
    ``df.attrs`` is carried as a column.
    """
    ms = [get_metric(m) for m in (metrics if metrics is not None else ARM_TABLE_METRICS)]
    pair = tuple(buyers) if buyers is not None else infer_buyers(df)
    if pair is not None and metrics is None:
        ms.append(buyer_split(str(pair[0]), str(pair[1])))
    arm_list = list(arms) if arms is not None else sorted(pd.unique(df["arm"]))
    cells, stats = [], []
    for arm in arm_list:
        rows = df[df["arm"] == arm]
        if rows.empty:
            raise KeyError(f"arm {arm!r} has no episodes; arms: {sorted(pd.unique(df['arm']))}")
        n_cl = int(pd.unique(rows["seed"]).size)
        for m in ms:
            num, den, signs = cluster_sums(rows, m, resampler)
            stats.append(RatioStat(num, den, signs, signs.size))
            cells.append((arm, m, len(rows), n_cl))
    dists = resample_stats(resampler, stats)
    out = []
    for j, ((arm, m, n_ep, n_cl), stat) in enumerate(zip(cells, stats)):
        s = summarize(dists[:, j], alpha)
        est = stat.value()
        out.append({"arm": arm, "metric": m.name, "label": m.label, "estimate": est, "ci_low": s.ci_low,
                    "ci_high": s.ci_high, "se_low": s.se_low, "se_high": s.se_high, "n_episodes": n_ep,
                    "n_clusters": n_cl, "n_resamples": resampler.n_resamples, "n_undefined": s.n_undefined,
                    "ci": fmt_ci(est, s.ci_low, s.ci_high, signed=False, missing=None)})
    table = pd.DataFrame(out)
    if HASH_FIELD in df.attrs:
        table[HASH_FIELD] = df.attrs[HASH_FIELD]
        table.attrs[HASH_FIELD] = df.attrs[HASH_FIELD]
    return table


__all__ = ["ArmSpec", "SeedBlock", "Protocol", "ProtocolError", "Deviation", "DeviationLog", "PilotLog",
           "PilotResult", "protocol_to_dict", "protocol_from_dict", "protocol_from_params", "canonical_json",
           "protocol_hash", "short_hash", "load_protocol", "freeze", "stamp", "check_protocol_hashes",
           "evaluation_frame", "build_specs", "check_sampling", "pilot_gate", "evaluate_arms", "evaluate_arms_apart",
           "arm_settings",
           "run_settings", "HELD_OUT_EXTENSION", "held_out_extension_protocol", "run_held_out_extension",
           "arm_metrics_table", "HASH_FIELD"]
