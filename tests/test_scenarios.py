"""Scenarios are pure functions of (domain, seed); seed blocks are disjoint."""

from __future__ import annotations

import numpy as np
import pytest

from negolib.games.multi_issue.domains import get_domain
from negolib.games.multi_issue.scenarios import (
    EVAL_SEED_START,
    TRAIN_SEED_BLOCK,
    VALIDATION_SEED_BLOCK,
    eval_seeds,
    evaluation_set,
    make_scenario,
    train_seeds,
    validation_seeds,
)


def test_scenario_is_deterministic_and_seed_sensitive():
    car = get_domain("car")
    a, b, c = make_scenario(car, 7), make_scenario(car, 7), make_scenario(car, 8)
    assert a == b and a.seller != c.seller
    assert make_scenario(get_domain("job_offer"), 7).seller.weights != a.seller.weights


def test_parties_are_drawn_independently_with_opposed_directions():
    s = make_scenario(get_domain("car"), 3)
    assert s.seller.weights != s.buyer.weights
    assert np.isclose(sum(s.seller.weights), 1) and np.isclose(sum(s.buyer.weights), 1)
    for k, issue in enumerate(s.domain.issues):
        if issue.kind == "continuous":
            assert s.seller.signs[k] == issue.seller_sign == -s.buyer.signs[k]
            assert s.seller.preferred[k] is None
        else:
            assert s.seller.signs[k] == 0 and s.seller.preferred[k] in issue.levels
    assert 0.2 <= s.seller.reservation <= 0.4 and 0.2 <= s.buyer.reservation <= 0.4


def test_dirichlet_weights_are_sparse_like_alpha_0_3():
    d = get_domain("car")
    maxima = [max(make_scenario(d, s).seller.weights) for s in range(400)]
    # Dirichlet(0.3) over 10 terms concentrates mass: the largest weight averages well above 1/10.
    assert 0.35 < np.mean(maxima) < 0.75


def test_evaluation_set_is_64_seeds_by_9_domains_in_the_reserved_block():
    sc = evaluation_set()
    assert len(sc) == 576 and len({s.key for s in sc}) == 576
    assert sum(s.domain.held_out for s in sc) == 64
    assert all(s.seed >= EVAL_SEED_START for s in sc) and 5_000_053 in eval_seeds()
    assert EVAL_SEED_START >= 1000 * max(TRAIN_SEED_BLOCK)
    assert set(train_seeds(100)).isdisjoint(validation_seeds(100))
    assert max(VALIDATION_SEED_BLOCK) < EVAL_SEED_START


def test_seed_block_errors():
    with pytest.raises(ValueError):
        train_seeds(10, offset=len(TRAIN_SEED_BLOCK))
    with pytest.raises(ValueError):
        eval_seeds(0)
    with pytest.raises(ValueError):
        make_scenario(get_domain("car"), -1)
