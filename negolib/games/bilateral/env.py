"""The episode of bilateral price bargaining: turn order, standing offers, closing rules and the record.

Contract: :class:`Episode` alternates the parties (``first_mover`` opens) for at most ``deadline_turns`` turns;
:meth:`Episode.step` plays one turn (text or :class:`~.protocol.StructuredTurn`). ``make_offer`` replaces the
mover's standing offer; ``accept_offer`` closes a deal at the counterpart's standing offer (with none standing it
is an invalid accept: counted as a bad parse, a no-op); ``walk_away`` ends with no deal, and so does the deadline.
A bad parse or a prose-only turn leaves the offers as they stand. :meth:`Episode.view` is what a party may see.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from negolib.games.bilateral.protocol import StructuredTurn, parse_turn, raw_calls
from negolib.games.bilateral.scenarios import BilateralScenario
from negolib.games.bilateral.tools import ACCEPT_OFFER, MAKE_OFFER, WALK_AWAY

Role = Literal["seller", "buyer"]
End = Literal["accept", "walk_away", "deadline"]
INVALID_ACCEPT_ERROR = "invalid accept_offer: the counterpart has no standing offer to accept"


def other(role: Role) -> Role:
    """The counterpart's role."""
    return "buyer" if role == "seller" else "seller"


@dataclass(frozen=True)
class BilateralConfig:
    """The rules' constants: the deadline in turns (both parties together) and who opens."""

    deadline_turns: int = 10
    first_mover: Role = "seller"

    def __post_init__(self) -> None:
        if type(self.deadline_turns) is not int or self.deadline_turns < 1:
            raise ValueError(f"deadline_turns must be an integer >= 1, got {self.deadline_turns!r}")
        if self.first_mover not in ("seller", "buyer"):
            raise ValueError(f"first_mover must be 'seller' or 'buyer', got {self.first_mover!r}")

    def mover(self, turn: int) -> Role:
        """The role that plays turn ``turn`` (1-based)."""
        return self.first_mover if turn % 2 == 1 else other(self.first_mover)

    def turns_of(self, role: Role) -> int:
        """How many turns ``role`` gets before the deadline."""
        first = (self.deadline_turns + 1) // 2
        return first if role == self.first_mover else self.deadline_turns - first


@dataclass(frozen=True)
class HistoryEntry:
    """One past turn as a party sees it: the message, the valid call (None: no call or a bad parse) and, for the
    viewer's own turns only, why a call failed."""

    turn: int
    role: Role
    message: str
    action: dict[str, Any] | None
    parse_error: str | None = None
    invalid_accept: bool = False

    @property
    def offer(self) -> float | None:
        """The price offered on this turn, if it was a ``make_offer``."""
        if self.action is not None and self.action["name"] == MAKE_OFFER:
            return float(self.action["arguments"]["price"])
        return None


@dataclass(frozen=True)
class BargainView:
    """Everything one party may see when asked for its next turn."""

    episode_id: str
    role: Role
    reservation: float  # the seller's cost or the buyer's value: private
    tier: str
    scale: float
    seed: int
    turn: int  # the turn about to be played, 1-based
    deadline: int
    history: tuple[HistoryEntry, ...]
    own_offer: float | None
    their_offer: float | None
    config: BilateralConfig

    @property
    def counterpart(self) -> Role:
        return other(self.role)

    @property
    def reservation_name(self) -> str:
        return "cost" if self.role == "seller" else "value"

    @property
    def turns_left(self) -> int:
        """Turns left before the deadline, this one included (both parties together)."""
        return self.deadline - self.turn + 1

    @property
    def own_turns_left(self) -> int:
        """This party's turns left, this one included."""
        return sum(self.config.mover(t) == self.role for t in range(self.turn, self.deadline + 1))

    @property
    def own_turn_index(self) -> int:
        """This party's turn number, 0-based (0 on its first turn)."""
        return sum(self.config.mover(t) == self.role for t in range(1, self.turn))


@dataclass
class TurnRecord:
    """One turn of the transcript, with the standing offers after it."""

    turn: int
    role: Role
    raw: str
    raw_tool_calls: list[Any] | None
    message: str
    action: dict[str, Any] | None
    parse_error: str | None
    invalid_accept: bool = False
    seller_offer: float | None = None
    buyer_offer: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0


@dataclass
class Outcome:
    """How the episode ended. ``price`` is None without a deal; bad parses include invalid accepts."""

    deal: bool
    price: float | None
    closed_by: Role | None
    end: End
    walked_away_by: Role | None
    turns: int
    seller_turns: int
    buyer_turns: int
    seller_bad_parses: int
    buyer_bad_parses: int
    seller_invalid_accepts: int
    buyer_invalid_accepts: int
    seller_prose_only: int
    buyer_prose_only: int
    seller_offer: float | None
    buyer_offer: float | None


