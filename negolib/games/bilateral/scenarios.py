"""Scenarios of bilateral price bargaining: a (tier, seed) pair fixes the seller's cost and the buyer's value.

Contract: :func:`make_scenario` is a pure function of (tier, seed). The seed draws the *relative* cost and value
(log-uniform, independently: cost in [0.5, 1.5] and value in [0.75, 2.0] times the tier's scale, so about a
fifth of scenarios have no zone of possible agreement); the tier only scales them, so one seed is the same
relative scenario in every tier (tiers are paired). Training seeds come from a low block, evaluation seeds
from a reserved block three orders of magnitude above it (as :mod:`negolib.games.multi_issue.scenarios`).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from negolib.games.seeds import SeedBlocks

TIERS: dict[str, float] = {"10": 10.0, "100": 100.0, "1k": 1_000.0, "10k": 10_000.0, "100k": 100_000.0}
"""Price tier name -> scale in dollars."""
COST_RANGE = (0.5, 1.5)
VALUE_RANGE = (0.75, 2.0)
SEEDS = SeedBlocks()
"""Seed blocks: training low, validation, evaluation reserved from 5,000,000 (shared by every tier)."""
TRAIN_SEED_BLOCK, VALIDATION_SEED_BLOCK = SEEDS.train, SEEDS.validation
EVAL_SEED_START, MAX_EVAL_SEEDS = SEEDS.eval_start, SEEDS.max_eval
eval_seeds, train_seeds, validation_seeds = SEEDS.eval_seeds, SEEDS.train_seeds, SEEDS.validation_seeds
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


def scenario_set(seeds: Iterable[int], tiers: Sequence[str] | None = None) -> list[BilateralScenario]:
    """Every (tier, seed) scenario, tier-major; default tiers: all, cheapest first."""
    names = list(tiers) if tiers is not None else list(TIERS)
    seeds = list(seeds)
    return [make_scenario(t, s) for t in names for s in seeds]


def evaluation_set(n_seeds: int) -> list[BilateralScenario]:
    """The evaluation set: ``n_seeds`` reserved seeds in every tier."""
    return scenario_set(eval_seeds(n_seeds))
