"""The episode state machine: turn order, ledger, closing rules, reward (Eq. 1) and the record.

The seller opens by default and the parties alternate; a round is one turn of each, for at most
``max_rounds`` rounds (12 rounds = 24 turns) [paper §3]. ACCEPT closes the episode on the current
ledger; in evaluation terms attached to an accept are ignored, in training they are applied first
(``accept_applies_terms``). Reaching the cap without an accept is a no-deal. A turn that does not
parse still delivers its prose; the ledger is unchanged and the episode goes on.

**Fair ACCEPT (ours)**: an ACCEPT closes only when the counterpart's most recent turn parsed as a
COUNTER, i.e. a party accepts only what the other party put forward. Otherwise (the first turn, or
after a counterpart turn that failed to parse) the ACCEPT is an invalid action: the ledger is
unchanged, the episode goes on, the turn counts as a bad parse of the accepting party (its
``parse_error`` says why) and is flagged ``invalid_accept``. ``EnvConfig(accept_needs_offer=False)`` is the
paper's rule (any ACCEPT closes): a profile chooses with ``evaluation.accept_needs_offer`` (the paper profile plays
the paper's), and the prompt states the rule in force.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from negolib.core.transcripts import SCHEMA_VERSION
from negolib.games.multi_issue.domains import Domain
from negolib.games.multi_issue.protocol import apply_terms, parse_action
from negolib.games.multi_issue.scenarios import PartyPrefs, Role, Scenario, other
from negolib.games.multi_issue.utility import contributions, discounted, normalized_utility


@dataclass(frozen=True)
class EnvConfig:
    """Environment constants; defaults are the paper's (Eq. 1, 12 rounds, seller opens)."""

    max_rounds: int = 12
    first_mover: Role = "seller"
    accept_applies_terms: bool = False
    no_deal_penalty: float = 0.3
    format_penalty: float = 0.05
    length_penalty: float = 0.05
    soft_budget_frac: float = 0.75
    converge_from_turn: int = 16
    accept_needs_offer: bool = True  # ours: ACCEPT closes only on the counterpart's parsed COUNTER

    def __post_init__(self) -> None:
        if self.max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {self.max_rounds}")
        if self.first_mover not in ("seller", "buyer"):
            raise ValueError(f"first_mover must be 'seller' or 'buyer', got {self.first_mover!r}")
        if not 0 < self.soft_budget_frac < 1:
            raise ValueError(f"soft_budget_frac must be in (0, 1), got {self.soft_budget_frac}")

    @property
    def max_turns(self) -> int:
        return 2 * self.max_rounds

    @property
    def soft_budget(self) -> float:
        return self.soft_budget_frac * self.max_rounds

    @classmethod
    def training(cls, **kw: Any) -> EnvConfig:
        """The training configuration: terms attached to an accept are applied before closing."""
        return cls(accept_applies_terms=True, **kw)


INVALID_ACCEPT_ERROR = ("invalid ACCEPT: the counterpart's last turn was not a parsed COUNTER, so there is "
                        "no offer of theirs to accept (ours)")


def reward(score: float, n_bad: int, n_policy: int, n_rounds: int, config: EnvConfig) -> float:
    """Eq. 1: r = S - g_fmt n_bad/n_policy - g_len max(0, n - t_soft) / (T - t_soft)."""
    fmt = n_bad / n_policy if n_policy else 0.0
    over = max(0.0, n_rounds - config.soft_budget) / (config.max_rounds - config.soft_budget)
    return score - config.format_penalty * fmt - config.length_penalty * over


@dataclass(frozen=True)
class HistoryEntry:
    """One past turn as a party sees it: the counterpart's raw text is never included."""

    turn: int
    role: Role
    prose: str
    ledger: Mapping[str, Any]
    raw: str | None = None
    offered: bool = True  # the turn parsed as an action (not an invalid ACCEPT): an offer this party made


