"""Bilateral price bargaining (issue 15 section 2, after Bergemann et al.): one item, one price, tool calls.

Contract: the package is the game plug-in registered as ``bilateral``; :class:`BilateralGame` implements
:class:`negolib.games.base.Game`. One module per job: :mod:`.scenarios` (tiers, seeds, draws), :mod:`.tools`
(the three tool schemas), :mod:`.protocol` (the strict turn parser), :mod:`.env` (the episode's rules),
:mod:`.scripted` (strategies), :mod:`.prompts` (language-model prompts), :mod:`.play` (batched play),
:mod:`.metrics` (deal rate, surplus share, IR violations, efficiency by tier), :mod:`.game` (the plug-in) and
:mod:`.training` (SFT on a tournament's best transcripts, GRPO through the shared trainer with this game's episode
adapter, the three-stage evaluation; imported on its own, it pulls in the trainer).
"""

from negolib.games.bilateral.game import BilateralGame

__all__ = ["BilateralGame"]
