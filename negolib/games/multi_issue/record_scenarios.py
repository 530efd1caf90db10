"""The scenario a record of the paper's game was played on, for the analyses that read records back.

A record names its scenario by ``domain`` and ``seed``. A shipped domain's scenario is drawn from that pair; an
imported (Genius) scenario has fixed preferences that no (domain, seed) pair rebuilds, so an analysis is handed
the imported scenarios by name (``scenarios=``, a profile's :func:`negolib.profile_genius.imported_scenarios`).
:class:`RecordScenarios` resolves both and checks a set of domain names up front (:meth:`RecordScenarios.require`),
so a caller that forgot the imported scenarios gets one clear error naming them rather than a failure inside a
loop or a number computed from another scenario.

:func:`split_skip_reason` says why a scenario's per-term split of U~ (distributive + integrative) would not add up
to the U~ its records carry (an imported scenario with a time discount: the recorded U~ is discounted, the
per-term contributions are not), so the decomposition skips its records with that reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from negolib.core.errors import ValidationError
from negolib.games.multi_issue.domains import Domain, load_domains
from negolib.games.multi_issue.scenarios import Scenario, make_scenario

HINT = "pass the profile's imported scenarios: scenarios=imported_scenarios(params.evaluation.genius)"


class RecordScenarios:
    """Domains by name and scenarios by (name, seed) of records: the imported scenario where ``imported`` names
    the domain (its fixed preferences, at the seed), else the shipped domain (or one of ``domains``, or of
    ``directory``) drawn at the seed. Built once per call; scenarios are cached."""

    def __init__(self, imported: Mapping[str, Scenario] | None = None, domains: Mapping[str, Domain] | None = None,
                 directory: str | Path | None = None) -> None:
        self.imported: dict[str, Scenario] = dict(imported or {})
        self._domains: dict[str, Domain] = {**load_domains(directory), **dict(domains or {})}
        self._scenarios: dict[tuple[str, int], Scenario] = {}

    def is_imported(self, name: str) -> bool:
        """Whether ``name`` is one of the imported scenarios."""
        return name in self.imported

    def known(self, name: str) -> bool:
        """Whether ``name`` resolves (a shipped or given domain, or an imported scenario)."""
        return name in self.imported or name in self._domains

    def require(self, names: Iterable[str], where: str) -> None:
        """Raise :class:`~negolib.core.errors.ValidationError` (field ``domain``) naming every name of ``names`` that
        does not resolve, the imported scenarios given and how to pass them; ``where``: the analysis asking."""
        unknown = sorted({str(n) for n in names if not self.known(str(n))})
        if unknown:
            given = sorted(self.imported) if self.imported else "none"
            raise ValidationError(where, "domain", f"records of {unknown} name neither a shipped domain nor an "
                                  f"imported scenario given (imported scenarios given: {given}); {HINT}")

    def domain(self, name: str) -> Domain:
        """The domain ``name`` names (an imported scenario's own domain)."""
        if name in self.imported:
            return self.imported[name].domain
        self.require([name], "record_scenarios")
        return self._domains[name]

    def scenario(self, name: str, seed: int) -> Scenario:
        """The scenario a record of (``name``, ``seed``) was played on."""
        key = (name, int(seed))
        if key not in self._scenarios:
            self._scenarios[key] = (replace(self.imported[name], seed=key[1]) if name in self.imported
                                    else make_scenario(self.domain(name), key[1]))
        return self._scenarios[key]


def split_skip_reason(scenario: Scenario) -> str | None:
    """Why the per-term split of ``scenario``'s U~ does not add up to its records' U~ (None: it does)."""
    if scenario.seller.discount != 1.0 or scenario.buyer.discount != 1.0:
        return (f"{scenario.domain.name}: imported with a time discount (its recorded U~ is discounted, its "
                "per-term contributions are not)")
    return None


__all__ = ["HINT", "RecordScenarios", "split_skip_reason"]
