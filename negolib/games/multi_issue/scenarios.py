"""Scenarios: a (domain, seed) pair fixes both parties' private preferences.

Both parties' importance weights (Dirichlet(0.3), drawn independently per party [paper §3]),
their preferred levels on integrative terms and their reservation values are a pure function of
(domain name, seed). Training seeds come from a low block; evaluation seeds from a reserved block
three orders of magnitude above every training seed (the paper quotes seed 5000053).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from negolib.games.multi_issue.domains import Domain, get_domain, load_domains

Role = Literal["seller", "buyer"]
ROLES: tuple[Role, Role] = ("seller", "buyer")
DIRICHLET_ALPHA = 0.3
RESERVATION_RANGE = (0.2, 0.4)
TRAIN_SEED_BLOCK = range(0, 4096)
VALIDATION_SEED_BLOCK = range(4096, 5000)
EVAL_SEED_START = 5_000_000
EVAL_SEEDS_PER_DOMAIN = 64


def other(role: Role) -> Role:
    """The counterpart's role."""
    return "buyer" if role == "seller" else "seller"


@dataclass(frozen=True)
class PartyPrefs:
    """One party's private preferences, in the domain's issue order.

    ``signs[k]`` is +1 when the party prefers high values of continuous issue k, -1 for low and 0
    for integrative issues; ``preferred[k]`` is the preferred level of integrative issue k (None
    for continuous issues). Weights sum to 1.

    Imported (Genius) scenarios fix both parties' preferences and set ``evaluations``: per issue,
    the party's evaluation of each level of a table issue (already divided by the largest, as
    Genius does), or of a continuous issue's two ends ``(e(lo), e(hi))`` (a linear evaluator, in
    between by interpolation); ``signs`` and ``preferred`` then give the better end and the best
    level. ``discount`` is the party's discount factor (1: none). Drawn scenarios leave
    ``evaluations`` empty and score as the module :mod:`.utility` says.
    """

    role: Role
    weights: tuple[float, ...]
    signs: tuple[int, ...]
    preferred: tuple[Any, ...]
    reservation: float
    evaluations: tuple[tuple[float, ...], ...] = ()
    discount: float = 1.0

    def as_dict(self, domain: Domain) -> dict[str, Any]:
        """A readable, JSON-ready view keyed by issue name."""
        out: dict[str, Any] = {"role": self.role, "reservation": self.reservation, "issues": {}}
        for issue, w, s, p in zip(domain.issues, self.weights, self.signs, self.preferred):
            entry: dict[str, Any] = {"weight": w}
            if issue.kind == "continuous":
                entry["prefers"] = "high" if s > 0 else "low"
            else:
                entry["preferred"] = p
            out["issues"][issue.name] = entry
        if self.evaluations:
            for issue, ev in zip(domain.issues, self.evaluations):
                keys = ("lo", "hi") if issue.kind == "continuous" else issue.levels
                out["issues"][issue.name]["evaluations"] = dict(zip(keys, ev))
            out["discount"] = self.discount
        return out


@dataclass(frozen=True)
class Scenario:
    """A negotiation instance: a domain, a seed and both parties' private preferences."""

    domain: Domain
    seed: int
    seller: PartyPrefs
    buyer: PartyPrefs

    @property
    def key(self) -> tuple[str, int]:
        return (self.domain.name, self.seed)

    def prefs(self, role: Role) -> PartyPrefs:
        return self.seller if role == "seller" else self.buyer


def _domain_code(name: str) -> int:
    return zlib.crc32(name.encode("utf-8"))


