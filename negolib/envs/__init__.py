"""The games as other ecosystems' environments (TRL's ``environment_factory`` in :mod:`negolib.envs.trl`).

Each interface is written once against the shared episode protocol (a game's training adapter of
:class:`negolib.training.rollout.TrainableEpisode` and :meth:`negolib.games.base.Game.payoffs`); importing this package
imports no optional dependency.
"""
