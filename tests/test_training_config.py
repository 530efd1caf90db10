"""TrainConfig: the paper's recipe as defaults, validated overrides from a params dict."""

from __future__ import annotations

import pytest

from negolib.core.errors import ValidationError
from negolib.training.config import LR_ARMS, TrainConfig


def test_defaults_are_the_papers_recipe():
    c = TrainConfig()
    assert (c.scenarios_per_step, c.rollouts_per_scenario, c.episodes_per_step) == (16, 8, 128)
    assert (c.clip_low, c.clip_high, c.loss_type, c.kl_beta, c.advantage) == (0.2, 0.2, "dapo", 0.04, "loo")
    assert (c.adam_beta1, c.adam_beta2, c.weight_decay) == (0.9, 0.95, 0.01)
    assert (c.learning_rate, c.warmup_steps, c.floor_lr) == (1e-6, 5, pytest.approx(1e-7))
    assert (c.max_new_tokens, c.max_context_tokens, c.max_prompt_tokens, c.max_rollout_turns) == (
        768,
        16384,
        2048,
        13,
    )
    assert (c.temperature, c.top_p, c.top_k) == (1.0, 0.95, 64)
    assert (c.validate_every, c.save_every, c.max_steps, c.scaffold) == (8, 8, 64, "training")
    assert sum(c.buyer_mixture.values()) == pytest.approx(1.0)
    assert c.resolved_dtype(cuda=False) == "float32" and c.resolved_dtype(cuda=True) == "bfloat16"
    assert c.resolved_backend(cuda=False, vllm_available=True) == "hf"
    assert c.resolved_backend(cuda=True, vllm_available=True) == "vllm"
    assert c.resolved_backend(cuda=True, vllm_available=False) == "hf"


def test_lr_arms_scale_peak_and_floor():
    for arm, mult in LR_ARMS.items():
        c = TrainConfig.from_params({"lr_arm": arm})
        assert c.peak_lr == pytest.approx(1e-6 * mult)
        assert c.floor_lr == pytest.approx(1e-7 * mult)


def test_from_params_overrides_and_coerces():
    c = TrainConfig.from_params(
        {
            "max_steps": 40,
            "learning_rate": 3e-6,
            "kl_beta": 0,
            "train_domains": ["job_offer"],
            "buyer_mixture": {"conceder": 1},
            "continue_from": "runs/a/checkpoint-64",
            "scaffold": "evaluation",
            "generation_batch_size": None,
        }
    )
    assert (c.max_steps, c.learning_rate, c.kl_beta) == (40, 3e-6, 0.0)
    assert c.train_domains == ("job_offer",) and c.buyer_mixture == {"conceder": 1.0}
    assert c.continue_from.endswith("checkpoint-64") and c.scaffold == "evaluation"
    assert TrainConfig.from_params(None, max_steps=2).max_steps == 2


@pytest.mark.parametrize(
    "params, field",
    [
        ({"max_stepz": 3}, "max_stepz"),
        ({"max_steps": "3"}, "max_steps"),
        ({"max_steps": 2.5}, "max_steps"),
        ({"learning_rate": "fast"}, "learning_rate"),
        ({"scaffold": "chat"}, "scaffold"),
        ({"lr_arm": "2x"}, "lr_arm"),
        ({"buyer_mixture": {"a": 0.5, "b": 0.4}}, "buyer_mixture"),
        ({"buyer_mixture": ["a"]}, "buyer_mixture"),
        ({"rollouts_per_scenario": 1}, "rollouts_per_scenario"),
        ({"top_p": 1.5}, "top_p"),
        ({"temperature": 0.0}, "temperature"),
        ({"top_k": -1}, "top_k"),
        ({"micro_batch_size": 3}, "micro_batch_size"),
        ({"gradient_checkpointing": 1}, "gradient_checkpointing"),
    ],
)
def test_bad_params_name_the_field(params, field):
    with pytest.raises(ValidationError) as err:
        TrainConfig.from_params(params, source="params/x.yaml")
    assert err.value.field == field
    assert field in str(err.value)


def test_decoding_is_the_one_sampling_schema():
    """The recipe's decoding fields are checked by, and handed on as, negolib.core.sampling's one schema."""
    from negolib.core.sampling import Decoding, SamplingConfig, sampling_problems

    c = TrainConfig(temperature=0.7, top_p=0.9, top_k=0, max_new_tokens=128)  # top_k 0: the filter off
    assert c.decoding == Decoding(0.7, 0.9, 0, 128)
    assert SamplingConfig.seeded(c.decoding, seed=5) == SamplingConfig(0.7, 0.9, 0, 128, seed=5)
    bad = {"temperature": float("inf"), "top_p": 0.95, "top_k": 64, "max_new_tokens": 768}
    (field, problem), = sampling_problems(**bad)
    with pytest.raises(ValidationError) as err:
        TrainConfig(**bad)
    assert err.value.field == field and problem in str(err.value)


def test_unknown_key_lists_allowed_keys():
    with pytest.raises(ValidationError, match="allowed keys.*max_steps"):
        TrainConfig.from_params({"epochs": 1})


def test_to_dict_round_trips():
    c = TrainConfig(
        max_steps=7, buyer_mixture={"conceder": 0.5, "hardheaded": 0.5}, train_domains=("job_offer",)
    )
    d = c.to_dict()
    d["train_domains"] = list(d["train_domains"])
    assert TrainConfig.from_params(d) == c


def test_vllm_server_mode_reaches_trl_config(tmp_path):
    pytest.importorskip("trl")
    from negolib.training.grpo_args import build_grpo_args

    cfg = TrainConfig(vllm_mode="server", vllm_server_base_url="http://127.0.0.1:8000")
    args = build_grpo_args(cfg, tmp_path, cuda=False, backend="vllm", stop_ids=[2])
    assert args.use_vllm and args.vllm_mode == "server" and args.vllm_server_base_url == "http://127.0.0.1:8000"
    colocated = build_grpo_args(TrainConfig(), tmp_path, cuda=False, backend="vllm", stop_ids=[2])
    assert colocated.vllm_mode == "colocate" and colocated.vllm_gpu_memory_utilization == 0.45


def test_tensor_parallel_size_field_reaches_the_grpo_args(tmp_path):
    """Table 8's train tensor-parallel degree (4 for 31B) is a TrainConfig field with help, validated, read
    from a profile mapping, and passed where the GRPO args are built (vLLM's tensor parallel size)."""
    import dataclasses

    pytest.importorskip("trl")
    from negolib.training.grpo_args import build_grpo_args

    f = {x.name: x for x in dataclasses.fields(TrainConfig)}["tensor_parallel_size"]
    assert f.default == 1 and "Table 8" in f.metadata["help"] and "31B" in f.metadata["help"]
    assert TrainConfig.from_params({"tensor_parallel_size": 4}).tensor_parallel_size == 4
    with pytest.raises(ValidationError, match="tensor_parallel_size"):
        TrainConfig(tensor_parallel_size=0)
    args = build_grpo_args(TrainConfig(tensor_parallel_size=4), tmp_path, cuda=False, backend="vllm", stop_ids=[2])
    assert args.vllm_tensor_parallel_size == 4
    one = build_grpo_args(TrainConfig(), tmp_path, cuda=False, backend="vllm", stop_ids=[2])
    assert one.vllm_tensor_parallel_size == 1
