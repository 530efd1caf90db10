"""What the games' supervised fine-tuning shares: a tournament's best deals as chats, and TRL's SFT on them.

Contract: :func:`select_best` picks, per scenario, the best valid deal among a tournament's matches (a game passes
its seller payoff and what makes a deal valid); a game turns each picked record into the seller's chat as its local
agent is prompted (its own ``seller_chat``); :func:`run_sft` fine-tunes a model on those chats with TRL's
``SFTTrainer``, the loss on the assistant turns only (:func:`encode_conversation`, checked against TRL's labels), and
saves an ``hf:<path>`` model with its log and the assistant-token loss before and after.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from negolib.games.matches import MATCHES_FILE, read_lines

Record = Mapping[str, Any]


def read_matches(path: str | Path) -> list[dict[str, Any]]:
    """The match lines of a tournament file (or of ``<dir>/matches.jsonl``), each decoded and typed by the
    tournament's reader (:func:`negolib.games.matches.read_lines`: a bad line raises naming the file and line); a
    torn last line is ignored."""
    p = Path(path)
    if p.is_dir():
        p = p / MATCHES_FILE
    if not p.exists():
        raise FileNotFoundError(f"no tournament file at {p}")
    return [rec.to_dict() for _, rec in read_lines(p)]


def match_fields(obj: Any) -> dict[str, Any]:
    """A tournament match record (a ``MatchRecord`` or its JSON dict) as a dict with the fields used here."""
    if isinstance(obj, Mapping):
        return {"seller": str(obj["seller"]), "buyer": str(obj["buyer"]), "scenario_key": str(obj["scenario_key"]),
                "record": dict(obj["record"])}
    return {"seller": str(obj.seller), "buyer": str(obj.buyer), "scenario_key": str(obj.scenario_key),
            "record": dict(obj.record)}


def is_lm_name(name: str) -> bool:
    """Whether an agent name is a language model's (``hf:<path>``, ``openai:<model>``, ...)."""
    return ":" in name


def select_best(matches: Iterable[Any], payoff: Callable[[Record], float], *, game: str,
                deal_ok: Callable[[Record], bool], sellers: Sequence[str] | None = None,
                opponents: Sequence[str] | None = None, select: Literal["best_deal", "top_seller"] = "best_deal",
                n_turns: Callable[[Record], int] | None = None, exclude: Collection[str] = ()) -> list[dict[str, Any]]:
    """Per scenario, the best deal among the candidate matches of ``game`` (one per scenario key, in key order).

    Candidates: valid records (no error, an outcome) of ``sellers`` (None: every seller that is not a language
    model nor in ``exclude``) against ``opponents`` (None: every buyer) whose deal passes ``deal_ok`` (the game's
    validity: a deal, no individual-rationality violation). ``best_deal``: the highest ``payoff`` (the seller's),
    ties to fewer turns (``n_turns``, default the record's turn count), then seller and buyer name. ``top_seller``:
    only the deals of the seller with the highest mean payoff over all its valid episodes against ``opponents``."""
    turns = n_turns or (lambda rec: len(rec["turns"]))
    rows = [match_fields(m) for m in matches]
    rows = [r for r in rows
            if (sellers is None and not is_lm_name(r["seller"]) and r["seller"] not in exclude)
            or (sellers and r["seller"] in sellers)]
    rows = [r for r in rows if opponents is None or r["buyer"] in opponents]
    rows = [r for r in rows if r["record"].get("game", game) == game]
    valid = [r for r in rows if r["record"].get("status") != "error" and r["record"].get("outcome")]
    if select == "top_seller":
        means: dict[str, list[float]] = {}
        for r in valid:
            means.setdefault(r["seller"], []).append(payoff(r["record"]))
        if not means:
            return []
        top = max(sorted(means), key=lambda s: float(np.mean(means[s])))
        valid = [r for r in valid if r["seller"] == top]
    elif select != "best_deal":
        raise ValueError(f"select must be 'best_deal' or 'top_seller', got {select!r}")
    best: dict[str, tuple[tuple, dict[str, Any]]] = {}
    for r in valid:
        rec = r["record"]
        if not deal_ok(rec):
            continue
        rank = (-payoff(rec), turns(rec), r["seller"], r["buyer"])
        if r["scenario_key"] not in best or rank < best[r["scenario_key"]][0]:
            best[r["scenario_key"]] = (rank, r)
    return [best[k][1] for k in sorted(best)]


@dataclass(frozen=True)
class GameSFTExample:
    """One seller conversation of a game (``messages`` ends on the seller's last turn), the match it came from and
    its seller payoff (the game's)."""

    messages: tuple[dict[str, Any], ...]
    scenario_key: str
    seller: str
    buyer: str
    payoff: float


