"""The learning ladder's CI rung: GRPO through the project's real path must learn a known optimum.

Contract: :func:`run_rung` builds a tiny Llama from a config and trains it with :func:`~negolib.training.grpo.build_run`
(TRL ``GRPOTrainer``, the multi-turn ``rollout_func``, ``env_mask``, leave-one-out advantages, the k3 KL term)
on a one-turn counter whose reward rises with the price named; it then reloads the final checkpoint and the
initial weights as ``hf`` arms through the agent factory and scores both on paired evaluation scenarios. It
returns plain data (:class:`RungResult`): per-step rewards and two gains with seeded cluster-bootstrap intervals.

Task: the ladder tokenizer knows only the ChatML tags, a pad token and ``levels`` whole-action tokens (token
``k`` decodes to a COUNTER naming every continuous term at concession level ``k / (levels - 1)``; all other
text encodes to nothing), so every prompt reads as its tags and the rung is a bandit: one new token, one round,
a buyer accepting any COUNTER. Seller utility rises with the level: the optimum is the top one; a sampled pad
or tag token is a bad parse (no deal). The random initial model samples every token about equally often.

Sabotaged twins (``sabotage=``, explicit wrappers applied here, not switches in production code; each must fail
to learn): ``env_mask_zero`` zeroes every ``env_mask`` TRL receives, ``shuffle_rewards`` permutes the episode
rewards within each GRPO group, ``lr_zero`` sets the optimizer's rates to 0 once training begins (``TrainConfig``
rejects 0), ``eval_initial`` trains normally but evaluates an arm pointed at the initial weights. Measured
with the defaults on seeds 0-11: the rung passed both criteria (99% intervals) and every twin failed, every time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from negolib.agents.base import Agent, AgentReply
from negolib.games.multi_issue.env import EnvConfig, PartyView
from negolib.games.multi_issue.scripted import TimeDependentAgent, offer_to_answer
from negolib.models import tiny_llama
from negolib.training.config import TrainConfig

Sabotage = Literal["env_mask_zero", "shuffle_rewards", "lr_zero", "eval_initial"]
SABOTAGES: tuple[str, ...] = ("env_mask_zero", "shuffle_rewards", "lr_zero", "eval_initial")
BUYER = "ladder_accept"
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # pad (also unk), then the ChatML tags


@dataclass(frozen=True)
class RungSpec:
    """The rung's task, model and budget. Defaults: 32 episodes a step, 40 steps, ~5-10 s on a CPU core.

    The small learning rate over many steps (not a big one over few) is what separates the rung from its
    twins: a consistent gradient moves the policy ~``steps`` Adam steps, a shuffled one only ~sqrt(steps)."""

    domain: str = "acquisition"
    levels: int = 6  # whole-action tokens, concession levels 0, 1/(levels-1), ..., 1
    hidden: int = 32
    layers: int = 2
    scenarios: int = 4  # training scenarios; every step plays each of them (one epoch per step)
    rollouts: int = 8  # the GRPO group
    steps: int = 40
    window: int = 3  # early = the first `window` steps, late = the last `window`
    learning_rate: float = 5e-3
    warmup_steps: int = 5  # the recipe's warmup; it also keeps Adam's full-size first step small
    kl_beta: float = 0.04  # the recipe's k3 KL coefficient against the initial policy
    eval_scenarios: int = 32  # paired evaluation scenarios (reserved evaluation seeds)
    n_resamples: int = 10_000
    alpha: float = 0.01  # 99% intervals: a no-op twin shows a "gain" by chance in 0.5% of seeds, not 2.5%
    threads: int | None = 1  # torch threads while the rung runs (restored after); tiny ops are fastest on one

    def __post_init__(self) -> None:
        if self.levels < 2 or self.steps < 2 * self.window or self.window < 1:
            raise ValueError(f"invalid rung spec {self}")


@dataclass(frozen=True)
class Gain:
    """A difference of means with its percentile cluster-bootstrap interval; ``positive`` when it excludes 0
    from above."""

    estimate: float
    ci_low: float
    ci_high: float
    n_clusters: int

    @property
    def positive(self) -> bool:
        return self.ci_low > 0

    def __str__(self) -> str:
        return f"{self.estimate:+.3f} [{self.ci_low:+.3f}, {self.ci_high:+.3f}] ({self.n_clusters} clusters)"


@dataclass
class TrainedRung:
    """A finished rung (or twin) run: where its weights are and what its training rewards did."""

    seed: int
    sabotage: str | None  # the training sabotage applied, if any
    spec: RungSpec
    initial_dir: str
    checkpoint: str
    step_rewards: list[list[float]]  # per optimizer step, the true episode rewards of its rollouts
    train_gain: Gain  # late-window mean reward minus early-window mean reward, paired by scenario slot
    train_optimum: float  # mean reward of always naming the top level on the training scenarios
    weight_change: float  # max |checkpoint - initial| over all weights
    seconds: float
    log: list[dict[str, Any]] = field(default_factory=list)  # the run's per-step train log rows

    @property
    def step_means(self) -> list[float]:
        return [float(np.mean(r)) for r in self.step_rewards]

    def window_means(self) -> tuple[float, float]:
        """(early, late) mean reward over the first and the last ``spec.window`` steps."""
        w = self.spec.window
        return (float(np.mean(self.step_rewards[:w])), float(np.mean(self.step_rewards[-w:])))


@dataclass
class RungResult:
    """A trained rung and the paired evaluation of its evaluated arm against the initial weights."""

    training: TrainedRung
    sabotage: str | None  # the sabotage of the whole rung (training or evaluation), if any
    evaluated_dir: str
    eval_initial: list[float]  # score S per evaluation scenario, initial weights
    eval_trained: list[float]  # score S per evaluation scenario, the evaluated (trained) arm
    eval_gain: Gain  # trained minus initial, paired by scenario
    eval_optimum: float  # mean score of always naming the top level on the evaluation scenarios
    seconds: float  # evaluation time

    @property
    def train_gain(self) -> Gain:
        return self.training.train_gain

    @property
    def learned(self) -> bool:
        """Both criteria: the training reward rose and the reloaded checkpoint beats the initial weights."""
        return self.train_gain.positive and self.eval_gain.positive

    def summary(self) -> str:
        t = self.training
        curve = " ".join(f"{m:+.2f}" for m in t.step_means)
        return (f"{self.sabotage or 'rung'} (seed {t.seed}): train gain {t.train_gain}; eval gain "
                f"{self.eval_gain}, S {np.mean(self.eval_initial):.3f} -> {np.mean(self.eval_trained):.3f} "
                f"(optimum {self.eval_optimum:.3f}); step rewards {curve} (optimum {t.train_optimum:.3f}); "
                f"{t.seconds + self.seconds:.1f} s")


# ---------------------------------------------------------------------------------------------
# The task: actions, tokenizer, model, buyer
# ---------------------------------------------------------------------------------------------


def _domain(name: str) -> Any:
    from negolib.games.multi_issue.domains import load_domains

    return load_domains()[name]


def level_terms(domain: Any, q: float) -> list[dict[str, Any]]:
    """Every continuous term of ``domain`` at concession level ``q`` of the seller's range (1 = best)."""
    terms = []
    for issue in domain.issues:
        if issue.kind != "continuous":
            continue
        frac = q if issue.seller_sign > 0 else 1.0 - q
        value = round(issue.lo + frac * (issue.hi - issue.lo), 2)
        terms.append({"name": issue.name, "value": int(value) if float(value).is_integer() else value})
    return terms


