"""Benchmark: batched local-model rollouts vs one episode at a time [SPEC 11].

SmolLM2-135M-Instruct (float32, CPU) sells against a scripted Conceder buyer. The batched engine
(``run_episodes``) advances 16 episodes together, so every seller wave is ONE ``generate`` call of
batch 16; the baseline plays episodes one after another (``play_one``, batch 1) on the same model,
with the same sampling, token budget and prefix reuse, half of them before the batched run and half
after (so a drift in the machine's speed hits both alike). Both prompt scaffolds are measured by
default (training: the GRPO rollouts' growing chat; evaluation: the scaffold re-rendered every
turn). Prints generated tokens/s (wall and CPU), episodes/s and their ratios, and each run's
split into prefill (prompt tokens not found in the prefix cache) and decode (sampled tokens),
with per-phase ratios.
Targets at batch 16 on 2 CPU cores (decided in issue #14): >= 4x on the training scaffold, >= 3x on
the evaluation scaffold (it re-renders ~380 prompt tokens a row every turn, and prefill hardly
batches on a CPU). Turns of 128 new tokens (the default profile's
language-model arms) and 3 rounds keep the run to a few minutes; the baseline plays fewer episodes
(rates, not totals, are compared).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _stats(records: list[dict[str, Any]], wall: float, cpu: float) -> dict[str, float]:
    seller = [t for r in records for t in r["turns"] if t["role"] == "seller"]
    out_tok = sum(t["output_tokens"] for t in seller)
    in_tok = sum(t["input_tokens"] for t in seller)
    return {"episodes": len(records), "seller_turns": len(seller), "gen_tokens": out_tok, "prompt_tokens": in_tok,
            "wall_s": wall, "cpu_s": cpu, "tok_s": out_tok / wall, "ep_s": len(records) / wall,
            "tok_cpu_s": out_tok / cpu,
            "bad_parse": sum(t["action"] is None for t in seller) / max(1, len(seller))}


def _line(name: str, s: dict[str, float]) -> str:
    return (f"{name:<22} {s['episodes']:3.0f} episodes {s['seller_turns']:3.0f} seller turns "
            f"{s['gen_tokens']:5.0f} gen tokens ({s['prompt_tokens'] / max(1, s['seller_turns']):5.0f} prompt "
            f"tokens/turn) {s['wall_s']:7.1f} s wall ({s['cpu_s']:7.1f} s CPU)  {s['tok_s']:6.2f} tok/s  "
            f"{s['ep_s']:.4f} episodes/s  {s['tok_cpu_s']:6.2f} tok/CPU-s")


def _timed(run: Callable[[], Any]) -> tuple[Any, float, float]:
    """``run()``'s result with the wall and CPU seconds it took."""
    t, c = time.perf_counter(), time.process_time()
    out = run()
    return out, time.perf_counter() - t, time.process_time() - c


TARGETS = {"training": 4.0, "evaluation": 3.0}  # tokens/s ratio at batch 16, 2 CPU cores (#14)


def _verdict(ratio: float, scaffold: str) -> str:
    return f"target >= {TARGETS[scaffold]:g}x: " + ("MET" if ratio >= TARGETS[scaffold] else "NOT MET")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--episodes", type=int, default=16, help="episodes played by the batched engine")
    ap.add_argument("--batch", type=int, default=16, help="concurrent episodes (= generate batch)")
    ap.add_argument("--sequential", type=int, default=8, help="episodes played one at a time")
    ap.add_argument("--max-new-tokens", type=int, default=128, help="per turn (default profile: 128)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scaffold", default="both", choices=["training", "evaluation", "both"],
                    help="prompt scaffold of the seller (both: training, then evaluation)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-prefix-cache", action="store_true", help="prefill every prompt in full (both runs)")
    ap.add_argument("--quick", action="store_true", help="2 sequential episodes (the batched run stays at 16)")
    args = ap.parse_args(argv)
    if args.quick:
        args.sequential = min(args.sequential, 2)

    import torch

    from negolib.models import load_causal_lm

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    model, tokenizer = load_causal_lm(args.model)
    print(f"model {args.model} loaded in {time.perf_counter() - t0:.1f} s; torch threads {torch.get_num_threads()}")
    scaffolds = ["training", "evaluation"] if args.scaffold == "both" else [args.scaffold]
    results = {sc: run_scaffold(model, tokenizer, sc, args) for sc in scaffolds}
    if len(results) > 1:
        verdicts = [f"{sc} scaffold {r['ratio_tokens']:.3f}x tokens/s ({_verdict(r['ratio_tokens'], sc)})"
                    for sc, r in results.items()]
        print("summary: " + "; ".join(verdicts))
    return results


