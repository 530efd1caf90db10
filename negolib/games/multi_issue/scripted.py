"""Scripted negotiators that speak the same prose + JSON protocol as the language models.

The environment cannot tell them from a model: each turn is two sentences of prose and one JSON
action, and each agent sees only its own preferences, the counterpart's prose and the ledger.
They are the paper's missing baseline [App. A "No scripted baseline"] and the classic automated
negotiators of the Genius / ANAC tradition:

* :class:`FixedOfferAgent`: names one contract every turn (its best, or a set utility) and accepts
  only a ledger at least that good;
* :class:`TimeDependentAgent`: Faratin et al. (1998) concession in utility space,
  u(t) = Pmax - (Pmax - Pmin) (k + (1 - k) t^(1/e)); Boulware e < 1, linear e = 1, Conceder
  e > 1, Hardliner e = 0; acceptance AC_next (accept when the ledger is worth at least the next bid);
* :class:`TitForTatAgent`: relative tit-for-tat, mirroring the counterpart's concession measured in
  its own utility;
* :class:`HardHeadedAgent`: Boulware concession plus a frequency opponent model; among bids near
  its target it proposes the one best for the modelled opponent (integrative logrolling).

Every agent is deterministic given its seed and the episode (prose variety comes from a PRNG seeded
by (agent seed, scenario seed, turn)). No agent accepts a ledger below its reservation value.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from negolib.agents.base import Agent, AgentReply
from negolib.games.multi_issue.domains import Domain, Issue
from negolib.games.multi_issue.env import HistoryEntry, PartyView
from negolib.games.multi_issue.scenarios import PartyPrefs, other
from negolib.games.multi_issue.utility import best_contract, normalized_utility

_OPEN = ("Thanks for making time for this. ", "Good to meet you. ", "I'm glad we can talk this through. ")
_COUNTER = ("I've looked at where we stand. ", "Thanks, that helps. ", "Let me come back with a proposal. ",
            "I hear you on that. ")
_ACCEPT = ("That works for me, let's close on the current terms. ",
           "I can live with this, so I'll accept the offer as it stands. ",
           "We have a deal on the terms as they stand. ")


def _fmt_value(issue: Issue, value: Any) -> str:
    if issue.kind == "continuous":
        return f"{value:g} {issue.unit}".strip()
    if issue.kind == "binary":
        return "yes" if value else "no"
    return str(value)


def _weight_order(prefs: PartyPrefs) -> list[int]:
    """Issue indices, least important to the party first."""
    return sorted(range(len(prefs.weights)), key=prefs.weights.__getitem__)


def concede(domain: Domain, prefs: PartyPrefs, target: float, order: Sequence[int] | None = None,
            concede_to: Mapping[int, Any] | None = None) -> tuple[dict[str, Any], float]:
    """A contract naming every term with own U~ at ``target`` (or just above), and that U~.

    Start from the party's best contract and give up utility term by term in ``order`` (default:
    least important first). A continuous term concedes partially; an integrative term concedes
    all-or-nothing, to the level in ``concede_to`` (default: the first non-preferred level).
    Because U~ splits exactly by term, the bid's utility is 1 minus what was given up.
    """
    target = min(1.0, max(0.0, target))
    if prefs.evaluations:
        return _concede_imported(domain, prefs, target, order)
    give = 1.0 - target
    issues, weights = domain.issues, prefs.weights
    values: list[Any] = [None] * len(issues)
    given = 0.0
    for k in (order if order is not None else _weight_order(prefs)):
        issue, w = issues[k], weights[k]
        if issue.kind == "continuous":
            c = give if give < w else w
            frac = 1.0 - c / w if w > 0 else 1.0  # share of the way from worst to best
            span = issue.hi - issue.lo
            x = issue.lo + frac * span if prefs.signs[k] > 0 else issue.hi - frac * span
            xr = round(x, 2)
            values[k] = xr
            given += w * (1.0 - (xr - issue.lo) / span if prefs.signs[k] > 0 else (xr - issue.lo) / span)
            give -= c
        else:
            pref = prefs.preferred[k]
            if give >= w and w > 0:
                alt = concede_to.get(k) if concede_to else None
                if alt is None or alt == pref:
                    alt = issue.levels[1] if issue.levels[0] == pref else issue.levels[0]
                values[k] = alt
                given += w
                give -= w
            else:
                values[k] = pref
    return dict(zip(domain.issue_names, values)), min(1.0, max(0.0, 1.0 - given))


def _concede_imported(domain: Domain, prefs: PartyPrefs, target: float,
                      order: Sequence[int] | None) -> tuple[dict[str, Any], float]:
    """:func:`concede` on an imported scenario: from the best contract, each term in ``order`` gives up
    as much as the remaining allowance takes (a table term: its level losing the most within it; a
    continuous term: partially along its linear evaluation)."""
    bid = best_contract(domain, prefs)
    give = normalized_utility(domain, prefs, bid) - target
    for k in (order if order is not None else _weight_order(prefs)):
        issue, w, ev = domain.issues[k], prefs.weights[k], prefs.evaluations[k]
        if give <= 0 or w <= 0:
            break
        top = max(ev)
        if issue.kind == "continuous":
            c = min(give, w * (top - min(ev)))
            frac = c / (w * (top - min(ev))) if top > min(ev) else 0.0
            best_x = issue.hi if ev[1] >= ev[0] else issue.lo
            bid[issue.name] = round(best_x + frac * ((issue.lo + issue.hi) - 2 * best_x), 2)
        else:
            ok = [j for j in range(len(ev)) if w * (top - ev[j]) <= give + 1e-12]
            j = max(ok, key=lambda j: w * (top - ev[j]))
            c = w * (top - ev[j])
            bid[issue.name] = issue.levels[j]
        give -= c
    return bid, normalized_utility(domain, prefs, bid)


def concession_bid(domain: Domain, prefs: PartyPrefs, target: float,
                   order: Sequence[int] | None = None,
                   concede_to: Mapping[int, Any] | None = None) -> dict[str, Any]:
    """The contract of :func:`concede` without its utility."""
    return concede(domain, prefs, target, order, concede_to)[0]


_ACCEPT_JSON = json.dumps({"action": "ACCEPT"})
_ENCODE = json.JSONEncoder().encode


def _mix(*xs: int) -> int:
    """A deterministic 32-bit hash of integers (prose variety without a PRNG object per turn)."""
    h = 2166136261
    for x in xs:
        h = ((h ^ (x & 0xFFFFFFFF)) * 16777619) & 0xFFFFFFFF
        h ^= h >> 15
    return h


def offer_to_answer(view: PartyView) -> HistoryEntry | None:
    """The counterpart's last turn when it made an offer this party may answer (it parsed as an action), else None:
    a turn that did not parse leaves the ledger holding this party's own last offer."""
    last = view.history[-1] if view.history else None
    return last if last is not None and last.role != view.role and last.offered else None