def _draw_party(domain: Domain, role: Role, rng: np.random.Generator) -> PartyPrefs:
    k = len(domain.issues)
    weights = rng.dirichlet(np.full(k, DIRICHLET_ALPHA))
    # Dirichlet(0.3) can underflow a weight to exactly 0 in float64; keep them as drawn.
    signs, preferred = [], []
    for issue in domain.issues:
        if issue.kind == "continuous":
            signs.append(issue.seller_sign if role == "seller" else -issue.seller_sign)
            preferred.append(None)
        else:
            signs.append(0)
            preferred.append(issue.levels[int(rng.integers(len(issue.levels)))])
    reservation = float(rng.uniform(*RESERVATION_RANGE))
    return PartyPrefs(role, tuple(float(w) for w in weights), tuple(signs), tuple(preferred), reservation)


def make_scenario(domain: Domain, seed: int) -> Scenario:
    """The scenario of ``(domain, seed)``: a pure function of the domain's name and the seed."""
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    ss = np.random.SeedSequence([_domain_code(domain.name), int(seed)])
    seller_rng, buyer_rng = (np.random.Generator(np.random.PCG64(s)) for s in ss.spawn(2))
    return Scenario(domain, int(seed), _draw_party(domain, "seller", seller_rng),
                    _draw_party(domain, "buyer", buyer_rng))


def eval_seeds(n: int = EVAL_SEEDS_PER_DOMAIN) -> list[int]:
    """The reserved evaluation seeds (shared by every domain): 5,000,000 + i."""
    if not 0 < n <= 1000:
        raise ValueError(f"n must be in 1..1000, got {n}")
    return [EVAL_SEED_START + i for i in range(n)]


def train_seeds(n: int, offset: int = 0) -> list[int]:
    """``n`` training seeds from the low block, starting at ``offset``."""
    if offset < 0 or offset + n > len(TRAIN_SEED_BLOCK):
        raise ValueError(f"training seeds must lie in {TRAIN_SEED_BLOCK}, got offset={offset} n={n}")
    return list(TRAIN_SEED_BLOCK[offset:offset + n])


def validation_seeds(n: int) -> list[int]:
    """``n`` seeds of the fixed validation block (disjoint from training and evaluation)."""
    if not 0 < n <= len(VALIDATION_SEED_BLOCK):
        raise ValueError(f"n must be in 1..{len(VALIDATION_SEED_BLOCK)}, got {n}")
    return list(VALIDATION_SEED_BLOCK[:n])


def scenario_set(seeds: Iterable[int], domains: Iterable[str] | None = None,
                 imported: Mapping[str, Scenario] | None = None) -> list[Scenario]:
    """Every (domain, seed) scenario, domain-major. Default domains: all nine shipped, then every imported one.

    ``imported``: fixed (Genius) scenarios by name; such a domain plays its one scenario at every seed (the
    preferences stay fixed, the seed indexes the replicate, as a drawn domain's seed indexes its draw)."""
    doms, imported = load_domains(), imported or {}
    names = list(domains) if domains is not None else [*doms, *imported]
    unknown = [n for n in names if n not in doms and n not in imported]
    if unknown:
        raise ValueError(f"unknown domains {unknown}; known: {sorted(doms)}"
                         + (f", imported: {sorted(imported)}" if imported else ""))
    seeds = list(seeds)
    return [replace(imported[n], seed=int(s)) if n in imported else make_scenario(doms[n], s)
            for n in names for s in seeds]


def lookup_scenario(domain: str, seed: int, imported: Mapping[str, Scenario] | None = None,
                    directory: str | Path | None = None) -> Scenario:
    """The scenario a record names: an imported one by its domain name (its fixed preferences, at ``seed``), else
    the drawn ``(domain, seed)`` of the domains in ``directory`` (default: the shipped ones)."""
    if imported and domain in imported:
        return replace(imported[domain], seed=int(seed))
    return make_scenario(get_domain(domain, directory), int(seed))


def evaluation_set(n_seeds: int = EVAL_SEEDS_PER_DOMAIN) -> list[Scenario]:
    """The evaluation scenario set: ``n_seeds`` reserved seeds x 9 domains (x 2 buyers = 1,152)."""
    return scenario_set(eval_seeds(n_seeds))
