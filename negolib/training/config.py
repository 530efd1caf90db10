"""The training recipes as validated dataclasses: GRPO [paper §3 "Optimization", App. H] and the format
warm-up before it *(ours)*.

Every default of :class:`TrainConfig` is the paper's unless marked *(ours)*. Any field of either can
be overridden from a params dict (``TrainConfig.from_params``, ``WarmupConfig.from_params``); an
unknown key or a value of the wrong type is a :class:`negolib.core.errors.ValidationError` naming the field
and what is allowed; the decoding values are checked by :func:`negolib.core.sampling.sampling_problems`, the rules'
one owner. This module imports only negolib's errors, schema and sampling, so that the profile loader
(:mod:`negolib.params`) can check a profile's recipes at load.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

from negolib.core.errors import ValidationError
from negolib.core.sampling import Decoding, sampling_problems
from negolib.core.schema import build

Scaffold = Literal["training", "evaluation"]
Backend = Literal["auto", "hf", "vllm"]
DType = Literal["auto", "float32", "bfloat16", "float16"]
TrainedTurns = Literal["all", "last"]
TRAINED_TURNS: tuple[str, ...] = get_args(TrainedTurns)
LR_ARMS: dict[str, float] = {"1x": 1.0, "3x": 3.0, "10x": 10.0}
"""The paper's learning-rate arms as multiples of the shared rate 1e-6 [§4 "Learning-rate arms"]."""


