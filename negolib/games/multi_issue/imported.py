"""Imported scenarios: a fixed scenario (both parties' preferences given, not drawn) as a YAML file.

:func:`save_scenario_file` writes what :func:`negolib.games.multi_issue.genius.read_genius_folder`
read; :func:`load_scenario_file` reads it back strictly (errors name the file and the field);
:func:`parse_scenario` reads the mapping (a frozen evaluation protocol embeds it);
:func:`load_imported` takes either a Genius folder or such a file, which is what ``--genius`` accepts.
The file::

    format: negolib-scenario/1
    source: the Genius folder it came from
    domain: {name, title, briefs, issues}     # an imported domain (table issues allowed)
    parties:
      seller: {profile, reservation, discount, weights: {issue: w},
               evaluations: {table issue: {level: e}, continuous issue: [e(lo), e(hi)]}}
      buyer: ...

``discount=False`` drops the parties' discount factors (the game's option to play undiscounted).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import yaml

from negolib.core.errors import ValidationError
from negolib.core.files import atomic_write_text, load_yaml
from negolib.games.multi_issue.domains import Domain, parse_domain
from negolib.games.multi_issue.genius import read_genius_folder
from negolib.games.multi_issue.scenarios import ROLES, PartyPrefs, Role, Scenario

FORMAT = "negolib-scenario/1"


def _issue_dict(domain: Domain) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in domain.issues:
        entry: dict[str, Any] = {"name": i.name, "kind": i.kind}
        if i.description:
            entry["description"] = i.description
        if i.kind == "continuous":
            entry.update(range=[i.lo, i.hi], seller_prefers="high" if i.seller_sign > 0 else "low", unit=i.unit)
        elif i.kind in ("categorical", "table"):
            entry["levels"] = list(i.levels)
            if i.kind == "table":
                entry["split"] = i.split
        out.append(entry)
    return out


def _party_dict(domain: Domain, prefs: PartyPrefs, profile: str) -> dict[str, Any]:
    evals: dict[str, Any] = {}
    for issue, ev in zip(domain.issues, prefs.evaluations):
        evals[issue.name] = [ev[0], ev[1]] if issue.kind == "continuous" else dict(zip(map(str, issue.levels), ev))
    return {"profile": profile, "reservation": prefs.reservation, "discount": prefs.discount,
            "weights": dict(zip(domain.issue_names, prefs.weights)), "evaluations": evals}


def scenario_dict(scenario: Scenario, source: str = "", profiles: dict[str, str] | None = None) -> dict[str, Any]:
    """The file's mapping of an imported scenario."""
    if not scenario.seller.evaluations:
        raise ValueError(f"scenario {scenario.key} is drawn, not imported (its preferences carry no evaluations)")
    d = scenario.domain
    profiles = profiles or {}
    return {"format": FORMAT, "source": source,
            "domain": {"name": d.name, "title": d.title, "briefs": dict(d.briefs), "issues": _issue_dict(d)},
            "parties": {r: _party_dict(d, scenario.prefs(r), profiles.get(r, "")) for r in ROLES}}


