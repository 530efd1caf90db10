"""Benchmark: the learning ladder's negotiation rung (issue 14 item 1). Does GRPO make SmolLM2 negotiate better?

SmolLM2-135M-Instruct (the packaged model) first gets the project's format warm-up
(:func:`negolib.games.multi_issue.warmup.run_format_warmup`: scripted sellers' turns against the book's training buyers,
Conceder 80% / Boulware 20%, lr 2e-4, batch 4), cached under ``--work-dir`` so a rerun skips it. The warmed-up
model is then trained with the project's GRPO path (:func:`negolib.training.grpo.build_run`: TRL's
``GRPOTrainer``, the multi-turn ``rollout_func``, ``env_mask``, leave-one-out advantages, the k3 KL term
except in ``--quick``)
against a scripted buyer with a known exploitable rule, and the trained checkpoint and the warmed-up start are
both loaded as ``hf`` arms through the agent factory and played on the same paired held-out scenarios.

The buyer (:class:`negolib.study.ladder.AcceptingBuyer`, ``--min-valid-terms``: 2 in ``--quick``, 1 in the
full preset) accepts the seller's opening COUNTER on its first turn when it names at least that many schema terms
(in range); otherwise it asks again and, in one-round episodes, there is no deal (score -0.3). A COUNTER naming
only off-schema terms, which changes nothing (the shortcut an earlier version of this rung learned), is therefore
no deal. With 2, about half the warmed-up openings close, so the deal splits most groups of 8 and carries the
gradient. The best play is one parseable opening that names the seller's ideal value of every term (an unnamed
term scores at its default, half its weight). By default the rung plays one domain, ``software_license``, whose
four continuous terms the seller always wants high, so part of the optimum is the same in every scenario
(``--domain`` another training domain). Episodes are one round, in the environment of the book's matched
lesson (:mod:`negolib.study.lesson`: terms on an ACCEPT ignored), on the training scaffold, in both training
and evaluation.

Evaluation: ``--eval-episodes`` scenarios on the reserved evaluation seeds (one seed each, of the rung's
domain), the same for both arms, sampled with the same seeds (common random numbers: arms with identical
weights play identical episodes). The gain is mean score S (trained) minus mean S (start), with a
95% percentile cluster-bootstrap interval over seeds (:func:`negolib.study.lesson.lesson_result`, the book's
lesson statistics on negolib's ``ClusterResampler``). Printed last, one line::

    LEARNING: gain +x.xxx [lo, hi] over N paired episodes, T s

GRPO micro-batches are 2 episodes (8 episodes of ~830 tokens in one forward/backward took SmolLM2 past 17 GB and
the kernel's OOM killer). ``--quick`` is meant to fit 15 minutes on 2 cores including the warm-up (see the README
for what was measured); ``--dry-run`` runs every phase on a tiny random
model in seconds (the gain is then noise around 0: nothing parses). Results measured on this host are in
benchmarks/README.md ("Negotiation rung (issue 14)").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@dataclass(frozen=True)
class Setting:
    """One preset of the benchmark (``--quick``, the default, ``--dry-run``); flags override fields."""

    model: str = "smollm2-135m-instruct"
    # format warm-up (the book's lr and batch; training scaffold only, the scaffold this rung plays)
    warmup_demos: int = 96
    warmup_lr: float = 2e-4
    warmup_batch: int = 4
    warmup_prompt_cap: int = 2048
    # GRPO
    steps: int = 24
    scenarios: int = 2  # scenarios a step; x rollouts = episodes a step
    rollouts: int = 4  # the GRPO group
    lr: float = 3e-5
    warmup_steps: int = 1
    kl_beta: float = 0.04
    loo_std_floor: float = 0.1  # bounds |A| when a group's other rollouts nearly tie (see TrainConfig)
    lora_rank: int = 0  # 0: full fine-tuning; > 0: LoRA adapters of this rank (LessonConfig.lora_rank)
    lora_alpha: int = 32
    max_new_tokens: int = 128
    max_prompt_tokens: int = 1024
    # evaluation
    eval_episodes: int = 64
    eval_batch: int = 32
    n_resamples: int = 10_000
    alpha: float = 0.05
    seed: int = 0
    # the game: one domain (training seeds and reserved evaluation seeds of it)
    domain: str = "software_license"
    min_valid_terms: int = 1  # the buyer accepts an opening naming at least this many valid schema terms


PRESETS = {
    "full": Setting(),
    # lr 1e-4 collapsed on one domain (bad parses 0.75 by step 5); lr 3e-5, groups of 8, a buyer that accepts
    # openings naming >= 2 valid terms (about half the warmed-up openings: the deal splits each group): 12 steps
    # learned, gain +0.280 [+0.152, +0.405] over 96 paired episodes, but took ~25 min (see the README). Cut to fit
    # 15 minutes: 7 GRPO steps, no KL term (TRL then loads no reference model and skips its forward: a step took
    # 58-70 s on 2 idle cores, not ~95 s; the 12-step run's KL stayed under 0.1, a penalty under 0.004 a token at
    # beta 0.04, small beside advantages of order 1), 64 paired evaluation episodes. The warm-up keeps its 64
    # demonstrations: with 48 the warmed-up start closed 2 of 64 (deal rate 0.03) and GRPO groups had no deal to
    # learn from (2026-12-02)
    "quick": Setting(warmup_demos=64, steps=7, scenarios=1, rollouts=8, lr=3e-5, kl_beta=0.0, eval_episodes=64,
                     min_valid_terms=2),
    "dry": Setting(model="tiny", warmup_demos=4, warmup_prompt_cap=4096, steps=2, scenarios=2, rollouts=2,
                   lr=1e-3, max_new_tokens=8, max_prompt_tokens=4096, eval_episodes=4, eval_batch=4,
                   n_resamples=1000),
}
BUYER_MIXTURE_WARMUP = {"conceder": 0.8, "boulware": 0.2}  # the book's training buyers (params/default.yaml)


def _log(msg: str, t0: float) -> None:
    print(f"[{time.perf_counter() - t0:7.1f} s] {msg}", flush=True)


def _key(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


# ---------------------------------------------------------------------------------------------
# Phases
# ---------------------------------------------------------------------------------------------


def initial_model(s: Setting, work: Path) -> str:
    """The folder of the model before the warm-up: the packaged SmolLM2 (converted once, cached outside the
    repository) or, for the dry run, a tiny random Llama saved under ``work``."""
    if s.model != "tiny":
        from negolib.models import local_model_dir

        return str(local_model_dir(s.model))
    from negolib.models import tiny_causal_lm

    folder = work / "tiny-initial"
    if not (folder / "config.json").is_file():
        model, tok = tiny_causal_lm(seed=s.seed)
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
    return str(folder)


def warmed_up_model(s: Setting, init: str, work: Path, progress: bool) -> tuple[str, bool]:
    """(folder of the warmed-up model, whether it came from the cache). The warm-up's settings and initial
    model name its folder, so a rerun with the same settings skips it."""
    from negolib.games.multi_issue.scripted import make_scripted
    from negolib.games.multi_issue.training import env_config, scenario_items
    from negolib.games.multi_issue.warmup import WarmupConfig, run_format_warmup, warmup_ready
    from negolib.training.config import TrainConfig

    config = WarmupConfig(demonstrations=s.warmup_demos, learning_rate=s.warmup_lr, batch_size=s.warmup_batch,
                          scaffolds=("training",), prompt_cap=s.warmup_prompt_cap, seed=s.seed)
    run_dir = work / f"warmup-{_key([s.model, init if s.model == 'tiny' else '', asdict(config)])}"
    cached = warmup_ready(run_dir)
    tc = TrainConfig(buyer_mixture=BUYER_MIXTURE_WARMUP, train_seeds_per_domain=max(1, -(-s.warmup_demos // 24)),
                     seed=s.seed, data_seed=s.seed)
    # seed-major, so the demonstrations cycle through all eight training domains
    items = sorted(scenario_items(tc, "train"), key=lambda it: (it.scenario.seed, it.scenario.domain.name))
    buyers = {n: make_scripted(n, seed=s.seed) for n in BUYER_MIXTURE_WARMUP}
    folder = run_format_warmup(init, run_dir, config, items, buyers, env_config(tc), progress=progress)
    return str(folder), cached


def lesson_config(s: Setting, lr: float | None = None) -> Any:
    """The rung as the book's matched lesson (:class:`negolib.training.config.LessonConfig`): one-round openings of
    ``s.domain`` against the accepting buyer, training scaffold, training and evaluation alike."""
    from negolib.training.config import LessonConfig

    per_step = s.scenarios * s.rollouts
    return LessonConfig(
        start_run="bench", domain=s.domain, min_valid_terms=s.min_valid_terms, rounds=1, scaffold="training",
        accept_applies_terms=False, steps=s.steps, scenarios_per_step=s.scenarios, rollouts_per_scenario=s.rollouts,
        micro_batch_size=min(per_step, 2), learning_rate=s.lr if lr is None else lr, warmup_steps=s.warmup_steps,
        kl_beta=s.kl_beta, loo_std_floor=s.loo_std_floor, lora_rank=s.lora_rank, lora_alpha=s.lora_alpha,
        max_new_tokens=s.max_new_tokens,
        max_prompt_tokens=s.max_prompt_tokens, eval_episodes=s.eval_episodes, eval_batch=s.eval_batch)


def train(s: Setting, start: str, out: Path, progress: bool,
          lr: float | None = None) -> tuple[str, list[dict[str, Any]]]:
    """GRPO from ``start`` through the lesson's path (:func:`negolib.study.lesson.train_lesson`, which calls
    :func:`~negolib.training.grpo.build_run`); (final checkpoint, step log). Always trains afresh."""
    import shutil

    from negolib.study.lesson import train_lesson

    shutil.rmtree(out, ignore_errors=True)
    run = train_lesson(lesson_config(s, lr), start, out, seed=s.seed, progress=progress)
    return run.checkpoint, run.log


def eval_scenarios(s: Setting) -> list[Any]:
    """One scenario per reserved evaluation seed of the rung's domain (clusters = seeds)."""
    from negolib.study.lesson import eval_scenarios as lesson_scenarios

    return lesson_scenarios(lesson_config(s))


