"""The games in other ecosystems' environment APIs: TRL's ``environment_factory``
(:mod:`negolib.envs.trl`), OpenEnv (:mod:`negolib.envs.openenv_server`), PettingZoo (:mod:`negolib.envs.pettingzoo`)
and Gymnasium (:mod:`negolib.envs.gymnasium`), over one text-episode core (:mod:`negolib.envs.core`) and the games'
training adapters. Each adapter imports its optional package only when imported itself; importing this package
registers the Gymnasium ids of :data:`GYM_IDS` (``gymnasium.make("negobook/MultiIssue-v0")``) when gymnasium is
installed, without importing any game (the entry point is a string, resolved by ``make``).
"""

from __future__ import annotations

import importlib.util

GYM_IDS: dict[str, str] = {"multi_issue": "negobook/MultiIssue-v0", "bilateral": "negobook/Bilateral-v0",
                           "multi_buyer": "negobook/MultiBuyer-v0", "multi_product": "negobook/MultiProduct-v0"}
"""Game name -> its Gymnasium id."""


def register_gymnasium() -> bool:
    """Register every id of :data:`GYM_IDS` with gymnasium (again is a no-op); False when gymnasium is absent."""
    if importlib.util.find_spec("gymnasium") is None:
        return False
    import gymnasium

    for game, env_id in GYM_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, entry_point="negolib.envs.gymnasium:NegotiationEnv", kwargs={"game": game})
    return True


register_gymnasium()

__all__ = ["GYM_IDS", "register_gymnasium"]
