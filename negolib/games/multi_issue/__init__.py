"""The paper's game, multi-issue contract bargaining, as a plug-in registered as ``multi_issue``.

Contract: :class:`MultiIssueGame` (:mod:`.game`) implements :class:`negolib.games.base.Game`. One module per job:
:mod:`.domains` (the nine negotiation domains, YAML), :mod:`.scenarios` (seed blocks, private weights, reservations),
:mod:`.utility` (normalised utility U~, best contracts), :mod:`.protocol` (COUNTER/ACCEPT JSON and its strict
parser), :mod:`.env` (the episode's rules, closing, reward Eq. 1 and score S), :mod:`.metrics` (per-episode and
per-arm metrics as ratios), :mod:`.scripted` (the scripted strategies), :mod:`.prompts` (the two scaffolds' templates),
:mod:`.rollout` (batched play into the checked transcript schema), :mod:`.training` (the game as the GRPO trainer's
task) and :mod:`.warmup` (the format warm-up, SFT on scripted sellers' turns).
"""

from negolib.games.multi_issue.game import MultiIssueGame

__all__ = ["MultiIssueGame"]
