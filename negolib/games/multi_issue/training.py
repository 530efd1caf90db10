"""The paper's game as the shared GRPO trainer plays it [paper §3-4, App. H].

Contract: :func:`paper_task` is the paper's game as the trainer's :class:`~negolib.training.grpo.TrainingTask`
(the policy sells against its scenario's buyer; scripted buyers by default; records in the checked transcript
schema). :class:`PaperEpisode` is the paper's :class:`negolib.games.multi_issue.env.Episode` as a trainable episode and
:func:`paper_episodes` its episode factory; :func:`scenario_items` the fixed training and validation scenario
sets (each scenario's buyer drawn ONCE from the mixture, seeded by ``(data_seed, domain, seed)``: a data
field, identical across arms, as the paper attaches it [§4]); :func:`env_config` the training environment
(terms attached to an ACCEPT applied unless ``TrainConfig.accept_applies_terms`` is off). The trainer's core
(:mod:`negolib.training.grpo`, :mod:`negolib.training.rollout`, :mod:`negolib.training.data`) imports none of
this: it is handed over.

Training scenarios are ``train_seeds`` over the eight training domains (every shipped domain that is not held
out: the used-car domain never appears in training). TRL's dataset rows are the task's
(:meth:`~negolib.training.grpo.TrainingTask.dataset`): ``prompt`` (the seller's first chat messages, what TRL's
``prompt`` column expects, used by TRL for logging; the rollout re-renders the real first prompt from the
episode, which for a buyer-opens run also holds the buyer's opening) and the item's index.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence

import numpy as np

from negolib.agents.base import Agent, AgentReply
from negolib.core.errors import ValidationError
from negolib.games.multi_issue.domains import load_domains
from negolib.games.multi_issue.env import EnvConfig, Episode
from negolib.games.multi_issue.prompts import render_messages
from negolib.games.multi_issue.scenarios import make_scenario, train_seeds, validation_seeds
from negolib.games.multi_issue.scripted import STRATEGIES, make_scripted
from negolib.training.config import TrainConfig
from negolib.training.data import ScenarioItem
from negolib.training.grpo import TrainingTask
from negolib.training.rollout import EpisodeFactory
from negolib.training.runlog import append_records, prune_transcripts

_TRAIN_STREAM, _VALIDATION_STREAM = 0, 1


class PaperEpisode(Episode):
    """The paper game's :class:`~negolib.games.multi_issue.env.Episode` as a
    :class:`~negolib.training.rollout.TrainableEpisode`: its outcome carries Eq. 1's reward and the score S; the
    driver's floor is ``-lambda``; a bad parse is a turn without a valid action."""

    @property
    def no_deal_floor(self) -> float:
        return -self.config.no_deal_penalty

    def opponent_turn(self, reply: AgentReply) -> str:
        return reply.text

    def bad_parses(self, role: str) -> tuple[int, int]:
        mine = [t for t in self.turns if t.role == role]
        return sum(t.action is None for t in mine), len(mine)


def paper_episodes(env: EnvConfig) -> EpisodeFactory:
    """The paper's episode factory under ``env``: ``(item, episode_id) -> PaperEpisode``."""

    def make(item: ScenarioItem, episode_id: str) -> PaperEpisode:
        return PaperEpisode(item.scenario, env, episode_id)

    return make


def training_domains(names: Sequence[str] | None = None) -> list[str]:
    """The training domains: ``names`` (checked) or every shipped domain that is not held out."""
    doms = load_domains()
    if names is None:
        return [n for n, d in doms.items() if not d.held_out]
    bad = [n for n in names if n not in doms]
    if bad:
        raise ValidationError("TrainConfig", "train_domains", f"unknown domains {bad}; known: {sorted(doms)}")
    held = [n for n in names if doms[n].held_out]
    if held:
        raise ValidationError(
            "TrainConfig", "train_domains", f"held-out domains {held} may not be trained on"
        )
    return list(names)