class ScriptedAgent(Agent):
    """Base class: subclasses choose a target and a bid; this class speaks and accepts."""

    backend = "scripted"

    max_terms: int | None = None
    """Name at most this many terms per counter: those that differ from the ledger, heaviest (for
    this party) first. ``None`` names every term. The ledger persists, so a compact counter is the
    same offer in fewer tokens (used for the format warm-up's demonstrations)."""

    def __init__(self, name: str, seed: int = 0) -> None:
        self.name, self.seed = name, seed

    # -- strategy hooks -------------------------------------------------------------------------
    def target(self, view: PartyView) -> float:
        """Own U~ the agent aims for at this turn."""
        raise NotImplementedError

    def bid(self, view: PartyView, target: float) -> tuple[dict[str, Any], float]:
        """The contract proposed at ``target`` and its own U~."""
        return concede(view.domain, view.prefs, target)

    # -- shared machinery -----------------------------------------------------------------------
    def utility(self, view: PartyView, ledger: Mapping[str, Any]) -> float:
        return normalized_utility(view.domain, view.prefs, ledger)

    def accepts(self, view: PartyView, next_bid_utility: float) -> bool:
        """AC_next with a reservation floor, applied only to an offer the counterpart just made.

        A counterpart turn that did not parse makes no offer (the ledger still holds this party's
        own last offer), so it is answered with a counter, never an accept **(ours)**.
        """
        if offer_to_answer(view) is None:
            return False
        u = self.utility(view, view.ledger)
        return u >= view.prefs.reservation and u >= next_bid_utility

    def act_batch(self, views: Sequence[PartyView]) -> list[AgentReply]:
        return [AgentReply(self._turn(v)) for v in views]

    def _turn(self, view: PartyView) -> str:
        pick = _mix(self.seed, view.seed, view.turn)
        t = self.target(view)
        bid, bid_u = self.bid(view, t)
        if self.accepts(view, bid_u):
            return _ACCEPT[pick % len(_ACCEPT)] + "\n" + _ACCEPT_JSON
        openers = _OPEN if len(view.history) < 2 else _COUNTER
        opener = openers[pick % len(openers)]
        ledger, weights = view.ledger, view.prefs.weights
        ranked = [(-weights[k], k) for k, i in enumerate(view.domain.issues) if ledger.get(i.name) != bid[i.name]]
        ranked = ranked or [(-w, k) for k, w in enumerate(weights)]
        heaviest = [k for _, k in sorted(ranked)]
        shown = [view.domain.issues[k] for k in heaviest[:2]]  # the two heaviest terms that moved
        detail = " and ".join(f"{i.name.replace('_', ' ')} at {_fmt_value(i, bid[i.name])}" for i in shown)
        prose = f"{opener}I can offer {detail}, with the other terms as listed."
        named = bid
        if self.max_terms is not None:
            moved = [view.domain.issues[k].name for k in heaviest[: self.max_terms]]
            named = {k: bid[k] for k in moved}
        action = {"action": "COUNTER", "terms": [{"name": k, "value": v} for k, v in named.items()]}
        return prose + "\n" + _ENCODE(action)

    def settings(self) -> dict[str, Any]:
        return {"backend": self.backend, "name": self.name, "strategy": type(self).__name__, "seed": self.seed,
                "max_terms": self.max_terms}


