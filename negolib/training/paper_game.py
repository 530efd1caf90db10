"""The paper's game as the shared GRPO trainer plays it [paper §3-4, App. H].

Contract: :class:`PaperEpisode` is the paper's :class:`negolib.env.Episode` as a trainable episode and
:func:`paper_episodes` its episode factory; :func:`scenario_items` the fixed training and validation scenario
sets (each scenario's buyer drawn ONCE from the mixture, seeded by ``(data_seed, domain, seed)``: a data
field, identical across arms, as the paper attaches it [§4]); :func:`build_dataset` TRL's dataset of them;
:func:`env_config` the training environment (terms attached to an ACCEPT applied). The trainer's core
(:mod:`negolib.training.rollout`, :mod:`negolib.training.data`) imports none of this: it is handed over.

Training scenarios are ``train_seeds`` over the eight training domains (every shipped domain that is not held
out: the used-car domain never appears in training). Rows carry ``prompt`` (the seller's first rendered chat
messages: what TRL's ``prompt`` column expects, used by TRL for logging; the rollout re-renders the real first
prompt from the episode, which for a buyer-opens run also holds the buyer's opening), and ``domain``,
``seed``, ``buyer`` and ``scenario_id``, which the rollout uses to rebuild the episode.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from negolib.agents.base import AgentReply
from negolib.domains import load_domains
from negolib.env import EnvConfig, Episode
from negolib.errors import ValidationError
from negolib.prompts import render_messages
from negolib.scenarios import make_scenario, train_seeds, validation_seeds
from negolib.training.config import TrainConfig
from negolib.training.data import ScenarioItem
from negolib.training.rollout import EpisodeFactory

_TRAIN_STREAM, _VALIDATION_STREAM = 0, 1


class PaperEpisode(Episode):
    """The paper game's :class:`negolib.env.Episode` as a :class:`~negolib.training.rollout.TrainableEpisode`:
    its outcome carries Eq. 1's reward and the score S; the driver's floor is ``-lambda``; a bad parse is a turn
    without a valid action."""

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
    """The training environment: terms attached to an accept are applied before closing [App. H]."""
    return EnvConfig.training(max_rounds=config.max_rounds, first_mover=config.first_mover,
                              accept_needs_offer=config.accept_needs_offer)


def first_prompt_messages(item: ScenarioItem, env: EnvConfig, scaffold: str) -> list[dict[str, str]]:
    """The seller's first chat messages for ``item`` (as the rollout renders them when the seller opens)."""
    ep = Episode(item.scenario, env, item.scenario_id)
    return render_messages(ep.view("seller"), scaffold)


def to_rows(items: Sequence[ScenarioItem], env: EnvConfig, scaffold: str) -> list[dict[str, Any]]:
    """Dataset rows: ``prompt`` (chat messages) plus the fields the rollout needs."""
    return [
        {
            "prompt": first_prompt_messages(it, env, scaffold),
            "domain": it.scenario.domain.name,
            "seed": it.scenario.seed,
            "buyer": it.buyer,
            "scenario_id": it.scenario_id,
        }
        for it in items
    ]


def build_dataset(config: TrainConfig, split: str = "train"):  # noqa: ANN201 (datasets imported lazily)
    """The split as a ``datasets.Dataset`` with a conversational ``prompt`` column (what TRL expects)."""
    from datasets import Dataset

    rows = to_rows(scenario_items(config, split), env_config(config), config.scaffold)
    return Dataset.from_list(rows)


def item_from_row(row: Mapping[str, Any]) -> ScenarioItem:
    """Rebuild the scenario of a dataset row (scenarios are a pure function of domain and seed)."""
    domains = load_domains()
    return ScenarioItem(make_scenario(domains[str(row["domain"])], int(row["seed"])), str(row["buyer"]))


__all__ = ["PaperEpisode", "build_dataset", "draw_buyer", "env_config", "first_prompt_messages", "item_from_row",
           "paper_episodes", "render_messages", "scenario_items", "to_rows", "training_domains"]
