"""The training and validation scenario sets, with each scenario's buyer fixed as a data field.

Training scenarios are ``train_seeds`` over the eight training domains (every shipped domain that is
not held out: the used-car domain never appears in training). Each scenario's buyer is drawn ONCE
from the configured mixture with a generator seeded by ``(data_seed, domain, seed)`` and stored in
the row, so the buyer assignment is a pure function of the scenario and identical across arms
(paper: 80% / 20% of two models, "attached to each scenario as a dataset field" [§4]).

Rows carry ``prompt`` (the seller's first rendered chat messages: what TRL's ``prompt`` column
expects, used by TRL for logging; the rollout re-renders the real first prompt from the episode,
which for a buyer-opens run also holds the buyer's opening), and ``domain``, ``seed``, ``buyer`` and
``scenario_id``, which the rollout uses to rebuild the episode. Another game's items are the caller's
(:func:`item_rows`): their rows carry the item's index instead.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from negolib.domains import load_domains
from negolib.env import EnvConfig, Episode
from negolib.errors import ValidationError
from negolib.prompts import render_messages
from negolib.scenarios import Scenario, make_scenario, train_seeds, validation_seeds
from negolib.training.config import TrainConfig

_TRAIN_STREAM, _VALIDATION_STREAM = 0, 1


@dataclass(frozen=True)
class ScenarioItem:
    """One row of a scenario set: the scenario and the opponent it is always played against (``buyer``: the
    buyer while the policy sells). ``key`` names another game's scenario (None: the paper's ``domain|seed``)."""

    scenario: Scenario | Any
    buyer: str
    key: str | None = None

    @property
    def scenario_id(self) -> str:
        if self.key is not None:
            return self.key
        return f"{self.scenario.domain.name}|{self.scenario.seed}"


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


def item_rows(items: Sequence[ScenarioItem], prompts: Sequence[list[dict[str, str]]]) -> list[dict[str, Any]]:
    """Dataset rows of a caller's scenario items (any game): ``prompt`` (the policy's first chat messages),
    ``buyer``, ``scenario_id`` and ``item``, the item's index, by which the rollout finds it again."""
    if len(items) != len(prompts):
        raise ValueError(f"{len(items)} items but {len(prompts)} prompts")
    return [{"prompt": list(p), "buyer": it.buyer, "scenario_id": it.scenario_id, "item": i}
            for i, (it, p) in enumerate(zip(items, prompts))]


def build_dataset(config: TrainConfig, split: str = "train"):  # noqa: ANN201 (datasets imported lazily)
    """The split as a ``datasets.Dataset`` with a conversational ``prompt`` column (what TRL expects)."""
    from datasets import Dataset

    rows = to_rows(scenario_items(config, split), env_config(config), config.scaffold)
    return Dataset.from_list(rows)


def item_from_row(row: Mapping[str, Any]) -> ScenarioItem:
    """Rebuild the scenario of a dataset row (scenarios are a pure function of domain and seed)."""
    domains = load_domains()
    return ScenarioItem(make_scenario(domains[str(row["domain"])], int(row["seed"])), str(row["buyer"]))


def buyer_shares(items: Sequence[ScenarioItem]) -> dict[str, float]:
    """Realized share of each buyer in a scenario set."""
    out: dict[str, float] = {}
    for it in items:
        out[it.buyer] = out.get(it.buyer, 0.0) + 1.0 / len(items)
    return out