def action_texts(spec: RungSpec) -> list[str]:
    """The whole-action token texts, level 0 (worst for the seller) first."""
    dom = _domain(spec.domain)
    out = []
    for k in range(spec.levels):
        action = {"action": "COUNTER", "terms": level_terms(dom, k / (spec.levels - 1))}
        out.append(f"Offer {k}.\n" + json.dumps(action))
    return out


def ladder_tokenizer(actions: Sequence[str]) -> Any:
    """A tokenizer whose vocabulary is ``SPECIALS`` (ids 0-2) and one token per action (ids 3, ...).

    Every character outside an action or tag string is normalized away, so a rendered chat encodes to its
    tags alone; encoding is concatenation-consistent, so the turn-tag round trip of :mod:`chat_template` holds.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers
    from transformers import PreTrainedTokenizerFast

    from negolib.models import CHATML_TEMPLATE

    tk = Tokenizer(models.WordLevel(vocab={SPECIALS[0]: 0}, unk_token=SPECIALS[0]))
    tk.normalizer = normalizers.Replace(Regex(r"[\s\S]"), "")
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    tk.add_tokens([AddedToken(a, special=False, normalized=False) for a in actions])
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token=SPECIALS[1], eos_token=SPECIALS[2],
                                  pad_token=SPECIALS[0], unk_token=SPECIALS[0], chat_template=CHATML_TEMPLATE,
                                  clean_up_tokenization_spaces=False)
    tok.padding_side = "left"
    return tok


def save_tiny_llama(folder: str | Path, tok: Any, hidden: int, layers: int, max_positions: int, seed: int) -> Path:
    """A tiny Llama built from a config for tokenizer ``tok`` (:func:`negolib.models.tiny_llama`: weights drawn
    from ``seed``, sampling on), saved with ``tok`` into ``folder``."""
    model = tiny_llama(tok, seed, hidden, layers, max_positions)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def save_initial_model(folder: str | Path, spec: RungSpec, seed: int) -> Path:
    """Build the tiny Llama from a config (weights drawn from ``seed``) and save it with its tokenizer."""
    return save_tiny_llama(folder, ladder_tokenizer(action_texts(spec)), spec.hidden, spec.layers, 64, seed)


class AcceptingBuyer(Agent):
    """Accepts the seller's offer whenever the seller's last turn parsed (a COUNTER: a seller's opening ACCEPT
    is invalid) and the standing ledger then holds at least ``min_valid_terms`` schema terms; otherwise asks
    for one (no action, so the episode runs to the round cap without a deal). With ``min_valid_terms=1`` a
    COUNTER naming only off-schema or out-of-range terms, which changes nothing, is not a deal."""

    name = BUYER
    backend = "scripted"

    def __init__(self, min_valid_terms: int = 0) -> None:
        if min_valid_terms < 0:
            raise ValueError(f"min_valid_terms must be >= 0, got {min_valid_terms}")
        self.min_valid_terms = min_valid_terms

    def act_batch(self, views: Sequence[PartyView]) -> list[AgentReply]:
        out = []
        for v in views:
            last = offer_to_answer(v)  # the seller's last turn, when it parsed
            schema = {issue.name for issue in v.domain.issues}
            if last is not None and sum(name in schema for name in last.ledger) >= self.min_valid_terms:
                out.append(AgentReply('Agreed.\n{"action": "ACCEPT"}'))
            else:
                out.append(AgentReply("Please make me an offer that names the terms you want."))
        return out


class DeadlineBuyer(TimeDependentAgent):
    """A conceding buyer with a deadline (a matched lesson's buyer, ours). It counters as the paper game's Conceder
    does (Faratin e = 2: from its best contract toward its reservation value, most of the way in the first rounds)
    but accepts nothing before its last turn; at its last turn it must buy, and accepts the seller's standing offer
    if the seller's last turn was a parsed COUNTER that set at least ``min_valid_terms`` contract terms in range (terms
    whose value the counter changed: a term out of range or off the schema changes nothing). A seller who holds firm
    to the deadline is paid its own last counter; one who ACCEPTs the buyer's earlier counter takes that counter,
    worth less to it (RESULTS.md gives the scripted sellers' scores against it)."""

    def __init__(self, name: str = "lesson_deadline", seed: int = 0, min_valid_terms: int = 0) -> None:
        super().__init__(name, seed, e=2.0)
        if min_valid_terms < 0:
            raise ValueError(f"min_valid_terms must be >= 0, got {min_valid_terms}")
        self.min_valid_terms = min_valid_terms

    def accepts(self, view: PartyView, next_bid_utility: float) -> bool:
        last = offer_to_answer(view)
        if last is None or view.turn + 2 <= view.config.max_turns:  # no offer, or a later turn of its own left
            return False
        before = view.history[-2].ledger if len(view.history) > 1 else {}
        moved = sum(last.ledger.get(issue.name) != before.get(issue.name) for issue in view.domain.issues)
        return moved >= self.min_valid_terms

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "min_valid_terms": self.min_valid_terms}