@dataclass(frozen=True)
class PartyView:
    """Everything one party may see when it is asked for its next turn."""

    episode_id: str
    role: Role
    domain: Domain
    prefs: PartyPrefs
    seed: int
    turn: int
    history: tuple[HistoryEntry, ...]
    ledger: Mapping[str, Any]
    config: EnvConfig

    @property
    def converge(self) -> bool:
        """True from the turn where the phase instruction says to converge (turn 16)."""
        return self.turn >= self.config.converge_from_turn


@dataclass
class TurnRecord:
    """One turn of the transcript."""

    turn: int
    role: Role
    raw: str
    prose: str
    action: dict[str, Any] | None
    parse_error: str | None
    ledger: dict[str, Any]
    invalid_terms: list[str] = field(default_factory=list)
    off_schema_terms: list[str] = field(default_factory=list)
    invalid_accept: bool = False  # an ACCEPT with no counterpart COUNTER to accept (ours)
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    prompt_capped: bool = False  # the agent's prompt cap bound on this turn (history dropped or prompt cut)
    tags_stripped: int = 0  # template tags the agent stripped from its reply (the template-tag guard's count)


@dataclass
class Outcome:
    """How the episode ended and what each party got."""

    deal: bool
    closed_by: Role | None
    final_ledger: dict[str, Any]
    seller_utility: float
    buyer_utility: float
    seller_terms: list[float]
    buyer_terms: list[float]
    turns: int
    rounds: int
    seller_turns: int
    seller_bad_parses: int
    bad_parses: int
    seller_invalid_accepts: int
    invalid_accepts: int
    accept_with_terms: bool
    score: float
    reward: float