class FixedOfferAgent(ScriptedAgent):
    """Names one contract every turn and waits: its best (``offer_utility=1``) or a set utility."""

    def __init__(self, name: str = "fixed_offer", seed: int = 0, offer_utility: float = 1.0) -> None:
        super().__init__(name, seed)
        _require_params(FixedOfferAgent, offer_utility=offer_utility)
        self.offer_utility = offer_utility

    def target(self, view: PartyView) -> float:
        return max(self.offer_utility, view.prefs.reservation)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "offer_utility": self.offer_utility}


class TimeDependentAgent(ScriptedAgent):
    """Faratin et al. (1998) time-dependent concession: Boulware, linear, Conceder or Hardliner."""

    def __init__(self, name: str, seed: int = 0, e: float = 1.0, k: float = 0.0,
                 p_max: float = 1.0, p_min: float = 0.0) -> None:
        super().__init__(name, seed)
        _require_params(TimeDependentAgent, e=e, k=k, p_max=p_max, p_min=p_min)
        self.e, self.k, self.p_max, self.p_min = e, k, p_max, p_min

    def concession(self, t: float) -> float:
        """f(t) = k + (1 - k) t^(1/e) in [0, 1]; e = 0 (Hardliner) never concedes."""
        if self.e == 0:
            return self.k
        return self.k + (1 - self.k) * min(1.0, max(0.0, t)) ** (1.0 / self.e)

    def target(self, view: PartyView) -> float:
        t = (view.turn - 1) / max(1, view.config.max_turns - 1)
        lo = max(self.p_min, view.prefs.reservation)
        return self.p_max - (self.p_max - lo) * self.concession(t)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "e": self.e, "k": self.k, "p_max": self.p_max, "p_min": self.p_min}


class TitForTatAgent(ScriptedAgent):
    """Relative tit-for-tat: concede, in own utility, what the counterpart last conceded."""

    def __init__(self, name: str = "tit_for_tat", seed: int = 0, min_concession: float = 0.01) -> None:
        super().__init__(name, seed)
        _require_params(TitForTatAgent, min_concession=min_concession)
        self.min_concession = min_concession

    def target(self, view: PartyView) -> float:
        mine = [h for h in view.history if h.role == view.role]
        theirs = [h for h in view.history if h.role != view.role]
        if not mine:
            return 1.0
        last = self.utility(view, mine[-1].ledger)
        gain = 0.0
        if len(theirs) >= 2:
            gain = self.utility(view, theirs[-1].ledger) - self.utility(view, theirs[-2].ledger)
        target = last - max(self.min_concession, gain)
        return max(view.prefs.reservation, target)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "min_concession": self.min_concession}


