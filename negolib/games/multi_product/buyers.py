"""Scripted buyers of the multi-product market: one agent answering ACCEPT/DECLINE for every buyer of a market.

Contract: a :class:`BuyerRule` accepts this turn's offer iff its surplus ``value - price`` is at least ``min_share``
times the value (so never a price above the valuation) and at least the surplus of every other offer standing
for it (its best option among the offers it holds; ties accept). ``pool`` is the rule with ``min_share`` 0,
``picky`` wants a tenth of the value left (a held-out buyer). :class:`ScriptedBuyers` answers a batch of
:class:`~.env.BuyerView` in the protocol's text (``ACCEPT``/``DECLINE`` then a short message).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from negolib.agents.base import Agent, AgentReply
from negolib.games.multi_product.env import BuyerView
from negolib.games.multi_product.protocol import format_answer


@dataclass(frozen=True)
class BuyerRule:
    """Accept iff the surplus is at least ``min_share`` of the value and no standing offer gives more."""

    name: str
    min_share: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_share < 1.0:
            raise ValueError(f"min_share must be in [0, 1), got {self.min_share!r}")

    def accepts(self, view: BuyerView) -> bool:
        o = view.offer
        value = view.valuations[o.product]
        surplus = value - o.price
        if surplus < 0 or surplus < self.min_share * value:
            return False
        others = (view.valuations[k] - p for k, p in view.standing.items() if k != o.product)
        return all(surplus >= s for s in others)


RULES: dict[str, BuyerRule] = {r.name: r for r in (BuyerRule("pool"), BuyerRule("picky", 0.1))}
"""Buyer name -> rule: ``pool`` (the training buyers) and ``picky`` (held out)."""

_TEXT = {True: ("Deal, thank you.", "I'll take it.", "Yes, that works for me."),
         False: ("No, thank you.", "That doesn't work for me.", "I'll pass.")}


class ScriptedBuyers(Agent):
    """Answers for every buyer of a market with ``rule``."""

    backend = "scripted"

    def __init__(self, name: str = "pool@buyer", rule: str = "pool", seed: int = 0) -> None:
        if rule not in RULES:
            raise ValueError(f"unknown buyer rule {rule!r}; known: {', '.join(RULES)}")
        self.name, self.rule, self.seed = name, RULES[rule], int(seed)

    def reply(self, view: BuyerView) -> AgentReply:
        accept = self.rule.accepts(view)
        options = _TEXT[accept]
        h = zlib.crc32(f"{self.seed}|{view.market}|{view.seed}|{view.buyer}|{len(view.thread)}".encode())
        return AgentReply(format_answer(accept, options[h % len(options)]))

    def act_batch(self, views: Sequence[BuyerView]) -> list[AgentReply]:  # type: ignore[override]
        return [self.reply(v) for v in views]

    def settings(self) -> dict[str, Any]:
        return {"backend": self.backend, "name": self.name, "rule": self.rule.name, "min_share": self.rule.min_share,
                "seed": self.seed}
