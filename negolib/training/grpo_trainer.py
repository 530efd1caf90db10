"""TRL's ``GRPOTrainer`` as this project runs it: leave-one-out advantages, the warmup-cosine schedule, each
micro-batch over its own width, a group's shared prompt scored once, TRL's CPU log-prob tiles folded in place,
atomic checkpoints; and the callbacks that log one row per optimizer step and run in-loop validation.
:mod:`negolib.training.grpo` builds and runs it (it imports this module only when a run starts, so
``import negolib`` does not import TRL)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from trl import GRPOTrainer

from negolib.core.progress import report
from negolib.training.advantages import loo_advantages_torch
from negolib.training.checkpoints import publish, rotate
from negolib.training.config import TrainConfig
from negolib.training.lean_tiles import lean_logprob_tiles
from negolib.training.padding import trim_micro_batch
from negolib.training.runlog import RunLog
from negolib.training.schedule import WarmupCosine, lambda_scheduler
from negolib.training.shared_prefix import shareable, shared_prefix_logps


class NegotiationGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` with leave-one-out advantages, the warmup-cosine schedule, atomic
    checkpoints and the rows of the current generation batch exposed to ``rollout_func``."""

    def __init__(self, *args: Any, train_config: TrainConfig, **kwargs: Any) -> None:
        self.train_config = train_config
        self.current_rows: list[dict[str, Any]] | None = None
        self._gathered_rewards = None
        self.shared_prefix_calls = 0  # scorings that computed a group's shared prompt once
        super().__init__(*args, **kwargs)

    def train(self, *args: Any, **kwargs: Any) -> Any:
        """TRL's ``train`` with its CPU log-prob tiles folded in place (:mod:`negolib.training.lean_tiles`: the same
        bits; the default book's transfer update peaked at 10.25 GB in TRL's out-of-place folds)."""
        with lean_logprob_tiles(self.train_config.lean_logprob_tiles):
            return super().train(*args, **kwargs)

    # -- schedule ---------------------------------------------------------------------------
    def create_scheduler(self, num_training_steps: int, optimizer: Any = None) -> Any:
        if self.lr_scheduler is None:
            c = self.train_config
            sched = WarmupCosine(c.peak_lr, num_training_steps, c.warmup_steps, c.min_lr_ratio)
            self.lr_scheduler = lambda_scheduler(optimizer or self.optimizer, sched)
            self._created_lr_scheduler = True
        return self.lr_scheduler

    # -- advantages -------------------------------------------------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):  # noqa: ANN001, ANN202
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._gathered_rewards = rewards_per_func
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):  # noqa: ANN001, ANN202
        self.current_rows = list(inputs)
        out = super()._generate_and_score_completions(inputs)
        if self.train_config.advantage == "loo":
            import torch

            mode = "train" if self.model.training else "eval"
            g = self.num_generations if mode == "train" else self.num_generations_eval
            rpf = self._gathered_rewards
            rewards = (rpf * self.reward_weights.to(rpf.device).unsqueeze(0)).nansum(dim=1)
            rewards[torch.isnan(rpf).all(dim=1)] = torch.nan
            adv = loo_advantages_torch(rewards, g, ddof=self.train_config.loo_std_ddof,
                                       std_floor=self.train_config.loo_std_floor)
            finite = adv[~torch.isnan(rewards)]
            if len(finite):  # the largest |A| of the step: shows when a near-zero std blew one up
                self._metrics[mode]["advantage_abs_max"].append(float(finite.abs().max()))
            n = len(inputs)
            local = adv[self.accelerator.process_index * n : (self.accelerator.process_index + 1) * n]
            out["advantages"] = local.to(out["advantages"].device, out["advantages"].dtype)
            logged = self._logs["advantages"]  # replace TRL's group-normalized values in the sample log
            for _ in range(min(len(adv), len(logged))):
                logged.pop()
            logged.extend(adv.tolist())
        return out

    # -- a group's shared prompt computed once -------------------------------------------
    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep,  # noqa: ANN001, ANN202
                                           batch_size=None, compute_entropy=False, compute_aux_loss=False,
                                           **extra):
        plain = not compute_aux_loss and all(v is None for v in extra.values())
        if (self.train_config.shared_prefix and plain and not self.args.gradient_checkpointing
                and shareable(input_ids, attention_mask, logits_to_keep)):
            import torch

            size = batch_size or input_ids.size(0)
            parts = [shared_prefix_logps(model, input_ids[i:i + size], attention_mask[i:i + size],
                                         logits_to_keep, compute_entropy)
                     for i in range(0, input_ids.size(0), size)]
            self.shared_prefix_calls = getattr(self, "shared_prefix_calls", 0) + 1
            logps = torch.cat([p[0] for p in parts], dim=0)
            entropies = torch.cat([p[1] for p in parts], dim=0) if compute_entropy else None
            return logps, entropies, None
        return super()._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
            compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **extra)

    # -- the loss over each micro-batch's own width ---------------------------------------
    def _compute_loss(self, model, inputs):  # noqa: ANN001, ANN202
        if self.train_config.trim_padding:  # drop columns that are padding in every row of this micro-batch
            inputs = trim_micro_batch(inputs)
        return super()._compute_loss(model, inputs)

    # -- checkpoints ------------------------------------------------------------------------
    def _get_output_dir(self, trial: Any) -> str:
        staging = getattr(self, "_staging_dir", None)
        return staging if staging is not None else super()._get_output_dir(trial)

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        run_dir = Path(super()._get_output_dir(trial))
        name = f"checkpoint-{self.state.global_step}"
        staging = run_dir / f".staging-{name}"  # the same on every rank
        self._staging_dir = str(staging)
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self._staging_dir = None
        self.accelerator.wait_for_everyone()
        if self.args.should_save:
            publish(staging / name, run_dir / name)
            import shutil

            shutil.rmtree(staging, ignore_errors=True)
            rotate(run_dir, self.train_config.save_total_limit)