@dataclass(frozen=True)
class TrainConfig:
    """The multi-turn GRPO recipe. Field groups: batching, objective, optimizer, schedule, sequences,
    sampling, buyers and data, validation and checkpoints, runtime."""

    # -- batching [App. H "Batching"] ---------------------------------------------------------
    scenarios_per_step: int = 16
    rollouts_per_scenario: int = 8  # the GRPO group; 16 x 8 = 128 episodes per optimizer step
    micro_batch_size: int = 1  # episodes per forward/backward (Table 8: 1); accumulation fills the step
    # -- objective [App. H "Algorithm"] -------------------------------------------------------
    advantage: Literal["loo", "group"] = "loo"  # NeMo-RL leave-one-out; "group" = TRL's mean/std
    loo_std_ddof: int = 1  # ddof of the leave-one-out std (NeMo-RL: 1, Bessel-corrected)
    # Ours (0 = NeMo-RL): divide by max(std, floor). The leave-one-out std excludes the rollout itself,
    # so when the other rollouts nearly agree a lone different reward is divided by ~1e-6 (NeMo-RL
    # does the same); a floor bounds |A| by |r - b| / floor.
    loo_std_floor: float = 0.0
    clip_low: float = 0.2
    clip_high: float = 0.2
    loss_type: str = "dapo"  # token-level loss
    kl_beta: float = 0.04  # k3 estimator against the initial policy, in the loss
    # -- optimizer [App. H "Optimizer"] -------------------------------------------------------
    learning_rate: float = 1e-6  # the shared rate
    lr_multiplier: float = 1.0  # arms: 1x, 3x, 10x scale peak and floor together
    adam_beta1: float = 0.9
    adam_beta2: float = 0.95
    adam_epsilon: float = 1e-8
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0  # (ours: NeMo-RL's default)
    # -- schedule -------------------------------------------------------------------------------
    warmup_steps: int = 5
    min_lr_ratio: float = 0.1  # cosine floor = lr / 10 (1e-7 at 1e-6)
    max_steps: int = 64  # the initial run; a continuation adds 40 or 48 under its own schedule
    continue_from: str | None = None  # checkpoint to start from with a fresh warmup-cosine + optimizer
    # -- sequences [App. H "Sequences"] -------------------------------------------------------
    max_new_tokens: int = 768  # per seller turn
    max_context_tokens: int = 16_384
    max_prompt_tokens: int = 2_048
    max_rollout_turns: int = 13  # seller turns in the driver: one above the 12 the round cap allows
    # -- sampling [App. H "Sampling"] ---------------------------------------------------------
    temperature: float = 1.0
    top_p: float = 0.95
    top_k: int = 64
    # -- environment ----------------------------------------------------------------------------
    max_rounds: int = 12
    first_mover: Literal["seller", "buyer"] = "seller"
    accept_needs_offer: bool = True  # ours: ACCEPT closes only on the buyer's COUNTER (False: paper; a profile's
    #                                  evaluation.accept_needs_offer unless the run's config sets it)
    accept_applies_terms: bool = field(
        default=True,
        metadata={"help": "How the terms attached to an ACCEPT count in training. True (the paper's training "
                          "rule, App. H): they are applied to the ledger before the deal closes. False: they are "
                          "ignored, as in the paper's evaluation, so that training and evaluation play one game "
                          "(the matched lesson). Every profile states which it uses."},
    )
    scaffold: Scaffold = "training"  # "evaluation" is a beyond-paper arm
    trained_turns: TrainedTurns = field(
        default="all",
        metadata={"help": "Which of an episode's seller turns the loss trains on. 'all' (the paper's recipe): every "
                          "seller token carries the episode's advantage. 'last' (ours): only the seller's last turn "
                          "does, the others are masked like the buyer's tokens; right where the reward depends on "
                          "that turn alone (the deadline buyer: its counters before its last turn depend on time "
                          "only, so the outcome is the seller's last move), wrong elsewhere."},
    )
    # -- buyers and data [§4 "Held-out buyers"] ----------------------------------------------
    buyer_mixture: Mapping[str, float] = field(
        default_factory=lambda: {"conceder": 0.8, "hardheaded": 0.2}
    )  # names -> probabilities (ours)
    train_domains: tuple[str, ...] | None = None  # None: every non-held-out domain (eight)
    train_seeds_per_domain: int = 128  # 8 x 128 = 1,024 scenarios = 64 steps x 16 (ours)
    train_seed_offset: int = 0
    data_seed: int = 0  # seeds the once-per-scenario buyer draw (identical across arms)
    # -- validation and checkpoints [App. H] --------------------------------------------------
    validate_every: int = 8  # and at step 0; 0 disables validation
    validation_seeds_per_domain: int = 2  # x eight domains = 16 fixed validation scenarios (ours)
    validation_scaffold: Scaffold | None = None  # None: the training scaffold (see grpo.validate)
    save_every: int = 8  # and at the end
    save_total_limit: int | None = None
    # -- runtime --------------------------------------------------------------------------------
    seed: int = 0
    dtype: DType = "auto"  # float32 on CPU, bfloat16 on GPU
    generation_backend: Backend = "auto"  # hf on CPU, vLLM colocated on GPU
    vllm_gpu_memory_utilization: float = 0.45  # Table 8: 0.45 / 0.40 / 0.35 / 0.30 by size
    vllm_mode: Literal["colocate", "server"] = "colocate"  # server: generation on `trl vllm-serve` GPUs
    vllm_server_base_url: str | None = None  # e.g. http://gen-node:8000 (server mode only)
    tensor_parallel_size: int = field(
        default=1,
        metadata={"help": "Tensor-parallel degree of the run (Table 8: 1 / 1 / 1 / 4 for 2.3B / 4.5B / 12B / "
                          "31B): the colocated vLLM generation engine shards the policy over this many devices "
                          "(TRL's vllm_tensor_parallel_size; in server mode pass it to `trl vllm-serve`). "
                          "The world size must be a multiple of it."},
    )  # Table 8 "Train tensor-parallel degree": 4 for 31B, 1 otherwise
    gradient_checkpointing: bool = False
    lean_logprob_tiles: bool = field(
        default=True,
        metadata={"help": "Ours: on a CPU, fold TRL's chunked log-prob tiles in place (negolib.training.lean_tiles): "
                          "the same bits as TRL's own folds without their ~10 tile-sized temporaries (512 MB "
                          "each); False runs TRL's folds."},
    )
    # -- LoRA via peft, for sizes whose full fine-tuning does not fit one device (ours) ----------
    lora_rank: int = 0  # 0: full fine-tuning (the paper's recipe); > 0: LoRA adapters of this rank
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_target_modules: tuple[str, ...] | None = None  # None: every linear layer ("all-linear")
    generation_batch_size: int | None = None  # seller turns per generate call (None: every live episode)
    trim_padding: bool = field(
        default=True,
        metadata={"help": "Ours: run each micro-batch's forward and backward over its own longest trajectory, not "
                          "the step's (TRL pads the whole generation batch to its longest prompt and completion "
                          "before splitting it); the loss is unchanged (negolib.training.padding)."},
    )
    shared_prefix: bool = field(
        default=True,
        metadata={"help": "Ours: when every row of a micro-batch starts with the same prompt (one scenario's GRPO "
                          "group), run that prompt's forward and backward once, not once a row; the log-probs and "
                          "gradients are the stock path's up to float rounding (negolib.training.shared_prefix). "
                          "Off under gradient checkpointing."},
    )

    def __post_init__(self) -> None:
        src = "TrainConfig"
        positive = (
            "scenarios_per_step",
            "micro_batch_size",
            "max_new_tokens",
            "max_context_tokens",
            "max_prompt_tokens",
            "max_rollout_turns",
            "max_steps",
            "max_rounds",
            "train_seeds_per_domain",
            "validation_seeds_per_domain",
            "tensor_parallel_size",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ValidationError(src, name, f"must be >= 1, got {getattr(self, name)}")
        if self.rollouts_per_scenario < 2:
            raise ValidationError(src, "rollouts_per_scenario", "GRPO needs >= 2 rollouts per scenario")
        for name, problem in sampling_problems(self.temperature, self.top_p, self.top_k, self.max_new_tokens):
            raise ValidationError(src, name, problem)  # the decoding rules' one owner: negolib.core.sampling
        for name in ("learning_rate", "lr_multiplier"):
            if not getattr(self, name) > 0:
                raise ValidationError(src, name, f"must be > 0, got {getattr(self, name)}")
        for name in (
            "clip_low",
            "clip_high",
            "kl_beta",
            "weight_decay",
            "warmup_steps",
            "validate_every",
            "save_every",
            "train_seed_offset",
            "lora_rank",
            "lora_dropout",
            "loo_std_floor",
        ):
            if getattr(self, name) < 0:
                raise ValidationError(src, name, f"must be >= 0, got {getattr(self, name)}")
        if self.trained_turns not in TRAINED_TURNS:
            raise ValidationError(
                src, "trained_turns", f"must be one of {list(TRAINED_TURNS)}, got {self.trained_turns!r}"
            )
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValidationError(src, "min_lr_ratio", f"must be in [0, 1], got {self.min_lr_ratio}")
        if self.generation_batch_size is not None and self.generation_batch_size < 1:
            raise ValidationError(
                src, "generation_batch_size", f"must be >= 1 or null, got {self.generation_batch_size}"
            )
        if self.max_prompt_tokens + self.max_new_tokens > self.max_context_tokens:
            raise ValidationError(
                src, "max_context_tokens", "must hold at least max_prompt_tokens + max_new_tokens"
            )
        if self.episodes_per_step % self.micro_batch_size:
            raise ValidationError(
                src, "micro_batch_size", f"must divide the {self.episodes_per_step} episodes per step"
            )
        if not self.buyer_mixture:
            raise ValidationError(src, "buyer_mixture", "needs at least one buyer")
        if (
            any(p < 0 for p in self.buyer_mixture.values())
            or abs(sum(self.buyer_mixture.values()) - 1) > 1e-6
        ):
            raise ValidationError(
                src,
                "buyer_mixture",
                f"probabilities must be >= 0 and sum to 1, got {dict(self.buyer_mixture)}",
            )
        if self.loss_type not in ("dapo", "grpo", "bnpo", "dr_grpo"):
            raise ValidationError(
                src, "loss_type", f"must be one of dapo, grpo, bnpo, dr_grpo; got {self.loss_type!r}"
            )

    # -- derived values -----------------------------------------------------------------------
    @property
    def decoding(self) -> Decoding:
        """The rollouts' decoding settings (temperature, top-p, top-k, new tokens a turn) as the one schema
        every backend takes (:class:`negolib.core.sampling.Decoding`; add a seed with ``SamplingConfig.seeded``)."""
        return Decoding(self.temperature, self.top_p, self.top_k, self.max_new_tokens)

    @property
    def episodes_per_step(self) -> int:
        return self.scenarios_per_step * self.rollouts_per_scenario

    @property
    def peak_lr(self) -> float:
        """The arm's peak learning rate: the shared rate times the arm's multiplier."""
        return self.learning_rate * self.lr_multiplier

    @property
    def floor_lr(self) -> float:
        """The cosine floor, scaled with the peak (1e-7, 3e-7, 1e-6 for the three arms)."""
        return self.peak_lr * self.min_lr_ratio

    def resolved_dtype(self, cuda: bool) -> str:
        """float32 on CPU (bf16 backward does not complete on the CPU), bfloat16 on GPU, unless set."""
        if self.dtype != "auto":
            return self.dtype
        return "bfloat16" if cuda else "float32"

    def resolved_backend(self, cuda: bool, vllm_available: bool) -> str:
        """hf on CPU; vLLM colocated on GPU when vllm is installed."""
        if self.generation_backend != "auto":
            return self.generation_backend
        return "vllm" if cuda and vllm_available else "hf"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["buyer_mixture"] = dict(self.buyer_mixture)
        return d

    # -- construction from params ---------------------------------------------------------------
    @classmethod
    def from_params(
        cls, params: Mapping[str, Any] | None = None, source: str = "params", **overrides: Any
    ) -> TrainConfig:
        """Build from a params mapping (e.g. the ``train:`` block of a params file) plus overrides.

        ``lr_arm`` ("1x", "3x", "10x") is accepted as a shorthand for ``lr_multiplier``. Unknown keys
        and values of the wrong type raise :class:`ValidationError` naming ``source`` and the field.
        """
        merged = {**dict(params or {}), **overrides}
        if "lr_arm" in merged:
            arm = merged.pop("lr_arm")
            if arm not in LR_ARMS:
                raise ValidationError(source, "lr_arm", f"must be one of {sorted(LR_ARMS)}, got {arm!r}")
            merged.setdefault("lr_multiplier", LR_ARMS[arm])
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(merged) - set(fields))
        if unknown:
            raise ValidationError(source, unknown[0],
                                  f"unknown keys {unknown}; allowed keys: {sorted(fields)} (+ lr_arm)")
        return build(cls, merged, source)


