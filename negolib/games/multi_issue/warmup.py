"""Format warm-up: a short supervised fine-tune on scripted sellers' turns before GRPO **(ours)**.

A 135M model rarely writes a parseable JSON action (the paper's Gemma 4 sizes do): every turn is a
bad parse, every episode in a GRPO group ends the same way, the group's rewards have zero variance
and the policy gradient is exactly zero. The paper's recipe starts from instruction-tuned models
that already follow the format, so the embedded default first teaches the format with a few dozen
demonstrations, then runs GRPO from there. The warm-up is reported as its own arm (step 0 of the
run), so the GRPO gain is measured against the policy GRPO actually started from.

Demonstrations are the turns of scripted sellers (compact counters: only the terms that moved, at
most ``max_terms``) against the run's training buyers on training seeds, rendered exactly as the
language-model seller would see them (training and/or evaluation scaffold, the model's own chat
template). The loss is the mean token negative log-likelihood of the demonstration's completion
(prose + JSON + end-of-turn tag); prompt tokens carry no loss.

With ``prompt_grad=False`` (the default) the prompt but its last token is run once without gradients
and its keys and values are held fixed while the completion is trained on; the gradient then flows
through the completion positions only (the loss value is the same). This halves the CPU cost of a
step and is what the default profile uses.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from negolib.agents.base import Agent
from negolib.agents.hf_agent import fit_prompt
from negolib.core.chat_template import derive_turn_tags
from negolib.games.multi_issue.env import EnvConfig, Episode
from negolib.games.multi_issue.prompts import render_messages
from negolib.games.multi_issue.scripted import make_scripted
from negolib.models import load_causal_lm, prefill_kwargs
from negolib.training.checkpoints import atomic_dir
from negolib.training.config import WarmupConfig
from negolib.training.release import release_memory

__all__ = ["WarmupConfig", "Demonstration", "demonstrations", "format_warmup", "run_format_warmup",
           "warmup_dir", "warmup_ready"]

COMPLETE = "warmup_complete.json"


@dataclass(frozen=True)
class Demonstration:
    """One supervised example: the seller's prompt ids and the scripted turn's completion ids."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    domain: str
    seed: int
    strategy: str
    buyer: str
    turn: int
    scaffold: str
    text: str


def demonstrations(tokenizer: Any, items: Sequence[Any], buyers: Mapping[str, Agent], config: WarmupConfig,
                   env: EnvConfig | None = None) -> list[Demonstration]:
    """Scripted sellers' turns against ``buyers`` on ``items`` (:class:`~negolib.training.data.ScenarioItem`),
    as prompt/completion token ids under the model's chat template.

    Items are visited in order, strategies and scaffolds in rotation, until ``config.demonstrations``
    seller turns are collected (each episode gives its first ``seller_turns_per_episode``).
    """
    if not items:
        raise ValueError("warmup: no scenarios to draw demonstrations from")
    tags = derive_turn_tags(tokenizer, False, strict=False)
    sellers = [make_scripted(s, name=s, seed=config.seed, max_terms=config.max_terms) for s in config.strategies]
    end = list(tags.stop_ids[:1])
    out: list[Demonstration] = []
    k = 0
    while len(out) < config.demonstrations:
        item = items[k % len(items)]
        seller = sellers[k % len(sellers)]
        scaffold = config.scaffolds[(k + k // len(sellers)) % len(config.scaffolds)]  # every pairing occurs
        if item.buyer not in buyers:
            raise KeyError(f"warmup: no agent for training buyer {item.buyer!r}; have {sorted(buyers)}")
        ep = Episode(item.scenario, env, episode_id=f"warmup-{k}")
        seller_turns = 0
        while not ep.done and seller_turns < config.seller_turns_per_episode and len(out) < config.demonstrations:
            view = ep.view()
            if view.role == "seller":
                text = seller.act(view).text
                prompt, _ = fit_prompt(view, tokenizer, render_messages, scaffold, config.prompt_cap, False, "warmup")
                completion = list(tokenizer(text, add_special_tokens=False)["input_ids"]) + end
                out.append(Demonstration(tuple(prompt), tuple(completion), item.scenario.domain.name,
                                         item.scenario.seed, seller.name, item.buyer, view.turn, scaffold, text))
                seller_turns += 1
            else:
                text = buyers[item.buyer].act(view).text
            ep.step(text)
        k += 1
        if k > 100 * config.demonstrations:  # every episode closes before a seller turn: cannot happen
            raise RuntimeError("warmup: could not collect demonstrations")
    return out


def _lr_at(step: int, total: int, config: WarmupConfig) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    warm = max(1, round(config.warmup_fraction * total))
    if step < warm:
        return config.learning_rate * (step + 1) / warm
    t = (step - warm) / max(1, total - warm)
    return config.learning_rate * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def _example_loss(model: Any, demo: Demonstration, prompt_grad: bool) -> tuple[Any, int]:
    """Summed completion NLL of one demonstration and its token count."""
    import torch

    device = next(model.parameters()).device
    prompt = torch.tensor([demo.prompt_ids], device=device)
    completion = torch.tensor([demo.completion_ids], device=device)
    n = completion.shape[1]
    if prompt_grad or prompt.shape[1] < 2:
        ids = torch.cat([prompt, completion], dim=1)
        logits = model(input_ids=ids).logits[0, prompt.shape[1] - 1 : -1]
    else:  # the prompt but its last token, once, without gradients; then its last token + the completion
        with torch.no_grad():
            past = model(input_ids=prompt[:, :-1], use_cache=True, **prefill_kwargs(model)).past_key_values
        ids = torch.cat([prompt[:, -1:], completion[:, :-1]], dim=1)
        pos = torch.arange(prompt.shape[1] - 1, prompt.shape[1] - 1 + ids.shape[1], device=device)[None]
        logits = model(input_ids=ids, past_key_values=past, position_ids=pos, use_cache=False).logits[0]
    nll = torch.nn.functional.cross_entropy(logits.float(), completion[0], reduction="sum")
    return nll, n


def format_warmup(model: Any, demos: Sequence[Demonstration], config: WarmupConfig,
                  progress: bool = True) -> list[dict[str, Any]]:
    """Fine-tune ``model`` in place on ``demos``; returns one log row per optimizer step."""
    import torch

    from negolib.core.progress import ProgressBar as tqdm
    from negolib.core.progress import report

    if not demos:
        raise ValueError("warmup: no demonstrations")
    order = list(range(len(demos)))
    rng = random.Random(config.seed)
    batches: list[list[int]] = []
    for _ in range(config.epochs):
        rng.shuffle(order)
        batches += [order[i : i + config.batch_size] for i in range(0, len(order), config.batch_size)]
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=config.learning_rate, betas=(0.9, 0.95), weight_decay=config.weight_decay)
    torch.manual_seed(config.seed)
    model.train()
    rows: list[dict[str, Any]] = []
    bar = tqdm(total=len(batches), desc="format warm-up", disable=not progress, unit="step")
    try:
        for step, batch in enumerate(batches):
            t0 = time.perf_counter()
            lr = _lr_at(step, len(batches), config)
            for g in opt.param_groups:
                g["lr"] = lr
            opt.zero_grad(set_to_none=True)
            tokens = sum(len(demos[i].completion_ids) for i in batch)
            total = 0.0
            for i in batch:
                nll, _ = _example_loss(model, demos[i], config.prompt_grad)
                (nll / tokens).backward()
                total += float(nll.detach())
            norm = float(torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm))
            opt.step()
            row = {"step": step + 1, "loss": total / tokens, "tokens": tokens, "grad_norm": norm, "lr": lr,
                   "seconds": time.perf_counter() - t0}
            rows.append(row)
            bar.set_postfix(loss=f"{row['loss']:.3f}")
            bar.update(1)
            # the book's heartbeat line, whether or not the bar shows (the book runs with progress=False)
            report(f"format warm-up step {step + 1}/{len(batches)}: loss {row['loss']:.3f} ({row['seconds']:.0f} s)")
    finally:
        bar.close()
        model.eval()
    return rows