class StepLogger(TrainerCallback):
    """One row per optimizer step: TRL's metrics (reward, kl, entropy, grad_norm, clip ratios, ...)
    plus the rollout's (score, deal rate, tokens, time split) and wall time. ``time_update_s`` is the
    step's wall time minus its rollout and validation time (``shared["validation_s"]``, set by :class:`Validate`)."""

    def __init__(self, log: RunLog, shared: dict[str, float], progress: bool) -> None:
        self.log, self.shared, self.progress = log, shared, progress
        prev = log.rows()
        self.offset = float(prev[-1].get("wall_time_s", 0.0)) if prev else 0.0
        self.t0 = self.last = time.perf_counter()

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.t0 = self.last = time.perf_counter()

    def on_log(
        self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None, **kw: Any
    ) -> None:
        if not logs or "train_runtime" in logs or not state.is_world_process_zero:
            return
        now = time.perf_counter()
        row: dict[str, Any] = {
            "step": state.global_step,
            "wall_time_s": self.offset + now - self.t0,
            "time_step_s": now - self.last,
        }
        self.last = now
        row.update({k: v for k, v in logs.items() if isinstance(v, (int, float))})
        row["lr"] = logs.get("learning_rate")
        row["time_validation_s"] = self.shared.pop("validation_s", 0.0)
        if "time_rollout_s" in row:
            row["time_update_s"] = max(
                0.0, row["time_step_s"] - row["time_rollout_s"] - row["time_validation_s"]
            )
        self.log.append(row)
        of = f"/{state.max_steps}" if state.max_steps else ""
        report(f"GRPO step {row['step']}{of}: reward {row.get('reward', float('nan')):+.3f} "
               f"({row['time_step_s']:.0f} s)")
        if self.progress:
            nan = float("nan")
            print(
                f"step {row['step']}: reward {row.get('reward', nan):+.3f} "
                f"score {row.get('score', nan):+.3f} deal {row.get('deal_rate', nan):.2f} "
                f"kl {row.get('kl', nan):.5f} lr {row.get('lr') or 0:.2e} ({row['time_step_s']:.1f}s)",
                flush=True,
            )


class Validate(TrainerCallback):
    """Runs the validator (an object with ``run(trainer, step)`` and ``factory.trainer``) every ``every`` steps and
    leaves its seconds in ``shared["validation_s"]`` for :class:`StepLogger`."""

    def __init__(self, validator: Any, every: int, shared: dict[str, float], progress: bool) -> None:
        self.validator, self.every, self.shared, self.progress = validator, every, shared, progress

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.validator is not None and self.every and state.global_step % self.every == 0:
            t0 = time.perf_counter()
            row = self.validator.run(self.validator.factory.trainer, state.global_step)
            self.shared["validation_s"] = time.perf_counter() - t0
            if self.progress and row:
                step, score, deal = state.global_step, row["score"], row["deal_rate"]
                print(f"validation @ {step}: score {score:+.3f} deal {deal:.2f}", flush=True)


def callbacks(log: RunLog, validator: Any, validate_every: int, progress: bool) -> list[TrainerCallback]:
    """The step logger and the validation callback of one run (they share the validation seconds of a step)."""
    shared: dict[str, float] = {}
    return [StepLogger(log, shared, progress), Validate(validator, validate_every, shared, progress)]


__all__ = ["NegotiationGRPOTrainer", "StepLogger", "Validate", "callbacks"]
