"""The recipe as TRL's and peft's configuration objects: :func:`build_grpo_args` (the ``GRPOConfig`` of a
:class:`~negolib.training.config.TrainConfig`: batch split, optimizer, clipping, KL, generation, checkpoints, the
vLLM engine) and :func:`lora_config` (the ``LoraConfig`` of a LoRA run). :func:`negolib.training.grpo.build_run`
builds its trainer from them; TRL and peft are imported only when they are called.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from negolib.training.config import TrainConfig


def build_grpo_args(config: TrainConfig, ckpt_dir: Path, cuda: bool, backend: str, stop_ids: Sequence[int]) -> Any:
    """The ``GRPOConfig`` of the recipe (single process; accelerate scales it out)."""
    from trl import GRPOConfig

    dtype = config.resolved_dtype(cuda)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    per_step = config.episodes_per_step // world
    if per_step % config.micro_batch_size:
        raise ValueError(
            f"{per_step} episodes per process do not split into micro-batches of {config.micro_batch_size}"
        )
    save_steps = config.save_every or config.max_steps
    kw: dict[str, Any] = dict(
        output_dir=str(ckpt_dir),
        per_device_train_batch_size=config.micro_batch_size,
        gradient_accumulation_steps=per_step // config.micro_batch_size,
        num_generations=config.rollouts_per_scenario,
        max_steps=config.max_steps,
        learning_rate=config.peak_lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        adam_beta1=config.adam_beta1,
        adam_beta2=config.adam_beta2,
        adam_epsilon=config.adam_epsilon,
        weight_decay=config.weight_decay,
        max_grad_norm=config.max_grad_norm,
        beta=config.kl_beta,
        epsilon=config.clip_low,
        epsilon_high=config.clip_high,
        loss_type=config.loss_type,
        scale_rewards="group" if config.advantage == "group" else "none",
        num_iterations=1,
        use_bias_correction_kl=False,
        vllm_importance_sampling_correction=False,
        max_completion_length=config.max_new_tokens,
        temperature=config.temperature,
        top_p=config.top_p,
        top_k=config.top_k,
        logging_steps=1,
        save_strategy="steps",
        save_steps=save_steps,
        save_total_limit=None,
        report_to=[],
        seed=config.seed,
        data_seed=config.seed,
        disable_dropout=True,
        gradient_checkpointing=config.gradient_checkpointing,
        bf16=dtype == "bfloat16" and cuda,
        fp16=False,
        use_cpu=not cuda,
        disable_tqdm=True,
        log_completions=False,
        model_init_kwargs={"dtype": dtype},
        dataloader_num_workers=0,
        shuffle_dataset=True,
    )
    if backend == "vllm":
        kw.update(
            use_vllm=True,
            vllm_mode=config.vllm_mode,
            vllm_gpu_memory_utilization=config.vllm_gpu_memory_utilization,
            vllm_max_model_length=config.max_context_tokens,
            vllm_tensor_parallel_size=config.tensor_parallel_size,
            generation_kwargs={"stop_token_ids": list(stop_ids)},
        )
        if config.vllm_mode == "server" and config.vllm_server_base_url:
            kw["vllm_server_base_url"] = config.vllm_server_base_url
    return GRPOConfig(**kw)


def lora_config(config: TrainConfig) -> Any:
    """A peft ``LoraConfig`` when ``config.lora_rank > 0`` (else None: full fine-tuning).

    With adapters, TRL computes the KL reference by disabling them, so the reference is still the
    initial policy; checkpoints then hold the adapter, which transformers loads on top of the base.
    """
    if config.lora_rank <= 0:
        return None
    from peft import LoraConfig

    targets = list(config.lora_target_modules) if config.lora_target_modules else "all-linear"
    return LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=targets, task_type="CAUSAL_LM")


__all__ = ["build_grpo_args", "lora_config"]
