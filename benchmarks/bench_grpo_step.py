"""Benchmark: what a GRPO step of the matched lesson costs, and what each cheaper-step lever saves (issue 27, sec. 2).

Variants, each a full GRPO step through the project's path (:func:`negolib.study.lesson.train_lesson`, TRL's
``GRPOTrainer``), from the same start, on the same scenarios, with the same seed:

* ``reference``: the KL term on (``kl_beta`` 0.04): TRL loads a reference model and runs its forward every step;
* ``no_reference``: ``kl_beta`` 0: no reference model (the lesson's setting);
* ``untrimmed``: ``kl_beta`` 0 with ``trim_padding`` off: every micro-batch padded to the step's longest episode;
* ``trimmed``: ``kl_beta`` 0 with ``trim_padding`` on (the default): each micro-batch over its own width;
* ``stock_prompt``: ``kl_beta`` 0 with ``shared_prefix`` off and micro-batches of 2 (the lesson before the lever):
  every rollout's prompt run through forward and backward (TRL's stock scoring);
* ``shared_prompt``: ``kl_beta`` 0 with ``shared_prefix`` on and the whole group of 8 in one micro-batch (the
  lesson now): the group's prompt run once (:mod:`negolib.training.shared_prefix`).

``--micro-batch`` sets the other variants' episodes a forward/backward (micro-batches never exceed a step's episodes).

The variants run in rounds, each round in a rotated order (A-B-C-D, then B-C-D-A, ...), so a drift of the shared
host's speed falls on every variant alike. Per variant it prints the median [min, max] over rounds of the update's
seconds a step (``time_update_s``: forward and backward, the part these levers touch) and of the whole step, and
each lever's ratio against its baseline measured in the same run: ``no_reference / reference``,
``trimmed / untrimmed`` and ``shared_prompt / stock_prompt``. ``--dry-run`` runs it all on a tiny random model in
seconds (a test runs that).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

VARIANTS: dict[str, dict[str, Any]] = {
    "reference": {"kl_beta": 0.04, "trim_padding": True, "shared_prefix": False},
    "no_reference": {"kl_beta": 0.0, "trim_padding": True, "shared_prefix": False},
    "untrimmed": {"kl_beta": 0.0, "trim_padding": False, "shared_prefix": False},
    "trimmed": {"kl_beta": 0.0, "trim_padding": True, "shared_prefix": False},
    "stock_prompt": {"kl_beta": 0.0, "trim_padding": True, "shared_prefix": False, "micro_batch_size": 2},
    "shared_prompt": {"kl_beta": 0.0, "trim_padding": True, "shared_prefix": True, "micro_batch_size": 8},
}
RATIOS = (("no_reference", "reference"), ("trimmed", "untrimmed"), ("shared_prompt", "stock_prompt"))


def _start(model: str, work: Path) -> str:
    """The start policy's folder: the packaged SmolLM2 (its timing does not depend on the warm-up) or a tiny model."""
    if model != "tiny":
        from negolib.models import local_model_dir

        return str(local_model_dir(model))
    from negolib.models import tiny_causal_lm

    folder = work / "tiny"
    if not (folder / "config.json").is_file():
        m, tok = tiny_causal_lm(seed=0)
        m.save_pretrained(folder)
        tok.save_pretrained(folder)
    return str(folder)


def run_variant(name: str, start: str, work: Path, lesson: Any, steps: int) -> list[dict[str, float]]:
    """``steps`` GRPO steps of the lesson under variant ``name``; the run log's timing per step."""
    import shutil

    from negolib.study.lesson import train_lesson

    out = work / f"run-{name}"
    shutil.rmtree(out, ignore_errors=True)
    recipe = dict(VARIANTS[name])
    per_step = lesson.scenarios_per_step * lesson.rollouts_per_scenario
    recipe["micro_batch_size"] = min(per_step, recipe.get("micro_batch_size", lesson.micro_batch_size))
    run = train_lesson(dataclasses.replace(lesson, steps=steps), start, out, seed=0, recipe=recipe)
    return [{"update": float(r.get("time_update_s", float("nan"))),
             "step": float(r.get("step_time", r.get("time_step_s", float("nan"))))} for r in run.log]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true", help="a tiny random model, seconds")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of every variant (default: %(default)s)")
    ap.add_argument("--steps", type=int, default=1, help="GRPO steps a run (default: %(default)s)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset of the variants")
    ap.add_argument("--work-dir", default=".cache/bench_grpo_step")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--micro-batch", type=int, default=2, help="episodes a forward/backward (default: %(default)s)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import torch

    from negolib.training.config import LessonConfig

    torch.set_num_threads(args.threads)
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    lesson = LessonConfig(start_run="bench", min_valid_terms=2, scenarios_per_step=1, rollouts_per_scenario=8,
                          micro_batch_size=args.micro_batch)
    if args.dry_run:
        lesson = dataclasses.replace(lesson, rollouts_per_scenario=4, max_new_tokens=8, max_prompt_tokens=512,
                                     micro_batch_size=min(args.micro_batch, 4))
    start = _start("tiny" if args.dry_run else "smollm2-135m-instruct", work)
    names = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {sorted(VARIANTS)}")
    times: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    t0 = time.perf_counter()
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]  # rotated: a drift falls on every variant
        for name in order:
            times[name] += run_variant(name, start, work, lesson, args.steps)
            print(f"[{time.perf_counter() - t0:7.1f} s] round {r + 1}: {name} update "
                  f"{times[name][-1]['update']:.1f} s, step {times[name][-1]['step']:.1f} s", flush=True)
    result: dict[str, Any] = {"variants": {}, "ratios": {}, "rounds": args.rounds, "steps": args.steps,
                              "model": "tiny" if args.dry_run else "smollm2-135m-instruct"}
    for name, rows in times.items():
        up = [x["update"] for x in rows]
        st = [x["step"] for x in rows]
        result["variants"][name] = {"update_median": statistics.median(up), "update_min": min(up),
                                    "update_max": max(up), "step_median": statistics.median(st)}
        print(f"{name:>13}: update {statistics.median(up):6.1f} s [{min(up):.1f}, {max(up):.1f}], "
              f"step {statistics.median(st):6.1f} s (median [range] of {len(up)})")
    for b, a in RATIOS:
        if b in times and a in times:
            ratio = result["variants"][b]["update_median"] / result["variants"][a]["update_median"]
            result["ratios"][f"{b}/{a}"] = ratio
            print(f"GRPO STEP: {b} / {a} update time {ratio:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
