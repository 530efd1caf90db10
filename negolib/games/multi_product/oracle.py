"""The allocation oracle of the multi-product market: the best buyer-product assignment, exactly, and baselines.

Contract: :func:`best_assignment` maximises the total weight of a matching of buyers (rows) to products (columns),
each at most once, using only positive-weight pairs and at most ``max_pairs`` of them, exactly, by
``scipy.optimize.linear_sum_assignment`` (a cap below min(M, K) is met by dummy columns that must absorb the other
buyers). :func:`brute_force_assignment` enumerates every matching (tests, tiny markets); :func:`greedy_assignment`
takes the heaviest free pair first (a 1/2-approximation, the benchmark's baseline).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment


@dataclass(frozen=True)
class Assignment:
    """A matching: ``pairs`` (buyer, product), sorted by buyer, and its total ``value``."""

    pairs: tuple[tuple[int, int], ...]
    value: float

    def product_of(self, buyer: int) -> int | None:
        """The product assigned to ``buyer`` (None: none)."""
        return next((k for m, k in self.pairs if m == buyer), None)


def _check(weights: np.ndarray, max_pairs: int | None) -> tuple[np.ndarray, int]:
    w = np.asarray(weights, dtype=float)
    if w.ndim != 2:
        raise ValueError(f"weights must be a 2-d array (buyers x products), got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite")
    cap = min(w.shape) if max_pairs is None else int(max_pairs)
    if cap < 0:
        raise ValueError(f"max_pairs must be >= 0, got {max_pairs!r}")
    return w, min(cap, *w.shape) if w.size else 0


def _assignment(w: np.ndarray, pairs: list[tuple[int, int]]) -> Assignment:
    kept = sorted((int(m), int(k)) for m, k in pairs if w[m, k] > 0)
    return Assignment(tuple(kept), float(sum(w[m, k] for m, k in kept)))


def best_assignment(weights: np.ndarray, max_pairs: int | None = None) -> Assignment:
    """The maximum-weight matching of ``weights`` (M buyers x K products) with at most ``max_pairs`` pairs, using
    positive weights only (a pair of weight <= 0 is never worth making); exact."""
    w, cap = _check(weights, max_pairs)
    if cap == 0:
        return Assignment((), 0.0)
    gain = np.maximum(w, 0.0)
    m, k = gain.shape
    if cap < min(m, k):
        # M - cap dummy columns worth more than any real matching: every optimum fills them all, so exactly
        # ``cap`` buyers remain for the real products, matched as well as possible.
        big = float(gain.sum()) + 1.0
        gain = np.hstack([gain, np.full((m, m - cap), big)])
    rows, cols = linear_sum_assignment(gain, maximize=True)
    return _assignment(w, [(r, c) for r, c in zip(rows, cols) if c < k])


def brute_force_assignment(weights: np.ndarray, max_pairs: int | None = None) -> Assignment:
    """:func:`best_assignment` by enumerating every partial matching (each buyer: no product or a free one); for
    tests on tiny markets only (exponential)."""
    w, cap = _check(weights, max_pairs)
    m, k = w.shape
    best: tuple[float, tuple[tuple[int, int], ...]] = (0.0, ())
    for choice in itertools.product(range(-1, k), repeat=m):
        used = [c for c in choice if c >= 0]
        if len(used) != len(set(used)) or len(used) > cap:
            continue
        pairs = tuple((i, c) for i, c in enumerate(choice) if c >= 0 and w[i, c] > 0)
        value = float(sum(w[i, c] for i, c in pairs))
        if value > best[0] + 1e-12:
            best = (value, pairs)
    return Assignment(best[1], best[0])


def greedy_assignment(weights: np.ndarray, max_pairs: int | None = None) -> Assignment:
    """The heaviest positive pair whose buyer and product are both free, repeatedly (at most ``max_pairs``): at
    least half the optimum, not exact."""
    w, cap = _check(weights, max_pairs)
    order = np.argsort(-w, axis=None, kind="stable")
    free_m, free_k = np.ones(w.shape[0], bool), np.ones(w.shape[1], bool)
    pairs: list[tuple[int, int]] = []
    for flat in order:
        if len(pairs) >= cap:
            break
        m, k = divmod(int(flat), w.shape[1])
        if w[m, k] <= 0:
            break
        if free_m[m] and free_k[k]:
            pairs.append((m, k))
            free_m[m] = free_k[k] = False
    return _assignment(w, pairs)
