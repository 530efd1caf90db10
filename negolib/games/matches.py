"""The tournament's matches file: one JSON line per episode, every line checked on read, one record per episode.

It lives with what the games share so that the tournament and the games' own readers (:mod:`negolib.games.sft`)
read it through this one reader. Contract: :func:`read_lines` reads ``matches.jsonl`` strictly: each line is
decoded by the transcripts' reader (valid UTF-8, strict JSON: :func:`negolib.core.transcripts.decode_line`) and its
fields typed (:meth:`MatchRecord.from_obj`); :func:`check_lines` checks each episode record with the game
(:meth:`Game.check_record`, then :meth:`Game.payoffs`: finite payoffs in [0, 1]). Any problem is a
:class:`TournamentError` whose message starts ``FILE:LINE:``; a torn last line (no newline, left by a kill) is not
read. :func:`latest_matches` keeps one record per (seller, buyer, scenario): a valid record supersedes error records
(a retried match); two different valid records of one episode are an error naming both lines; an identical
duplicate is tolerated (the first is kept). :func:`check_settings` refuses records written under other
:class:`TournamentSettings` (the game, the agents' seed, the seeds per stratum and the game's own settings,
:meth:`Game.settings`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from negolib.core.errors import NegolibError
from negolib.core.files import drop_partial_tail
from negolib.core.transcripts import TranscriptError, decode_line, settings_diff
from negolib.games.base import Game
from negolib.games.records import RecordProblem, show

MATCHES_FILE = "matches.jsonl"
EpisodeKey = tuple[str, str, str]
"""(seller agent, buyer agent, scenario key): one episode of a tournament."""


class TournamentError(NegolibError, ValueError):
    """A tournament file that cannot be resumed by this run (other settings, a bad line, a held lock)."""


def plain_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` as JSON values (tuples become lists), as a record holds them after a round trip."""
    return json.loads(json.dumps(dict(settings), allow_nan=False, default=str))


@dataclass(frozen=True)
class TournamentSettings:
    """What every record of one matches file shares: a rerun with other settings is refused. ``game_settings``
    is the game's :meth:`~negolib.games.base.Game.settings` (None: not recorded, by an older negolib)."""

    game: str
    agent_seed: int
    n_seeds: int
    game_settings: dict[str, Any] | None = field(default=None, hash=False)


@dataclass(frozen=True)
class MatchRecord:
    """One episode of one match (``seller`` agent vs ``buyer`` agent) on one scenario, tagged with the
    settings; ``record`` is the game's own JSON-ready episode record."""

    game: str
    agent_seed: int
    n_seeds: int
    seller: str
    buyer: str
    scenario_key: str
    record: dict[str, Any] = field(repr=False)
    game_settings: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def settings(self) -> TournamentSettings:
        return TournamentSettings(self.game, self.agent_seed, self.n_seeds, self.game_settings)

    @property
    def key(self) -> EpisodeKey:
        return (self.seller, self.buyer, self.scenario_key)

    def to_dict(self) -> dict[str, Any]:
        """The record as the JSON object of its line."""
        return {"game": self.game, "agent_seed": self.agent_seed, "n_seeds": self.n_seeds, "seller": self.seller,
                "buyer": self.buyer, "scenario_key": self.scenario_key, "game_settings": self.game_settings,
                "record": self.record}

    def to_line(self) -> str:
        """The record as one JSON line (with its newline); non-finite numbers are refused."""
        return json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=False) + "\n"

    @classmethod
    def from_obj(cls, obj: Any, where: str) -> MatchRecord:
        """Parse a decoded JSON line, checking every field's type; ``where`` (``file:line``) names it in the
        error."""
        if type(obj) is not dict:
            raise TournamentError(f"{where}: not a tournament record (a JSON object), got {show(obj)}")
        names = ("game", "agent_seed", "n_seeds", "seller", "buyer", "scenario_key", "record")
        missing = [n for n in names if n not in obj]
        if missing:
            raise TournamentError(f"{where}: not a tournament record (missing {', '.join(missing)})")
        unknown = sorted(set(obj) - {*names, "game_settings"})
        if unknown:
            raise TournamentError(f"{where}: unknown field(s) {', '.join(unknown)}")
        for name in ("game", "seller", "buyer", "scenario_key"):
            if type(obj[name]) is not str or not obj[name]:
                raise TournamentError(f"{where}: field '{name}' must be a non-empty string, got {show(obj[name])}")
        if type(obj["agent_seed"]) is not int:
            raise TournamentError(f"{where}: field 'agent_seed' must be an integer, got {show(obj['agent_seed'])}")
        if type(obj["n_seeds"]) is not int or obj["n_seeds"] < 1:
            raise TournamentError(f"{where}: field 'n_seeds' must be an integer >= 1, got {show(obj['n_seeds'])}")
        if type(obj["record"]) is not dict:
            raise TournamentError(f"{where}: field 'record' must be a JSON object, got {show(obj['record'])}")
        if obj["record"].get("scenario_key") != obj["scenario_key"]:
            raise TournamentError(f"{where}: field 'record.scenario_key' is {show(obj['record'].get('scenario_key'))}"
                                  f", but the line is of scenario {show(obj['scenario_key'])}")
        settings = obj.get("game_settings")
        if settings is not None and type(settings) is not dict:
            raise TournamentError(f"{where}: field 'game_settings' must be a JSON object, got {show(settings)}")
        return cls(obj["game"], obj["agent_seed"], obj["n_seeds"], obj["seller"], obj["buyer"], obj["scenario_key"],
                   obj["record"], settings)


