"""One seller, several buyers, a turn budget (issue 17 section 1, after Liu et al.'s multi-buyer market).

Contract: the package is the game plug-in registered as ``multi_buyer``; :class:`MultiBuyerGame` implements
:class:`negolib.games.base.Game`. One module per job: :mod:`.scenarios` (markets, seeds, draws), :mod:`.tools`
(the tool schemas), :mod:`.protocol` (the strict turn parsers over :mod:`negolib.games.toolcalls`), :mod:`.env`
(the episode's rules), :mod:`.buyers` (the scripted buyer pool), :mod:`.sellers` (scripted baselines),
:mod:`.prompts` and :mod:`.agents` (language-model and API sellers, the latter shared with the multi-product
market), :mod:`.buyer_prompts` and :mod:`.lm_buyers` (language-model and API buyers),
:mod:`.play` (batched play), :mod:`.metrics` (normalised surplus, top-buyer deals, exploration,
overshoots), :mod:`.game` (the plug-in, on the market shell both markets share) and :mod:`.training` (GRPO of the
seller through the shared trainer, the stage evaluation).
"""

from negolib.games.multi_buyer.game import MultiBuyerGame

__all__ = ["MultiBuyerGame"]