def run_scaffold(model: Any, tokenizer: Any, scaffold: str, args: argparse.Namespace) -> dict[str, Any]:
    """Batched engine vs one episode at a time with the seller on ``scaffold``; prints and returns
    both runs' rates, their ratios and the prefill/decode split."""
    from negolib.agents.hf_agent import GenerationStats, HFAgent
    from negolib.core.sampling import SamplingConfig
    from negolib.games.multi_issue.env import EnvConfig
    from negolib.games.multi_issue.prompts import render_messages
    from negolib.games.multi_issue.rollout import make_specs, play_one, run_episodes
    from negolib.games.multi_issue.scenarios import eval_seeds, scenario_set
    from negolib.games.multi_issue.scripted import make_scripted

    sampling = SamplingConfig(max_new_tokens=args.max_new_tokens, seed=0)
    cache = 0 if args.no_prefix_cache else 32_768
    batched = HFAgent(model, tokenizer, sampling, scaffold=scaffold, max_batch=args.batch, name="seller",
                      model_name=args.model, prefix_cache_tokens=cache, render=render_messages)
    single = HFAgent(model, tokenizer, sampling, scaffold=scaffold, max_batch=1, name="seller",
                     model_name=args.model, prefix_cache_tokens=cache, render=render_messages)
    print(f"\n== {scaffold} scaffold: sampling {sampling}")
    agents_b = {"seller": batched, "conceder": make_scripted("conceder")}
    agents_s = {"seller": single, "conceder": make_scripted("conceder")}
    cfg = EnvConfig(max_rounds=args.rounds)
    n_seeds = -(-args.episodes // 9)
    scenarios = scenario_set(eval_seeds(n_seeds))[: args.episodes]
    specs = make_specs("bench", "seller", ["conceder"], scenarios, cfg)
    single.generate_ids([single.tokenizer("warm up", add_special_tokens=False)["input_ids"]], seed=0)
    single.stats = GenerationStats()

    # one-at-a-time episodes run half before and half after the batched run (A-B-A), so a machine
    # whose speed drifts during the benchmark (a shared host) slows both sides alike
    half = args.sequential // 2
    first, wall1, cpu1 = _timed(lambda: [play_one(s, agents_s) for s in specs[:half]])
    res, wall, cpu = _timed(lambda: run_episodes(specs, agents_b, progress=False, max_batch=args.batch))
    sb = _stats(res.records, wall, cpu)
    print(_line(f"batched (batch {args.batch})", sb), flush=True)
    second, wall2, cpu2 = _timed(lambda: [play_one(s, agents_s) for s in specs[half: args.sequential]])
    ss = _stats(first + second, wall1 + wall2, cpu1 + cpu2)
    print(_line("one at a time", ss), flush=True)

    ratio_tok, ratio_ep = sb["tok_s"] / ss["tok_s"], sb["ep_s"] / ss["ep_s"]
    ratio_cpu = sb["tok_cpu_s"] / ss["tok_cpu_s"]
    print(f"ratio batched / one-at-a-time ({scaffold} scaffold): {ratio_tok:.3f}x tokens/s, "
          f"{ratio_ep:.2f}x episodes/s, {ratio_cpu:.2f}x tokens per CPU-second ({_verdict(ratio_tok, scaffold)})")
    for label, agent in (("batched", batched), ("one at a time", single)):
        pc = agent.prefix_cache
        if pc is not None:
            share = pc.reused / max(1, pc.reused + pc.computed)
            print(f"prefix cache ({label}): {share:.0%} of prompt tokens reused, {pc.computed} prefilled")
    phases = {}
    for label, agent in (("batched", batched), ("one at a time", single)):
        st = agent.stats
        phases[label] = st.rates()
        print(f"phases ({label}): prefill {st.prefill_tokens} tokens in {st.prefill_s:.1f} s "
              f"({phases[label]['prefill_tok_s']:.0f} tok/s), decode {st.decode_tokens} tokens in {st.decode_s:.1f} s "
              f"({phases[label]['decode_tok_s']:.1f} tok/s)")
    b, o = phases["batched"], phases["one at a time"]
    if o["prefill_tok_s"] and o["decode_tok_s"]:
        print(f"phase ratios batched / one-at-a-time: prefill {b['prefill_tok_s'] / o['prefill_tok_s']:.2f}x, "
              f"decode {b['decode_tok_s'] / o['decode_tok_s']:.2f}x")
    print(f"seller bad-parse rate: batched {sb['bad_parse']:.2f}, one at a time {ss['bad_parse']:.2f}")
    return {"batched": sb, "sequential": ss, "ratio_tokens": ratio_tok, "ratio_episodes": ratio_ep,
            "ratio_cpu": ratio_cpu, "phases": phases}


if __name__ == "__main__":
    main()