def rung_config(spec: RungSpec, seed: int) -> TrainConfig:
    """The rung's :class:`TrainConfig`: the recipe's objective (LOO advantages, dapo loss, clip 0.2, k3 KL),
    with a tiny budget, a high learning rate (the spec's) and one one-token turn per episode."""
    return TrainConfig(
        scenarios_per_step=spec.scenarios, rollouts_per_scenario=spec.rollouts,
        micro_batch_size=spec.scenarios * spec.rollouts, max_steps=spec.steps,
        learning_rate=spec.learning_rate, warmup_steps=spec.warmup_steps, kl_beta=spec.kl_beta,
        max_new_tokens=1, max_prompt_tokens=16, max_context_tokens=32, max_rollout_turns=1, max_rounds=1,
        train_domains=(spec.domain,), train_seeds_per_domain=spec.scenarios, buyer_mixture={BUYER: 1.0},
        validate_every=0, save_every=spec.steps, seed=seed, data_seed=seed,
    )


# ---------------------------------------------------------------------------------------------
# Sabotage wrappers (twins only)
# ---------------------------------------------------------------------------------------------


def _wrap_rollouts(trainer: Any, sabotage: str, seed: int) -> None:
    """Replace the trainer's ``rollout_func`` by one that corrupts what TRL receives. The transcripts the
    real rollout writes keep the true rewards, which is what the rung measures."""
    inner, group = trainer.rollout_func, trainer.num_generations
    rng = np.random.default_rng(seed)

    def rollout_func(prompts: list[Any], tr: Any) -> dict[str, list[Any]]:
        out = inner(prompts, tr)
        if sabotage == "env_mask_zero":
            out["env_mask"] = [[0] * len(m) for m in out["env_mask"]]
        else:  # shuffle_rewards: rollouts of one scenario are consecutive (TRL's RepeatSampler)
            r = np.asarray(out["episode_reward"], dtype=float).reshape(-1, group)
            out["episode_reward"] = rng.permuted(r, axis=1).reshape(-1).tolist()
        return out

    trainer.rollout_func = rollout_func


