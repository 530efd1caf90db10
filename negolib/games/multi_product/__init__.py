"""A multi-product market with a four-part message protocol (issue 17 section 2, after the source paper's market).

Contract: the package is the game plug-in registered as ``multi_product``; :class:`MultiProductGame` implements
:class:`negolib.games.base.Game`. One module per job: :mod:`.scenarios` (markets, seeds, draws), :mod:`.oracle`
(the exact assignment oracle and baselines), :mod:`.protocol` (the four-part format and its parser), :mod:`.env`
(the episode and its constraints), :mod:`.buyers` and :mod:`.sellers` (scripted agents), :mod:`.prompts` and
:mod:`.agents` (language-model and API sellers writing the four-part text), :mod:`.play` (batched play),
:mod:`.metrics` (constraint adherence, surplus, allocation quality), :mod:`.game` (the plug-in) and :mod:`.training`
(GRPO of the seller through the shared trainer, the paired evaluation of its stages).
"""

from negolib.games.multi_product.game import MultiProductGame

__all__ = ["MultiProductGame"]
