"""What is particular to each game behind :mod:`negolib.envs.trl`: its tools, its scenarios and its training episodes.

Contract: a :class:`GameBinding` per registered game names (1) the policy's tools, a mixin class whose public methods
are the tools TRL shows the model (typed, with Google-style docstrings for ``transformers.utils.get_json_schema``),
each mapping its arguments to the game's action turn (the text or structured turn the game's own parser reads) and
handing it to ``self._move``; (2) the scenario of a ``"stratum|seed"`` key and each split's strata and seeds (the
game's disjoint seed blocks: training, validation, evaluation); (3) the game's training episodes and render under
keyword options (its environment and reward configs, split by field name). Nothing here plays an episode.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from negolib.agents.base import Render
from negolib.games.seeds import SeedBlocks
from negolib.training.rollout import EpisodeFactory

SPLITS: tuple[str, ...] = ("train", "validation", "test")
"""Dataset splits: training seeds, validation seeds, reserved evaluation seeds (the test split adds held-out strata)."""


# ---------------------------------------------------------------------------------------------
# The tools: one mixin per game (public methods are tools; ``_move`` is the environment's)
# ---------------------------------------------------------------------------------------------


class MultiIssueTools:
    """The paper's game: ``counter(terms, message)`` and ``accept(message)``, written as the game's JSON action."""

    def counter(self, terms: dict[str, float | str], message: str) -> str:
        """Propose a contract: the named terms are set on the shared ledger (unnamed terms keep their standing
        values) and the buyer answers.

        Args:
            terms: The terms to set, by issue name: a number, or one of a categorical issue's options.
            message: What you say to the buyer with this offer.
        """
        action = {"action": "COUNTER", "terms": [{"name": k, "value": v} for k, v in dict(terms).items()]}
        return self._move(f"{message}\n{json.dumps(action)}")  # type: ignore[attr-defined]

    def accept(self, message: str) -> str:
        """Accept the buyer's standing offer (the ledger as it stands after the buyer's last counter): the deal closes.

        Args:
            message: What you say to the buyer as you accept.
        """
        return self._move(f"{message}\n{json.dumps({'action': 'ACCEPT'})}")  # type: ignore[attr-defined]


def _calls(name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": name, "arguments": arguments}]


class BilateralTools:
    """Bilateral price bargaining: ``make_offer(price, message)``, ``accept_offer(message)``, ``walk_away(message)``,
    played as the game's structured tool-call turn."""

    def make_offer(self, price: float, message: str) -> str:
        """Make a binding offer to trade the item at this price; it replaces your previous offer and the other party
        may accept it.

        Args:
            price: The price in dollars, a positive number.
            message: What you say to the other party with the offer.
        """
        return self._structured(message, _calls("make_offer", {"price": price}))  # type: ignore[attr-defined]

    def accept_offer(self, message: str) -> str:
        """Accept the other party's standing offer: the deal closes at their offered price.

        Args:
            message: What you say to the other party as you accept.
        """
        return self._structured(message, _calls("accept_offer", {}))  # type: ignore[attr-defined]

    def walk_away(self, message: str) -> str:
        """End the negotiation now without a deal.

        Args:
            message: What you say to the other party as you leave.
        """
        return self._structured(message, _calls("walk_away", {}))  # type: ignore[attr-defined]


class MultiBuyerTools:
    """The multi-buyer market: ``message_buyer(to, message, offer)``, the seller's one tool, as a structured turn."""

    def message_buyer(self, to: str, message: str, offer: float | None = None) -> str:
        """Send a message to one buyer, optionally with a binding offer to sell at a price; that buyer answers at once
        (accept, counter or decline). Each call spends one turn of your budget.

        Args:
            to: The buyer addressed, buyer_1 .. buyer_N.
            message: What you say to that buyer.
            offer: Optional: a binding price in dollars the buyer may accept now.
        """
        arguments: dict[str, Any] = {"to": to} if offer is None else {"to": to, "offer": offer}
        return self._structured(message, _calls("message_buyer", arguments))  # type: ignore[attr-defined]


class MultiProductTools:
    """The multi-product market: ``make_offer(to, product, price, message)``, written as the game's four-part
    message (the price to the cent)."""

    def make_offer(self, to: str, product: str, price: float, message: str) -> str:
        """Offer one product to one buyer at a price; that buyer accepts or declines at once. Each call spends one
        message of your budget.

        Args:
            to: The buyer addressed, buyer_1 .. buyer_M.
            product: The product offered, product_1 .. product_K.
            price: The price in dollars (rounded to the cent).
            message: What you say to that buyer.
        """
        shown = f"{price:.2f}" if isinstance(price, (int, float)) and math.isfinite(price) else str(price)
        text = f"TO: {to}\nPRODUCT: {product}\nPRICE: {shown}\nMESSAGE: {message}"
        return self._move(text)  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------