def _zero_lr_callback(trainer: Any) -> Any:
    """A callback that sets every learning rate (and the scheduler's base rates) to 0 when training begins."""
    from transformers import TrainerCallback

    class ZeroLR(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            sched = trainer.lr_scheduler
            inner = getattr(sched, "scheduler", sched)  # accelerate may wrap it
            inner.base_lrs = [0.0 for _ in inner.base_lrs]
            inner._last_lr = [0.0 for _ in inner.base_lrs]  # what the step log reads
            for g in trainer.optimizer.param_groups:
                g["lr"], g["initial_lr"] = 0.0, 0.0

    return ZeroLR()


# ---------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------


def paired_gain(a: np.ndarray, b: np.ndarray, n_resamples: int, seed: int, alpha: float) -> Gain:
    """mean(a) - mean(b) over paired clusters (row g of ``a`` and ``b`` are one cluster's values, shape (G,)),
    with the percentile interval of negolib's cluster bootstrap (:class:`negolib.stats.ClusterResampler`)."""
    from negolib.stats import ClusterResampler, RatioStat, resample_stats, summarize

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    g = a.size
    stat = RatioStat(np.stack([a, b], axis=1), np.ones((g, 2)), np.ones(2), 1)
    resampler = ClusterResampler(np.arange(g), n_resamples, seed)
    s = summarize(resample_stats(resampler, [stat])[:, 0], alpha)
    return Gain(stat.value(), s.ci_low, s.ci_high, g)


def _episode_rewards(transcripts: Path, steps: int) -> tuple[list[list[float]], dict[tuple, float]]:
    """(rewards per step in play order, reward by (step, domain, seed, rollout rank)) from train.jsonl."""
    per_step: list[list[float]] = [[] for _ in range(steps)]
    keyed: dict[tuple, float] = {}
    for line in transcripts.read_text().splitlines():
        rec = json.loads(line)
        step, reward = int(rec["step"]), float(rec["training"]["reward"])
        rank = int(str(rec["arm"]).rsplit("|r", 1)[1])
        per_step[step - 1].append(reward)
        keyed[(step, rec["domain"], int(rec["seed"]), rank)] = reward
    return per_step, keyed


def _window_gain(keyed: dict[tuple, float], spec: RungSpec, seed: int) -> Gain:
    """Late minus early mean reward; cluster = (scenario, rollout rank, slot j), pairing early step j with
    late step steps - window + j, so both sides hold the same scenarios."""
    late, early = [], []
    for j in range(spec.window):
        e_step, l_step = 1 + j, spec.steps - spec.window + 1 + j
        for (step, dom, sd, rank), r in sorted(keyed.items()):
            if step == e_step and (l_step, dom, sd, rank) in keyed:
                early.append(r)
                late.append(keyed[(l_step, dom, sd, rank)])
    return paired_gain(np.array(late), np.array(early), spec.n_resamples, seed, spec.alpha)


def weight_change(a: str | Path, b: str | Path) -> float:
    """Largest absolute difference between the weights saved in two model folders (same architecture)."""
    from safetensors.numpy import load_file

    wa, wb = load_file(str(Path(a) / "model.safetensors")), load_file(str(Path(b) / "model.safetensors"))
    return max(float(np.max(np.abs(wa[k].astype(np.float64) - wb[k]))) for k in wa)


def _optimum(scenarios: Sequence[Any], spec: RungSpec) -> float:
    """Mean seller utility of the top-level action (always accepted) on ``scenarios``."""
    from negolib.games.multi_issue.utility import normalized_utility

    top = {t["name"]: t["value"] for t in level_terms(_domain(spec.domain), 1.0)}
    return float(np.mean([normalized_utility(s.domain, s.seller, top) for s in scenarios]))


def evaluate_arm(weights: str | Path, spec: RungSpec, seed: int, arm: str = "ladder_seller") -> list[float]:
    """Score S per evaluation scenario of the ``hf`` arm loaded from ``weights`` through the agent factory
    (:func:`negolib.agents.factory.build_agent`, the loader a ``trained`` arm uses once its checkpoint folder
    is resolved), on the evaluation scaffold and environment, one round against :class:`AcceptingBuyer`.
    Sampling seeds derive from ``seed`` and the episode ids, so two arms evaluated under the same ``arm``
    label draw the same random numbers (identical weights give identical episodes)."""
    from negolib.agents.factory import ModelCache, build_agent
    from negolib.games.multi_issue.rollout import make_specs, run_episodes
    from negolib.games.multi_issue.scenarios import eval_seeds, scenario_set
    from negolib.params import AgentSpec, Sampling

    agent_spec = AgentSpec(backend="hf", path=str(weights), sampling=Sampling(max_new_tokens=1),
                           scaffold="evaluation", batch_size=spec.eval_scenarios, prompt_cap=16)
    seller = build_agent(arm, agent_spec, seed, cache=ModelCache(), role="seller")
    scenarios = scenario_set(eval_seeds(spec.eval_scenarios), [spec.domain])
    specs = make_specs(arm, arm, [BUYER], scenarios, EnvConfig(max_rounds=1))
    res = run_episodes(specs, {arm: seller, BUYER: AcceptingBuyer()}, progress=False)
    by_seed = {int(r["seed"]): float(r["outcome"]["score"]) for r in res.records}
    return [by_seed[s.seed] for s in scenarios]


# ---------------------------------------------------------------------------------------------
# The rung
# ---------------------------------------------------------------------------------------------


@contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` torch intra-op threads (None: unchanged), restoring the previous count."""
    import torch

    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train_rung(out_dir: str | Path, seed: int = 0, sabotage: Sabotage | None = None,
               spec: RungSpec | None = None, progress: bool = False) -> TrainedRung:
    """Build the initial model and train it through :func:`~negolib.training.grpo.build_run` into ``out_dir``
    (``sabotage``: a training twin, or ``"eval_initial"``/None for a normal run)."""
    from negolib.games.multi_issue.training import paper_task, scenario_items
    from negolib.training.checkpoints import last_checkpoint
    from negolib.training.grpo import build_run

    if sabotage is not None and sabotage not in SABOTAGES:
        raise ValueError(f"sabotage must be one of {SABOTAGES} or None, got {sabotage!r}")
    spec = spec or RungSpec()
    t0 = time.perf_counter()
    out = Path(out_dir)
    initial = save_initial_model(out / "initial", spec, seed)
    config = rung_config(spec, seed)
    with _torch_threads(spec.threads):
        run = build_run(config, initial, out / "run", buyers={BUYER: AcceptingBuyer()}, progress=progress,
                        resume=False, task=paper_task(config))
        if sabotage in ("env_mask_zero", "shuffle_rewards"):
            _wrap_rollouts(run.trainer, sabotage, seed)
        elif sabotage == "lr_zero":
            run.trainer.add_callback(_zero_lr_callback(run.trainer))
        run.trainer.train()
    checkpoint = last_checkpoint(run.out_dir / "checkpoints")
    if checkpoint is None:
        raise RuntimeError(f"the rung wrote no checkpoint under {run.out_dir / 'checkpoints'}")
    step_rewards, keyed = _episode_rewards(run.out_dir / "transcripts" / "train.jsonl", spec.steps)
    return TrainedRung(
        seed=seed, sabotage=sabotage if sabotage != "eval_initial" else None, spec=spec,
        initial_dir=str(initial), checkpoint=str(checkpoint), step_rewards=step_rewards,
        train_gain=_window_gain(keyed, spec, seed),
        train_optimum=_optimum([it.scenario for it in scenario_items(config, "train")], spec),
        weight_change=weight_change(initial, checkpoint), seconds=time.perf_counter() - t0, log=run.train_log.rows(),
    )


def evaluate_rung(trained: TrainedRung, sabotage: Sabotage | None = None) -> RungResult:
    """Score the trained checkpoint (with ``sabotage="eval_initial"``: the initial weights instead) and the
    initial weights on the same evaluation scenarios with the same sampling seeds."""
    from negolib.games.multi_issue.scenarios import eval_seeds, scenario_set

    t0, spec = time.perf_counter(), trained.spec
    sabotage = sabotage or trained.sabotage
    evaluated = trained.initial_dir if sabotage == "eval_initial" else trained.checkpoint
    eval_seed = trained.seed * 1_000_003 + 17  # both arms sample with the same seeds (common random numbers)
    with _torch_threads(spec.threads):
        before = evaluate_arm(trained.initial_dir, spec, eval_seed)
        after = evaluate_arm(evaluated, spec, eval_seed)
    return RungResult(
        training=trained, sabotage=sabotage, evaluated_dir=evaluated, eval_initial=before, eval_trained=after,
        eval_gain=paired_gain(np.array(after), np.array(before), spec.n_resamples, trained.seed, spec.alpha),
        eval_optimum=_optimum(scenario_set(eval_seeds(spec.eval_scenarios), [spec.domain]), spec),
        seconds=time.perf_counter() - t0,
    )


def run_rung(out_dir: str | Path, seed: int = 0, sabotage: Sabotage | None = None,
             spec: RungSpec | None = None, progress: bool = False) -> RungResult:
    """Train and evaluate one rung (or, with ``sabotage``, one twin) into ``out_dir``; see the module doc."""
    return evaluate_rung(train_rung(out_dir, seed, sabotage, spec, progress), sabotage)


__all__ = ["BUYER", "SABOTAGES", "AcceptingBuyer", "DeadlineBuyer", "Gain", "RungResult", "RungSpec", "TrainedRung",
           "action_texts", "evaluate_arm", "evaluate_rung", "ladder_tokenizer", "level_terms", "paired_gain",
           "run_rung", "rung_config", "save_initial_model", "save_tiny_llama", "train_rung"]
