"""A profile's imported (Genius/ANAC) evaluation scenarios: ``evaluation.genius``.

The section maps a name to a Genius scenario folder or a file written by ``negolib genius import`` (a relative
path resolves against the profile's folder)::

    evaluation:
      domains: [car, laptop]          # shipped domains and imported scenarios, by name (omitted: all of both)
      genius:
        laptop: ../tests/fixtures/genius/laptop
        trip: {path: scenarios/trip.yaml, seller_profile: party_b.xml, discount: false}

:func:`check_genius` (a schema hook of :mod:`negolib.params`) loads each scenario when the profile loads, so a
missing path or a broken scenario is a :class:`~negolib.core.errors.ValidationError` naming the profile and the dotted
field (``evaluation.genius.laptop.path``); :func:`check_genius_names` refuses a name that is a shipped domain's;
:func:`imported_scenarios` gives the scenarios by name (each domain renamed to its name in the profile), which the
evaluation protocol plays at every evaluation seed (:func:`negolib.games.multi_issue.scenarios.scenario_set`). The
frozen protocol embeds the scenarios themselves (:func:`genius_to_dict`, :func:`genius_from_dict`): its hash
follows their preferences.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from negolib.core.errors import ValidationError
from negolib.games.multi_issue.domains import load_domains
from negolib.games.multi_issue.imported import load_imported, parse_scenario, scenario_dict
from negolib.games.multi_issue.scenarios import Scenario

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_KEYS = ("path", "seller_profile", "discount")


@dataclass(frozen=True)
class GeniusSource:
    """One imported scenario of a profile: ``path`` (resolved: absolute), the seller's profile file in a Genius
    folder (None: by file name, as ``negolib genius import`` decides) and whether its discount factors apply."""

    path: str
    seller_profile: str | None = None
    discount: bool = True

    def load(self, name: str | None = None) -> Scenario:
        """The scenario, its domain renamed to ``name`` when given."""
        sc = load_imported(self.path, discount=self.discount, seller=self.seller_profile)
        if name is None or name == sc.domain.name:
            return sc
        return dataclasses.replace(sc, domain=dataclasses.replace(sc.domain, name=name))


def _resolve(path: str, source: str) -> Path:
    """``path`` against the profile's folder (the working directory for a profile given as a mapping)."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    base = Path(source).parent if Path(source).is_file() else Path.cwd()
    return (base / p).resolve()


def check_genius(value: Any, source: str, where: str) -> GeniusSource:
    """A path or a ``{path, seller_profile, discount}`` mapping, loaded and checked (see the module docstring)."""
    raw = {"path": value} if isinstance(value, str) else value
    if not isinstance(raw, Mapping):
        raise ValidationError(source, where, f"must be a path or a mapping with keys {list(_KEYS)}, got {value!r}")
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise ValidationError(source, where, f"unknown keys {unknown}; allowed: {list(_KEYS)}")
    at = f"{where}.path" if not isinstance(value, str) else where
    path, seller, discount = raw.get("path"), raw.get("seller_profile"), raw.get("discount", True)
    if not isinstance(path, str) or not path.strip():
        raise ValidationError(source, at, f"must be a Genius folder or a scenario file, got {path!r}")
    if seller is not None and not isinstance(seller, str):
        raise ValidationError(source, f"{where}.seller_profile", f"must be a profile file name, got {seller!r}")
    if not isinstance(discount, bool):
        raise ValidationError(source, f"{where}.discount", f"must be true or false, got {discount!r}")
    resolved = _resolve(path, source)
    if not resolved.exists():
        raise ValidationError(source, at, f"{path!r} does not exist (resolved: {resolved})")
    out = GeniusSource(str(resolved), seller, discount)
    try:
        out.load()
    except ValidationError as exc:
        raise ValidationError(source, at, f"{path!r} is not a valid imported scenario: {exc}") from None
    except (OSError, ValueError) as exc:
        raise ValidationError(source, at, f"{path!r} cannot be read as a Genius scenario: {exc}") from None
    return out


def check_genius_names(genius: Mapping[str, GeniusSource] | None, source: str, where: str) -> None:
    """Each name is an identifier and not a shipped domain's (a record's ``domain`` must say which it is)."""
    shipped = set(load_domains())
    for name in genius or {}:
        if not _NAME.match(name):
            raise ValidationError(source, f"{where}.{name}", "a scenario's name uses letters, digits and '_', "
                                  "starting with a letter")
        if name in shipped:
            raise ValidationError(source, f"{where}.{name}", f"{name!r} is a shipped domain; name the imported "
                                  "scenario otherwise")


def genius_to_dict(genius: Mapping[str, Scenario]) -> dict[str, Any]:
    """The scenarios as a frozen protocol embeds them: by name, each the scenario file's mapping (no source path,
    so the protocol's hash depends on the preferences, not on where the files lie)."""
    return {name: scenario_dict(sc) for name, sc in genius.items()}


def genius_from_dict(raw: Any, source: str, where: str = "genius") -> dict[str, Scenario]:
    """The embedded scenarios of a protocol file (see :func:`genius_to_dict`), checked as on import."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValidationError(source, where, f"must map a name to an imported scenario, got {raw!r}")
    out = {str(name): parse_scenario(data, source, f"{where}.{name}") for name, data in raw.items()}
    return {name: dataclasses.replace(sc, domain=dataclasses.replace(sc.domain, name=name))
            for name, sc in out.items()}


def check_protocol_genius(genius: Mapping[str, Scenario], source: str, where: str = "genius") -> None:
    """A protocol's imported scenarios: imported, keyed by their own domain name, none a shipped domain's."""
    check_genius_names({name: GeniusSource("") for name in genius}, source, where)
    for name, sc in genius.items():
        if not sc.domain.imported or sc.domain.name != name:
            raise ValidationError(source, f"{where}.{name}", f"must be an imported scenario whose domain is named "
                                  f"{name!r}, got domain {sc.domain.name!r} (imported: {sc.domain.imported})")


def imported_scenarios(genius: Mapping[str, GeniusSource] | None) -> dict[str, Scenario]:
    """The imported scenarios by name (a params profile's ``evaluation.genius``; empty when it has none)."""
    return {name: src.load(name) for name, src in (genius or {}).items()}


__all__ = ["GeniusSource", "check_genius", "check_genius_names", "check_protocol_genius", "genius_from_dict",
           "genius_to_dict", "imported_scenarios"]