class HardHeadedAgent(TimeDependentAgent):
    """Boulware concession with a frequency opponent model (after HardHeaded, ANAC 2011).

    The model counts how often the counterpart's ledger holds each level (its preferred level
    estimate) and how rarely it changes each issue (its weight estimate). Among candidate bids at
    or just above the target, the agent proposes the one the model rates best for the opponent,
    conceding first on issues that are cheap for itself and valuable to the opponent.
    """

    def __init__(self, name: str = "hardheaded", seed: int = 0, e: float = 0.2, p_min: float = 0.0,
                 window: float = 0.05) -> None:
        super().__init__(name, seed, e=e, p_min=p_min)
        _require_params(HardHeadedAgent, window=window)
        self.window = window

    def opponent_model(self, view: PartyView) -> tuple[list[float], dict[int, Any]]:
        """Estimated opponent weights (domain order, sum 1) and preferred integrative levels."""
        issues = view.domain.issues
        theirs = [h.ledger for h in view.history if h.role == other(view.role)]
        weights = [1.0] * len(issues)
        counts: list[dict[Any, int]] = [{} for _ in issues]
        prev: Mapping[str, Any] | None = None
        for led in theirs:
            for k, issue in enumerate(issues):
                if issue.name in led:
                    counts[k][led[issue.name]] = counts[k].get(led[issue.name], 0) + 1
                    if prev is not None and prev.get(issue.name) == led[issue.name]:
                        weights[k] += 0.2  # unchanged issues are likely important to them
            prev = led
        total = sum(weights)
        preferred = {k: max(c, key=c.get) for k, c in enumerate(counts) if c and issues[k].kind != "continuous"}
        return [w / total for w in weights], preferred

    def _opp_value(self, domain: Domain, weights: list[float], preferred: dict[int, Any],
                   bid: Mapping[str, Any], opp_signs: Sequence[int]) -> float:
        v = 0.0
        for k, issue in enumerate(domain.issues):
            x = bid[issue.name]
            if issue.kind == "continuous":
                phi = opp_signs[k] * (2 * (x - issue.lo) / (issue.hi - issue.lo) - 1)
            else:
                phi = 1.0 if preferred.get(k) == x else (0.0 if k not in preferred else -1.0)
            v += weights[k] * (phi + 1) / 2
        return v

    def bid(self, view: PartyView, target: float) -> tuple[dict[str, Any], float]:
        d, p = view.domain, view.prefs
        weights, preferred = self.opponent_model(view)
        opp_signs = [-s for s in p.signs]  # continuous directions are opposed by role [paper §3]
        n = len(d.issues)
        orders = [
            sorted(range(n), key=lambda k: p.weights[k]),
            sorted(range(n), key=lambda k: p.weights[k] / (weights[k] + 1e-9)),
            sorted(range(n), key=lambda k: (d.issues[k].kind == "continuous", p.weights[k])),
        ]
        best, best_v = None, -1.0
        for tgt in (target, min(1.0, target + self.window / 2), min(1.0, target + self.window)):
            for order in orders:
                cand, u = concede(d, p, tgt, order, preferred)
                if u + 1e-9 < target:
                    continue
                v = self._opp_value(d, weights, preferred, cand, opp_signs)
                if v > best_v:
                    best, best_v = (cand, u), v
        return best if best is not None else concede(d, p, target)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "window": self.window}


STRATEGIES = {
    "fixed_offer": lambda name, seed, **kw: FixedOfferAgent(name, seed, **kw),
    "boulware": lambda name, seed, **kw: TimeDependentAgent(name, seed, **{"e": 0.2, **kw}),
    "linear": lambda name, seed, **kw: TimeDependentAgent(name, seed, **{"e": 1.0, **kw}),
    "conceder": lambda name, seed, **kw: TimeDependentAgent(name, seed, **{"e": 2.0, **kw}),
    "hardliner": lambda name, seed, **kw: TimeDependentAgent(name, seed, **{"e": 0.0, **kw}),
    "tit_for_tat": lambda name, seed, **kw: TitForTatAgent(name, seed, **kw),
    "hardheaded": lambda name, seed, **kw: HardHeadedAgent(name, seed, **kw),
}


# -- declared parameters: the one validator of a strategy's params (loader and constructors) ------

