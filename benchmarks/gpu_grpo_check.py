"""GPU check: a few real multi-turn GRPO steps through the production path, with the time split.

Builds a randomly initialised Llama of realistic size (default ~1.2B: hidden 2048, 16 layers, GQA
32/8 heads, MLP 8192, the SmolLM2 tokenizer's 49k vocabulary when its files are available, else a
byte tokenizer), saves it, and runs :func:`negolib.training.grpo.train` on it: 16 scenarios x 8
rollouts per step against the scripted training buyers, bf16, vLLM colocated when ``vllm`` is
installed, else HF ``generate`` on the GPU. Prints per step: step time, generation, buyer turns,
update (the rest of the step), generated seller tokens and generation tokens/s; with ``--json``
also writes them. By default the buyers stall (never accept) so that every episode runs the full
12 rounds, the production shape; ``--buyers scripted`` uses the training buyers as they are.
SPEC 11 target for ~1B, 128 episodes x ~12 turns x ~100 tokens on one H200: a step in <= 60 s
(stretch 30 s). A random policy rarely stops early, so most turns run to
``--max-new-tokens``: the measured step is a worst case for that budget.

``--dry-run`` builds the same pipeline at tiny size on the CPU (tiny Llama, 2 x 2 episodes, one
step) so the script is exercised in the CPU test suite. Run the real check with
``benchmarks/gpu_check.sh`` on a GPU machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true", help="tiny model on the CPU, one step (CI)")
    ap.add_argument("--steps", type=int, default=2, help="optimizer steps (the first includes warm-up)")
    ap.add_argument("--scenarios", type=int, default=16, help="scenarios per step")
    ap.add_argument("--rollouts", type=int, default=8, help="rollouts per scenario (the GRPO group)")
    ap.add_argument("--max-new-tokens", type=int, default=100, help="new tokens per seller turn")
    ap.add_argument("--max-rounds", type=int, default=12, help="round cap of the environment")
    ap.add_argument("--micro-batch", type=int, default=4, help="episodes per forward/backward")
    ap.add_argument(
        "--buyers",
        choices=("stall", "scripted"),
        default="stall",
        help="stall: scripted buyers that never accept (full-length episodes); scripted: as trained",
    )
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--intermediate", type=int, default=8192)
    ap.add_argument(
        "--tokenizer", default=None, help="tokenizer folder (default: carried SmolLM2 files, else bytes)"
    )
    ap.add_argument("--backend", choices=("auto", "hf", "vllm"), default="auto")
    ap.add_argument(
        "--gpu-memory-utilization", type=float, default=0.45, help="vLLM share (Table 8: 0.45 at E2B)"
    )
    ap.add_argument("--gradient-checkpointing", action="store_true")
    ap.add_argument("--out", default=None, help="run folder (default: a temporary folder)")
    ap.add_argument("--json", default=None, help="write the per-step summary here")
    return ap.parse_args(argv)


def _tokenizer(path: str | None) -> Any:
    """The SmolLM2 tokenizer (carried files or the local cache), else the byte tokenizer."""
    from transformers import AutoTokenizer

    from negolib.models import cache_root, tiny_tokenizer

    candidates = (
        [Path(path)]
        if path
        else [ROOT / ".cache" / "gpu_pkgs" / "tokenizer", cache_root() / "smollm2-135m-instruct"]
    )
    for c in candidates:
        if (c / "tokenizer.json").is_file():
            tok = AutoTokenizer.from_pretrained(c)
            if tok.chat_template:
                return tok
    return tiny_tokenizer()


def build_model(args: argparse.Namespace, out: Path) -> tuple[Path, int]:
    """Save a randomly initialised policy + tokenizer under ``out``; returns (path, parameter count)."""
    import torch

    path = out / "init-model"
    if args.dry_run:
        from negolib.models import tiny_causal_lm

        model, tok = tiny_causal_lm(seed=0)
    else:
        from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

        tok = _tokenizer(args.tokenizer)
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        cfg = LlamaConfig(
            vocab_size=len(tok),
            hidden_size=args.hidden,
            intermediate_size=args.intermediate,
            num_hidden_layers=args.layers,
            num_attention_heads=args.heads,
            num_key_value_heads=args.kv_heads,
            max_position_embeddings=16_384,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
            tie_word_embeddings=True,
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            with torch.device("cuda"):
                model = LlamaForCausalLM(cfg).to(torch.bfloat16)
        model.generation_config = GenerationConfig(
            eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id
        )
    n = sum(p.numel() for p in model.parameters())
    model.save_pretrained(path)
    tok.save_pretrained(path)
    del model
    return path, n


def train_config(args: argparse.Namespace) -> Any:
    from negolib.training.config import TrainConfig

    if args.dry_run:
        return TrainConfig(
            scenarios_per_step=2,
            rollouts_per_scenario=2,
            micro_batch_size=2,
            max_steps=1,
            max_rounds=1,
            max_new_tokens=8,
            max_prompt_tokens=128,
            max_context_tokens=1024,
            train_seeds_per_domain=1,
            validate_every=0,
            save_every=1,
            generation_backend="hf",
        )
    return TrainConfig(
        scenarios_per_step=args.scenarios,
        rollouts_per_scenario=args.rollouts,
        micro_batch_size=args.micro_batch,
        max_steps=args.steps,
        max_rounds=args.max_rounds,
        max_new_tokens=args.max_new_tokens,
        validate_every=0,
        save_every=args.steps,
        generation_backend=args.backend,
        vllm_gpu_memory_utilization=args.gpu_memory_utilization,
        gradient_checkpointing=args.gradient_checkpointing,
        train_seeds_per_domain=max(1, args.scenarios * args.steps // 8 + 1),
    )


def stalling_buyers(mixture: dict[str, float]) -> dict[str, Any]:
    """The scripted training buyers, except that an ACCEPT becomes a stalling reply: against a random
    policy every episode then runs to the round cap (12 rounds = the SPEC's ~12 seller turns/episode)."""
    from negolib.agents.base import Agent, AgentReply
    from negolib.games.multi_issue.scripted import make_scripted

    class Stalling(Agent):
        def __init__(self, inner: Agent) -> None:
            self.inner, self.name, self.backend = inner, inner.name, "scripted"

        def act_batch(self, views: Any) -> list[AgentReply]:
            out = []
            for rep in self.inner.act_batch(views):
                if '"ACCEPT"' in rep.text:
                    rep = AgentReply("I still need a better offer before I can agree to anything here.")
                out.append(rep)
            return out

    return {n: Stalling(make_scripted(n)) for n in mixture}


def _no_save_callback() -> Any:
    """Skip checkpoint writes (a ~1B checkpoint is not what this check measures)."""
    from transformers import TrainerCallback

    class NoSave(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            control.should_save = False

    return NoSave()


def summarize(rows: list[dict[str, Any]], n_params: int) -> list[dict[str, Any]]:
    """The per-step time split and throughput from the training log."""
    out = []
    for r in rows:
        out.append(
            {
                "step": r["step"],
                "step_s": r.get("time_step_s"),
                "generation_s": r.get("time_generation_s"),
                "buyer_s": r.get("time_buyer_s"),
                "update_s": r.get("time_update_s"),
                "seller_tokens": r.get("tokens_generated"),
                "trained_tokens": r.get("tokens_trained"),
                "gen_tokens_per_s": r.get("generation_tokens_per_s"),
                "reward": r.get("reward"),
                "kl": r.get("kl"),
                "params": n_params,
            }
        )
    return out


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    from negolib.games.multi_issue.training import paper_task
    from negolib.training.grpo import train

    if not args.dry_run and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run with --dry-run on a CPU machine")
    if args.dry_run:
        torch.set_num_threads(min(2, torch.get_num_threads()))
    tmp = None
    if args.out is None:
        tmp = tempfile.TemporaryDirectory(prefix="gpu-grpo-check-")
        out = Path(tmp.name)
    else:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        model_path, n_params = build_model(args, out)
        cfg = train_config(args)
        print(
            f"model: {n_params / 1e9:.3f}B parameters at {model_path}; build {time.perf_counter() - t0:.1f}s",
            flush=True,
        )
        print(
            f"recipe: {cfg.scenarios_per_step} x {cfg.rollouts_per_scenario} episodes/step, {cfg.max_steps} "
            f"steps, {cfg.max_new_tokens} new tokens/turn, {cfg.max_rounds} rounds",
            flush=True,
        )
        t1 = time.perf_counter()
        callbacks = [] if args.dry_run else [_no_save_callback()]
        buyers = stalling_buyers(dict(cfg.buyer_mixture)) if args.buyers == "stall" else None
        result = train(
            cfg, model_path, out / "run", buyers=buyers, progress=True, resume=False, callbacks=callbacks,
            task=paper_task(cfg),
        )
        rows = summarize(result.log, n_params)
        print(f"backend: {result.backend}; total {time.perf_counter() - t1:.1f}s", flush=True)
        cols = ("step_s", "generation_s", "buyer_s", "update_s", "seller_tokens", "gen_tokens_per_s")
        print(f"{'step':>4} " + " ".join(f"{c:>16}" for c in cols))
        for r in rows:
            print(f"{r['step']:>4} " + " ".join(f"{r[c] or 0:>16.3f}" for c in cols))
        if args.json:
            Path(args.json).write_text(
                json.dumps({"backend": result.backend, "steps": rows}, indent=2) + "\n"
            )
        return rows
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    main()
