"""One analysis of an episode table: seed-cluster resamplers shared per scenario set.

Every estimate and contrast over the same seeds draws from the same seeded resamples (one
:class:`negolib.stats.ClusterResampler` per set of seeds), so intervals computed in different notebooks
from the same transcripts agree to the last digit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from negolib.params import Params
from negolib.stats import ClusterResampler


@dataclass
class Analysis:
    """One analysis of an episode table: resamplers shared per scenario set (same seeded draws).

    Arms that played the same seeds share a :class:`negolib.stats.ClusterResampler`; language-model
    arms on a declared subset get one over the subset's seeds (their clusters), never empty ones.
    """

    df: pd.DataFrame
    n_resamples: int = 10_000
    seed: int = 0
    alpha: float = 0.05
    refine: bool = False
    refine_resamples: int = 100_000
    _cache: dict[tuple, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_params(cls, df: pd.DataFrame, params: Params) -> Analysis:
        s = params.statistics
        return cls(df, s.n_resamples, s.seed, s.alpha, s.refine, s.refine_resamples)

    def resampler(self, seeds: Iterable[Any]) -> Any:
        key = tuple(sorted(set(int(s) for s in seeds)))
        if key not in self._cache:
            self._cache[key] = ClusterResampler(np.asarray(key), self.n_resamples, self.seed)
        return self._cache[key]

    def arms(self) -> list[str]:
        return [] if self.df.empty else sorted(pd.unique(self.df["arm"]))

    def shared_seeds(self, arm_a: str, arm_b: str) -> list[Any]:
        """The seeds both arms played (sorted)."""
        return sorted(set(self.df.loc[self.df["arm"] == arm_a, "seed"]) &
                      set(self.df.loc[self.df["arm"] == arm_b, "seed"]))

    def pair_frame(self, arm_a: str, arm_b: str) -> tuple[pd.DataFrame, Any]:
        """(the two arms' episodes on the seeds both played, the resampler over those seeds)."""
        seeds = self.shared_seeds(arm_a, arm_b)
        sub = self.df[self.df["arm"].isin([arm_a, arm_b]) & self.df["seed"].isin(seeds)]
        return sub, self.resampler(seeds)

    def has(self, arm: str | None) -> bool:
        return arm is not None and not self.df.empty and bool((self.df["arm"] == arm).any())


__all__ = ["Analysis"]