def save_scenario_file(scenario: Scenario, path: str | Path, source: str = "") -> Path:
    """Write an imported scenario as YAML (atomically); the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(scenario_dict(scenario, source), sort_keys=False, allow_unicode=True, width=100)
    atomic_write_text(path, text)
    return path


def _number(x: Any, source: str, where: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(float(x)):
        raise ValidationError(source, where, f"must be a finite number, got {x!r}")
    return float(x)


def _parse_party(raw: Any, domain: Domain, role: Role, source: str, prefix: str = "") -> PartyPrefs:
    where = f"{prefix}parties.{role}"
    if not isinstance(raw, dict):
        raise ValidationError(source, where, "must be a mapping")
    unknown = set(raw) - {"profile", "reservation", "discount", "weights", "evaluations"}
    if unknown:
        raise ValidationError(source, where, f"unknown keys {sorted(unknown)}")
    weights, evals = raw.get("weights"), raw.get("evaluations")
    names = list(domain.issue_names)
    for key, val in (("weights", weights), ("evaluations", evals)):
        if not isinstance(val, dict) or sorted(val) != sorted(names):
            raise ValidationError(source, f"{where}.{key}", f"must map exactly the issues {names}")
    assert isinstance(weights, dict) and isinstance(evals, dict)
    w = tuple(_number(weights[n], source, f"{where}.weights.{n}") for n in names)
    if min(w) < 0 or abs(sum(w) - 1.0) > 1e-6:
        raise ValidationError(source, f"{where}.weights", f"must be >= 0 and sum to 1, got sum {sum(w)!r}")
    table: list[tuple[float, ...]] = []
    signs, preferred = [], []
    for issue in domain.issues:
        ev, at = evals[issue.name], f"{where}.evaluations.{issue.name}"
        if issue.kind == "continuous":
            if not isinstance(ev, list) or len(ev) != 2:
                raise ValidationError(source, at, f"must be [e(lo), e(hi)], got {ev!r}")
            row = tuple(_number(x, source, at) for x in ev)
            signs.append(1 if row[1] >= row[0] else -1)
            preferred.append(None)
        else:
            labels = [str(v) for v in issue.levels]
            if not isinstance(ev, dict) or sorted(map(str, ev)) != sorted(labels):
                raise ValidationError(source, at, f"must map exactly the levels {labels}")
            lookup = {str(k): v for k, v in ev.items()}
            row = tuple(_number(lookup[lab], source, f"{at}.{lab}") for lab in labels)
            signs.append(0)
            preferred.append(issue.levels[max(range(len(row)), key=row.__getitem__)])
        if min(row) < -1e-9 or max(row) > 1 + 1e-9:
            raise ValidationError(source, at, f"evaluations must lie in [0, 1], got {list(row)}")
        table.append(row)
    reservation = _number(raw.get("reservation", 0.0), source, f"{where}.reservation")
    discount = _number(raw.get("discount", 1.0), source, f"{where}.discount")
    if not 0.0 < discount <= 1.0:
        raise ValidationError(source, f"{where}.discount", f"must be in (0, 1], got {discount!r}")
    return PartyPrefs(role, w, tuple(signs), tuple(preferred), reservation, tuple(table), discount)


def parse_scenario(data: Any, source: str, where: str = "") -> Scenario:
    """An imported scenario from the file's mapping (seed 0); errors name ``source`` and the field under ``where``."""
    prefix = f"{where}." if where else ""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValidationError(source, f"{prefix}format",
                              f"must be {FORMAT!r} (write the file with `negolib genius import`)")
    unknown = set(data) - {"format", "source", "domain", "parties"}
    if unknown:
        raise ValidationError(source, where or "<top>", f"unknown keys {sorted(unknown)}")
    domain = parse_domain(data.get("domain"), f"{source}: {prefix}domain", imported=True)
    parties = data.get("parties")
    if not isinstance(parties, dict) or set(parties) != set(ROLES):
        raise ValidationError(source, f"{prefix}parties", "must map exactly 'seller' and 'buyer'")
    return Scenario(domain, 0, *(_parse_party(parties[r], domain, r, source, prefix) for r in ROLES))


def load_scenario_file(path: str | Path) -> Scenario:
    """An imported scenario from its YAML file (seed 0)."""
    return parse_scenario(load_yaml(path), str(path))


def load_imported(path: str | Path, discount: bool = True, seller: str | None = None) -> Scenario:
    """An imported scenario from a Genius folder or a scenario file; ``discount=False`` plays it undiscounted."""
    path = Path(path)
    scenario = read_genius_folder(path, seller) if path.is_dir() else load_scenario_file(path)
    if discount:
        return scenario
    return dataclasses.replace(scenario, seller=dataclasses.replace(scenario.seller, discount=1.0),
                               buyer=dataclasses.replace(scenario.buyer, discount=1.0))


__all__ = ["FORMAT", "load_imported", "load_scenario_file", "parse_scenario", "save_scenario_file", "scenario_dict"]
