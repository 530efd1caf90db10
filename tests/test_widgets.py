"""The widgets of notebook 01 without a browser: the controls-to-terms mapping, the buyer widget's
one control per schema term, its COUNTER and ACCEPT buttons (clicked in Python), the explorer."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from negolib.book.context import open_book
from negolib.book.widgets import BuyerSession, EpisodeExplorer, counter_terms, initial_values, term_step
from negolib.games.multi_issue.domains import get_domain

ipywidgets = pytest.importorskip("ipywidgets")

SMOKE = Path(__file__).resolve().parent.parent / "params" / "smoke.yaml"
CAR = get_domain("car")


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    return open_book(SMOKE, tmp_path_factory.mktemp("widgets") / "o")


def _walk(widget: Any) -> list[Any]:
    """``widget`` and every widget below it."""
    out = [widget]
    for child in getattr(widget, "children", ()):
        out += _walk(child)
    return out


# --- the pure mapping ----------------------------------------------------------------------------

def test_counter_terms_names_exactly_the_included_terms_in_schema_order():
    values = initial_values(CAR, {})
    values.update(price=33.3000000001, service="full", accessories=True)
    terms = counter_terms(CAR, values, ["service", "price", "accessories"])
    assert list(terms) == ["price", "service", "accessories"]  # schema order, nothing else
    assert terms == {"price": 33.3, "service": "full", "accessories": True}
    assert counter_terms(CAR, values, []) == {}


@pytest.mark.parametrize("values, included, match", [
    ({"price": 30.0}, ["prize"], "not terms of the car schema: prize"),
    ({}, ["price"], "no value for price"),
    ({"price": 60.0}, ["price"], "outside its range 28-48"),
    ({"price": float("nan")}, ["price"], "needs a number"),
    ({"price": "30"}, ["price"], "needs a number"),
    ({"service": "monthly"}, ["service"], "not one of its levels"),
    ({"accessories": 1}, ["accessories"], "not one of its levels"),  # 1 is not the level True
])
def test_counter_terms_refuses_what_a_term_cannot_take(values, included, match):
    with pytest.raises(ValueError, match=match):
        counter_terms(CAR, values, included)


def test_initial_values_come_from_the_ledger_else_midpoint_and_preferred_level():
    pref = [None] * 4 + ["Wagon", None, None, None, None, None]
    v = initial_values(CAR, {"price": 99.0, "service": "annual", "trade_in": False}, pref)
    assert v["price"] == 48.0  # clamped to the range
    assert v["warranty_months"] == 12.0 and v["delivery"] == 11.0  # middle of the range
    assert v["service"] == "annual" and v["trade_in"] is False  # from the ledger
    assert v["model"] == "Wagon" and v["interior"] == "Standard"  # preferred level, else the first
    assert v["accessories"] is True  # binary levels are (True, False)


def test_term_step_is_a_round_fraction_of_the_range():
    assert term_step(CAR.issue("price")) == pytest.approx(0.1)
    for issue in CAR.issues:
        if issue.kind == "continuous":
            s = term_step(issue)
            assert (issue.hi - issue.lo) / 200 <= s + 1e-12 <= (issue.hi - issue.lo) / 40


# --- the buyer widget ----------------------------------------------------------------------------

def test_buyer_widget_has_one_control_per_schema_term(book):
    s = BuyerSession(book, "boulware", "car", 5_000_053)
    s.widget()
    c = s.controls
    assert c is not None
    assert list(c.values) == list(c.include) == list(CAR.issue_names)
    for issue in CAR.issues:
        ctl, box = c.values[issue.name], c.include[issue.name]
        assert isinstance(box, ipywidgets.Checkbox) and box.value is False
        assert ctl.description == issue.name
        if issue.kind == "continuous":
            assert isinstance(ctl, ipywidgets.FloatSlider)
            assert (ctl.min, ctl.max) == (issue.lo, issue.hi)
            assert ctl.step == pytest.approx(term_step(issue))
        else:
            assert isinstance(ctl, ipywidgets.Dropdown)
            assert tuple(v for _, v in ctl.options) == tuple(issue.levels)
    # the seller opened: every term its counter named shows the ledger's value
    opened = s.episode.ledger
    assert opened
    for name, value in opened.items():
        assert c.values[name].value == pytest.approx(value) if isinstance(value, float) else \
            c.values[name].value == value
    # no free-text terms anywhere in the widget
    assert not [x for x in _walk(c.box) if isinstance(x, ipywidgets.Textarea) and x is not c.prose]


def test_counter_button_sends_exactly_the_included_terms(book):
    s = BuyerSession(book, "boulware", "car", 5_000_053)
    s.widget()
    c = s.controls
    c.values["service"].value = "full"  # changing a value ticks its box
    assert c.included() == ["service"]
    c.values["price"].value = 30.0
    c.include["price"].value = True
    c.values["model"].value = "Coupe"
    c.include["model"].value = False  # changed, then unticked: not sent
    c.prose.value = "A lower price and the full service plan, please."
    n = len(s.episode.turns)
    c.counter.click()
    mine, answer = s.episode.turns[n], s.episode.turns[n + 1]
    assert mine.role == "buyer" and answer.role == "seller"  # the seller answered
    assert mine.action["action"] == "COUNTER"
    assert {t["name"]: t["value"] for t in mine.action["terms"]} == {"price": 30.0, "service": "full"}
    assert mine.off_schema_terms == [] and mine.invalid_terms == []
    assert mine.prose.startswith("A lower price")
    assert c.included() == [] and c.prose.value == ""  # reset for the next turn
    assert f"turn {len(s.episode.turns) + 1}" in c.status.value


def test_accept_button_closes_after_a_seller_counter(book):
    s = BuyerSession(book, "boulware", "car", 5_000_053)
    s.widget()
    assert s.can_accept and "ACCEPT closes the deal" in s.controls.status.value
    s.controls.accept.click()
    assert s.episode.done and s.episode.outcome.deal
    assert "episode over: deal" in s.controls.status.value
    assert s.controls.counter.disabled and s.controls.accept.disabled


def test_accept_after_a_seller_turn_that_did_not_parse_is_invalid(book, monkeypatch):
    babbler = SimpleNamespace(act=lambda view: SimpleNamespace(text="Let me think about it.", input_tokens=0,
                                                               output_tokens=0, latency_s=0.0))
    monkeypatch.setattr(EpisodeExplorer, "agent", lambda self, name: babbler)
    s = BuyerSession(book, "babbler", "car", 5_000_053)
    s.widget()
    assert not s.can_accept and "invalid action" in s.controls.status.value
    s.controls.accept.click()
    assert not s.episode.done and s.episode.turns[1].invalid_accept
    assert "invalid action" in s.controls.status.value


# --- the explorer --------------------------------------------------------------------------------

def test_explorer_widget_builds_plays_and_steps(book):
    ex = EpisodeExplorer(book)
    seller, buyer = ex.demo_parties()
    box = ex.widget(seller=seller, buyer=buyer)
    parts = _walk(box)
    play = next(x for x in parts if isinstance(x, ipywidgets.Button) and x.description == "play episode")
    step = next(x for x in parts if isinstance(x, ipywidgets.IntSlider))
    assert step.max > 1 and step.value == step.max  # it played on building
    play.click()
    step.value = 1
    assert step.value == 1


def test_transcript_lines_show_the_buyers_terms_but_not_the_sellers_json(book):
    from negolib.book.widgets import _action_text

    s = BuyerSession(book, "boulware", "car", 5_000_053)
    s.buyer_turn("A lower price.", {"price": 30.0})
    seller_open, mine = s.episode.turns[0], s.episode.turns[1]
    assert _action_text(seller_open, show_terms=False) == "COUNTER"
    assert _action_text(mine) == "COUNTER price=30.0"