@dataclass(frozen=True)
class WarmupConfig:
    """Settings of the format warm-up (all overridable from a profile's ``training.runs.<r>.warmup``)."""

    demonstrations: int = 48
    strategies: tuple[str, ...] = ("boulware", "linear", "hardheaded", "tit_for_tat")
    max_terms: int = 4
    seller_turns_per_episode: int = 3
    scaffolds: tuple[str, ...] = ("training", "evaluation")
    epochs: int = 1
    learning_rate: float = 5e-5
    warmup_fraction: float = 0.1
    batch_size: int = 4
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0
    prompt_grad: bool = False
    prompt_cap: int = 2048
    seed: int = 0

    def __post_init__(self) -> None:
        if self.demonstrations < 1 or self.epochs < 1 or self.batch_size < 1:
            raise ValueError("warmup: demonstrations, epochs and batch_size must be >= 1")
        if not self.strategies:
            raise ValueError("warmup: strategies must name at least one scripted strategy")
        if not self.scaffolds or set(self.scaffolds) - {"training", "evaluation"}:
            raise ValueError(f"warmup: scaffolds must be a non-empty subset of training/evaluation, "
                             f"got {self.scaffolds}")
        if not 0 < self.learning_rate < 1:
            raise ValueError(f"warmup: learning_rate must be in (0, 1), got {self.learning_rate}")

    @classmethod
    def from_params(cls, raw: Mapping[str, Any] | None, source: str = "warmup") -> WarmupConfig:
        """Build from a params mapping; unknown keys and wrong types are errors naming ``source``
        (checked by the same rules as :meth:`negolib.training.config.TrainConfig.from_params`)."""
        raw = dict(raw or {})
        known = sorted(f.name for f in fields(cls))
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise ValidationError(source, unknown[0], f"unknown warm-up keys {unknown}; allowed: {known}")
        try:
            return build(cls, raw, source)
        except ValidationError:
            raise
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None