@dataclass(frozen=True)
class Bound:
    """A numeric parameter's allowed values: finite, ``lo <= value <= hi``, whole when ``integer``."""

    lo: float
    hi: float = math.inf
    integer: bool = False

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not allowed, or None."""
        kind = "an integer" if self.integer else "a number"
        span = f">= {self.lo:g}" if self.hi == math.inf else f"in [{self.lo:g}, {self.hi:g}]"
        ok = (isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
              and self.lo <= value <= self.hi and (not self.integer or value == int(value)))
        return None if ok else f"must be {kind} {span}, got {value!r}"


_UNIT = Bound(0.0, 1.0)
PARAM_SPECS: dict[type[ScriptedAgent], dict[str, Bound]] = {
    FixedOfferAgent: {"offer_utility": _UNIT},
    TimeDependentAgent: {"e": Bound(0.0), "k": _UNIT, "p_max": _UNIT, "p_min": _UNIT},
    TitForTatAgent: {"min_concession": _UNIT},
    HardHeadedAgent: {"e": Bound(0.0), "p_min": _UNIT, "window": _UNIT},
}
"""The parameters each agent class takes (beyond name and seed) and their ranges; a profile's
``params`` for a scripted arm may name exactly these, plus ``max_terms`` (:data:`COMMON_PARAMS`)."""
COMMON_PARAMS: dict[str, Bound] = {"max_terms": Bound(1, integer=True)}
STRATEGY_CLASSES: dict[str, type[ScriptedAgent]] = {
    "fixed_offer": FixedOfferAgent, "boulware": TimeDependentAgent, "linear": TimeDependentAgent,
    "conceder": TimeDependentAgent, "hardliner": TimeDependentAgent, "tit_for_tat": TitForTatAgent,
    "hardheaded": HardHeadedAgent,
}


def _param_problems(cls: type[ScriptedAgent], params: Mapping[str, Any],
                    extra: Mapping[str, Bound] | None = None) -> list[tuple[str, str]]:
    spec = {**PARAM_SPECS[cls], **(extra or {})}
    out = [(k, f"is not a parameter of {cls.__name__}; allowed: {sorted(spec)}") for k in params if k not in spec]
    out += [(k, why) for k, v in params.items() if k in spec and (why := spec[k].problem(v)) is not None]
    if "p_max" in spec and not out:
        lo, hi = params.get("p_min", 0.0), params.get("p_max", 1.0)
        if lo > hi:
            out.append(("p_min", f"must be <= p_max ({hi}), got {lo}"))
    return out


def strategy_param_problems(strategy: str, params: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(parameter, problem) for each of ``params`` that strategy ``strategy`` does not take or whose
    value is out of range; empty when :func:`make_scripted` will accept them."""
    if strategy not in STRATEGY_CLASSES:
        return [("strategy", f"unknown scripted strategy {strategy!r}; choose from {sorted(STRATEGY_CLASSES)}")]
    return _param_problems(STRATEGY_CLASSES[strategy], params, COMMON_PARAMS)


def check_strategy_params(strategy: str, params: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming the first parameter :func:`strategy_param_problems` rejects."""
    problems = strategy_param_problems(strategy, params)
    if problems:
        key, why = problems[0]
        raise ValueError(f"{why}" if key == "strategy" else f"scripted strategy {strategy!r}: {key} {why}")


def _require_params(cls: type[ScriptedAgent], **values: Any) -> None:
    """A constructor's check of its own arguments against :data:`PARAM_SPECS`."""
    problems = _param_problems(cls, values)
    if problems:
        key, why = problems[0]
        raise ValueError(f"{cls.__name__}: {key} {why}")


def make_scripted(strategy: str, name: str | None = None, seed: int = 0, max_terms: int | None = None,
                  **params: Any) -> ScriptedAgent:
    """Build a scripted agent by strategy name (see :data:`STRATEGIES`); ``max_terms`` makes its
    counters compact (see :attr:`ScriptedAgent.max_terms`). Parameters are checked against
    :data:`PARAM_SPECS` first (:func:`check_strategy_params`)."""
    check_strategy_params(strategy, {**params, **({"max_terms": max_terms} if max_terms is not None else {})})
    agent = STRATEGIES[strategy](name or strategy, seed, **params)
    agent.max_terms = max_terms
    return agent