def draw_buyer(
    mixture: Mapping[str, float], domain: str, seed: int, data_seed: int = 0, stream: int = _TRAIN_STREAM
) -> str:
    """The buyer of scenario ``(domain, seed)``: one draw from ``mixture``, seeded by the scenario."""
    names = list(mixture)
    p = np.asarray([mixture[n] for n in names], dtype=float)
    ss = np.random.SeedSequence([int(data_seed), stream, zlib.crc32(domain.encode()), int(seed)])
    rng = np.random.Generator(np.random.PCG64(ss))
    return names[int(rng.choice(len(names), p=p / p.sum()))]


def scenario_items(config: TrainConfig, split: str = "train") -> list[ScenarioItem]:
    """The fixed training (``split="train"``) or validation scenario set, domain-major."""
    domains = load_domains()
    names = training_domains(config.train_domains)
    if split == "train":
        seeds, stream = train_seeds(config.train_seeds_per_domain, config.train_seed_offset), _TRAIN_STREAM
    elif split == "validation":
        seeds, stream = validation_seeds(config.validation_seeds_per_domain), _VALIDATION_STREAM
    else:
        raise ValueError(f"split must be 'train' or 'validation', got {split!r}")
    return [
        ScenarioItem(
            make_scenario(domains[n], s), draw_buyer(config.buyer_mixture, n, s, config.data_seed, stream)
        )
        for n in names
        for s in seeds
    ]


def env_config(config: TrainConfig) -> EnvConfig:
    """The training environment. Terms attached to an ACCEPT are applied before closing when
    ``config.accept_applies_terms`` (the paper's training rule [App. H]) and ignored otherwise (the paper's
    evaluation rule, which a matched lesson trains under)."""
    return EnvConfig(max_rounds=config.max_rounds, first_mover=config.first_mover,
                     accept_applies_terms=config.accept_applies_terms,
                     accept_needs_offer=config.accept_needs_offer)


def default_buyers(config: TrainConfig) -> dict[str, Agent]:
    """Scripted buyers for every mixture name that is a scripted strategy (seeded with ``config.seed``)."""
    unknown = [n for n in config.buyer_mixture if n not in STRATEGIES]
    if unknown:
        raise KeyError(f"buyers {unknown} are not scripted strategies; pass agents for them in `buyers`")
    return {n: make_scripted(n, seed=config.seed) for n in config.buyer_mixture}


def roundtrip_dialogue(item: ScenarioItem, config: TrainConfig, turns: int = 4) -> list[dict[str, str]]:
    """A multi-turn seller chat (scripted play) for the tag round-trip check before training [App. J]."""
    ep = Episode(item.scenario, env_config(config), "roundtrip")
    agents = {"seller": make_scripted("linear"), "buyer": make_scripted("boulware")}
    while not ep.done and len(ep.turns) < turns:
        ep.step(agents[ep.to_move].act(ep.view()).text)
    return render_messages(ep.view("seller"), "training")


def paper_task(config: TrainConfig) -> TrainingTask:
    """The paper's game as the trainer plays it under ``config``: the policy sells on :func:`scenario_items`
    (train and validation) in the training environment (:func:`env_config`), rendered by
    :func:`~negolib.games.multi_issue.prompts.render_messages`; opponents default to :func:`default_buyers`; records are
    checked against the transcript schema (:func:`negolib.training.runlog.append_records`)."""
    train = tuple(scenario_items(config, "train"))
    return TrainingTask(
        episode_factory=paper_episodes(env_config(config)),
        render=render_messages,
        train_items=train,
        validation_items=tuple(scenario_items(config, "validation")),
        role="seller",
        roundtrip=tuple(roundtrip_dialogue(train[0], config)),
        default_opponents=lambda: default_buyers(config),
        append_records=append_records,
        prune_records=prune_transcripts,
    )


__all__ = ["PaperEpisode", "default_buyers", "draw_buyer", "env_config", "paper_episodes", "paper_task",
           "roundtrip_dialogue", "scenario_items", "training_domains"]
