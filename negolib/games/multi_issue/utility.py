"""Utilities: the feature map phi, U, the normalized utility U~ and its exact per-term split.

For a party with weights w (summing to 1) and features phi_k in [-1, 1]:

* continuous: phi = sign * (2 (x - lo) / (hi - lo) - 1), x clipped to [lo, hi];
* categorical and binary: +1 at the party's preferred level, -1 at any other;
* a term never named: phi = 0.

U = sum_k w_k phi_k, U_min = -1, U_max = 1, so U~ = (U + 1) / 2 = sum_k w_k (phi_k + 1) / 2: the
normalized utility splits exactly into per-term contributions, which is what the distributive /
integrative decomposition of Table 2 uses.

Imported (Genius) scenarios carry each party's evaluations (``PartyPrefs.evaluations``): a table
issue scores e(level) (the file's evaluation over the issue's largest, as Genius normalises), a
continuous issue e(x) = e(lo) + (e(hi) - e(lo)) (x - lo) / (hi - lo), x clipped; phi = 2 e - 1, so
U~ = sum_k w_k e_k is Genius's utility and still splits exactly by term. **Unnamed terms**: in our
drawn scenarios an unnamed term scores phi = 0 (half its weight); in an imported scenario it scores
the party's *worst* evaluation on the issue, so leaving a term out never pays and the feasible set is
that of complete contracts (Genius bids are complete). A discount factor d applies on normalised
time t in [0, 1] as U~ d^t (:func:`discounted`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from negolib.games.multi_issue.domains import Domain, Issue
from negolib.games.multi_issue.scenarios import PartyPrefs, Scenario

_MISSING = object()


def feature(issue: Issue, value: Any, sign: int, preferred: Any) -> float:
    """phi of one canonical ledger value for one party (see module docstring)."""
    if issue.kind == "continuous":
        x = min(max(float(value), issue.lo), issue.hi)
        return sign * (2.0 * (x - issue.lo) / (issue.hi - issue.lo) - 1.0)
    return 1.0 if value == preferred else -1.0


def evaluation(issue: Issue, evaluations: tuple[float, ...], value: Any) -> float:
    """e in an imported scenario: a table issue's evaluation of ``value``, or a continuous issue's
    linear evaluation at ``value`` (clipped to [lo, hi])."""
    if issue.kind == "continuous":
        x = min(max(float(value), issue.lo), issue.hi)
        return evaluations[0] + (evaluations[1] - evaluations[0]) * (x - issue.lo) / (issue.hi - issue.lo)
    return evaluations[issue.levels.index(value)]


def evaluations(domain: Domain, prefs: PartyPrefs, ledger: Mapping[str, Any]) -> np.ndarray:
    """e per issue of an imported scenario, shape (n_issues,); an unnamed term scores the party's
    worst evaluation."""
    out = np.empty(len(domain.issues))
    for k, (issue, ev) in enumerate(zip(domain.issues, prefs.evaluations)):
        out[k] = evaluation(issue, ev, ledger[issue.name]) if issue.name in ledger else min(ev)
    return out


def features(domain: Domain, prefs: PartyPrefs, ledger: Mapping[str, Any]) -> np.ndarray:
    """phi for every schema term, shape (n_issues,); unnamed terms (and off-schema names) give 0
    (an imported scenario's unnamed terms: the party's worst evaluation)."""
    if prefs.evaluations:
        return 2.0 * evaluations(domain, prefs, ledger) - 1.0
    out = np.zeros(len(domain.issues))
    for k, issue in enumerate(domain.issues):
        if issue.name in ledger:
            out[k] = feature(issue, ledger[issue.name], prefs.signs[k], prefs.preferred[k])
    return out


def contributions(domain: Domain, prefs: PartyPrefs, ledger: Mapping[str, Any]) -> np.ndarray:
    """Per-term contributions w_k (phi_k + 1) / 2, shape (n_issues,); they sum to U~ exactly."""
    if prefs.evaluations:
        return np.asarray(prefs.weights) * evaluations(domain, prefs, ledger)
    return np.asarray(prefs.weights) * (features(domain, prefs, ledger) + 1.0) / 2.0


def raw_utility(domain: Domain, prefs: PartyPrefs, ledger: Mapping[str, Any]) -> float:
    """U = sum_k w_k phi_k in [-1, 1]."""
    return float(np.dot(prefs.weights, features(domain, prefs, ledger)))


def normalized_utility(domain: Domain, prefs: PartyPrefs, ledger: Mapping[str, Any]) -> float:
    """U~ in [0, 1]: 0 at the party's worst feasible contract, 1 at its best (an imported
    scenario: Genius's utility sum_k w_k e_k, 1 at the best contract)."""
    if prefs.evaluations:
        total = sum(w * e for w, e in zip(prefs.weights, evaluations(domain, prefs, ledger)))
        return min(1.0, max(0.0, float(total)))
    total = 0.0
    for issue, w, sign, pref in zip(domain.issues, prefs.weights, prefs.signs, prefs.preferred):
        value = ledger.get(issue.name, _MISSING)
        if value is _MISSING:
            total += w
        elif issue.kind == "continuous":
            x = min(max(float(value), issue.lo), issue.hi)
            total += w * (sign * (2.0 * (x - issue.lo) / (issue.hi - issue.lo) - 1.0) + 1.0)
        elif value == pref:
            total += 2.0 * w
    return min(1.0, max(0.0, total / 2.0))


def split_utility(domain: Domain, prefs: PartyPrefs, ledger: Mapping[str, Any]) -> tuple[float, float]:
    """(distributive, integrative) parts of U~; they sum to U~ (unnamed terms count in their class)."""
    c = contributions(domain, prefs, ledger)
    mask = np.array([i.distributive for i in domain.issues])
    return float(c[mask].sum()), float(c[~mask].sum())


def best_contract(domain: Domain, prefs: PartyPrefs) -> dict[str, Any]:
    """The party's ideal contract (U~ = 1), naming every term."""
    out: dict[str, Any] = {}
    for k, issue in enumerate(domain.issues):
        if prefs.evaluations:
            ev = prefs.evaluations[k]
            if issue.kind == "continuous":
                out[issue.name] = issue.hi if ev[1] >= ev[0] else issue.lo
            else:
                out[issue.name] = issue.levels[int(np.argmax(ev))]
        elif issue.kind == "continuous":
            out[issue.name] = issue.hi if prefs.signs[k] > 0 else issue.lo
        else:
            out[issue.name] = prefs.preferred[k]
    return out


def discounted(utility: float, discount: float, time: float) -> float:
    """Genius's time discount: ``utility * discount ** time`` for normalised time in [0, 1] (d = 1: none)."""
    return utility if discount == 1.0 else utility * discount ** min(1.0, max(0.0, time))


def both_utilities(scenario: Scenario, ledger: Mapping[str, Any]) -> tuple[float, float]:
    """(seller U~, buyer U~) of a ledger."""
    d = scenario.domain
    return normalized_utility(d, scenario.seller, ledger), normalized_utility(d, scenario.buyer, ledger)
