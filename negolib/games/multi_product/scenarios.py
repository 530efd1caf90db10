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
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from negolib.games.multi_buyer.scenarios import buyer_id as buyer_id  # the same names in both markets
from negolib.games.multi_product.oracle import Assignment, best_assignment
from negolib.games.seeds import MarketScenario, ScenarioSets, SeedBlocks, check_seed, named_config

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

SEEDS = SeedBlocks()
"""Seed blocks as in the other games: training low, validation, evaluation reserved (shared by every market)."""
TRAIN_SEED_BLOCK, VALIDATION_SEED_BLOCK = SEEDS.train, SEEDS.validation
EVAL_SEED_START, MAX_EVAL_SEEDS = SEEDS.eval_start, SEEDS.max_eval
eval_seeds, train_seeds, validation_seeds = SEEDS.eval_seeds, SEEDS.train_seeds, SEEDS.validation_seeds
_GAME_CODE = zlib.crc32(b"multi_product")


def product_id(index: int) -> str:
    """``product_<index + 1>``."""
    return f"product_{index + 1}"


@dataclass(frozen=True)
class MultiProductScenario(MarketScenario):
    """One market instance (dollars, to the cent): public ``list_prices``, the seller's ``costs`` (one per product)
    and ``valuations[m][k]``, buyer m's value of product k."""

    list_prices: tuple[float, ...]
    costs: tuple[float, ...]
    valuations: tuple[tuple[float, ...], ...]

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
    cfg, label = named_config(market, name, MARKETS, MarketConfig)
    check_seed(seed)
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


SETS = ScenarioSets("multi_product", make_scenario, EVAL_MARKETS, SEEDS)
"""The market's scenario sets: ``parse_key("market|seed")``, ``scenario_set(seeds, markets)`` and
``evaluation_set(n_seeds, markets)`` (market-major; default markets: :data:`EVAL_MARKETS`)."""
parse_key, scenario_set, evaluation_set = SETS.parse_key, SETS.scenario_set, SETS.evaluation_set