def sft_examples(source: str | Path | Iterable[Any], payoff: Callable[[Record], float],
                 chat: Callable[[Record], list[dict[str, Any]]], *, game: str, deal_ok: Callable[[Record], bool],
                 sellers: Sequence[str] | None = None, opponents: Sequence[str] | None = None,
                 select: Literal["best_deal", "top_seller"] = "best_deal", min_share: float = 0.0,
                 max_examples: int | None = None, exclude: Collection[str] = ()) -> list[GameSFTExample]:
    """The SFT conversations of a tournament (its directory, its ``matches.jsonl`` or its match records): ``chat``
    of each scenario's best deal (:func:`select_best`, ``exclude`` as there) with a payoff of at least
    ``min_share``, in scenario-key order (the first ``max_examples``)."""
    matches = read_matches(source) if isinstance(source, (str, Path)) else list(source)
    out = []
    for r in select_best(matches, payoff, game=game, deal_ok=deal_ok, sellers=sellers, opponents=opponents,
                         select=select, exclude=exclude):
        share = float(payoff(r["record"]))
        if share >= min_share:
            out.append(GameSFTExample(tuple(chat(r["record"])), r["scenario_key"], r["seller"], r["buyer"], share))
    return out[:max_examples] if max_examples is not None else out


def encode_conversation(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> tuple[list[int], list[int]]:
    """(ids, assistant mask) of a chat: the template's render without a generation prompt, tokenized once; the mask
    is 1 on the tokens of each assistant message's content and its end-of-turn token, 0 elsewhere."""
    from negolib.core.chat_template import derive_turn_tags, render_chat

    msgs = [dict(m) for m in messages]
    full = render_chat(tokenizer, msgs, add_generation_prompt=False)
    stop = tokenizer.decode([derive_turn_tags(tokenizer).stop_ids[0]], skip_special_tokens=False)
    spans = []
    for i, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        prefix = render_chat(tokenizer, msgs[:i], add_generation_prompt=True)
        upto = render_chat(tokenizer, msgs[: i + 1], add_generation_prompt=False)
        end = upto.find(stop, len(prefix) + len(m["content"]))
        if not (full.startswith(upto) and upto.startswith(prefix)) or end < 0:
            raise ValueError(f"the chat template does not render assistant message {i} as a prefix of the chat")
        spans.append((len(prefix), end + len(stop)))
    enc = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
    mask = [int(b > a and any(lo <= a and b <= hi for lo, hi in spans)) for a, b in enc["offset_mapping"]]
    return list(enc["input_ids"]), mask


@dataclass(frozen=True)
class SFTConfig:
    """Supervised fine-tuning with TRL's ``SFTTrainer`` on the assistant turns (ours)."""

    epochs: int = 2  # passes over the conversations
    learning_rate: float = 5e-5  # peak; cosine decay after a linear warm-up
    warmup_ratio: float = 0.1  # fraction of the steps spent warming up
    batch_size: int = 4  # conversations per optimizer step (micro-batches of one, accumulated)
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    max_length: int = 4096  # tokens per conversation; longer ones keep their start
    seed: int = 0  # shuffling and initialisation of anything random
    dtype: str = "float32"  # float32 on CPU

    def __post_init__(self) -> None:
        """A refused value raises ``ValueError("<Class>.<field> <problem>")``, naming its field."""
        for name, ok, rule in (("epochs", self.epochs >= 1, ">= 1"), ("batch_size", self.batch_size >= 1, ">= 1"),
                               ("max_length", self.max_length >= 2, ">= 2"),
                               ("learning_rate", 0 < self.learning_rate < 1, "in (0, 1)"),
                               ("warmup_ratio", 0 <= self.warmup_ratio < 1, "in [0, 1)")):
            if not ok:
                raise ValueError(f"{type(self).__name__}.{name} must be {rule}, got {getattr(self, name)}")


@dataclass
class SFTResult:
    """Where the fine-tuned model is (``hf:<model_dir>``), the mean assistant-token loss on the data before and
    after, the optimizer steps, the seconds and TRL's log rows."""

    model_dir: Path
    loss_before: float
    loss_after: float
    steps: int
    seconds: float
    examples: int
    log: list[dict[str, Any]] = field(default_factory=list)


def masked_loss(model: Any, encoded: Sequence[tuple[list[int], list[int]]]) -> float:
    """Mean next-token negative log-likelihood over the masked (assistant) tokens of ``encoded``."""
    import torch

    total, n = 0.0, 0
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for ids, mask in encoded:
                x = torch.tensor([ids], device=device)
                logits = model(input_ids=x).logits[0, :-1].float()
                target, keep = x[0, 1:], torch.tensor(mask[1:], device=device).bool()
                nll = torch.nn.functional.cross_entropy(logits, target, reduction="none")
                total += float(nll[keep].sum())
                n += int(keep.sum())
    finally:
        model.train(was_training)
    return total / max(1, n)


def run_sft(model_dir: str | Path, dataset: Sequence[Any],
            out_dir: str | Path, config: SFTConfig | None = None, progress: bool = False) -> SFTResult:
    """Fine-tune the model at ``model_dir`` (a folder or a packaged model name) on ``dataset`` (chats, or examples
    with a ``messages`` chat) and save it to
    ``<out_dir>/model`` (atomically; loadable as ``hf:<out_dir>/model``), with ``sft_log.jsonl`` and
    ``sft_summary.json`` beside it. The loss covers the assistant turns only (:func:`encode_conversation`)."""
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig as TRLSFTConfig
    from trl import SFTTrainer

    from negolib.models import resolve_model_path
    from negolib.training.checkpoints import atomic_dir

    c = config or SFTConfig()
    if not dataset:
        raise ValueError("run_sft: an empty dataset")
    t0 = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    init = resolve_model_path(model_dir)
    tok = AutoTokenizer.from_pretrained(init)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    chats = [ex.messages if hasattr(ex, "messages") else ex for ex in dataset]  # examples or bare chats
    encoded = [encode_conversation(tok, chat) for chat in chats]
    encoded = [(ids[: c.max_length], mask[: c.max_length]) for ids, mask in encoded]
    empty = [i for i, (_, mask) in enumerate(encoded) if not any(mask)]
    if len(empty) == len(encoded):
        raise ValueError(f"run_sft: no assistant token within max_length={c.max_length} in any of the {len(encoded)} "
                         "conversations (truncation keeps their start); raise max_length")
    if empty:
        warnings.warn(f"run_sft: {len(empty)} of {len(encoded)} conversations have no assistant token within "
                      f"max_length={c.max_length} and are not trained on (examples {empty[:8]})", stacklevel=2)
    rows = [{"input_ids": ids, "assistant_masks": mask} for ids, mask in encoded]
    cuda = torch.cuda.is_available()
    args = TRLSFTConfig(
        output_dir=str(out / "trainer"), num_train_epochs=c.epochs, per_device_train_batch_size=1,
        gradient_accumulation_steps=c.batch_size, learning_rate=c.learning_rate, lr_scheduler_type="cosine",
        warmup_steps=c.warmup_ratio, weight_decay=c.weight_decay, max_grad_norm=c.max_grad_norm,
        max_length=c.max_length, packing=False, logging_steps=1, save_strategy="no", report_to=[],
        seed=c.seed, data_seed=c.seed, use_cpu=not cuda, bf16=False, fp16=False, disable_tqdm=not progress,
        dataloader_num_workers=0, model_init_kwargs={"dtype": c.dtype}, completion_only_loss=False,
        assistant_only_loss=False, dataset_num_proc=None,
    )
    trainer = SFTTrainer(model=init, args=args, train_dataset=Dataset.from_list(rows), processing_class=tok)
    if not progress:
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
    for (ids, mask), labels in zip(encoded, trainer.train_dataset["labels"]):  # TRL's labels are our mask
        if list(labels) != [i if m else -100 for i, m in zip(ids, mask)]:
            raise RuntimeError("SFTTrainer's labels do not follow the assistant mask; nothing was trained")
    before = masked_loss(trainer.model, encoded)
    trainer.train()
    after = masked_loss(trainer.model, encoded)
    final = out / "model"
    with atomic_dir(final) as staged:
        trainer.model.save_pretrained(staged)
        tok.save_pretrained(staged)
    log = [dict(r) for r in trainer.state.log_history]
    with open(out / "sft_log.jsonl", "w") as fh:
        for r in log:
            fh.write(json.dumps(r) + "\n")
    result = SFTResult(final, before, after, int(trainer.state.global_step), time.perf_counter() - t0, len(rows), log)
    summary = {"init": init, "config": asdict(c), "examples": len(rows), "steps": result.steps,
               "loss_before": before, "loss_after": after, "seconds": result.seconds,
               "assistant_tokens": sum(sum(m) for _, m in encoded), "tokens": sum(len(i) for i, _ in encoded)}
    (out / "sft_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return result


__all__ = ["MATCHES_FILE", "GameSFTExample", "SFTConfig", "SFTResult", "encode_conversation", "is_lm_name",
           "masked_loss", "match_fields", "read_matches", "run_sft", "select_best", "sft_examples"]
