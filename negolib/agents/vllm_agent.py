"""A vLLM offline engine as a negotiating party (backend ``vllm``, GPU only).

Same interface as :class:`~negolib.agents.hf_agent.HFAgent`: views are rendered with the same
templates and chat template, the whole batch goes to one ``LLM.generate`` call, and replies carry
prompt/completion token ids and the sampled tokens' log-probs (``logprobs_mode="processed_logprobs"``,
as TRL sets it, so temperature is reflected). Each request gets its own seed derived from (agent
seed, episode id, turn), so a turn samples the same text whatever else is in the batch. vllm is
imported lazily and is never installed on CPU machines.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from negolib.agents.base import Agent, AgentReply, Render, View, require_render
from negolib.agents.hf_agent import EVAL_CONTEXT_TOKENS, cap_bound, context_prompt_cap, fit_prompt, model_context_length
from negolib.core.chat_template import TurnTags, decode_turn_counted, derive_turn_tags
from negolib.core.sampling import SamplingConfig, derive_seed
from negolib.training.config import Scaffold

VLLM_MISSING = "vllm is a GPU-only extra: pip install negolib[gpu]"


def import_vllm() -> Any:
    """The ``vllm`` module, or an ImportError saying how to install it."""
    try:
        import vllm
    except ImportError as exc:
        raise ImportError(VLLM_MISSING) from exc
    return vllm


class VLLMAgent(Agent):
    """vLLM offline generation; pass a model path/id (an ``LLM`` is built with ``llm_kwargs`` and any
    further keyword arguments, e.g. ``tensor_parallel_size``) or an existing ``LLM``."""

    backend = "vllm"

    def __init__(self, model: Any, sampling: SamplingConfig | None = None, scaffold: Scaffold = "evaluation",
                 name: str = "vllm", prompt_cap: int | None = None,
                 render: Render | None = None, llm_kwargs: dict[str, Any] | None = None,
                 tokenizer: Any | None = None, **engine_kwargs: Any) -> None:
        if scaffold not in ("training", "evaluation"):
            raise ValueError(f"unknown scaffold {scaffold!r}; choose 'training' or 'evaluation'")
        self._vllm = import_vllm()
        self.sampling = sampling or SamplingConfig()
        self.scaffold: Scaffold = scaffold
        self.name, self.renderer = name, render  # the game's (view, scaffold) -> messages
        if isinstance(model, str):
            kw = {"logprobs_mode": "processed_logprobs", "seed": self.sampling.seed, **(llm_kwargs or {}),
                  **engine_kwargs}
            if "max_model_len" not in kw:  # serve the evaluation context (App. K: 16k), or the model's if shorter
                own = _declared_context(model)
                if own is not None:
                    kw["max_model_len"] = min(own, EVAL_CONTEXT_TOKENS)
            self.llm = self._vllm.LLM(model=model, **kw)
            self.model_name = model
        else:
            self.llm = model
            self.model_name = str(getattr(model, "model_name", "") or type(model).__name__)
        self.tokenizer = tokenizer if tokenizer is not None else self.llm.get_tokenizer()
        self.tags: TurnTags = derive_turn_tags(self.tokenizer, self.sampling.thinking, strict=False)
        if prompt_cap is None:  # the arm's context length (the engine's), not the training driver's 2,048
            prompt_cap = context_prompt_cap(engine_context(self.llm), self.sampling.max_new_tokens)
        self.prompt_cap = prompt_cap

    def sampling_kwargs(self, seed: int | None = None) -> dict[str, Any]:
        """The exact ``SamplingParams`` arguments sent (neutral values for every other filter)."""
        s = self.sampling
        return {"n": 1, "temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k if s.top_k > 0 else -1,
                "min_p": 0.0, "repetition_penalty": 1.0, "max_tokens": s.max_new_tokens, "seed": seed,
                "logprobs": 0, "stop_token_ids": list(self.tags.stop_ids), "skip_special_tokens": False}

    def sampling_params(self, seed: int | None = None) -> Any:
        return self._vllm.SamplingParams(**self.sampling_kwargs(seed))

    def settings(self) -> dict[str, Any]:
        kw = self.sampling_kwargs(self.sampling.seed)
        return {"backend": self.backend, "name": self.name, "model": self.model_name, "scaffold": self.scaffold,
                "do_sample": True, "temperature": kw["temperature"], "top_p": kw["top_p"],
                "top_k": self.sampling.top_k, "max_new_tokens": kw["max_tokens"], "thinking": self.sampling.thinking,
                "seed": self.sampling.seed, "stop_ids": kw["stop_token_ids"], "prompt_cap": self.prompt_cap}

    def act_batch(self, views: Sequence[View]) -> list[AgentReply]:
        if not views:
            return []
        t0 = time.perf_counter()
        render = require_render(self)
        fitted = [fit_prompt(v, self.tokenizer, render, self.scaffold, self.prompt_cap, self.sampling.thinking,
                             self.name) for v in views]
        params = [self.sampling_params(derive_seed(self.sampling.seed, [v.episode_id], [v.turn])) for v in views]
        outs = self.llm.generate([{"prompt_token_ids": ids} for ids, _ in fitted], sampling_params=params,
                                 use_tqdm=False)
        latency = time.perf_counter() - t0
        stops = set(self.tags.stop_ids)
        replies = []
        for (ids, dropped), out in zip(fitted, outs):
            o = out.outputs[0]
            comp = list(o.token_ids)
            lps = [float(step[t].logprob) for step, t in zip(o.logprobs or [], comp)]
            fin = bool(comp) and comp[-1] in stops
            body = comp[:-1] if fin else comp
            text, stripped = decode_turn_counted(self.tokenizer, body, self.tags)
            replies.append(AgentReply(text, input_tokens=len(ids), output_tokens=len(comp), latency_s=latency,
                                      extra={"prompt_ids": ids, "completion_ids": comp, "logprobs": lps,
                                             "finish_reason": "stop" if fin else str(o.finish_reason or "length"),
                                             "history_dropped": dropped,
                                             "prompt_capped": cap_bound(ids, dropped, self.prompt_cap),
                                             "tags_stripped": stripped}))
        return replies


def engine_context(llm: Any) -> int | None:
    """The context length a vLLM engine serves (``max_model_len``), or None when it does not say."""
    for path in (("llm_engine", "model_config", "max_model_len"), ("model_config", "max_model_len"),
                 ("max_model_len",)):
        v: Any = llm
        for attr in path:
            v = getattr(v, attr, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def _declared_context(model: str) -> int | None:
    """The context length a model's config declares (None when it cannot be read here)."""
    try:
        from transformers import AutoConfig

        return model_context_length(AutoConfig.from_pretrained(model, local_files_only=True))
    except Exception:  # noqa: BLE001 - vLLM then chooses its own default
        return None


__all__ = ["VLLMAgent", "VLLM_MISSING", "engine_context", "import_vllm"]
