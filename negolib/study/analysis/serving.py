"""What the serving of each arm did to its seller turns, counted per arm from the episode table.

* Prompt cap: a self-served seller is evaluated with its arm's context length (App. K), not the training
  driver's 2,048 (App. H); a turn whose prompt still met the cap (history dropped, or the prompt cut) is
  logged in its transcript record (``prompt_capped``) and counted here, so a binding cap is reported rather
  than silent. API sellers are never capped (zero).
* Template tags: the agents strip chat-template tags and special tokens from a reply before it is parsed
  or shown to the buyer; how many they stripped is logged per turn (``tags_stripped``) and counted here,
  so the template-tag guard (the paper: "no arm produced a template-tag leak", App. J) can fail: it passes
  for an arm whose sellers' replies needed no tag stripped.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from negolib.params import Params
from negolib.training.config import TrainConfig

SERVING_COLUMNS = ["arm", "n_episodes", "n_seller_turns", "n_prompt_capped_turns", "n_prompt_capped_episodes",
                   "prompt_capped_episode_share", "n_tags_stripped", "n_tag_episodes", "tag_guard_passed"]


def serving_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Per arm: episodes, seller turns, seller turns whose prompt cap bound and the episodes with at least one
    such turn (count and share), template tags stripped from the seller's replies (``n_tags_stripped``; the
    episodes with any, ``n_tag_episodes``) and whether the template-tag guard passed (none stripped), from
    :func:`negolib.core.transcripts.episodes_frame` rows (records without the fields count zero)."""
    if df is None or df.empty:
        return pd.DataFrame(columns=SERVING_COLUMNS)
    d = df.copy()
    capped = d["n_prompt_capped_turns"] if "n_prompt_capped_turns" in d else pd.Series(0, index=d.index)
    d["_capped"] = capped.fillna(0).astype(int)
    d["_turns"] = d["seller_turns"].fillna(0).astype(int) if "seller_turns" in d else 0
    tags = d["n_tags_stripped"] if "n_tags_stripped" in d else pd.Series(0, index=d.index)
    d["_tags"] = tags.fillna(0).astype(int)
    g = d.groupby("arm", sort=False)
    out = pd.DataFrame({"n_episodes": g.size(), "n_seller_turns": g["_turns"].sum(),
                        "n_prompt_capped_turns": g["_capped"].sum(),
                        "n_prompt_capped_episodes": g["_capped"].apply(lambda s: int((s > 0).sum())),
                        "n_tags_stripped": g["_tags"].sum(),
                        "n_tag_episodes": g["_tags"].apply(lambda s: int((s > 0).sum()))})
    out["prompt_capped_episode_share"] = out["n_prompt_capped_episodes"] / out["n_episodes"]
    out["tag_guard_passed"] = out["n_tags_stripped"] == 0
    return out.reset_index()[SERVING_COLUMNS]


TOPOLOGY_COLUMNS = ["size", "paper_size", "eval_arm", "eval_backend", "eval_device", "eval_tp", "eval_memory_fraction",
                    "train_runs", "train_tp", "train_memory_fraction"]


def root_init(params: Params, run: str) -> str:
    """The arm a run's weights start from, following ``run@step`` continuations."""
    seen: set[str] = set()
    init = params.training.runs[run].init
    while "@" in init and init not in seen:
        seen.add(init)
        parent = init.split("@")[0]
        if parent not in params.training.runs:
            break
        init = params.training.runs[parent].init
    return init.split("@")[0]


def size_topology(params: Params) -> pd.DataFrame:
    """Table 8's serving and training topology of this profile, per size group: the base arm's backend, device,
    tensor-parallel degree and memory fraction as served in evaluation (None where the backend sets none), and the
    runs starting from that base with their training tensor-parallel degrees and generation memory fractions (the
    distinct values over the runs, TrainConfig's defaults where a run sets none)."""
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    rows = []
    for g in params.design.sizes:
        spec = params.arms.get(g.base)
        runs = [r for r in params.training.runs if root_init(params, r) == g.base]
        cfgs = [params.training.runs[r].config for r in runs]
        tp = sorted({int(c.get("tensor_parallel_size", defaults["tensor_parallel_size"])) for c in cfgs})
        mem = sorted({float(c.get("vllm_gpu_memory_utilization", defaults["vllm_gpu_memory_utilization"]))
                      for c in cfgs})
        backend = spec.backend if spec else None
        rows.append({"size": g.label, "paper_size": g.paper, "eval_arm": g.base, "eval_backend": backend,
                     "eval_device": (spec.device or ("cpu" if backend == "hf" else None)) if spec else None,
                     "eval_tp": (spec.tensor_parallel or 1) if backend == "vllm" else None,
                     "eval_memory_fraction": spec.gpu_memory_utilization if backend == "vllm" else None,
                     "train_runs": runs, "train_tp": tp, "train_memory_fraction": mem})
    return pd.DataFrame(rows, columns=TOPOLOGY_COLUMNS)


__all__ = ["SERVING_COLUMNS", "TOPOLOGY_COLUMNS", "root_init", "serving_frame", "size_topology"]
