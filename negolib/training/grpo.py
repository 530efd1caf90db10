"""Multi-turn GRPO of the seller with TRL's ``GRPOTrainer`` [paper §3 "Optimization", App. H].

How TRL is used (trl 1.16):

* ``rollout_func`` (TRL's supported hook for custom generation) plays whole episodes with
  :class:`~negolib.training.rollout.RolloutEngine` and returns ``prompt_ids``, ``completion_ids``,
  ``logprobs``, ``env_mask`` (TRL's documented multi-turn mask: 1 = seller token, 0 = buyer/scaffold
  token, folded into the loss mask) and the episode reward, score and deal flag as extra fields; the
  reward function :func:`episode_reward` just returns the reward field. ``rollout_func`` receives only
  the prompts, so the trainer keeps the current generation batch's dataset rows (domain, seed,
  buyer) in ``current_rows`` for it.
* Advantages: TRL computes group mean/std advantages inline in ``_generate_and_score_completions``
  (there is no separate advantage method in 1.16).
  :class:`~negolib.training.grpo_trainer.NegotiationGRPOTrainer` keeps the rewards TRL gathered
  (``_calculate_rewards``) and replaces ``advantages`` in that method's output with NeMo-RL's
  leave-one-out advantages (:mod:`negolib.training.advantages`), before TRL shuffles and splits the batch.
  ``advantage="group"`` keeps TRL's own.
* Loss: ``loss_type="dapo"`` (token-level: summed over every unmasked token of the generation batch
  and divided by their count), clip ``epsilon``/``epsilon_high`` 0.2/0.2, ``beta`` 0.04 with TRL's k3
  estimator against a reference copy of the initial weights, in the loss; ``use_bias_correction_kl``
  is off, so the KL term is the plain k3 of NeMo-RL's default; so is TRL's vLLM importance-sampling
  correction (NeMo-RL's recipe has none; its sequence-level default would drop long multi-turn
  episodes wholesale). One optimizer step per 128-episode
  generation batch (``gradient_accumulation_steps = episodes / micro-batch``), ``num_iterations=1``.
* Schedule: ``create_scheduler`` is overridden with the warmup-cosine of :mod:`schedule`.
* Checkpoints: TRL/HF save every ``save_every`` steps and at the end; ``_save_checkpoint`` is wrapped
  so each checkpoint is written into a staging directory and renamed into place (atomic), and
  ``train(..., resume=True)`` resumes from the last complete one (weights, optimizer, scheduler,
  RNG, data position).
* Generation: HF ``generate`` through :class:`~negolib.agents.hf_agent.HFAgent` on the policy module
  (CPU), or TRL's colocated vLLM engine from token ids (GPU, ``generation_backend="vllm"``).

Games: a :class:`TrainingTask` is the game the policy trains in (this module imports none): the game's episode
factory and render (its adapter of :class:`~negolib.training.rollout.TrainableEpisode`), its training and
validation scenario items, the policy's role, a multi-turn chat for the tag round-trip check, its default
opponents and how its records are written; the dataset rows carry each item's index. The paper's game is
:func:`negolib.games.multi_issue.training.paper_task` (the policy sells, its scripted buyers by default, the checked
transcript schema).

Validation (step 0 and every ``validate_every`` steps): one episode per fixed validation scenario
against its assigned buyer, sampled with the recipe's settings, in the *training* environment
(terms attached to an accept applied) and by default on the *training* scaffold, i.e. on the
distribution the policy is optimized on, as NeMo-RL's in-loop validation does;
``validation_scaffold="evaluation"`` validates on the evaluation scaffold instead. Logged: mean
score S, deal rate, reward, turns, bad-parse rate.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from negolib.agents.base import Agent
from negolib.agents.hf_agent import HFAgent
from negolib.core.chat_template import TurnTags, assert_roundtrip, derive_turn_tags
from negolib.core.files import atomic_write_text, locked_append
from negolib.core.sampling import SamplingConfig
from negolib.models import resolve_model_path
from negolib.training.checkpoints import last_checkpoint, sweep_staging
from negolib.training.config import TrainConfig
from negolib.training.data import ScenarioItem, item_rows
from negolib.training.grpo_args import build_grpo_args, lora_config
from negolib.training.release import release_memory
from negolib.training.rollout import (
    EpisodeFactory,
    HFAgentGenerator,
    Render,
    RolloutBatch,
    RolloutEngine,
    RolloutLimits,
    VLLMTokenGenerator,
)
from negolib.training.runlog import RunLog

TRAIN_LOG = "train_log"
VALIDATION_LOG = "validation_log"


def episode_reward(
    prompts: list[Any], completions: list[Any], episode_reward: list[float], **_: Any
) -> list[float]:
    """The reward function TRL calls: the episode reward (Eq. 1) the rollout already computed."""
    return [float(r) for r in episode_reward]


# ---------------------------------------------------------------------------------------------
# Engines, validation, callbacks
# ---------------------------------------------------------------------------------------------


def _limits(c: TrainConfig) -> RolloutLimits:
    return RolloutLimits(c.max_new_tokens, c.max_context_tokens, c.max_prompt_tokens, c.max_rollout_turns)


def append_game_records(path: Path, records: Sequence[dict[str, Any]]) -> None:
    """Append another game's training records as JSON lines (not checked against the paper's transcript schema)."""
    locked_append(path, "".join(json.dumps(r, allow_nan=False, separators=(",", ":")) + "\n" for r in records).encode())


def prune_game_records(path: Path, max_step: int) -> None:
    """Drop another game's training records of steps after ``max_step`` and a torn last line (before a resume)."""
    if not path.is_file():
        return
    lines = path.read_text(encoding="utf-8").split("\n")[:-1]  # after the last newline: empty, or a torn line
    keep = [line + "\n" for line in lines if line.strip() and json.loads(line).get("step", 0) <= max_step]
    atomic_write_text(path, "".join(keep))


