"""Scenarios of the multi-product market: a (market, seed) pair fixes list prices, private costs and valuations.

Contract: :func:`make_scenario` is a pure function of (market config, seed). A :class:`MarketConfig` names the
sizes (K products, M buyers, the seller's turn budget), the valuation model (independent, or correlated within a
buyer) and the price scale; :data:`MARKETS` holds the named configs (the training market and the generalisation
arms: unseen sizes, correlated valuations, price ranges outside training). Product list prices are public, costs
private to the seller, each buyer's valuations private to it. Seed blocks as in the other games.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from negolib.games.multi_product.oracle import Assignment, best_assignment

LIST_RANGE = (0.8, 1.6)
"""A product's public list price, uniform in this range times the market's scale."""
COST_SHARE = (0.4, 0.7)
"""A product's private cost, uniform in this share of its list price."""
VALUE_SIGMA = 0.3
"""The spread of log valuations around the list price."""


@dataclass(frozen=True)
class MarketConfig:
    """One market's rules and draws: ``n_products`` (K) substitutable products, ``n_buyers`` (M) buyers who each
    buy at most one, ``turn_budget`` seller messages in all; log valuations around each product's list price with
    correlation ``rho`` between one buyer's products (0: independent); prices of the order of ``scale``."""

    n_products: int = 3
    n_buyers: int = 4
    turn_budget: int = 10
    rho: float = 0.0
    scale: float = 100.0

    def __post_init__(self) -> None:
        for name, hi in (("n_products", 50), ("n_buyers", 50), ("turn_budget", 1000)):
            v = getattr(self, name)
            if type(v) is not int or not 1 <= v <= hi:
                raise ValueError(f"{name} must be an integer in [1, {hi}], got {v!r}")
        if not (isinstance(self.rho, (int, float)) and 0.0 <= self.rho <= 1.0):
            raise ValueError(f"rho must be a number in [0, 1], got {self.rho!r}")
        if not (isinstance(self.scale, (int, float)) and math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"scale must be a positive number, got {self.scale!r}")

    @property
    def valuations(self) -> str:
        """``"independent"`` or ``"correlated"``."""
        return "correlated" if self.rho > 0 else "independent"


MARKETS: dict[str, MarketConfig] = {
    "base": MarketConfig(),
    "small": MarketConfig(n_products=2, n_buyers=3, turn_budget=6),
    "large": MarketConfig(n_products=5, n_buyers=6, turn_budget=14),
    "correlated": MarketConfig(rho=0.8),
    "cheap": MarketConfig(scale=10.0),
    "premium": MarketConfig(scale=1000.0),
}
"""Named markets: ``base`` is the training market; the others are generalisation arms (unseen sizes, correlated
valuations, price ranges ten times below and above training)."""
TRAIN_MARKETS: tuple[str, ...] = ("base",)
EVAL_MARKETS: tuple[str, ...] = tuple(MARKETS)

TRAIN_SEED_BLOCK = range(0, 4096)
VALIDATION_SEED_BLOCK = range(4096, 5000)
EVAL_SEED_START = 5_000_000
MAX_EVAL_SEEDS = 1000
_GAME_CODE = zlib.crc32(b"multi_product")


def buyer_id(index: int) -> str:
    """``buyer_<index + 1>``."""
    return f"buyer_{index + 1}"


def product_id(index: int) -> str:
    """``product_<index + 1>``."""
    return f"product_{index + 1}"


@dataclass(frozen=True)
class MultiProductScenario:
    """One market instance (dollars, to the cent): public ``list_prices``, the seller's ``costs`` (one per product)
    and ``valuations[m][k]``, buyer m's value of product k."""

    market: str
    seed: int
    config: MarketConfig = field(repr=False)
    list_prices: tuple[float, ...]
    costs: tuple[float, ...]
    valuations: tuple[tuple[float, ...], ...]

    @property
    def key(self) -> str:
        """``"market|seed"``, the scenario key of records."""
        return f"{self.market}|{self.seed}"

    @property
    def n_products(self) -> int:
        return len(self.costs)

    @property
    def n_buyers(self) -> int:
        return len(self.valuations)

    @cached_property
    def best_welfare(self) -> Assignment:
        """The welfare-optimal feasible allocation (value - cost, at most ``turn_budget`` sales): the most surplus
        a seller can extract, so the normaliser of the seller's reward."""
        v, c = np.asarray(self.valuations), np.asarray(self.costs)
        return best_assignment(v - c[None, :], self.config.turn_budget)

    @cached_property
    def best_revenue(self) -> Assignment:
        """The revenue-optimal feasible allocation: the most revenue (sum of valuations) over assignments that sell
        nothing below cost, at most ``turn_budget`` sales."""
        v, c = np.asarray(self.valuations), np.asarray(self.costs)
        return best_assignment(np.where(v >= c[None, :], v, 0.0), self.config.turn_budget)


def make_scenario(market: str | MarketConfig, seed: int, name: str | None = None) -> MultiProductScenario:
    """The scenario of ``(market, seed)``: ``market`` a name of :data:`MARKETS` or a :class:`MarketConfig` (then
    called ``name``, default ``"custom"``); ``ValueError`` for an unknown market or a negative seed."""
    if isinstance(market, MarketConfig):
        cfg, label = market, name or "custom"
    elif market in MARKETS:
        cfg, label = MARKETS[market], market
    else:
        raise ValueError(f"unknown market {market!r}; known: {', '.join(MARKETS)}")
    if "|" in label:
        raise ValueError(f"a market name may not contain '|': {label!r}")
    if type(seed) is not int or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    ss = np.random.SeedSequence([_GAME_CODE, seed])
    list_rng, cost_rng, buyer_rng, taste_rng = (np.random.Generator(np.random.PCG64(s)) for s in ss.spawn(4))
    k, m = cfg.n_products, cfg.n_buyers
    lists = list_rng.uniform(*LIST_RANGE, k) * cfg.scale
    costs = lists * cost_rng.uniform(*COST_SHARE, k)
    z = buyer_rng.standard_normal((m, 1))  # a buyer's common taste: correlates its valuations when rho > 0
    e = taste_rng.standard_normal((m, k))
    vals = lists[None, :] * np.exp(VALUE_SIGMA * (math.sqrt(cfg.rho) * z + math.sqrt(1 - cfg.rho) * e))

    def cents(a: np.ndarray) -> tuple[float, ...]:
        return tuple(round(float(x), 2) for x in a)

    return MultiProductScenario(label, seed, cfg, cents(lists), cents(costs), tuple(cents(row) for row in vals))


def parse_key(key: str) -> tuple[str, int]:
    """``"market|seed"`` -> (market, seed)."""
    market, _, seed = key.rpartition("|")
    if not market or not seed.isdigit():
        raise ValueError(f"not a multi_product scenario key: {key!r}")
    return market, int(seed)


def eval_seeds(n: int) -> list[int]:
    """The reserved evaluation seeds (shared by every market): 5,000,000 + i."""
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


def scenario_set(seeds: Iterable[int], markets: Sequence[str] | None = None) -> list[MultiProductScenario]:
    """Every (market, seed) scenario, market-major; default markets: :data:`EVAL_MARKETS`."""
    names = list(markets) if markets is not None else list(EVAL_MARKETS)
    seeds = list(seeds)
    return [make_scenario(m, s) for m in names for s in seeds]


def evaluation_set(n_seeds: int, markets: Sequence[str] | None = None) -> list[MultiProductScenario]:
    """The evaluation set: ``n_seeds`` reserved seeds in every market (default: all of them)."""
    return scenario_set(eval_seeds(n_seeds), markets)
