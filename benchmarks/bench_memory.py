"""Benchmark: peak resident memory (VmHWM) of the default book's two heavy phases (issue 28, section 7).

* ``eval``: notebook 04's language-model wave: three SmolLM2 seller arms (three copies of the weights, as the base,
  warm-up and GRPO arms are three checkpoints), each playing the profile's declared subset (5 seeds of the held-out
  car domain x 2 buyers) on the evaluation scaffold, batch 20, 128 new tokens, float32. ``fixed``: each arm in a
  fresh process of its own, as ``evaluate_arms_apart`` plays notebook 04's local models (the peak is the largest
  of the three); ``legacy``: the three in one process (one :class:`ModelCache`), all 30 episodes together.
* ``grpo``: notebook 03's GRPO run (the profile's ``smollm2_grpo`` recipe through :func:`negolib.training.grpo.train`,
  TRL ``GRPOTrainer``, micro-batches of 4 two-round episodes), ``--steps`` steps from the packaged model.

Each phase runs in a fresh child process (VmHWM is a process's high-water mark), once with the memory levers
(``fixed``) and once ``legacy`` (the behaviour before issue 28: the arms in one process, a KV pool per agent, and
prefix-cache entries a prompt moved past kept until the token cap evicts them; GRPO without gradient
checkpointing). It prints each peak, ``MEMORY: <phase> fixed / legacy peak ... = <ratio>x`` and whether both
variants gave identical results (a digest of every record, token and log-prob of the eval phase; of the trained
weights of the grpo phase). ``--rounds`` caps the evaluation episodes (the profile plays 12; fewer rounds mean
shorter prompts and a lower peak); ``--trace`` prints the peak after each LM wave. ``--dry-run`` runs both phases
on a tiny random model (a test runs it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("eval", "grpo")
ARMS = ("lm_base", "lm_warmup", "lm_grpo")


def vm_hwm_gb() -> float:
    """This process's peak resident set (``VmHWM`` of ``/proc/self/status``) in GB (1e9 bytes); 0 where unknown."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e9
    except OSError:
        pass
    return 0.0


def _model_folder(dry_run: bool, work: Path) -> str:
    """The packaged SmolLM2 checkpoint folder, or a tiny random model saved under ``work``."""
    if not dry_run:
        from negolib.models import local_model_dir

        return str(local_model_dir("smollm2-135m-instruct"))
    from negolib.agents.factory import tiny_model_dir

    return str(tiny_model_dir(work / "tiny"))


def _surrogate(folder: str, work: Path) -> str:
    """SmolLM2's key/value shape (30 layers x 3 key/value heads x 64 dims, 46 KB a token in float32) and
    vocabulary, with 3 query heads and a small MLP: every cache, pool and logits buffer of a wave is SmolLM2's
    size while its arithmetic is ~40x less (random weights, so its replies run to the token cap, as the base
    SmolLM2's mostly do). Saved under ``work`` once."""
    out = work / "surrogate"
    if (out / "config.json").is_file():
        return str(out)
    import torch
    from transformers import AutoConfig, AutoTokenizer, LlamaForCausalLM

    cfg = AutoConfig.from_pretrained(folder)
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    cfg.num_attention_heads, cfg.head_dim = cfg.num_key_value_heads, head_dim
    cfg.hidden_size, cfg.intermediate_size = cfg.num_key_value_heads * head_dim, 128
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(out)
    AutoTokenizer.from_pretrained(folder).save_pretrained(out)
    return str(out)