def check_episode(game: Game, record: dict[str, Any], where: str) -> None:
    """Check one episode record with the game (:meth:`Game.check_record`, then :meth:`Game.payoffs`: finite
    payoffs in [0, 1], a boolean deal); a problem is a :class:`TournamentError` starting with ``where``."""
    try:
        game.check_record(record)
    except RecordProblem as exc:
        what = f"field 'record.{exc.field}'" if exc.field else "record"
        raise TournamentError(f"{where}: {what}: {exc.problem}") from None
    try:
        p = game.payoffs(record)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as exc:
        raise TournamentError(f"{where}: the {game.name} record can not be read as payoffs "
                              f"({type(exc).__name__}: {exc})") from None
    for name in ("seller", "buyer"):
        v = getattr(p, name)
        if type(v) not in (int, float) or not math.isfinite(v) or not 0.0 <= v <= 1.0:
            raise TournamentError(f"{where}: the record's {name} payoff is {show(v)}, not a number in [0, 1]")


def read_lines(path: str | Path) -> list[tuple[int, MatchRecord]]:
    """(line number, record) of every line of a matches file in file order ([] when absent), each decoded and
    typed (:meth:`MatchRecord.from_obj`); the episode records are checked by :func:`check_lines`."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")[:-1]  # the text after the last newline: empty, or a torn line
    out = []
    for i, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            obj = decode_line(raw, path, i)
        except TranscriptError as exc:
            raise TournamentError(f"{path}:{i}: unreadable line ({exc.problem})") from None
        out.append((i, MatchRecord.from_obj(obj, f"{path}:{i}")))
    return out


def check_lines(path: str | Path, lines: Sequence[tuple[int, MatchRecord]], game: Game) -> None:
    """Check every episode record of ``lines`` with ``game`` (:func:`check_episode`), naming ``path`` and the
    line."""
    for i, rec in lines:
        check_episode(game, rec.record, f"{path}:{i}")


def read_matches(path: str | Path, game: Game | None = None) -> list[MatchRecord]:
    """Every record of a matches file in file order (see :func:`read_lines`); given ``game``, every episode
    record is checked too and a conflicting duplicate refused (:func:`check_lines`, :func:`latest_matches`)."""
    lines = read_lines(path)
    if game is not None:
        check_lines(path, lines, game)
        latest_matches(path, lines, game)
    return [rec for _, rec in lines]


def latest_matches(path: str | Path, lines: Sequence[tuple[int, MatchRecord]],
                   game: Game) -> dict[EpisodeKey, MatchRecord]:
    """One record per episode (see the module docstring); a conflicting duplicate raises :class:`TournamentError`
    naming both lines."""
    kept: dict[EpisodeKey, tuple[int, MatchRecord, bool]] = {}
    for line, rec in lines:
        valid = bool(game.payoffs(rec.record).valid)
        prev = kept.get(rec.key)
        if prev is not None and prev[2]:
            if valid and rec != prev[1]:
                raise TournamentError(
                    f"{path}:{line}: episode {rec.seller} vs {rec.buyer} on {rec.scenario_key!r} is already recorded "
                    f"at line {prev[0]} with other content; one episode, one record: remove the line that does not "
                    "belong (an identical copy is tolerated)")
            continue  # an identical copy, or an error record after a valid one: the valid record stands
        kept[rec.key] = (line, rec, valid)
    return {k: rec for k, (_, rec, _) in kept.items()}


_NOT_RECORDED = "(not recorded: written by an older negolib)"


def _fmt(value: Any) -> str:
    if value is _NOT_RECORDED:
        return value
    if type(value) is object:  # settings_diff's mark of a field one side lacks
        return "(absent)"
    return repr(value) if isinstance(value, str) else show(value)


def check_settings(path: str | Path, records: Sequence[MatchRecord], settings: TournamentSettings,
                   lines: Sequence[int] | None = None) -> None:
    """Raise :class:`TournamentError` naming the file (and line, given ``lines``) and each differing setting
    when a record of ``records`` was written with settings other than ``settings``."""
    want = {"game": settings.game, "agent_seed": settings.agent_seed, "n_seeds": settings.n_seeds,
            "game_settings": settings.game_settings}
    for i, rec in enumerate(records):
        if rec.settings == settings:
            continue
        have = {"game": rec.game, "agent_seed": rec.agent_seed, "n_seeds": rec.n_seeds,
                "game_settings": rec.game_settings}
        if rec.game_settings is None and settings.game_settings is not None:
            have["game_settings"] = _NOT_RECORDED
        diff = "; ".join(f"{k}: {_fmt(a)} in the file, {_fmt(b)} in this run"
                         for k, a, b in settings_diff(have, want)[:8])
        where = f"{path}:{lines[i]}" if lines is not None else str(path)
        raise TournamentError(f"{where}: the file holds records of other tournament settings ({diff}); rerun with "
                              "the file's settings or write to another out directory")


@contextlib.contextmanager
def run_lock(path: Path) -> Iterator[None]:
    """Hold a non-blocking ``flock`` on ``<path>.lock`` for the run; a second run refuses at once."""
    lock = path.with_name(path.name + ".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TournamentError(f"another tournament run is writing {path} (it holds {lock}); wait for it "
                                  "to end or use another out directory") from None
        yield
    finally:
        os.close(fd)


def drop_torn_tail(path: Path) -> None:
    """Truncate a torn last line left by a kill (under the file's append lock)."""
    if not path.exists():
        return
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        drop_partial_tail(fd)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


__all__ = ["MATCHES_FILE", "EpisodeKey", "MatchRecord", "TournamentError", "TournamentSettings", "check_episode",
           "check_lines", "check_settings", "drop_torn_tail", "latest_matches", "plain_settings", "read_lines",
           "read_matches", "run_lock"]