def warmup_dir(run_dir: str | Path) -> Path:
    """Where a run's warm-up model lives: ``<run_dir>/warmup/model``."""
    return Path(run_dir) / "warmup" / "model"


def warmup_ready(run_dir: str | Path) -> bool:
    """True when the run's warm-up finished (its model folder was written completely)."""
    return (Path(run_dir) / "warmup" / COMPLETE).is_file()


def run_format_warmup(init: str | Path, run_dir: str | Path, config: WarmupConfig, items: Sequence[Any],
                      buyers: Mapping[str, Agent], env: EnvConfig | None = None, dtype: str = "float32",
                      device: str = "cpu", progress: bool = True) -> Path:
    """Warm up the model at ``init`` and save it to :func:`warmup_dir` (atomically); a finished
    warm-up is not redone. Writes ``warmup_log.jsonl`` and ``demonstrations.jsonl`` beside it."""
    root = Path(run_dir) / "warmup"
    final = warmup_dir(run_dir)
    if warmup_ready(run_dir) and final.is_dir():
        return final
    model, tok = load_causal_lm(str(init), dtype=dtype, device=device)
    demos = demonstrations(tok, items, buyers, config, env)
    t0 = time.perf_counter()
    rows = format_warmup(model, demos, config, progress=progress)
    with atomic_dir(final) as staged:
        model.save_pretrained(staged)
        tok.save_pretrained(staged)
    with open(root / "warmup_log.jsonl", "w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    with open(root / "demonstrations.jsonl", "w") as fh:
        for d in demos:
            fh.write(json.dumps({"domain": d.domain, "seed": d.seed, "strategy": d.strategy, "buyer": d.buyer,
                                 "turn": d.turn, "scaffold": d.scaffold, "prompt_tokens": len(d.prompt_ids),
                                 "completion_tokens": len(d.completion_ids), "text": d.text}) + "\n")
    summary = {"init": str(init), "config": asdict(config), "demonstrations": len(demos), "steps": len(rows),
               "seconds": time.perf_counter() - t0, "final_loss": rows[-1]["loss"], "first_loss": rows[0]["loss"]}
    (root / COMPLETE).write_text(json.dumps(summary, indent=2))
    del model
    release_memory()  # the warmed-up weights and their optimizer state, before GRPO loads its own copy
    return final