# The bindings
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GameBinding:
    """One game behind the TRL environment: its tool mixin, a note on how the tools replace its text protocol, its
    policy roles, its scenarios (``make(stratum, seed)``, ``strata(split)``, seed ``blocks``) and ``episodes(role,
    options) -> (episode factory, render)`` (options: fields of the game's environment and reward configs)."""

    name: str
    tools: type
    note: str
    roles: tuple[str, ...]
    make: Callable[[str, int], Any]
    strata: Callable[[str], tuple[str, ...]]
    episodes: Callable[[str, Mapping[str, Any]], tuple[EpisodeFactory, Render]]
    blocks: SeedBlocks = SeedBlocks()

    def seeds(self, split: str, n: int) -> list[int]:
        """``n`` seeds of ``split`` from the game's disjoint blocks."""
        if split == "train":
            return self.blocks.train_seeds(n)
        if split == "validation":
            return self.blocks.validation_seeds(n)
        if split == "test":
            return self.blocks.eval_seeds(n)
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


def split_options(options: Mapping[str, Any], *configs: type) -> list[dict[str, Any]]:
    """``options`` split by the field names of each dataclass of ``configs``; ``TypeError`` naming the known ones for
    an option no config has."""
    names = [{f.name for f in fields(c)} for c in configs]
    unknown = sorted(set(options) - set().union(*names))
    if unknown:
        raise TypeError(f"unknown options {unknown}; known: {sorted(set().union(*names))}")
    return [{k: v for k, v in options.items() if k in n} for n in names]


def _multi_issue() -> GameBinding:
    from negolib.games.multi_issue.domains import load_domains
    from negolib.games.multi_issue.env import EnvConfig
    from negolib.games.multi_issue.prompts import render_messages
    from negolib.games.multi_issue.scenarios import make_scenario
    from negolib.games.multi_issue.training import paper_episodes, training_domains

    def episodes(role: str, options: Mapping[str, Any]) -> tuple[EpisodeFactory, Render]:
        (env,) = split_options(options, EnvConfig)
        return paper_episodes(replace(EnvConfig.training(), **env)), render_messages

    def strata(split: str) -> tuple[str, ...]:
        return tuple(training_domains()) if split != "test" else tuple(load_domains())

    return GameBinding(
        "multi_issue", MultiIssueTools,
        "Act only through the tools: counter(terms, message) writes your COUNTER action and accept(message) your "
        "ACCEPT; what you say goes in `message`.", ("seller",),
        lambda domain, seed: make_scenario(load_domains()[domain], seed), strata, episodes)


def _bilateral() -> GameBinding:
    from negolib.games.bilateral import training
    from negolib.games.bilateral.env import BilateralConfig
    from negolib.games.bilateral.scenarios import SEEDS, TIERS, make_scenario

    def episodes(role: str, options: Mapping[str, Any]) -> tuple[EpisodeFactory, Render]:
        env, reward = split_options(options, BilateralConfig, training.RewardConfig)
        return (training.episode_factory(BilateralConfig(**env), role, training.RewardConfig(**reward)),  # type: ignore[arg-type]
                training.render)

    return GameBinding(
        "bilateral", BilateralTools,
        "Act only through the tools make_offer(price, message), accept_offer(message) and walk_away(message); what "
        "you say goes in `message`.", ("seller", "buyer"), make_scenario, lambda split: tuple(TIERS), episodes, SEEDS)


def _market(name: str) -> GameBinding:
    import importlib

    scenarios = importlib.import_module(f"negolib.games.{name}.scenarios")
    training = importlib.import_module(f"negolib.games.{name}.training")
    tools, note = {
        "multi_buyer": (MultiBuyerTools, "Act only through the tool message_buyer(to, message, offer); what you say "
                                         "goes in `message`."),
        "multi_product": (MultiProductTools, "Act only through the tool make_offer(to, product, price, message): it "
                                             "writes the four-part message (TO, PRODUCT, PRICE, MESSAGE) for you."),
    }[name]

    def episodes(role: str, options: Mapping[str, Any]) -> tuple[EpisodeFactory, Render]:
        (reward,) = split_options(options, training.RewardConfig)
        return training.episode_factory(training.RewardConfig(**reward)), training.render

    def strata(split: str) -> tuple[str, ...]:
        return tuple(scenarios.TRAIN_MARKETS) if split != "test" else tuple(scenarios.EVAL_MARKETS)

    return GameBinding(name, tools, note, ("seller",),
                       lambda market, seed: scenarios.SETS.scenario_set([seed], [market])[0], strata, episodes,
                       scenarios.SEEDS)


BINDINGS: dict[str, Callable[[], GameBinding]] = {
    "multi_issue": _multi_issue,
    "bilateral": _bilateral,
    "multi_buyer": lambda: _market("multi_buyer"),
    "multi_product": lambda: _market("multi_product"),
}
"""Game name -> its binding (built on demand: a game is imported only when asked)."""


def binding(game: str) -> GameBinding:
    """The binding of the registered game ``game``; ``KeyError`` naming the games bound."""
    if game not in BINDINGS:
        raise KeyError(f"no TRL binding for game {game!r}; bound: {', '.join(sorted(BINDINGS))}")
    return BINDINGS[game]()


__all__ = ["BINDINGS", "SPLITS", "BilateralTools", "GameBinding", "MultiBuyerTools", "MultiIssueTools",
           "MultiProductTools", "binding", "split_options"]
