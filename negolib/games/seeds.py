"""Seed blocks and scenario sets of the games: what makes a scenario a pure function of (config, seed), paired.

Contract: a :class:`SeedBlocks` holds a game's three disjoint seed blocks (training low, validation, evaluation
reserved from 5,000,000) and hands out seeds from them, ``ValueError`` outside a block. :func:`named_config` reads
a stratum (market, tier) given by name or config, :func:`check_seed` a seed; :func:`scenario_grid` builds every
(stratum, seed) scenario stratum-major; :func:`parse_key` reads a ``"stratum|seed"`` scenario key; a
:class:`ScenarioSets` bundles them for one game.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

C = TypeVar("C")
S = TypeVar("S")


@dataclass(frozen=True)
class SeedBlocks:
    """Training seeds from ``train``, validation seeds from ``validation``, evaluation seeds ``eval_start + i`` for
    ``i < max_eval``; the three blocks are disjoint."""

    train: range = range(0, 4096)
    validation: range = range(4096, 5000)
    eval_start: int = 5_000_000
    max_eval: int = 1000

    def __post_init__(self) -> None:
        if not self.train.stop <= self.validation.start < self.validation.stop <= self.eval_start:
            raise ValueError(f"seed blocks must be disjoint and in order: {self}")

    def eval_seeds(self, n: int) -> list[int]:
        """The ``n`` first reserved evaluation seeds (shared by every stratum of a game)."""
        if not 0 < n <= self.max_eval:
            raise ValueError(f"n must be in 1..{self.max_eval}, got {n}")
        return [self.eval_start + i for i in range(n)]

    def train_seeds(self, n: int, offset: int = 0) -> list[int]:
        """``n`` training seeds from the low block, starting at ``offset``."""
        if n < 0 or offset < 0 or offset + n > len(self.train):
            raise ValueError(f"training seeds must lie in {self.train}, got offset={offset} n={n}")
        return list(self.train[offset:offset + n])

    def validation_seeds(self, n: int) -> list[int]:
        """``n`` seeds of the validation block (disjoint from training and evaluation)."""
        if not 0 < n <= len(self.validation):
            raise ValueError(f"n must be in 1..{len(self.validation)}, got {n}")
        return list(self.validation[:n])


@dataclass(frozen=True)
class MarketScenario:
    """What a market game's scenario starts with: its market's name, its seed and the market's config; its key is
    ``"market|seed"``. A game's scenario adds its draws as further fields."""

    market: str
    seed: int
    config: Any = field(repr=False)

    @property
    def key(self) -> str:
        """``"market|seed"``, the scenario key of records."""
        return f"{self.market}|{self.seed}"


def named_config(stratum: str | C, name: str | None, configs: Mapping[str, C], kind: type[C],
                 what: str = "market") -> tuple[C, str]:
    """(config, label) of ``stratum``: a name of ``configs``, or a ``kind`` instance labelled ``name`` (default
    ``"custom"``); ``ValueError`` for an unknown name or a label holding '|' (the key separator)."""
    if isinstance(stratum, kind):
        cfg, label = stratum, name or "custom"
    elif isinstance(stratum, str) and stratum in configs:
        cfg, label = configs[stratum], stratum
    else:
        raise ValueError(f"unknown {what} {stratum!r}; known: {', '.join(configs)}")
    if "|" in label:
        raise ValueError(f"a {what} name may not contain '|': {label!r}")
    return cfg, label


def check_seed(seed: object) -> int:
    """``seed`` when it is an integer >= 0 (bools are not), else ``ValueError``."""
    if type(seed) is not int or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    return seed


def scenario_grid(make: Callable[[str, int], S], seeds: Iterable[int], strata: Sequence[str]) -> list[S]:
    """``make(stratum, seed)`` for every stratum and seed, stratum-major."""
    seeds = list(seeds)
    return [make(m, s) for m in strata for s in seeds]


@dataclass(frozen=True)
class ScenarioSets(Generic[S]):
    """A game's scenario sets: ``make(stratum, seed)`` over its strata (markets, tiers; ``strata`` the evaluation
    default) and seed blocks; its methods are the game's ``parse_key``, ``scenario_set`` and ``evaluation_set``
    (whose ``markets`` argument names the strata to draw, keeping the markets' keyword)."""

    game: str
    make: Callable[[str, int], S]
    strata: tuple[str, ...]
    blocks: SeedBlocks = SeedBlocks()

    def parse_key(self, key: str) -> tuple[str, int]:
        """``"stratum|seed"`` -> (stratum, seed)."""
        return parse_key(key, self.game)

    def scenario_set(self, seeds: Iterable[int], markets: Sequence[str] | None = None) -> list[S]:
        """Every (stratum, seed) scenario, stratum-major; default strata: the evaluation ones."""
        return scenario_grid(self.make, seeds, list(markets) if markets is not None else list(self.strata))

    def evaluation_set(self, n_seeds: int, markets: Sequence[str] | None = None) -> list[S]:
        """The evaluation set: ``n_seeds`` reserved seeds in every stratum (default: the evaluation ones)."""
        return self.scenario_set(self.blocks.eval_seeds(n_seeds), markets)


def parse_key(key: str, game: str, strata: Container[str] | None = None) -> tuple[str, int]:
    """``"stratum|seed"`` -> (stratum, seed); ``ValueError`` naming ``game`` for another shape (or, with
    ``strata``, an unknown stratum)."""
    stratum, _, seed = key.rpartition("|")
    if not stratum or not seed.isdigit() or (strata is not None and stratum not in strata):
        raise ValueError(f"not a {game} scenario key: {key!r}")
    return stratum, int(seed)


__all__ = ["ScenarioSets", "SeedBlocks", "check_seed", "named_config", "parse_key", "scenario_grid"]