def evaluate_cached(weights: str, s: Setting, scenarios: list[Any], seed: int, path: Path) -> tuple[list[Any], bool]:
    """The lesson's paired evaluation of ``weights`` (:func:`negolib.study.lesson.evaluate_lesson`), its records
    kept in ``path``; (records, whether they came from there)."""
    from negolib.study.lesson import evaluate_lesson

    cached = path.is_file()
    records = evaluate_lesson(weights, lesson_config(s), seed, path)
    if [(r["domain"], int(r["seed"])) for r in records] != [(x.domain.name, x.seed) for x in scenarios]:
        raise RuntimeError(f"{path}: the records are not the rung's evaluation scenarios; delete the file")
    return records, cached


def _summary(records: list[dict[str, Any]]) -> dict[str, float]:
    """The lesson's own per-arm summary (:meth:`negolib.study.lesson.Episodes.summary`) under this benchmark's
    JSON keys, plus the terms named in the opening and the error episodes."""
    import numpy as np

    from negolib.study.lesson import Episodes

    d = Episodes.from_records(records).summary()
    named = [len((r["turns"][0].get("action") or {}).get("terms") or []) for r in records if r["turns"]]
    return {"S": d["S"], "deal_rate": d["deal rate"], "utility_on_deals": d["utility on deals"],
            "terms_named": float(np.mean(named)) if named else 0.0,
            "errors": sum(r["status"] == "error" for r in records)}