class Episode:
    """One negotiation between a seller and a buyer over one item."""

    def __init__(self, scenario: BilateralScenario, config: BilateralConfig | None = None,
                 episode_id: str = "") -> None:
        self.scenario = scenario
        self.config = config or BilateralConfig()
        self.episode_id = episode_id or scenario.key
        self.turns: list[TurnRecord] = []
        self.standing: dict[Role, float | None] = {"seller": None, "buyer": None}
        self.outcome: Outcome | None = None
        self._history: dict[Role, list[HistoryEntry]] = {"seller": [], "buyer": []}

    @property
    def done(self) -> bool:
        return self.outcome is not None

    @property
    def to_move(self) -> Role:
        return self.config.mover(len(self.turns) + 1)

    def view(self, role: Role | None = None) -> BargainView:
        """The view of ``role`` (default: the party to move)."""
        role = role or self.to_move
        s = self.scenario
        return BargainView(self.episode_id, role, s.reservation(role), s.tier, s.scale, s.seed,
                           len(self.turns) + 1, self.config.deadline_turns, tuple(self._history[role]),
                           self.standing[role], self.standing[other(role)], self.config)

    def step(self, turn: str | StructuredTurn, input_tokens: int = 0, output_tokens: int = 0,
             latency_s: float = 0.0) -> TurnRecord:
        """Play the party to move's turn and advance the episode; ``RuntimeError`` once it is over."""
        if self.done:
            raise RuntimeError(f"episode {self.episode_id} is over")
        role = self.to_move
        parsed = parse_turn(turn)
        action, error, invalid = parsed.action, parsed.error, False
        if action is not None and action.tool == ACCEPT_OFFER and self.standing[other(role)] is None:
            action, error, invalid = None, INVALID_ACCEPT_ERROR, True
        if action is not None and action.tool == MAKE_OFFER:
            self.standing[role] = action.price
        raw = turn.message if isinstance(turn, StructuredTurn) else turn
        rec = TurnRecord(len(self.turns) + 1, role, raw if isinstance(raw, str) else "", raw_calls(turn),
                         parsed.message, action.to_dict() if action else None, error, invalid,
                         self.standing["seller"], self.standing["buyer"], input_tokens, output_tokens, latency_s)
        self.turns.append(rec)
        for viewer in ("seller", "buyer"):
            mine = viewer == role
            self._history[viewer].append(HistoryEntry(rec.turn, role, rec.message, rec.action,
                                                      error if mine else None, invalid and mine))
        if action is not None and action.tool == ACCEPT_OFFER:
            self._close(self.standing[other(role)], role, "accept")
        elif action is not None and action.tool == WALK_AWAY:
            self._close(None, None, "walk_away", walked_away_by=role)
        elif len(self.turns) >= self.config.deadline_turns:
            self._close(None, None, "deadline")
        return rec

    def _close(self, price: float | None, closed_by: Role | None, end: End,
               walked_away_by: Role | None = None) -> None:
        def count(role: Role, what: str) -> int:
            turns = [t for t in self.turns if t.role == role]
            if what == "turns":
                return len(turns)
            if what == "bad":
                return sum(t.parse_error is not None for t in turns)
            if what == "invalid":
                return sum(t.invalid_accept for t in turns)
            return sum(t.action is None and t.parse_error is None for t in turns)  # prose only

        self.outcome = Outcome(
            deal=price is not None, price=price, closed_by=closed_by, end=end, walked_away_by=walked_away_by,
            turns=len(self.turns), seller_turns=count("seller", "turns"), buyer_turns=count("buyer", "turns"),
            seller_bad_parses=count("seller", "bad"), buyer_bad_parses=count("buyer", "bad"),
            seller_invalid_accepts=count("seller", "invalid"), buyer_invalid_accepts=count("buyer", "invalid"),
            seller_prose_only=count("seller", "prose"), buyer_prose_only=count("buyer", "prose"),
            seller_offer=self.standing["seller"], buyer_offer=self.standing["buyer"],
        )

    def where(self) -> str:
        """Where the episode stands, for error texts: ``tier|seed turn N (role)``."""
        return f"{self.scenario.key} turn {len(self.turns) + 1} ({self.to_move})"

    def record(self, **extra: Any) -> dict[str, Any]:
        """The JSON-ready record: scenario, status (``running``, ``deal``, ``no_deal``), config, turns, outcome."""
        s, out = self.scenario, self.outcome
        status = "running" if out is None else ("deal" if out.deal else "no_deal")
        return {"game": "bilateral", "scenario_key": s.key, "tier": s.tier, "seed": s.seed, "scale": s.scale,
                "cost": s.cost, "value": s.value, **extra, "status": status, "config": asdict(self.config),
                "turns": [asdict(t) for t in self.turns], "outcome": None if out is None else asdict(out)}
