"""Multi-turn GRPO training of the seller [paper §3 "Optimization", App. H, App. I].

* :mod:`config`: :class:`TrainConfig`, the recipe (paper defaults, validated overrides);
* :mod:`data`: scenario items (a scenario and its fixed opponent) and TRL's dataset rows of any game
  (the paper's scenario sets are :mod:`negolib.games.multi_issue.training`'s);
* :mod:`rollout`: token-level multi-turn rollouts of any game's episodes (``prompt_ids``,
  ``completion_ids``, ``env_mask``);
* :mod:`advantages`: NeMo-RL's leave-one-out advantages;
* :mod:`grpo`: TRL ``GRPOTrainer`` subclass, ``rollout_func``, logging, validation, :func:`train`;
* :mod:`grpo_args`: the recipe as TRL's ``GRPOConfig`` and peft's ``LoraConfig``;
* :mod:`schedule`: warmup-cosine with a floor, continuations;
* :mod:`flops`: App. I FLOP accounting and Table 8;
* :mod:`checkpoints`: atomic checkpoint directories and resume;
* :mod:`runlog`: per-step training logs and training transcripts.

The study level (a profile's training runs, their arms and agents; the learning ladder and the matched lesson) is
the paper's study's: :mod:`negolib.study.runs`, :mod:`negolib.study.ladder`, :mod:`negolib.study.lesson`.

Torch, transformers and TRL are imported only when a run is built.
"""

from negolib.training.advantages import loo_advantages, loo_baseline_and_std
from negolib.training.config import LR_ARMS, TrainConfig
from negolib.training.schedule import WarmupCosine, combined_schedule

__all__ = [
    "LR_ARMS",
    "TrainConfig",
    "WarmupCosine",
    "combined_schedule",
    "loo_advantages",
    "loo_baseline_and_std",
    "train",
    "TrainResult",
    "build_run",
]


def __getattr__(name: str):  # noqa: ANN202 (lazy heavy imports)
    if name in ("train", "TrainResult", "build_run"):
        from negolib.training import grpo

        return getattr(grpo, name)
    raise AttributeError(f"module 'negolib.training' has no attribute {name!r}")