@dataclass(frozen=True)
class TrainingTask:
    """The game the shared trainer plays (the paper's: :func:`negolib.games.multi_issue.training.paper_task`).

    ``episode_factory`` and ``render`` are the game's (see :class:`~negolib.training.rollout.RolloutEngine`);
    ``train_items`` / ``validation_items`` its scenario items, each naming the opponent agent it is played
    against; ``role`` the policy's; ``roundtrip`` a multi-turn chat of the policy (system/user first, then
    alternating assistant and user turns) whose turn tags must round-trip before training (empty: the first
    training prompt plus two canned assistant turns); ``default_opponents`` builds the opponents when the caller
    passes none (None: the caller must); ``append_records`` / ``prune_records`` write the training and validation
    records and cut them back to a resumed step (default: plain JSON lines)."""

    episode_factory: EpisodeFactory
    render: Render
    train_items: tuple[ScenarioItem, ...]
    validation_items: tuple[ScenarioItem, ...] = ()
    role: str = "seller"
    roundtrip: tuple[dict[str, str], ...] = ()
    default_opponents: Callable[[], Mapping[str, Agent]] | None = None
    append_records: Callable[[Path, Sequence[dict[str, Any]]], None] = append_game_records
    prune_records: Callable[[Path, int], None] = prune_game_records

    def __post_init__(self) -> None:
        if not self.train_items:
            raise ValueError("a training task needs at least one training item")
        if self.role not in ("seller", "buyer"):
            raise ValueError(f"role must be 'seller' or 'buyer', got {self.role!r}")

    def first_prompt(self, item: ScenarioItem, scaffold: str) -> list[dict[str, str]]:
        """The policy's first chat messages on ``item`` (before any opening of the opponent's)."""
        return self.render(self.episode_factory(item, item.scenario_id).view(self.role), scaffold)

    def roundtrip_dialogue(self, scaffold: str) -> list[dict[str, str]]:
        if self.roundtrip:
            return [dict(m) for m in self.roundtrip]
        head = self.first_prompt(self.train_items[0], scaffold)
        return [*head, {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Go on."},
                {"role": "assistant", "content": "Done."}]

    def dataset(self, scaffold: str):  # noqa: ANN201 (datasets imported lazily)
        """The training items as a ``datasets.Dataset`` (rows of :func:`~negolib.training.data.item_rows`)."""
        from datasets import Dataset

        prompts = [self.first_prompt(it, scaffold) for it in self.train_items]
        return Dataset.from_list(item_rows(self.train_items, prompts))


def _parties(role: str, opponent: str) -> dict[str, str]:
    """The record's ``seller`` and ``buyer`` fields: "policy" in ``role``, the opponent in the other."""
    return {"seller": "policy", "buyer": opponent} if role == "seller" else {"seller": opponent, "buyer": "policy"}


@dataclass
class EngineFactory:
    """Builds rollout engines on the trainer's current policy (HF) or its colocated vLLM engine, for the game of
    ``episode_factory``/``render``/``role`` (a :class:`TrainingTask`'s)."""

    config: TrainConfig
    tokenizer: Any
    tags: TurnTags
    buyers: Mapping[str, Agent]
    backend: str
    episode_factory: EpisodeFactory
    render: Render
    role: str = "seller"
    trainer: Any = None

    def generator(self, seed: int) -> Any:
        tr, c = self.trainer, self.config
        if self.backend == "vllm":

            def sync() -> None:
                if tr.state.global_step != tr._last_loaded_step:
                    tr.vllm_generation.sync_weights()
                    tr._last_loaded_step = tr.state.global_step

            return VLLMTokenGenerator(tr.vllm_generation, self.tags.stop_ids, sync)
        sampling = SamplingConfig.seeded(c.decoding, seed=seed)
        agent = HFAgent(
            tr.accelerator.unwrap_model(tr.model),
            self.tokenizer,
            sampling,
            scaffold=c.scaffold,
            max_batch=c.generation_batch_size or 1_000_000,
            prompt_cap=c.max_prompt_tokens,
        )
        return HFAgentGenerator(agent)

    def engine(self, seed: int, scaffold: str | None = None) -> RolloutEngine:
        return RolloutEngine(
            self.generator(seed),
            self.tokenizer,
            self.tags,
            self.buyers,
            episode_factory=self.episode_factory,
            render=self.render,
            limits=_limits(self.config),
            scaffold=scaffold or self.config.scaffold,
            role=self.role,
        )


def _play(
    trainer: Any, engine: RolloutEngine, items: Sequence[ScenarioItem], ids: Sequence[str]
) -> RolloutBatch:
    """Play with the policy in eval mode (no dropout, KV cache on), restoring its mode afterwards."""
    model = trainer.model
    was_training = model.training
    model.eval()
    try:
        return engine.play(items, ids)
    finally:
        model.train(was_training)


def make_rollout_func(
    factory: EngineFactory,
    transcripts: Path | None,
    run_name: str,
    items: Sequence[ScenarioItem],
    append: Callable[[Path, Sequence[dict[str, Any]]], None] = append_game_records,
) -> Callable[..., dict]:
    """TRL's ``rollout_func(prompts, trainer)``: play the generation batch's episodes.

    TRL hands over the per-process prompts with each scenario repeated ``num_generations`` times
    (its ``RepeatSampler``); the matching dataset rows are in ``trainer.current_rows``. A row names its
    item by index into ``items``. ``append`` writes the transcript records.
    """

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        rows = trainer.current_rows
        if rows is None or len(rows) != len(prompts):
            raise RuntimeError("rollout_func needs the generation batch's rows (trainer.current_rows)")
        step = trainer.state.global_step + 1
        items_ = [items[int(r["item"])] for r in rows]
        counts: dict[str, int] = {}
        ranks = []  # rollout index of each episode within its scenario's group
        for it in items_:
            ranks.append(counts.get(it.scenario_id, 0))
            counts[it.scenario_id] = ranks[-1] + 1
        arms = [f"{run_name}|step{step}|r{k}" for k in ranks]
        ids = [f"{arm}|{it.scenario_id}|{it.buyer}" for arm, it in zip(arms, items_)]
        seed = factory.config.seed * 1_000_003 + step * 1_009 + trainer.accelerator.process_index
        batch = _play(trainer, factory.engine(seed), items_, ids)
        for name, value in batch.metrics().items():
            trainer._log_metric(name, float(value))
        if transcripts is not None and trainer.accelerator.is_main_process:
            recs = []
            for arm, t in zip(arms, batch.trajectories):
                rec = t.record(arm=arm, **_parties(factory.role, t.item.buyer))
                rec["step"] = step
                recs.append(rec)
            append(transcripts, recs)
        return batch.trl_output(factory.config.trained_turns)

    return rollout_func


@dataclass
class Validator:
    """Validation on the fixed validation scenarios (see the module docstring)."""

    factory: EngineFactory
    items: list[ScenarioItem]
    log: RunLog
    transcripts: Path | None
    scaffold: str
    run_name: str
    append: Callable[[Path, Sequence[dict[str, Any]]], None] = append_game_records

    def run(self, trainer: Any, step: int) -> dict[str, Any]:
        if step in self.log.steps():
            return {}
        t0 = time.perf_counter()
        seed = self.factory.config.seed * 1_000_003 + 7_919 + step
        ids = [f"{self.run_name}|val{step}|{it.scenario_id}|{it.buyer}" for it in self.items]
        batch = _play(trainer, self.factory.engine(seed, self.scaffold), self.items, ids)
        m = batch.metrics()
        row = {
            "step": step,
            "score": m["score"],
            "deal_rate": m["deal_rate"],
            "reward": m["episode_reward"],
            "turns": m["turns"],
            "bad_parse_rate": m["bad_parse_rate"],
            "truncated_rate": m["truncated_rate"],
            "n_episodes": len(self.items),
            "scaffold": self.scaffold,
            "time_s": time.perf_counter() - t0,
        }
        if self.transcripts is not None:
            recs = []
            for t in batch.trajectories:
                rec = t.record(arm=f"{self.run_name}|val{step}", **_parties(self.factory.role, t.item.buyer))
                rec["step"] = step
                recs.append(rec)
            self.append(self.transcripts, recs)
        self.log.append(row)
        return row


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


@dataclass
class TrainResult:
    """What a run produced: the final checkpoint, the per-step log and the validation log."""

    out_dir: Path
    checkpoint: Path | None
    steps: int
    log: list[dict[str, Any]] = field(default_factory=list)
    validation: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    backend: str = "hf"


@dataclass
class RunSetup:
    """A constructed run, ready to train: the TRL trainer and what drives it."""

    trainer: Any
    factory: EngineFactory
    validator: Validator | None
    resume_from: Path | None
    train_log: RunLog
    validation_log: RunLog
    out_dir: Path
    backend: str


def _initial_weights(
    config: TrainConfig, model_name_or_path: str | Path, recorded: Path, resume_from: Path | None
) -> str:
    """The run's initial policy (also the KL reference): the model, or ``continue_from``. A resumed run
    keeps the one its ``config.json`` recorded; naming a different existing model is an error."""
    init = resolve_model_path(config.continue_from or model_name_or_path)
    if resume_from is None or not recorded.is_file():
        return init
    before = json.loads(recorded.read_text()).get("init")
    if before and before != init:
        if Path(init).exists() and Path(before).exists() and Path(init).resolve() != Path(before).resolve():
            raise ValueError(
                f"{recorded.parent} was started from {before!r}; resuming it from {init!r} would "
                "change the policy's initial weights and KL reference"
            )
        return before
    return init


def build_run(
    config: TrainConfig,
    model_name_or_path: str | Path,
    out_dir: str | Path,
    buyers: Mapping[str, Agent] | None = None,
    progress: bool = True,
    resume: bool = True,
    callbacks: Sequence[Any] = (),
    transcripts: bool = True,
    *,
    task: TrainingTask,
) -> RunSetup:
    """Everything :func:`train` needs, without training: config files, logs (pruned to the resumed
    checkpoint), the turn tags (round-trip asserted on a multi-turn dialogue first) and the trainer.
    ``task``: the game (the paper's: :func:`negolib.games.multi_issue.training.paper_task`); ``buyers``: its opponents
    (default: the task's ``default_opponents``)."""
    import torch
    from transformers import AutoTokenizer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ckpt_dir = out / "checkpoints"
    sweep_staging(ckpt_dir)
    cuda = torch.cuda.is_available()
    vllm_ok = False
    if cuda:
        import importlib.util

        vllm_ok = importlib.util.find_spec("vllm") is not None
    backend = config.resolved_backend(cuda, vllm_ok)
    resume_from = last_checkpoint(ckpt_dir) if resume else None
    init = _initial_weights(config, model_name_or_path, out / "config.json", resume_from)
    atomic_write_text(
        out / "config.json",
        json.dumps(
            {
                "train": config.to_dict(),
                "init": init,
                "backend": backend,
                "dtype": config.resolved_dtype(cuda),
            },
            indent=2,
        )
        + "\n",
    )
    train_log, val_log = RunLog(out, TRAIN_LOG), RunLog(out, VALIDATION_LOG)
    tdir = out / "transcripts"
    if resume_from is None:  # a fresh run: nothing of an earlier attempt survives
        for p in (
            train_log.jsonl,
            train_log.csv,
            val_log.jsonl,
            val_log.csv,
            tdir / "train.jsonl",
            tdir / "validation.jsonl",
        ):
            p.unlink(missing_ok=True)
    else:
        done_step = int(resume_from.name.split("-")[1])
        train_log.truncate_after(done_step)
        val_log.truncate_after(done_step)
        task.prune_records(tdir / "train.jsonl", done_step)
        task.prune_records(tdir / "validation.jsonl", done_step)

    tok = AutoTokenizer.from_pretrained(init)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    tags = derive_turn_tags(tok)
    assert_roundtrip(tok, tags, task.roundtrip_dialogue(config.scaffold))
    if buyers is None:
        if task.default_opponents is None:
            raise ValueError("a training task without default opponents needs its opponent agents (buyers)")
        buyers = task.default_opponents()
    agents = dict(buyers)
    needed = {it.buyer for it in (*task.train_items, *task.validation_items)}
    missing = sorted(needed - set(agents))
    if missing:
        raise KeyError(f"no buyer agent for mixture names {missing}; given: {sorted(agents)}")

    factory = EngineFactory(config, tok, tags, agents, backend, task.episode_factory, task.render, task.role)
    run_name = out.name
    validator = None
    if config.validate_every:
        vscaffold = config.validation_scaffold or config.scaffold
        validator = Validator(
            factory,
            list(task.validation_items),
            val_log,
            tdir / "validation.jsonl" if transcripts else None,
            vscaffold,
            run_name,
            task.append_records,
        )
    rollout_func = make_rollout_func(
        factory,
        tdir / "train.jsonl" if transcripts else None,
        run_name,
        task.train_items,
        task.append_records,
    )
    args = build_grpo_args(config, ckpt_dir, cuda, backend, tags.stop_ids)
    from negolib.training.grpo_trainer import NegotiationGRPOTrainer
    from negolib.training.grpo_trainer import callbacks as run_callbacks

    trainer_cls = NegotiationGRPOTrainer
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*rollout_func.*experimental.*")
        trainer = trainer_cls(
            model=init,
            reward_funcs=[episode_reward],
            args=args,
            train_dataset=task.dataset(config.scaffold),
            processing_class=tok,
            rollout_func=rollout_func,
            peft_config=lora_config(config),
            train_config=config,
            callbacks=[*run_callbacks(train_log, validator, config.validate_every, progress), *callbacks],
        )
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for cb in (PrinterCallback, ProgressCallback):  # our StepLogger prints one line per step instead
        trainer.remove_callback(cb)
    factory.trainer = trainer
    return RunSetup(trainer, factory, validator, resume_from, train_log, val_log, out, backend)


def train(
    config: TrainConfig,
    model_name_or_path: str | Path,
    out_dir: str | Path,
    buyers: Mapping[str, Agent] | None = None,
    progress: bool = True,
    resume: bool = True,
    callbacks: Sequence[Any] = (),
    transcripts: bool = True,
    *,
    task: TrainingTask,
) -> TrainResult:
    """Run (or resume) one GRPO training run into ``out_dir``.

    ``out_dir`` receives ``config.json``, ``train_log.{csv,jsonl}``, ``validation_log.{csv,jsonl}``,
    ``transcripts/{train,validation}.jsonl`` and ``checkpoints/checkpoint-<step>`` (every
    ``save_every`` steps and at the end; each a loadable model + tokenizer folder). With
    ``config.continue_from`` set, the policy (and the KL reference) start from that checkpoint under
    a fresh optimizer and a fresh warmup-cosine (the paper's continuation). ``task`` is the game (see
    :class:`TrainingTask`; the paper's: :func:`negolib.games.multi_issue.training.paper_task`), ``buyers`` maps its
    opponents' names to agents (default: the task's). ``resume`` picks up the last complete checkpoint in
    ``out_dir`` (a run already at ``max_steps`` returns at once).
    """
    out = Path(out_dir)
    done = last_checkpoint(out / "checkpoints") if resume else None
    if done is not None and int(done.name.split("-")[1]) >= config.max_steps:  # nothing left to do
        state = json.loads((done / "trainer_state.json").read_text())
        recorded = json.loads((out / "config.json").read_text()) if (out / "config.json").is_file() else {}
        return TrainResult(
            out,
            done,
            int(state["global_step"]),
            RunLog(out, TRAIN_LOG).rows(),
            RunLog(out, VALIDATION_LOG).rows(),
            config.to_dict(),
            recorded.get("backend", "hf"),
        )
    run = build_run(config, model_name_or_path, out_dir, buyers, progress, resume, callbacks, transcripts, task=task)
    if run.validator is not None and run.resume_from is None:
        row = run.validator.run(run.trainer, 0)
        if progress and row:
            print(f"validation @ 0: score {row['score']:+.3f} deal {row['deal_rate']:.2f}", flush=True)
    run.trainer.train(resume_from_checkpoint=str(run.resume_from) if run.resume_from else None)
    final = last_checkpoint(run.out_dir / "checkpoints")
    result = TrainResult(
        run.out_dir,
        final,
        int(run.trainer.state.global_step),
        run.train_log.rows(),
        run.validation_log.rows(),
        config.to_dict(),
        run.backend,
    )
    del run  # the trainer, its model and optimizer state: freed now, not at the next phase's peak
    release_memory()
    return result


__all__ = [
    "EngineFactory",
    "RunLog",
    "RunSetup",
    "TrainResult",
    "TrainingTask",
    "build_run",
    "Validator",
    "append_game_records",
    "episode_reward",
    "make_rollout_func",
    "prune_game_records",
    "train",
]
