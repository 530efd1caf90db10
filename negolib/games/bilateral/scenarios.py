"""Scenarios of bilateral price bargaining: a (tier, seed) pair fixes the seller's cost and the buyer's value.

Contract: :func:`make_scenario` is a pure function of (tier, seed). The seed draws the *relative* cost and value
(log-uniform, independently: cost in [0.5, 1.5] and value in [0.75, 2.0] times the tier's scale, so about a
fifth of scenarios have no zone of possible agreement); the tier only scales them, so one seed is the same
relative scenario in every tier (tiers are paired). Training seeds come from a low block, evaluation seeds
from a reserved block three orders of magnitude above it (as :mod:`negolib.scenarios`).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

TIERS: dict[str, float] = {"10": 10.0, "100": 100.0, "1k": 1_000.0, "10k": 10_000.0, "100k": 100_000.0}
"""Price tier name -> scale in dollars."""
COST_RANGE = (0.5, 1.5)
VALUE_RANGE = (0.75, 2.0)
TRAIN_SEED_BLOCK = range(0, 4096)
VALIDATION_SEED_BLOCK = range(4096, 5000)
EVAL_SEED_START = 5_000_000
MAX_EVAL_SEEDS = 1000
_GAME_CODE = zlib.crc32(b"bilateral")


@dataclass(frozen=True)
class BilateralScenario:
    """One item: its price tier, seed and both parties' private reservation prices (dollars, to the cent)."""

    tier: str
    seed: int
    cost: float
    value: float

    @property
    def scale(self) -> float:
        return TIERS[self.tier]

    @property
    def key(self) -> str:
        """``"tier|seed"``, the scenario key of records."""
        return f"{self.tier}|{self.seed}"

    @property
    def zone(self) -> float:
        """The gains from trade, value - cost (zero or negative when no price suits both)."""
        return self.value - self.cost

    @property
    def has_zone(self) -> bool:
        """Whether a zone of possible agreement exists (value > cost)."""
        return self.value > self.cost

    def reservation(self, role: str) -> float:
        """The seller's cost or the buyer's value."""
        if role not in ("seller", "buyer"):
            raise ValueError(f"role must be 'seller' or 'buyer', got {role!r}")
        return self.cost if role == "seller" else self.value


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def make_scenario(tier: str, seed: int) -> BilateralScenario:
    """The scenario of ``(tier, seed)``; ``ValueError`` for an unknown tier or a negative seed."""
    if tier not in TIERS:
        raise ValueError(f"unknown price tier {tier!r}; known: {', '.join(TIERS)}")
    if int(seed) != seed or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    ss = np.random.SeedSequence([_GAME_CODE, int(seed)])
    seller_rng, buyer_rng = (np.random.Generator(np.random.PCG64(s)) for s in ss.spawn(2))
    scale = TIERS[tier]
    cost = round(_log_uniform(seller_rng, *COST_RANGE) * scale, 2)
    value = round(_log_uniform(buyer_rng, *VALUE_RANGE) * scale, 2)
    return BilateralScenario(tier, int(seed), cost, value)


def parse_key(key: str) -> tuple[str, int]:
    """``"tier|seed"`` -> (tier, seed)."""
    tier, _, seed = key.rpartition("|")
    if tier not in TIERS or not seed.isdigit():
        raise ValueError(f"not a bilateral scenario key: {key!r}")
    return tier, int(seed)


def eval_seeds(n: int) -> list[int]:
    """The reserved evaluation seeds (shared by every tier): 5,000,000 + i."""
    if not 0 < n <= MAX_EVAL_SEEDS:
        raise ValueError(f"n must be in 1..{MAX_EVAL_SEEDS}, got {n}")
    return [EVAL_SEED_START + i for i in range(n)]


def train_seeds(n: int, offset: int = 0) -> list[int]:
    """``n`` training seeds from the low block, starting at ``offset``."""
    if n < 0 or offset < 0 or offset + n > len(TRAIN_SEED_BLOCK):
        raise ValueError(f"training seeds must lie in {TRAIN_SEED_BLOCK}, got offset={offset} n={n}")
    return list(TRAIN_SEED_BLOCK[offset:offset + n])


def validation_seeds(n: int) -> list[int]:
    """``n`` seeds of the validation block (disjoint from training and evaluation)."""
    if not 0 < n <= len(VALIDATION_SEED_BLOCK):
        raise ValueError(f"n must be in 1..{len(VALIDATION_SEED_BLOCK)}, got {n}")
    return list(VALIDATION_SEED_BLOCK[:n])


def scenario_set(seeds: Iterable[int], tiers: Sequence[str] | None = None) -> list[BilateralScenario]:
    """Every (tier, seed) scenario, tier-major; default tiers: all, cheapest first."""
    names = list(tiers) if tiers is not None else list(TIERS)
    seeds = list(seeds)
    return [make_scenario(t, s) for t in names for s in seeds]


def evaluation_set(n_seeds: int) -> list[BilateralScenario]:
    """The evaluation set: ``n_seeds`` reserved seeds in every tier."""
    return scenario_set(eval_seeds(n_seeds))
