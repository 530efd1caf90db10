"""The registered games: name -> the module path and class that implement :class:`negolib.games.base.Game`.

Contract: :func:`get_game` imports a game only when asked (games may carry heavy or optional dependencies);
:func:`list_games` gives (name, one-line summary) for ``python -m negolib games``. Adding a game is one line in
:data:`REGISTRY` and a package under ``negolib/games/<name>/``.
"""

from __future__ import annotations

import importlib

from negolib.games.base import Game

REGISTRY: dict[str, str] = {
    "multi_issue": "negolib.games.multi_issue:MultiIssueGame",
    "bilateral": "negolib.games.bilateral:BilateralGame",
    "multi_buyer": "negolib.games.multi_buyer:MultiBuyerGame",
    "multi_product": "negolib.games.multi_product:MultiProductGame",
}
"""Game name -> ``module:Class``."""


def get_game(name: str) -> Game:
    """The game registered as ``name`` (a fresh instance); ``KeyError`` naming the registered games."""
    if name not in REGISTRY:
        raise KeyError(f"no game {name!r}; registered: {', '.join(sorted(REGISTRY))}")
    module, cls = REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)()


def list_games() -> list[tuple[str, str]]:
    """(name, summary) of every registered game, by name."""
    return [(name, get_game(name).summary) for name in sorted(REGISTRY)]


__all__ = ["REGISTRY", "Game", "get_game", "list_games"]