class Episode:
    """One negotiation between a seller and a buyer on a scenario."""

    def __init__(self, scenario: Scenario, config: EnvConfig | None = None, episode_id: str = "") -> None:
        self.scenario = scenario
        self.config = config or EnvConfig()
        self.episode_id = episode_id or f"{scenario.domain.name}:{scenario.seed}"
        self.ledger: dict[str, Any] = {}
        self.turns: list[TurnRecord] = []
        self.outcome: Outcome | None = None
        self._accept_terms = False
        self._history: dict[Role, list[HistoryEntry]] = {"seller": [], "buyer": []}

    @property
    def done(self) -> bool:
        return self.outcome is not None

    @property
    def to_move(self) -> Role:
        """The role whose turn is next."""
        first = self.config.first_mover
        return first if len(self.turns) % 2 == 0 else other(first)

    def view(self, role: Role | None = None) -> PartyView:
        """The view of ``role`` (default: the party to move)."""
        role = role or self.to_move
        s = self.scenario
        ledger = self.turns[-1].ledger if self.turns else {}  # the last snapshot, never mutated
        return PartyView(self.episode_id, role, s.domain, s.prefs(role), s.seed, len(self.turns) + 1,
                         tuple(self._history[role]), ledger, self.config)

    def step(self, text: str, input_tokens: int = 0, output_tokens: int = 0,
             latency_s: float = 0.0, prompt_capped: bool = False, tags_stripped: int = 0) -> TurnRecord:
        """Play the raw ``text`` of the party to move and advance the episode (``prompt_capped``: the
        agent's prompt cap bound on this turn; ``tags_stripped``: template tags the agent stripped from its
        reply; both logged in the record)."""
        if self.done:
            raise RuntimeError(f"episode {self.episode_id} is over")
        role = self.to_move
        parsed = parse_action(text)
        rec = TurnRecord(len(self.turns) + 1, role, text, parsed.prose,
                         parsed.action.to_dict() if parsed.action else None, parsed.error, {},
                         input_tokens=input_tokens, output_tokens=output_tokens, latency_s=latency_s,
                         prompt_capped=bool(prompt_capped), tags_stripped=int(tags_stripped))
        act = parsed.action
        if act is not None and act.kind == "ACCEPT" and not self._can_accept():
            act, rec.action, rec.invalid_accept = None, None, True
            rec.parse_error = INVALID_ACCEPT_ERROR
        if act is not None and (act.kind == "COUNTER" or self.config.accept_applies_terms):
            upd = apply_terms(self.scenario.domain, self.ledger, act.terms)
            rec.invalid_terms, rec.off_schema_terms = upd.invalid, upd.off_schema
        rec.ledger = dict(self.ledger)
        self.turns.append(rec)
        for viewer in ("seller", "buyer"):  # ledger snapshots are shared, never mutated afterwards
            self._history[viewer].append(HistoryEntry(rec.turn, role, rec.prose, rec.ledger,
                                                      text if viewer == role else None, act is not None))
        if act is not None and act.kind == "ACCEPT":
            self._accept_terms = bool(act.terms)
            self._close(True, role)
        elif len(self.turns) >= self.config.max_turns:
            self._close(False, None)
        return rec

    def _can_accept(self) -> bool:
        """Whether an ACCEPT by the party to move closes: the counterpart's last turn is a COUNTER."""
        if not self.config.accept_needs_offer:
            return True
        if not self.turns:
            return False
        last = self.turns[-1]  # parties alternate, so the last turn is the counterpart's
        return last.action is not None and last.action.get("action") == "COUNTER"

    def _close(self, deal: bool, closed_by: Role | None) -> None:
        s, cfg = self.scenario, self.config
        seller_c = contributions(s.domain, s.seller, self.ledger)
        buyer_c = contributions(s.domain, s.buyer, self.ledger)
        su = min(1.0, max(0.0, float(seller_c.sum())))
        bu = min(1.0, max(0.0, float(buyer_c.sum())))
        time = len(self.turns) / cfg.max_turns  # normalised time of a party's discount factor (1 for drawn scenarios)
        su, bu = discounted(su, s.seller.discount, time), discounted(bu, s.buyer.discount, time)
        seller_turns = [t for t in self.turns if t.role == "seller"]
        n_bad_seller = sum(t.action is None for t in seller_turns)
        rounds = math.ceil(len(self.turns) / 2)
        score = su if deal else -cfg.no_deal_penalty
        self.outcome = Outcome(
            deal=deal, closed_by=closed_by, final_ledger=dict(self.ledger),
            seller_utility=su if deal else float("nan"), buyer_utility=bu if deal else float("nan"),
            seller_terms=[float(x) for x in seller_c], buyer_terms=[float(x) for x in buyer_c],
            turns=len(self.turns), rounds=rounds, seller_turns=len(seller_turns),
            seller_bad_parses=n_bad_seller, bad_parses=sum(t.action is None for t in self.turns),
            seller_invalid_accepts=sum(t.invalid_accept for t in seller_turns),
            invalid_accepts=sum(t.invalid_accept for t in self.turns),
            accept_with_terms=deal and self._accept_terms, score=score,
            reward=reward(score, n_bad_seller, len(seller_turns), rounds, cfg),
        )

    def record(self, **key: Any) -> dict[str, Any]:
        """The JSON-ready transcript record of this episode (see :mod:`negolib.core.transcripts`)."""
        out = self.outcome
        status = "running" if out is None else ("deal" if out.deal else "no_deal")
        return {
            "schema": SCHEMA_VERSION, **key, "domain": self.scenario.domain.name,
            "seed": self.scenario.seed, "held_out": self.scenario.domain.held_out,
            "status": status, "config": asdict(self.config),
            "turns": [dict(vars(t)) for t in self.turns],  # shallow: values are JSON-ready snapshots
            "outcome": None if out is None else _jsonable(dict(vars(out))),
        }


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    """NaN (no-deal utilities) becomes None so the record is strict JSON."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}


def opening_score(scenario: Scenario, ledger: Mapping[str, Any]) -> float:
    """The seller's U~ if ``ledger`` were accepted as it stands."""
    return normalized_utility(scenario.domain, scenario.seller, ledger)
