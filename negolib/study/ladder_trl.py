"""The learning ladder's TRL rung: TRL's stock ``GRPOTrainer`` with our ``environment_factory`` must learn.

Contract: :func:`train_trl_rung` builds a tiny Llama from a config and trains it with ``trl.GRPOTrainer(...,
environment_factory=...)`` (no trainer subclass; the reward is the environment's ``get_reward``, picked up by TRL
without a ``reward_funcs`` entry) on the paper's game through :func:`negolib.envs.trl.environment_factory`: one
round, a buyer accepting any parsed COUNTER, the policy's tool ``counter`` naming every continuous term at one of
``levels`` concession levels. It returns a :class:`negolib.study.ladder.TrainedRung` (per-step rewards, the
late-minus-early gain with its seed-cluster interval, the optimum, the weight change). Its twin ``lr_zero`` sets every
learning rate to 0 once training begins (a callback, as the ladder's) and must not learn.

The model's tokenizer (:func:`tool_tokenizer`) knows only the ChatML tags, a pad token and one token per whole tool
call (``<tool_call>{...}</tool_call>`` of a fixed call), so every prompt reads as its tags, a sampled call token is a
complete tool call TRL parses and runs, and the rung is a bandit over the levels. Its chat template renders assistant
tool calls and tool results (what TRL's tool loop needs); its response template parses a call after the last
``<|im_start|>``. :func:`save_tool_model` saves such a model for any game's calls (the four-game TRL smoke test).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from negolib.study.ladder import (
    SPECIALS,
    AcceptingBuyer,
    TrainedRung,
    _torch_threads,
    _zero_lr_callback,
    level_terms,
    paired_gain,
    save_tiny_llama,
    weight_change,
)

TOOL_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + (message['content'] or '') }}"
    "{% if message['role'] == 'assistant' and message.get('tool_calls') %}{% for call in message['tool_calls'] %}"
    "{{ '<tool_call>\n' + {'name': call['function']['name'], 'arguments': call['function']['arguments']} | tojson"
    " + '\n</tool_call>' }}{% endfor %}{% endif %}"
    "{{ '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""ChatML with assistant tool calls (``<tool_call>`` JSON) and tool messages as ``tool`` turns; prefix-preserving."""

RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>",
    "fields": {
        "tool_calls": {"open": "<tool_call>", "close_pattern": r"</tool_call>\s*", "repeats": True, "content": "json",
                       "transform": {"type": "function", "function": "{content}"}},
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}
"""transformers' response template of :data:`TOOL_CHAT_TEMPLATE` (Qwen3's, anchored on ``<|im_start|>``: the
tokenizer drops the role names)."""


def call_text(name: str, arguments: dict[str, Any]) -> str:
    """One whole tool call as the model writes it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def tool_tokenizer(calls: Sequence[str]) -> Any:
    """A tokenizer of ``SPECIALS`` (ids 0-2) and one token per whole tool call text of ``calls`` (ids 3, ...); all
    other text normalizes away. Chat template :data:`TOOL_CHAT_TEMPLATE`; response template
    :data:`RESPONSE_TEMPLATE`."""
    from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.WordLevel(vocab={SPECIALS[0]: 0}, unk_token=SPECIALS[0]))
    tk.normalizer = normalizers.Replace(Regex(r"[\s\S]"), "")
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    tk.add_tokens([AddedToken(c, special=False, normalized=False) for c in calls])
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token=SPECIALS[1], eos_token=SPECIALS[2],
                                  pad_token=SPECIALS[0], unk_token=SPECIALS[0], chat_template=TOOL_CHAT_TEMPLATE,
                                  clean_up_tokenization_spaces=False)
    tok.padding_side = "left"
    tok.response_template = RESPONSE_TEMPLATE
    return tok


def save_tool_model(folder: str | Path, calls: Sequence[str], seed: int, hidden: int = 32, layers: int = 2) -> Path:
    """A tiny Llama built from a config (weights drawn from ``seed``) with :func:`tool_tokenizer` of ``calls``,
    saved into ``folder``."""
    return save_tiny_llama(folder, tool_tokenizer(calls), hidden, layers, 128, seed)


def load_tool_model(folder: str | Path) -> tuple[Any, Any]:
    """(model, tokenizer) of :func:`save_tool_model`, the tokenizer's response template set again (it is not saved)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    tok.response_template = RESPONSE_TEMPLATE
    return AutoModelForCausalLM.from_pretrained(folder), tok


def grpo_args(out_dir: str | Path, batch: int, group: int, steps: int, learning_rate: float, seed: int,
              **overrides: Any) -> Any:
    """TRL's ``GRPOConfig`` for a tiny CPU run: ``batch`` rollouts a step in groups of ``group``, one optimizer step
    per generation batch, the recipe's k3 KL (``beta`` 0.04) and dapo loss, one tool round, nothing saved."""
    from trl import GRPOConfig

    kw: dict[str, Any] = dict(
        output_dir=str(out_dir), per_device_train_batch_size=batch, num_generations=group,
        gradient_accumulation_steps=1, max_steps=steps, learning_rate=learning_rate, beta=0.04, loss_type="dapo",
        max_completion_length=6, max_tool_calling_iterations=1, temperature=1.0, logging_steps=1,
        save_strategy="no", report_to=[], use_cpu=True, seed=seed, data_seed=seed, bf16=False, warmup_steps=5,
        disable_tqdm=True, dataloader_num_workers=0)
    kw.update(overrides)
    return GRPOConfig(**kw)