def eval_wave(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Notebook 04's LM arms on their declared subset: the three in this process (one :class:`ModelCache`), or only
    arm ``args.arm``; writes the wave's tokens and records to ``work`` (the parent digests them)."""
    import copy

    from negolib.agents.factory import ModelCache, local_agent
    from negolib.games.multi_issue.rollout import run_episodes
    from negolib.params import load_params
    from negolib.study.evaluation import build_specs, protocol_from_params

    params = load_params(ROOT / "params" / "default.yaml")
    spec = params.arms["smollm2_base"]
    protocol = protocol_from_params(params, arms=["smollm2_base"])
    base = build_specs(protocol)
    if args.dry_run:
        base = base[:4]
        spec = dataclasses.replace(spec, sampling=dataclasses.replace(spec.sampling, max_new_tokens=8))
    config = dataclasses.replace(base[0].config, max_rounds=args.rounds)
    folder = _model_folder(args.dry_run, work)
    ballast = []
    if args.surrogate:  # the three arms' real weights stay resident; the agents play the surrogate
        from negolib.models import load_causal_lm

        ballast = [load_causal_lm(folder)[0] for _ in range(3 if args.arm is None else 1)]
        folder = _surrogate(folder, work)
    cache = ModelCache()
    model, tok = cache.get(folder, spec.dtype or "float32", "cpu")
    agents: dict[str, Any] = {}
    specs = []
    for i, arm in enumerate(ARMS):
        if args.arm is not None and i != args.arm:
            continue
        if i and args.arm is None:  # the warm-up and GRPO arms are other checkpoints: their own weights
            cache.models[(f"{folder}#{arm}", spec.dtype or "float32", "cpu")] = (copy.deepcopy(model), tok)
        key = folder if not i or args.arm is not None else f"{folder}#{arm}"
        agent = local_agent(arm, key, spec, seed=i, cache=cache)
        if args.legacy:  # before issue 28: a pool per agent; superseded entries kept; the arms played together
            agent.kv_pool = None
            agent.prefix_cache.keep_superseded = True
        agents[arm] = agent
        specs += [dataclasses.replace(s, arm=arm, seller=arm, config=config) for s in base]
    for b in protocol.buyers:
        from negolib.study.runs import build_agent

        agents[b] = build_agent(b, params.agent(b), 0, params=params)
    tokens: list[Any] = []
    prompts: list[Any] = []

    def on_turn(ep: Any, rep: Any) -> None:
        if "completion_ids" in rep.extra:  # an LM turn: its prompt length, tokens and log-probs
            tokens.append([ep.episode_id, len(ep.turns), rep.extra["completion_ids"], rep.extra["logprobs"]])
            prompts.append(rep.extra["prompt_ids"])
            if args.trace and len(tokens) % len(base) == 0:
                print(f"TRACE turn {len(ep.turns)} prompt {len(rep.extra['prompt_ids'])} tokens, "
                      f"peak {vm_hwm_gb():.2f} GB", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    res = run_episodes(specs, agents, None, progress=False, on_turn=on_turn, one_cache_at_a_time=not args.legacy)
    records = [{k: v for k, v in r.items() if k != "turns"} | {"turns": [
        {k: v for k, v in t.items() if k != "latency_s"} for t in r["turns"]]} for r in res.records]
    del ballast
    (work / f"eval-{args.arm}.json").write_text(json.dumps({"tokens": tokens, "records": records}, default=str))
    return {"episodes": len(res.records), "turns": len(tokens), "seconds": time.perf_counter() - t0,
            "errors": len(res.errors), "surrogate": args.surrogate, "result_file": str(work / f"eval-{args.arm}.json"),
            "longest_prompt": max((len(t) for t in prompts), default=0)}


def wave_digest(files: list[str]) -> str:
    """The digest of the eval wave's tokens and records, read from each child's file, in an order that does not
    depend on which process played which arm."""
    tokens: list[Any] = []
    records: list[Any] = []
    for f in files:
        got = json.loads(Path(f).read_text())
        tokens += got["tokens"]
        records += got["records"]
    key = [json.dumps(r, sort_keys=True, default=str) for r in records]
    return _digest([sorted(tokens, key=lambda t: json.dumps(t)), sorted(key)])


def _digest(obj: Any) -> str:
    """A short SHA-256 of ``obj``'s canonical JSON (records, token ids): equal digests, equal results."""
    import hashlib

    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _weights_digest(folder: Path) -> str:
    """A short SHA-256 of a checkpoint's tensors (names, shapes and float32 bytes)."""
    import hashlib

    from safetensors.torch import load_file

    h = hashlib.sha256()
    for f in sorted(folder.glob("*.safetensors")):
        tensors = load_file(str(f))
        for name in sorted(tensors):
            h.update(name.encode() + tensors[name].float().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def grpo_step(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Notebook 03's GRPO run (the default profile's ``smollm2_grpo`` recipe: micro-batches of 4 two-round
    episodes, 2,048-token context) for ``--steps`` steps from the packaged model (the warm-up does not change the
    shapes); ``--legacy`` turns gradient checkpointing and the in-place log-prob tiles off, as before issue 28."""
    import shutil

    from negolib.games.multi_issue.training import paper_task
    from negolib.params import load_params, train_config
    from negolib.study.runs import build_agents
    from negolib.training.grpo import train

    params = load_params(ROOT / "params" / "default.yaml")
    run = params.training.runs["smollm2_grpo"]
    config = dataclasses.replace(train_config(params, "smollm2_grpo"), max_steps=args.steps, save_every=args.steps)
    if args.dry_run:
        config = dataclasses.replace(config, rollouts_per_scenario=2, micro_batch_size=2, max_new_tokens=8,
                                     max_prompt_tokens=512, max_context_tokens=640)
    if args.legacy:  # no checkpointing, TRL's tile folds; the shared-prompt path (on without checkpointing) off
        config = dataclasses.replace(config, gradient_checkpointing=False, shared_prefix=False,
                                     lean_logprob_tiles=False)
    out = work / ("grpo-legacy" if args.legacy else "grpo")
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    res = train(config, _model_folder(args.dry_run, work), out, buyers=build_agents(params, list(run.buyers), 0),
                progress=False, resume=False, task=paper_task(config))
    return {"steps": res.steps, "seconds": time.perf_counter() - t0, "micro_batch": config.micro_batch_size,
            "gradient_checkpointing": config.gradient_checkpointing, "lean_tiles": config.lean_logprob_tiles,
            "digest": _weights_digest(res.checkpoint) if res.checkpoint else ""}


def child(args: argparse.Namespace) -> None:
    """Run one phase in this process and print its JSON line (peak GB included)."""
    import torch

    torch.set_num_threads(args.threads)
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    before = vm_hwm_gb()
    out = (eval_wave if args.phase == "eval" else grpo_step)(args, work)
    out.update(phase=args.phase, legacy=args.legacy, peak_gb=vm_hwm_gb(), start_gb=before)
    print("RESULT " + json.dumps(out), flush=True)


def run_child(phase: str, legacy: bool, args: argparse.Namespace, arm: int | None = None) -> dict[str, Any]:
    """One phase in a fresh process (the fixed eval phase: one per arm); its result line."""
    if phase == "eval" and not legacy and arm is None:  # notebook 04: each local model in a process of its own
        parts = [run_child(phase, legacy, args, i) for i in range(len(ARMS))]
        return {**parts[0], "peak_gb": max(p["peak_gb"] for p in parts), "arm_peaks_gb": [p["peak_gb"] for p in parts],
                "seconds": sum(p["seconds"] for p in parts), "episodes": sum(p["episodes"] for p in parts),
                "turns": sum(p["turns"] for p in parts), "errors": sum(p["errors"] for p in parts),
                "longest_prompt": max(p["longest_prompt"] for p in parts),
                "digest": wave_digest([p["result_file"] for p in parts])}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", phase, "--rounds", str(args.rounds),
           "--steps", str(args.steps), "--threads", str(args.threads), "--work-dir", args.work_dir]
    cmd += ["--arm", str(arm)] * (arm is not None)
    cmd += ["--dry-run"] * args.dry_run + ["--legacy"] * legacy + ["--trace"] * args.trace
    cmd += ["--surrogate"] * args.surrogate
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    for line in proc.stderr.splitlines():
        if line.startswith("TRACE "):
            print(f"  {phase} {'legacy' if legacy else 'fixed'}: {line[6:]}")
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{phase} (legacy={legacy}) failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    res = json.loads(lines[-1][len("RESULT "):])
    if phase == "eval" and arm is None:
        res["digest"] = wave_digest([res["result_file"]])
    return res


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true", help="a tiny random model, seconds")
    ap.add_argument("--phases", default=",".join(PHASES), help="comma-separated subset of eval,grpo")
    ap.add_argument("--variants", default="fixed,legacy", help="comma-separated subset of fixed,legacy")
    ap.add_argument("--rounds", type=int, default=12, help="episode round cap of the eval phase (default 12)")
    ap.add_argument("--steps", type=int, default=1, help="GRPO steps of the grpo phase (default 1)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work-dir", default=".cache/bench_memory")
    ap.add_argument("--json", default=None)
    ap.add_argument("--surrogate", action="store_true",
                    help="eval phase: agents play a model of SmolLM2's cache shape and vocabulary with ~40x less "
                         "arithmetic, the real weights held resident beside them (what fits a busy 2-core host)")
    ap.add_argument("--trace", action="store_true", help="eval phase: peak memory after each LM wave (stderr)")
    ap.add_argument("--legacy", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child", choices=PHASES, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--arm", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        args.phase = args.child
        child(args)
        return {}
    result: dict[str, Any] = {"phases": {}, "ratios": {}, "model": "tiny" if args.dry_run else "smollm2-135m-instruct"}
    variants = [v for v in args.variants.split(",") if v]
    for phase in [p for p in args.phases.split(",") if p]:
        result["phases"][phase] = {}
        for variant in variants:
            res = run_child(phase, variant == "legacy", args)
            result["phases"][phase][variant] = res
            longest = f", longest prompt {res['longest_prompt']} tokens" if res.get("longest_prompt") else ""
            print(f"{phase:>5} {variant:>6}: peak {res['peak_gb']:.2f} GB (VmHWM; {res['seconds']:.0f} s{longest})",
                  flush=True)
        got = result["phases"][phase]
        if "fixed" in got and "legacy" in got:
            ratio = got["fixed"]["peak_gb"] / got["legacy"]["peak_gb"]
            result["ratios"][phase] = ratio
            same = got["fixed"]["digest"] == got["legacy"]["digest"]
            result.setdefault("identical", {})[phase] = same
            print(f"MEMORY: {phase} fixed / legacy peak {got['fixed']['peak_gb']:.2f} / {got['legacy']['peak_gb']:.2f} "
                  f"GB = {ratio:.2f}x; results {'identical' if same else 'DIFFER'}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    sys.exit(0 if main() is not None else 1)
