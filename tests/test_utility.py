"""Utilities: phi, U~ in [0, 1] and its exact per-term split (SPEC 2.1)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from negolib.games.multi_issue.domains import get_domain, load_domains
from negolib.games.multi_issue.scenarios import make_scenario
from negolib.games.multi_issue.utility import (
    best_contract,
    contributions,
    feature,
    normalized_utility,
    raw_utility,
    split_utility,
)

DOMAINS = list(load_domains())


def test_feature_continuous_endpoints_midpoint_and_clipping():
    price = get_domain("car").issue("price")  # range 28..48, seller prefers high
    assert feature(price, 48, 1, None) == 1 and feature(price, 28, 1, None) == -1
    assert feature(price, 38, 1, None) == 0 and feature(price, 48, -1, None) == -1
    assert feature(price, 100, 1, None) == 1 and feature(price, 0, 1, None) == -1


def test_feature_categorical_and_binary():
    car = get_domain("car")
    assert feature(car.issue("model"), "Sedan", 0, "Sedan") == 1
    assert feature(car.issue("model"), "Coupe", 0, "Sedan") == -1
    assert feature(car.issue("accessories"), False, 0, True) == -1


def test_unnamed_terms_count_half_their_weight(car_scenario):
    s = car_scenario
    assert normalized_utility(s.domain, s.seller, {}) == 0.5
    assert raw_utility(s.domain, s.seller, {}) == 0
    # off-schema names are never scored
    assert normalized_utility(s.domain, s.seller, {"delivery_day": 3}) == 0.5


def test_best_and_worst_contracts_hit_0_and_1(car_scenario):
    s = car_scenario
    best = best_contract(s.domain, s.seller)
    assert np.isclose(normalized_utility(s.domain, s.seller, best), 1.0)
    worst = {}
    for k, i in enumerate(s.domain.issues):
        if i.kind == "continuous":
            worst[i.name] = i.lo if s.seller.signs[k] > 0 else i.hi
        else:
            worst[i.name] = next(lv for lv in i.levels if lv != s.seller.preferred[k])
    assert np.isclose(normalized_utility(s.domain, s.seller, worst), 0.0)


@st.composite
def ledgers(draw):
    d = load_domains()[draw(st.sampled_from(DOMAINS))]
    seed = draw(st.integers(0, 10_000))
    ledger = {}
    for issue in d.issues:
        if not draw(st.booleans()):
            continue
        if issue.kind == "continuous":
            ledger[issue.name] = draw(st.floats(issue.lo - 50, issue.hi + 50, allow_nan=False))
        else:
            ledger[issue.name] = draw(st.sampled_from(issue.levels))
    return make_scenario(d, seed), ledger


@settings(max_examples=300, deadline=None)
@given(ledgers())
def test_normalized_utility_in_unit_interval_and_split_is_exact(case):
    s, ledger = case
    for prefs in (s.seller, s.buyer):
        u = normalized_utility(s.domain, prefs, ledger)
        c = contributions(s.domain, prefs, ledger)
        assert 0.0 <= u <= 1.0
        assert np.isclose(c.sum(), u, atol=1e-12)
        assert np.isclose((raw_utility(s.domain, prefs, ledger) + 1) / 2, u, atol=1e-12)
        dist, integ = split_utility(s.domain, prefs, ledger)
        assert np.isclose(dist + integ, u, atol=1e-12)
        assert np.all(c >= -1e-15) and np.all(c <= np.asarray(prefs.weights) + 1e-15)