# ---------------------------------------------------------------------------------------------
# The rung
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrlRungSpec:
    """The TRL rung's task, model and budget (the ladder's, through TRL's tool loop)."""

    domain: str = "acquisition"
    levels: int = 6
    hidden: int = 32
    layers: int = 2
    scenarios: int = 4
    rollouts: int = 8  # the GRPO group
    steps: int = 40
    window: int = 3
    learning_rate: float = 5e-3
    n_resamples: int = 10_000
    alpha: float = 0.01
    threads: int | None = 1


def rung_calls(spec: TrlRungSpec) -> list[str]:
    """The whole ``counter`` calls, level 0 (worst for the seller) first."""
    from negolib.games.multi_issue.domains import load_domains

    dom = load_domains()[spec.domain]
    out = []
    for k in range(spec.levels):
        terms = {t["name"]: t["value"] for t in level_terms(dom, k / (spec.levels - 1))}
        out.append(call_text("counter", {"terms": terms, "message": f"Offer {k}."}))
    return out


def _scenario_key(episode_id: str) -> str:
    return episode_id.rsplit("|trl", 1)[0]


def train_trl_rung(out_dir: str | Path, seed: int = 0, sabotage: str | None = None,
                   spec: TrlRungSpec | None = None) -> TrainedRung:
    """Train the rung (``sabotage="lr_zero"``: its twin) with TRL's stock ``GRPOTrainer`` into ``out_dir``."""
    from trl import GRPOTrainer

    from negolib.envs.trl import dataset, environment_factory

    if sabotage not in (None, "lr_zero"):
        raise ValueError(f"the TRL rung's only twin is 'lr_zero', got {sabotage!r}")
    spec = spec or TrlRungSpec()
    t0, out = time.perf_counter(), Path(out_dir)
    initial = save_tool_model(out / "initial", rung_calls(spec), seed, spec.hidden, spec.layers)
    base = environment_factory("multi_issue", AcceptingBuyer(), seed=seed, max_rounds=1)
    rewards: list[tuple[str, float]] = []  # (scenario key, reward) in the order TRL scores the rollouts

    class RungEnvironment(base):  # type: ignore[misc,valid-type]
        def get_reward(self) -> float:
            r = super().get_reward()
            rewards.append((_scenario_key(self.episode.episode_id), r))
            return r

    model, tok = load_tool_model(initial)
    rows = dataset("multi_issue", spec.scenarios, "train", strata=(spec.domain,))
    batch = spec.scenarios * spec.rollouts
    with _torch_threads(spec.threads):
        trainer = GRPOTrainer(model=model, processing_class=tok, train_dataset=rows,
                              environment_factory=RungEnvironment,
                              args=grpo_args(out / "run", batch, spec.rollouts, spec.steps, spec.learning_rate, seed))
        if sabotage == "lr_zero":
            trainer.add_callback(_zero_lr_callback(trainer))
        trainer.train()
    final = out / "final"
    trainer.save_model(str(final))
    step_rewards = [[r for _, r in rewards[i * batch:(i + 1) * batch]] for i in range(spec.steps)]
    keyed: dict[tuple[int, str, int], float] = {}
    for i in range(spec.steps):
        seen: dict[str, int] = {}
        for key, r in rewards[i * batch:(i + 1) * batch]:
            seen[key] = seen.get(key, 0) + 1
            keyed[(i + 1, key, seen[key])] = r
    early, late = [], []
    for j in range(spec.window):
        e_step, l_step = 1 + j, spec.steps - spec.window + 1 + j
        for (step, key, rank), r in sorted(keyed.items()):
            if step == e_step and (l_step, key, rank) in keyed:
                early.append(r)
                late.append(keyed[(l_step, key, rank)])
    log = [row for row in trainer.state.log_history if "loss" in row]
    return TrainedRung(
        seed=seed, sabotage=sabotage, spec=spec, initial_dir=str(initial), checkpoint=str(final),  # type: ignore[arg-type]
        step_rewards=step_rewards,
        train_gain=paired_gain(np.array(late), np.array(early), spec.n_resamples, seed, spec.alpha),
        train_optimum=_optimum(rows, spec), weight_change=weight_change(initial, final),
        seconds=time.perf_counter() - t0, log=log)


def _optimum(rows: Any, spec: TrlRungSpec) -> float:
    """Mean seller utility of the top level, always accepted, on the rung's scenarios."""
    from negolib.games.multi_issue.domains import load_domains
    from negolib.games.multi_issue.scenarios import make_scenario
    from negolib.games.multi_issue.utility import normalized_utility

    dom = load_domains()[spec.domain]
    top = {t["name"]: t["value"] for t in level_terms(dom, 1.0)}
    seeds = [int(r["scenario_key"].rpartition("|")[2]) for r in rows]
    return float(np.mean([normalized_utility(dom, make_scenario(dom, s).seller, top) for s in seeds]))


__all__ = ["RESPONSE_TEMPLATE", "TOOL_CHAT_TEMPLATE", "TrlRungSpec", "call_text", "grpo_args", "load_tool_model",
           "rung_calls", "save_tool_model", "tool_tokenizer", "train_trl_rung"]