def _help(text: str) -> dict[str, str]:
    return {"help": text}


OWN_WARMUP_SEED_OFFSET = 1000  # first training seed of a lesson's own warm-up (GRPO's seeds stay below it)
LESSON_STARTS = ("run_warmup", "own_warmup")
RULE_BUYERS = ("accepting", "deadline")  # the lesson's buyers with a stated rule (others: scripted strategies)


@dataclass(frozen=True)
class LessonConfig:
    """The matched lesson (ours): GRPO trained and evaluated on ONE task that differs only in its seeds.

    A profile's ``lesson:`` section. Training and evaluation share the game's rules (ACCEPT terms handled as
    ``accept_applies_terms`` says, in both), the prompt scaffold, the buyer and its stated acceptance rule, the
    horizon and the domain; the evaluation plays reserved evaluation seeds of that domain, paired (both arms on the
    same scenarios with common sampling seeds). The buyer (:class:`negolib.study.ladder.AcceptingBuyer`) accepts
    the seller's opening COUNTER when it names at least ``min_valid_terms`` of the contract's terms in range, and
    otherwise there is no deal (S = -0.3): each term named at the seller's best value raises the seller's utility
    (an unnamed term counts at half its weight), so what pays is reading the brief and opening firm on the terms
    that matter. Every field's help below is the schema; :meth:`problems` lists what is wrong."""

    start_run: str = field(default="", metadata=_help(
        "The profile's training run whose format warm-up the lesson starts from (start: run_warmup), or whose "
        "warm-up recipe and initial model it rebuilds on the lesson's own task (start: own_warmup)."))
    start: str = field(default="run_warmup", metadata=_help(
        "The start policy: 'run_warmup' (step 0 of start_run, warmed up on that run's domains and buyers) or "
        "'own_warmup' (start_run's warm-up recipe from its initial model, on the lesson's own task: its domain's "
        f"training seeds from {OWN_WARMUP_SEED_OFFSET} on, its buyer, rules, horizon and scaffold)."))
    start_warmup_scenarios: int = field(default=48, metadata=_help(
        "Scenarios (training seeds of the domain) the own warm-up's demonstrations play (start: own_warmup)."))
    start_warmup_strategies: tuple[str, ...] = field(default=(), metadata=_help(
        "The scripted sellers whose turns the own warm-up imitates (start: own_warmup), in rotation; empty: the "
        "start run's warm-up recipe's. A start that has seen several styles (one that holds its opening, others "
        "that concede) gives GRPO's groups different outcomes to choose between."))
    domain: str = field(default="software_license", metadata=_help(
        "The one domain trained on (training seeds) and evaluated on (reserved evaluation seeds)."))
    buyer: str = field(default="accepting", metadata=_help(
        "The buyer, in training and evaluation alike: 'accepting' (it accepts the seller's opening COUNTER when it "
        "names at least min_valid_terms contract terms in range), 'deadline' (a conceding buyer that must buy by "
        "its last turn: it counters as the Conceder does, accepts nothing earlier, and at its last turn accepts the "
        "seller's standing offer if the seller's last turn parsed and set min_valid_terms terms), or a scripted "
        "strategy of the paper's game "
        "(e.g. 'conceder': a time-dependent buyer that concedes early)."))
    min_valid_terms: int = field(default=1, metadata=_help(
        "The accepting buyer's stated rule: it accepts an opening naming at least this many contract terms in "
        "range; the deadline buyer's: at its last turn it accepts a last counter that sets at least this many "
        "(ignored by scripted buyers)."))
    rounds: int = field(default=1, metadata=_help("Rounds an episode lasts, in training and evaluation alike."))
    scaffold: Scaffold = field(default="training", metadata=_help(
        "The prompt scaffold, in training and evaluation alike."))
    accept_applies_terms: bool = field(default=False, metadata=_help(
        "How terms attached to an ACCEPT count, in training and evaluation alike (False: ignored)."))
    steps: int = field(default=8, metadata=_help("GRPO optimizer steps."))
    scenarios_per_step: int = field(default=2, metadata=_help("Scenarios a step (a group of rollouts each)."))
    rollouts_per_scenario: int = field(default=4, metadata=_help("The GRPO group size."))
    micro_batch_size: int = field(default=2, metadata=_help("Episodes per forward/backward."))
    learning_rate: float = field(default=3e-5, metadata=_help("Peak learning rate (warmup-cosine to a tenth)."))
    warmup_steps: int = field(default=1, metadata=_help("Linear warmup steps of the schedule."))
    kl_beta: float = field(default=0.0, metadata=_help(
        "k3 KL coefficient; 0 loads no reference model (a cheaper step)."))
    loo_std_floor: float = field(default=0.1, metadata=_help(
        "Floor of the leave-one-out std: bounds |advantage| by |r - b| / floor."))
    lora_rank: int = field(default=0, metadata=_help(
        "0: full fine-tuning; > 0: LoRA adapters of this rank on every linear layer (fewer weights move, so a "
        "small noisy batch disturbs the start policy less, and a step skips the base weights' gradients)."))
    lora_alpha: int = field(default=32, metadata=_help(
        "LoRA scale numerator (the adapters' update is alpha/rank x BA)."))
    max_new_tokens: int = field(default=128, metadata=_help("New tokens a seller turn."))
    trained_turns: TrainedTurns = field(default="all", metadata=_help(
        "Which seller turns of an episode the loss trains on: 'all' (every one carries the episode's advantage) or "
        "'last' (only the seller's last turn: right for the deadline buyer, whose earlier counters depend on time "
        "only, so the episode's outcome is decided by the seller's last move)."))
    temperature: float = field(default=1.0, metadata=_help(
        "Sampling temperature of the seller's turns, in training and evaluation alike (top-p as TrainConfig's)."))
    max_prompt_tokens: int = field(default=1024, metadata=_help(
        "Tokens kept of the opening prompt (the oldest go first); each round then adds its turns to the context, "
        "up to max_new_tokens + 96 tokens a round, in training and evaluation alike."))
    eval_episodes: int = field(default=64, metadata=_help(
        "Paired evaluation episodes: one per reserved evaluation seed of the domain (each seed a cluster)."))
    eval_batch: int = field(default=32, metadata=_help("Episodes advancing together in the evaluation."))
    planning_sd: float = field(default=0.25, metadata=_help(
        "The per-episode SD of the paired difference in S assumed for the pre-registered power calculation "
        "(measured on an earlier run: RESULTS.md says which)."))
    expected_gain: float = field(default=0.15, metadata=_help(
        "The gain in S the design expects; the pre-registration checks that the minimum detectable effect "
        "is below it."))
    power: float = field(default=0.8, metadata=_help("Power of the pre-registered minimum detectable effect."))

    def problems(self) -> list[tuple[str, str]]:
        """``(field, problem)`` pairs (empty when the lesson is valid); the profile loader raises the first."""
        out: list[tuple[str, str]] = []
        if not self.start_run:
            out.append(("start_run", "must name a training run of the profile"))
        if self.start not in LESSON_STARTS:
            out.append(("start", f"must be one of {list(LESSON_STARTS)}, got {self.start!r}"))
        if self.start_warmup_scenarios < 1:  # the seed block's end is checked where it is known (params_checks)
            out.append(("start_warmup_scenarios", f"must be >= 1, got {self.start_warmup_scenarios}"))
        if self.steps * self.scenarios_per_step > OWN_WARMUP_SEED_OFFSET:
            out.append(("steps", f"steps x scenarios_per_step training seeds must stay below {OWN_WARMUP_SEED_OFFSET} "
                                 "(the own warm-up's seeds start there)"))
        for name in ("rounds", "steps", "scenarios_per_step", "micro_batch_size", "max_new_tokens",
                     "max_prompt_tokens", "eval_episodes", "eval_batch"):
            if getattr(self, name) < 1:
                out.append((name, f"must be >= 1, got {getattr(self, name)}"))
        if self.rollouts_per_scenario < 2:
            out.append(("rollouts_per_scenario", "GRPO needs >= 2 rollouts per scenario"))
        if self.min_valid_terms < 0:
            out.append(("min_valid_terms", f"must be >= 0, got {self.min_valid_terms}"))
        if self.trained_turns not in TRAINED_TURNS:
            out.append(("trained_turns", f"must be one of {list(TRAINED_TURNS)}, got {self.trained_turns!r}"))
        if not self.learning_rate > 0:
            out.append(("learning_rate", f"must be > 0, got {self.learning_rate}"))
        out += [(name, problem) for name, problem in sampling_problems(self.temperature, 1.0, 0, 1)
                if name == "temperature"]  # the decoding rules' one owner (max_new_tokens is checked above)
        for name in ("kl_beta", "loo_std_floor", "warmup_steps", "lora_rank"):
            if getattr(self, name) < 0:
                out.append((name, f"must be >= 0, got {getattr(self, name)}"))
        if self.lora_rank and self.lora_alpha < 1:
            out.append(("lora_alpha", f"must be >= 1, got {self.lora_alpha}"))
        if not self.planning_sd > 0:
            out.append(("planning_sd", f"must be > 0, got {self.planning_sd}"))
        if not self.expected_gain > 0:
            out.append(("expected_gain", f"must be > 0, got {self.expected_gain}"))
        if not 0 < self.power < 1:
            out.append(("power", f"must be in (0, 1), got {self.power}"))
        if (self.scenarios_per_step * self.rollouts_per_scenario) % max(1, self.micro_batch_size):
            out.append(("micro_batch_size", "must divide the episodes of a step"))
        return out
