"""Scenarios of the multi-buyer market: a (market, seed) pair fixes the seller's cost, every buyer's budget and style.

Contract: :func:`make_scenario` is a pure function of (market config, seed). A :class:`MarketConfig` names the
rules' sizes (buyers, items, the seller's turn budget), the budget distribution and the buyer-style pool the
scenario draws from; :data:`MARKETS` holds the named configs (the training market and the generalisation arms).
The seed draws cost, budgets and styles from three independent streams, so markets that differ only in styles
(or only in budgets) are paired draw for draw. Seed blocks as in the other games: training low, evaluation reserved.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from negolib.games.seeds import MarketScenario, ScenarioSets, SeedBlocks, check_seed, named_config

TRAIN_STYLES: tuple[str, ...] = ("eager", "steady", "tough")
"""The buyer styles the seller is trained against (the training pool)."""
HELDOUT_STYLES: tuple[str, ...] = ("quiet", "splitter")
"""Buyer styles kept out of training (a generalisation arm)."""
ALL_STYLES: tuple[str, ...] = TRAIN_STYLES + HELDOUT_STYLES

COST_RANGE = (0.6, 0.9)
"""The seller's cost, uniform in this range times the market's scale."""


def _uniform(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(0.9, 2.0, n)


def _lognormal(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.exp(rng.normal(math.log(1.3), 0.35, n))


def _bimodal(rng: np.random.Generator, n: int) -> np.ndarray:
    """Mostly modest budgets and, with probability 1/4 each, a hidden high one: exploration pays."""
    high = rng.random(n) < 0.25
    return np.where(high, rng.uniform(1.8, 2.4, n), rng.uniform(0.8, 1.2, n))


def _narrow(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(1.2, 1.4, n)


BUDGET_DISTRIBUTIONS: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "uniform": _uniform, "lognormal": _lognormal, "bimodal": _bimodal, "narrow": _narrow,
}
"""Budget distribution name -> sampler of ``n`` budgets relative to the market's scale."""
TRAIN_BUDGETS = "uniform"


@dataclass(frozen=True)
class MarketConfig:
    """One market's rules and draws: ``n_buyers`` (3-6) buyers, ``n_items`` identical items (1, or up to one per
    buyer), ``turn_budget`` seller turns shared across buyers, the budget distribution and the style pool."""

    n_buyers: int = 4
    n_items: int = 1
    turn_budget: int = 12
    budgets: str = TRAIN_BUDGETS
    styles: tuple[str, ...] = TRAIN_STYLES
    scale: float = 100.0

    def __post_init__(self) -> None:
        def whole(name: str, lo: int, hi: int) -> None:
            v = getattr(self, name)
            if type(v) is not int or not lo <= v <= hi:
                raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {v!r}")

        whole("n_buyers", 3, 6)
        whole("n_items", 1, self.n_buyers if type(self.n_buyers) is int else 6)
        whole("turn_budget", 1, 1000)
        if isinstance(self.styles, list):
            object.__setattr__(self, "styles", tuple(self.styles))  # keep the config hashable
        if self.budgets not in BUDGET_DISTRIBUTIONS:
            raise ValueError(f"unknown budget distribution {self.budgets!r}; known: {', '.join(BUDGET_DISTRIBUTIONS)}")
        if not self.styles or any(s not in ALL_STYLES for s in self.styles):
            raise ValueError(f"styles must be a non-empty tuple of {', '.join(ALL_STYLES)}; got {self.styles!r}")
        if not (isinstance(self.scale, (int, float)) and math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"scale must be a positive number, got {self.scale!r}")


MARKETS: dict[str, MarketConfig] = {
    "base": MarketConfig(),
    "heldout_styles": MarketConfig(styles=HELDOUT_STYLES),
    "lognormal": MarketConfig(budgets="lognormal"),
    "bimodal": MarketConfig(budgets="bimodal"),
    "six_buyers": MarketConfig(n_buyers=6, turn_budget=14),
    "one_each": MarketConfig(n_items=4, turn_budget=16),
}
"""Named markets: ``base`` is the training market; the others are generalisation arms (unseen buyer styles,
other budget distributions, more buyers, one item per buyer)."""
TRAIN_MARKETS: tuple[str, ...] = ("base",)
EVAL_MARKETS: tuple[str, ...] = tuple(MARKETS)

SEEDS = SeedBlocks()
"""Seed blocks as in the other games: training low, validation, evaluation reserved (shared by every market)."""
TRAIN_SEED_BLOCK, VALIDATION_SEED_BLOCK = SEEDS.train, SEEDS.validation
EVAL_SEED_START, MAX_EVAL_SEEDS = SEEDS.eval_start, SEEDS.max_eval
eval_seeds, train_seeds, validation_seeds = SEEDS.eval_seeds, SEEDS.train_seeds, SEEDS.validation_seeds
_GAME_CODE = zlib.crc32(b"multi_buyer")


@dataclass(frozen=True)
class MultiBuyerScenario(MarketScenario):
    """One market instance: its name and seed, the config, the seller's cost and each buyer's budget and style
    (dollars, to the cent). Buyers are ``buyer_1`` .. ``buyer_N`` in order."""

    cost: float
    budgets: tuple[float, ...]
    styles: tuple[str, ...]

    @property
    def n_buyers(self) -> int:
        return len(self.budgets)

    @property
    def buyer_ids(self) -> tuple[str, ...]:
        return tuple(buyer_id(i) for i in range(self.n_buyers))

    @property
    def best_surplus(self) -> float:
        """The most the seller can gain: the ``n_items`` highest budgets minus the cost (positive parts only)."""
        top = sorted(self.budgets, reverse=True)[: self.config.n_items]
        return float(sum(max(0.0, b - self.cost) for b in top))

    @property
    def top_buyer(self) -> int:
        """The index of the highest-budget buyer (the first of equals)."""
        return int(np.argmax(self.budgets))


def buyer_id(index: int) -> str:
    """``buyer_<index + 1>``."""
    return f"buyer_{index + 1}"


def make_scenario(market: str | MarketConfig, seed: int, name: str | None = None) -> MultiBuyerScenario:
    """The scenario of ``(market, seed)``: ``market`` a name of :data:`MARKETS` or a :class:`MarketConfig`
    (then called ``name``, default ``"custom"``); ``ValueError`` for an unknown market or a negative seed."""
    cfg, label = named_config(market, name, MARKETS, MarketConfig)
    check_seed(seed)
    ss = np.random.SeedSequence([_GAME_CODE, seed])
    cost_rng, budget_rng, style_rng = (np.random.Generator(np.random.PCG64(s)) for s in ss.spawn(3))
    cost = round(float(cost_rng.uniform(*COST_RANGE)) * cfg.scale, 2)
    budgets = tuple(round(float(b) * cfg.scale, 2) for b in BUDGET_DISTRIBUTIONS[cfg.budgets](budget_rng, cfg.n_buyers))
    picks = style_rng.integers(0, len(cfg.styles), cfg.n_buyers)
    return MultiBuyerScenario(label, seed, cfg, cost, budgets, tuple(cfg.styles[int(i)] for i in picks))


SETS = ScenarioSets("multi_buyer", make_scenario, EVAL_MARKETS, SEEDS)
"""The market's scenario sets: ``parse_key("market|seed")``, ``scenario_set(seeds, markets)`` and
``evaluation_set(n_seeds, markets)`` (market-major; default markets: :data:`EVAL_MARKETS`)."""
parse_key, scenario_set, evaluation_set = SETS.parse_key, SETS.scenario_set, SETS.evaluation_set
