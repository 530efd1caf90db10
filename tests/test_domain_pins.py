"""Our nine domains load and score exactly as before the Genius import extended the utility model.

The pinned values (tests/fixtures/domain_utilities_pinned.json) were computed before that change:
for three seeds of every domain, the drawn weights and reservations, both parties' U~ and the
seller's (distributive, integrative) split of four random ledgers (some terms unnamed, some values
clipped), the seller's best contract and the exact frontier's size and maximum welfare.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from negolib.games.multi_issue.domains import load_domains
from negolib.games.multi_issue.scenarios import make_scenario
from negolib.games.multi_issue.utility import best_contract, both_utilities, split_utility
from negolib.study.efficiency import pareto_frontier

PINNED = json.loads((Path(__file__).parent / "fixtures" / "domain_utilities_pinned.json").read_text())


def test_every_domain_is_pinned() -> None:
    assert {k.split("|")[0] for k in PINNED} == set(load_domains())


@pytest.mark.parametrize("key", sorted(PINNED))
def test_scores_unchanged(key: str) -> None:
    name, seed = key.split("|")
    domain = load_domains()[name]
    sc = make_scenario(domain, int(seed))
    want = PINNED[key]
    assert list(sc.seller.weights) == want["weights_seller"]
    assert [sc.seller.reservation, sc.buyer.reservation] == want["reservations"]
    for ledger, utilities, split in want["ledgers"]:
        assert list(both_utilities(sc, ledger)) == utilities
        assert list(split_utility(domain, sc.seller, ledger)) == split
    assert list(both_utilities(sc, best_contract(domain, sc.seller))) == want["best_seller"]
    f = pareto_frontier(sc)
    assert f.max_welfare == want["max_welfare"]
    assert len(f.points) == want["n_frontier"]