def _fmt(d: dict[str, float]) -> str:
    return (f"S {d['S']:+.3f}, deal rate {d['deal_rate']:.2f}, seller utility on deals {d['utility_on_deals']:.3f}, "
            f"terms named {d['terms_named']:.1f}, errors {d['errors']}")


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="fits 15 minutes on 2 cores, warm-up included")
    mode.add_argument("--dry-run", action="store_true", help="every phase on a tiny random model (seconds)")
    ap.add_argument("--work-dir", default=".cache/bench_learning",
                    help="warm-up cache and training runs (default: %(default)s)")
    for name, typ in (("steps", int), ("scenarios", int), ("rollouts", int), ("lr", float), ("kl_beta", float),
                      ("loo_std_floor", float), ("lora_rank", int), ("lora_alpha", int),
                      ("warmup_demos", int), ("max_new_tokens", int), ("eval_episodes", int),
                      ("eval_batch", int), ("seed", int), ("domain", str), ("min_valid_terms", int)):
        ap.add_argument("--" + name.replace("_", "-"), type=typ, default=None, help="override the preset")
    ap.add_argument("--lrs", default=None, help="comma-separated learning rates to train from the same start, "
                                                "one LEARNING line each (default: the preset's --lr)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default: %(default)s)")
    ap.add_argument("--json", default=None, help="write the result here as JSON")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    import torch

    from negolib.study.lesson import lesson_result

    torch.set_num_threads(args.threads)
    preset = "dry" if args.dry_run else "quick" if args.quick else "full"
    s = replace(PRESETS[preset], **{k: v for k, v in vars(args).items()
                                    if k in Setting.__dataclass_fields__ and v is not None})
    progress = not args.no_progress
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    _log(f"preset {preset}: {s}", t0)

    init = initial_model(s, work)
    t = time.perf_counter()
    start, cached = warmed_up_model(s, init, work, progress)
    t_warm = time.perf_counter() - t
    _log(f"format warm-up {'from the cache' if cached else 'done'}: {start} ({t_warm:.1f} s)", t0)

    scenarios = eval_scenarios(s)
    eval_seed = s.seed * 1_000_003 + 17
    t = time.perf_counter()
    eval_key = _key([start, [(x.domain.name, x.seed) for x in scenarios], eval_seed, s.max_new_tokens,
                     s.max_prompt_tokens, s.eval_batch, s.min_valid_terms])
    before, before_cached = evaluate_cached(start, s, scenarios, eval_seed, work / f"eval-start-{eval_key}.jsonl")
    t_before = time.perf_counter() - t
    _log(f"start (warmed-up) on {len(before)} evaluation episodes{' (from the cache)' if before_cached else ''}: "
         f"{_fmt(_summary(before))} ({t_before:.1f} s)", t0)

    lrs = [float(x) for x in args.lrs.split(",")] if args.lrs else [s.lr]
    sweep = []
    for lr in lrs:  # the paper's advice: tune the learning rate first; every rate from the same start
        t = time.perf_counter()
        run_dir = work / f"run-{_key(asdict(replace(s, lr=lr)))}"
        checkpoint, log = train(s, start, run_dir, progress, lr)
        t_train = time.perf_counter() - t
        curve = " ".join(f"{row.get('reward', float('nan')):+.2f}" for row in log)
        _log(f"GRPO: {s.steps} steps x {s.scenarios * s.rollouts} episodes at lr {lr:g} ({t_train:.1f} s); "
             f"reward per step: {curve}", t0)
        t = time.perf_counter()
        after, _ = evaluate_cached(checkpoint, s, scenarios, eval_seed, run_dir / "eval-trained.jsonl")
        t_after = time.perf_counter() - t
        _log(f"trained at lr {lr:g} on the same {len(after)} episodes: {_fmt(_summary(after))} ({t_after:.1f} s)",
             t0)
        res = lesson_result(before, after, lesson_config(s, lr), s.n_resamples, s.seed, s.alpha)  # the book's
        gain = res.estimates["S"]
        sweep.append({"lr": lr, "gain": gain.diff, "ci_low": gain.ci_low, "ci_high": gain.ci_high,
                      "episodes": len(after), "clusters": res.n_clusters, "after": _summary(after),
                      "step_rewards": [row.get("reward") for row in log], "checkpoint": checkpoint,
                      "seconds": {"train": t_train, "eval_after": t_after}})
    total = time.perf_counter() - t0
    result = {"preset": preset, "setting": asdict(s), **{k: v for k, v in sweep[0].items() if k != "seconds"},
              "before": _summary(before), "sweep": sweep,
              "seconds": {"warmup": t_warm, "warmup_cached": cached, "eval_before": t_before,
                          "eval_before_cached": before_cached, **sweep[0]["seconds"], "total": total}}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    for row in sweep:
        tag = f" (lr {row['lr']:g})" if len(sweep) > 1 else ""
        print(f"LEARNING{tag}: gain {row['gain']:+.3f} [{row['ci_low']:+.3f}, {row['ci_high']:+.3f}] over "
              f"{row['episodes']} paired episodes, {total:.0f} s", flush=True)
    return result


if __name__ == "__main__":
    main()
