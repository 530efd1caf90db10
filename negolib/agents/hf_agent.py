"""A local transformers causal LM as a negotiating party (backend ``hf``).

Every view of a batch is rendered with the game's ``render`` (the paper's:
:func:`negolib.games.multi_issue.prompts.render_messages`), put through the
model's own chat template (thinking off), left-padded and generated in ONE ``model.generate`` call
per chunk of at most ``max_batch`` views, sampling exactly as configured (temperature, top-p, top-k;
the model's own ``generation_config`` is ignored so nothing else is applied). Replies carry the
token ids and the sampled tokens' log-probabilities, log_softmax(logits / temperature) as TRL's
trainer computes them, for GRPO.

Prefill is the CPU cost of a turn (prompts of ~900 tokens against tens of new tokens), so each row's
prompt is prefilled on its own from the longest prefix already cached (:class:`PrefixCache`: the
shared system message, the same episode's previous turn), and only the decoding runs batched, in a
preallocated cache with grouped-query attention that copies nothing (:mod:`negolib.agents.decode`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from negolib.agents.base import Agent, AgentReply, Render, View, require_render
from negolib.core.chat_template import TurnTags, decode_turn_counted, derive_turn_tags, encode_chat
from negolib.core.sampling import SamplingConfig, derive_seed
from negolib.models import load_causal_lm, prefill_kwargs
from negolib.training.config import Scaffold

TRAINING_PROMPT_CAP = 2048
"""The training driver's prompt cap (App. H): training only. Evaluation uses the arm's context length."""
DEFAULT_PROMPT_CAP = TRAINING_PROMPT_CAP  # the name other games' agents pass explicitly (their own setting)
EVAL_CONTEXT_TOKENS = 16_384
"""The context a self-served seller is evaluated with (App. H "16,384-token context", App. K "Serving": the
KV cache holds a 16k context); a model with a shorter context uses its own."""
# History turns dropped at a time when a prompt overflows its cap: dropping a block (three rounds)
# rather than one turn keeps the truncated prompt's head identical for the next few turns, so its
# cached prefix is reused instead of re-prefilling ~2k tokens per row on every later turn.
HISTORY_DROP_BLOCK = 6


class PromptTruncationWarning(UserWarning):
    """A prompt exceeded the cap and its oldest history was dropped."""


def model_context_length(model: Any) -> int | None:
    """The context length a model (or its config) declares (``max_position_embeddings`` and kin, also under
    ``text_config``), or None when it declares none."""
    cfg = getattr(model, "config", model)
    for c in (cfg, getattr(cfg, "text_config", None)):
        for key in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"):
            v = getattr(c, key, None) if c is not None else None
            if isinstance(v, int) and v > 0:
                return v
    return None


def context_prompt_cap(context: int | None, max_new_tokens: int) -> int:
    """The evaluation prompt cap of an arm served with ``context`` tokens (None: :data:`EVAL_CONTEXT_TOKENS`;
    never more): the context less room for one reply of ``max_new_tokens``."""
    ctx = min(context, EVAL_CONTEXT_TOKENS) if context else EVAL_CONTEXT_TOKENS
    return max(1, ctx - max(0, max_new_tokens))


def fit_prompt(view: View, tokenizer: Any, render: Render, scaffold: str, cap: int, thinking: bool = False,
               who: str = "agent") -> tuple[list[int], int]:
    """(prompt ids, number of oldest history turns dropped) for ``view``, rendered by ``render(view, scaffold)``,
    within ``cap`` tokens.

    Drops the oldest history turns, :data:`HISTORY_DROP_BLOCK` at a time, until the rendered prompt
    fits, warning when it does; a prompt that still does not fit with no history left is cut from the
    left, also with a warning (:func:`cap_bound` says from the result whether the cap bound).
    """
    drop, n = 0, len(view.history)
    while True:
        v = view if drop == 0 else replace(view, history=view.history[drop:])
        ids = encode_chat(tokenizer, render(v, scaffold), True, thinking)
        if len(ids) <= cap or drop >= n:
            break
        drop = min(n, drop + HISTORY_DROP_BLOCK)
    if drop:
        warnings.warn(f"{who}: prompt for episode {view.episode_id!r} turn {view.turn} exceeds {cap} tokens; "
                      f"dropped the {drop} oldest of {n} history turns (in blocks of {HISTORY_DROP_BLOCK})",
                      PromptTruncationWarning, stacklevel=3)
    if len(ids) > cap:
        warnings.warn(f"{who}: prompt for episode {view.episode_id!r} turn {view.turn} is {len(ids)} tokens "
                      f"with no history left; keeping its last {cap} tokens", PromptTruncationWarning, stacklevel=3)
        ids = ids[-cap:]
    return ids, drop


def cap_bound(ids: Sequence[int], dropped: int, cap: int) -> bool:
    """Whether the prompt cap bound on a prompt :func:`fit_prompt` returned: history was dropped, or the
    prompt fills the cap (cut from the left; one that fits to the last token counts too)."""
    return dropped > 0 or len(ids) >= cap


def _recorder(temperature: float) -> Any:
    """A logits processor (placed before the sampling warpers) recording the sampled tokens'
    log_softmax(logits / temperature) step by step, with O(batch x vocab) memory."""
    import torch
    from transformers import LogitsProcessor

    class LogprobRecorder(LogitsProcessor):
        def __init__(self) -> None:
            self.prev: torch.Tensor | None = None
            self.steps: list[torch.Tensor] = []

        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
            if self.prev is not None:
                self.steps.append(self.prev.gather(1, input_ids[:, -1:]).squeeze(1))
            self.prev = torch.log_softmax(scores.float() / temperature, dim=-1)
            return scores

        def finish(self, new_tokens: torch.Tensor) -> torch.Tensor:
            """Log-probs of ``new_tokens`` (batch, n_new)."""
            if self.prev is not None and len(self.steps) < new_tokens.shape[1]:
                self.steps.append(self.prev.gather(1, new_tokens[:, -1:]).squeeze(1))
                self.prev = None
            if not self.steps:
                return torch.zeros(new_tokens.shape, dtype=torch.float32, device=new_tokens.device)
            return torch.stack(self.steps, dim=1)

    return LogprobRecorder()


@dataclass
class GenerationStats:
    """Where an :class:`HFAgent`'s generation time went, summed over its calls.

    ``prefill_*``: prompt tokens run through the model (cached prefixes not counted) and the time
    for it; ``decode_*``: new tokens sampled and the time for it. With prefix reuse off, prompts
    are prefilled inside ``generate`` and the whole call counts as decoding.
    """

    calls: int = 0
    prefill_tokens: int = 0
    prefill_s: float = 0.0
    decode_tokens: int = 0
    decode_s: float = 0.0

    def rates(self) -> dict[str, float]:
        """Tokens per second of each phase (0 where a phase took no time)."""
        return {"prefill_tok_s": self.prefill_tokens / self.prefill_s if self.prefill_s else 0.0,
                "decode_tok_s": self.decode_tokens / self.decode_s if self.decode_s else 0.0}


#: A row whose uncached tokens share more than this many with another row of the same batch is
#: prefilled a round later, from the prefix cache (fewer shared tokens are cheaper to compute twice).
SHARED_TOKENS_TO_WAIT = 32


class PrefixCache:
    """Key/value states of recently seen prompt prefixes, reused by longest common prefix.

    Consecutive turns of an episode share most of their prompt (the training chat grows by
    appending; the evaluation prompt keeps its brief and history), and every prompt of a role
    shares the system message, so only the tokens after the longest cached common prefix are
    prefilled. States are keyed by a fingerprint of the weights (parameter version counters), so an
    optimizer step empties the cache. ``max_tokens`` bounds the tokens held (least recently used
    entries go first). Only used for models whose cache is plain full attention.
    """

    def __init__(self, max_tokens: int = 32_768, keep_superseded: bool = False) -> None:
        self.max_tokens = max_tokens
        self.keep_superseded = keep_superseded  # True: the behaviour before issue 28 (see :meth:`supersede`)
        self.entries: list[dict[str, Any]] = []  # {"ids": np.ndarray, "kv": [(k, v)] per layer, "used": int}
        self.fingerprint: Any = None
        self.clock = 0
        self.hits = self.reused = self.computed = self.superseded = self.released = 0

    def check(self, fingerprint: Any) -> None:
        """Drop everything if the weights changed since the entries were computed."""
        if fingerprint != self.fingerprint:
            self.entries.clear()
            self.fingerprint = fingerprint

    def lookup(self, ids: Any) -> tuple[int, dict[str, Any] | None]:
        """(length, entry) of the longest common prefix of ``ids`` with a cached entry."""
        best, best_e = 0, None
        for e in self.entries:
            lcp = _common_prefix(e["ids"], ids)
            if lcp > best:
                best, best_e = lcp, e
        if best_e is not None:
            self.clock += 1
            best_e["used"] = self.clock
        return best, best_e

    def store(self, ids: Any, kv: list[tuple[Any, Any]]) -> None:
        """Add a prefix (replacing cached prefixes of it) and evict down to ``max_tokens``."""
        self.entries = [e for e in self.entries
                        if not (len(e["ids"]) <= len(ids) and (e["ids"] == ids[: len(e["ids"])]).all())]
        self.clock += 1
        self.entries.append({"ids": ids, "kv": kv, "used": self.clock})
        self.entries.sort(key=lambda e: e["used"])
        while self.entries and sum(len(e["ids"]) for e in self.entries) > self.max_tokens:
            self.entries.pop(0)

    def supersede(self, matches: Sequence[tuple[dict[str, Any], int, Any]]) -> int:
        """Drop the entries a call's prompts moved past; returns how many were dropped.

        ``matches``: per prompt of one call, (entry it reused, common prefix length, ids stored for it or None).
        An entry matched by exactly one prompt, which diverged from it (the evaluation scaffold re-renders a
        prompt's tail every turn) and whose own ids were stored, holds nothing that prompt's new entry does not,
        except the tail the episode left: a later prompt reuses the new entry instead. Keeping such entries until
        the token cap evicts them doubled what an evaluation batch holds. ``keep_superseded`` turns this off.
        """
        dead = self.dead(matches)
        before = len(self.entries)
        self.entries = [e for e in self.entries if id(e) not in dead]
        self.superseded += before - len(self.entries)
        return before - len(self.entries)

    def dead(self, matches: Sequence[tuple[dict[str, Any], int, Any]]) -> set[int]:
        """``id``s of the entries :meth:`supersede` drops for ``matches`` (none with ``keep_superseded``)."""
        if self.keep_superseded:
            return set()
        count: dict[int, int] = {}
        for entry, _, _ in matches:
            count[id(entry)] = count.get(id(entry), 0) + 1
        return {id(e) for e, c, stored in matches if count[id(e)] == 1 and stored is not None and c < len(e["ids"])}

    def clear(self) -> None:
        self.entries.clear()


class HFAgent(Agent):
    """A transformers causal LM; batched, seeded sampling; token ids and log-probs in ``extra``."""

    backend = "hf"
    keeps_caches = True  # the prefix cache

    def __init__(self, model: Any, tokenizer: Any, sampling: SamplingConfig | None = None,
                 scaffold: Scaffold = "evaluation", name: str = "hf", max_batch: int = 16,
                 prompt_cap: int | None = None, render: Render | None = None,
                 model_name: str | None = None, prefix_cache_tokens: int = 32_768,
                 packed_prefill: bool = True, kv_pool: Any = None) -> None:
        if scaffold not in ("training", "evaluation"):
            raise ValueError(f"unknown scaffold {scaffold!r}; choose 'training' or 'evaluation'")
        self.model, self.tokenizer = model, tokenizer
        self.sampling = sampling or SamplingConfig()
        if prompt_cap is None:  # the arm's context length (App. K), not the training driver's cap
            prompt_cap = context_prompt_cap(model_context_length(model), self.sampling.max_new_tokens)
        if max_batch < 1 or prompt_cap < 1:
            raise ValueError("max_batch and prompt_cap must be >= 1")
        self.scaffold: Scaffold = scaffold
        self.name, self.max_batch, self.prompt_cap = name, max_batch, prompt_cap
        self.renderer = render  # the game's (view, scaffold) -> messages; a subclass may build prompts itself
        self.model_name = model_name or str(getattr(model, "name_or_path", "") or type(model).__name__)
        self.tags: TurnTags = derive_turn_tags(tokenizer, self.sampling.thinking, strict=False)
        pad = tokenizer.pad_token_id
        self.pad_id: int = pad if pad is not None else self.tags.stop_ids[0]
        self.prefix_cache = PrefixCache(prefix_cache_tokens) if prefix_cache_tokens > 0 else None
        # The decode buffers (negolib.agents.decode.KVPool): ``kv_pool`` when given (one pool for every agent of
        # a process: they decode one at a time, so one batch's buffers serve them all), else made on first use.
        self.kv_pool: Any = kv_pool
        self.packed_prefill = packed_prefill  # prefill a batch's rows in packed forwards where the model allows
        self.stats = GenerationStats()
        # A prefill needs no logits (generate computes the last prompt token's): skip the LM head.
        self._last_logits_only: dict[str, int] = prefill_kwargs(model)

    @classmethod
    def from_pretrained(cls, name_or_path: str, sampling: SamplingConfig | None = None, dtype: str = "float32",
                        device: str = "cpu", **kw: Any) -> HFAgent:
        """Load a packaged model name, a local folder or a hub id (see :func:`negolib.models.load_causal_lm`)."""
        model, tok = load_causal_lm(name_or_path, dtype=dtype, device=device)
        return cls(model, tok, sampling, model_name=str(name_or_path), **kw)

    # -- settings ---------------------------------------------------------------------------------
    def generation_config(self) -> Any:
        """The exact ``GenerationConfig`` passed to ``generate``."""
        from transformers import GenerationConfig

        s = self.sampling
        return GenerationConfig(do_sample=True, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k,
                                max_new_tokens=s.max_new_tokens, eos_token_id=list(self.tags.stop_ids),
                                pad_token_id=self.pad_id)

    def settings(self) -> dict[str, Any]:
        gc = self.generation_config()
        return {"backend": self.backend, "name": self.name, "model": self.model_name, "scaffold": self.scaffold,
                "do_sample": gc.do_sample, "temperature": gc.temperature, "top_p": gc.top_p, "top_k": gc.top_k,
                "max_new_tokens": gc.max_new_tokens, "thinking": self.sampling.thinking,
                "seed": self.sampling.seed, "stop_ids": list(self.tags.stop_ids), "prompt_cap": self.prompt_cap,
                "max_batch": self.max_batch, "dtype": str(getattr(self.model, "dtype", ""))}

    # -- generation -------------------------------------------------------------------------------
    def prompt_ids(self, view: View) -> tuple[list[int], int]:
        """(prompt ids, history turns dropped) of one view."""
        return fit_prompt(view, self.tokenizer, require_render(self), self.scaffold, self.prompt_cap,
                          self.sampling.thinking, self.name)

    def release_caches(self) -> None:
        """Empty the prefix cache (the shared decode pool is the :class:`ModelCache`'s and stays)."""
        if self.prefix_cache is not None:
            self.prefix_cache.clear()

    def act_batch(self, views: Sequence[View]) -> list[AgentReply]:
        replies: list[AgentReply] = []
        for start in range(0, len(views), self.max_batch):
            replies += self._chunk(list(views[start:start + self.max_batch]))
        return replies

    def _chunk(self, views: list[View]) -> list[AgentReply]:
        t0 = time.perf_counter()
        fitted = [self.prompt_ids(v) for v in views]
        prompts = [ids for ids, _ in fitted]
        seed = derive_seed(self.sampling.seed, [v.episode_id for v in views], [v.turn for v in views])
        completions, logprobs, finished = self.generate_ids(prompts, seed)
        latency = time.perf_counter() - t0
        out = []
        for (ids, dropped), comp, lps, fin in zip(fitted, completions, logprobs, finished):
            body = comp[:-1] if fin else comp
            text, stripped = decode_turn_counted(self.tokenizer, body, self.tags)
            out.append(AgentReply(text, input_tokens=len(ids), output_tokens=len(comp), latency_s=latency,
                                  extra={"prompt_ids": ids, "completion_ids": comp, "logprobs": lps,
                                         "finish_reason": "stop" if fin else "length",
                                         "history_dropped": dropped,
                                         "prompt_capped": cap_bound(ids, dropped, self.prompt_cap),
                                         "tags_stripped": stripped}))
        return out

    def generate_ids(self, prompts: Sequence[Sequence[int]], seed: int
                     ) -> tuple[list[list[int]], list[list[float]], list[bool]]:
        """Sample one completion per prompt, all prompts decoding together.

        Returns completion ids (through the first stop token), their log-probs, and whether each
        stopped on a stop token (else it hit ``max_new_tokens``). With prefix reuse on, prompts are
        prefilled row by row and sampled by our decode loop (:mod:`negolib.agents.decode`); otherwise
        by transformers' ``generate`` with the same settings.
        """
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        from negolib.agents.decode import grouped_attention

        device = getattr(self.model, "device", torch.device("cpu"))
        width = max(len(p) for p in prompts)
        st, t0 = self.stats, time.perf_counter()
        computed = self.prefix_cache.computed if self.prefix_cache is not None else 0
        past = self._prefilled_cache(prompts, width, device)
        st.calls += 1
        if past is not None:  # the prompts are prefilled: our own batched decode loop
            assert self.prefix_cache is not None
            t1 = time.perf_counter()
            st.prefill_s += t1 - t0
            st.prefill_tokens += self.prefix_cache.computed - computed
            out = self._decode(prompts, past, width, seed, device)
            st.decode_s += time.perf_counter() - t1
            st.decode_tokens += sum(len(c) for c in out[0])
            return out
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            if p:
                input_ids[i, width - len(p):] = torch.tensor(list(p), dtype=torch.long)
                mask[i, width - len(p):] = 1
        rec = _recorder(self.sampling.temperature)
        saved = self.model.generation_config  # a bare default config, so only ours applies
        self.model.generation_config = GenerationConfig()
        try:
            with torch.random.fork_rng(devices=[]), torch.inference_mode(), grouped_attention(self.model):
                torch.manual_seed(seed)
                seqs = self.model.generate(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                                           generation_config=self.generation_config(),
                                           logits_processor=LogitsProcessorList([rec]))
        finally:
            self.model.generation_config = saved
        new = seqs[:, width:]
        lp = rec.finish(new).cpu()  # the recorder's log-probs live on the model's device
        new = new.cpu()
        stops = set(self.tags.stop_ids)
        comps, lps, fins = [], [], []
        for i in range(new.shape[0]):
            row = new[i].tolist()
            cut = next((j for j, t in enumerate(row) if t in stops), None)
            n = len(row) if cut is None else cut + 1
            comps.append(row[:n])
            lps.append([float(x) for x in lp[i, :n]])
            fins.append(cut is not None)
        st.decode_s += time.perf_counter() - t0
        st.decode_tokens += sum(len(c) for c in comps)
        return comps, lps, fins


    def _decode(self, prompts: Sequence[Sequence[int]], past: Any, width: int, seed: int, device: Any
                ) -> tuple[list[list[int]], list[list[float]], list[bool]]:
        """Sample from prefilled prompts with :func:`negolib.agents.decode.decode`: the same
        distribution as ``generate`` with this config, drawn from a generator seeded with ``seed``.

        Each row's keys/values at the end (its prompt and its reply but the last token) go to the
        prefix cache, as a serving engine's prefix cache keeps finished sequences: the training
        scaffold's next prompt appends to this one, so the reply is not prefilled again."""
        import numpy as np
        import torch

        from negolib.agents.decode import decode, grouped_attention, sample_tokens

        s = self.sampling
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        pc = self.prefix_cache

        def sample(logits: Any) -> tuple[Any, Any]:
            return sample_tokens(logits, s.temperature, s.top_k, s.top_p, gen)

        def keep(row: int, new: list[int], kv: list[tuple[Any, Any]]) -> None:
            if pc is not None and len(new) > 1:
                ids = np.asarray(list(prompts[row]) + new[:-1], dtype=np.int64)
                pc.store(ids, [(k.contiguous(), v.clone()) for k, v in kv])

        with torch.inference_mode(), grouped_attention(self.model):
            return decode(self.model, past, [p[-1] for p in prompts], [len(p) for p in prompts], width,
                          s.max_new_tokens, sample, set(self.tags.stop_ids), on_leave=keep)

    # -- prefix reuse -----------------------------------------------------------------------------
    def _cacheable(self) -> bool:
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        if self.prefix_cache is None:
            return False
        try:
            layers = DynamicCache(config=self.model.config).layers
        except Exception:  # a model without a standard decoder config
            return False
        return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)

    def _prefilled_cache(self, prompts: Sequence[Sequence[int]], width: int, device: Any) -> Any:
        """A left-padded cache holding every prompt but its last token, built per row from the
        longest cached prefix plus a prefill of the rest; None when prefix reuse is off.

        Where the model allows it (:func:`negolib.agents.packed.supports_packed_prefill`) the rows'
        uncached tokens are prefilled together in packed forwards; a row that shares uncached tokens
        with another row of the batch (the same scenario's first prompt in a GRPO group) waits for
        the next round, where the prefix cache holds them, so shared tokens are computed once."""
        import numpy as np
        import torch
        from transformers import DynamicCache

        from negolib.agents.packed import supports_packed_prefill

        if min(len(p) for p in prompts) < 2 or not self._cacheable():
            return None
        pc = self.prefix_cache
        assert pc is not None
        if self.kv_pool is None:
            from negolib.agents.decode import KVPool

            self.kv_pool = KVPool()
        pc.check((id(self.model), sum(p._version for p in self.model.parameters())))
        arrays = [np.asarray(p[:-1], dtype=np.int64) for p in prompts]
        packed = self.packed_prefill and supports_packed_prefill(self.model)
        rows: list[Any] = [None] * len(prompts)
        matches: list[tuple[dict[str, Any], int, Any]] = []  # (entry reused, its length reused, ids stored)
        pending = list(range(len(prompts)))
        with torch.inference_mode():
            while pending:
                wave: dict[int, tuple[int, Any]] = {}
                later = []
                for i in pending:
                    if wave and not packed:  # row by row: each sees the previous rows' states cached
                        later.append(i)
                        continue
                    c, entry = pc.lookup(arrays[i])
                    if any(_common_prefix(arrays[i], arrays[j]) - max(c, cj) > SHARED_TOKENS_TO_WAIT
                           for j, (cj, _) in wave.items()):
                        later.append(i)  # its uncached start is another row's: computed once, reused next round
                        continue
                    wave[i] = (c, entry)
                release = self._releasable(wave, matches, arrays, rows) if packed and not later else set()
                try:
                    states = self._prefill([(arrays[i], *wave[i], i in release) for i in wave], packed, device)
                except BaseException:
                    pc.entries = [e for e in pc.entries if all(layer is not None for layer in e["kv"])]
                    raise
                pc.released += len(release)
                if states is None:  # e.g. a model training with gradient checkpointing
                    return None
                for (i, (c, entry)), kv in zip(wave.items(), states):
                    ids = arrays[i]
                    pc.hits += c > 0  # a cached prefix was reused
                    pc.reused, pc.computed = pc.reused + c, pc.computed + len(ids) - c
                    if c < len(ids):
                        pc.store(ids, kv)
                    if entry is not None:
                        matches.append((entry, c, ids if c < len(ids) else None))
                    rows[i] = kv
                pending = later
            pc.supersede(matches)
            batch = DynamicCache(config=self.model.config)
            capacity = width - 1 + self.sampling.max_new_tokens + 1
            batch.layers = self.kv_pool.layers(rows, width - 1, capacity)
        return batch

    def _releasable(self, wave: dict[int, tuple[int, Any]], matches: list[tuple[dict[str, Any], int, Any]],
                    arrays: list[Any], rows: list[Any]) -> set[int]:
        """Rows of a call's last wave whose prefix-cache entry :meth:`PrefixCache.supersede` will drop after it
        (reused by this row alone, which diverged from it and stores its own ids) and which an earlier call
        stored (this call's own rows still need theirs): the packed prefill frees such an entry layer by layer
        as it reads it (issue 28: the old entries and the new states of a batch were both whole in memory,
        ~1.4 GB each for ten 3k-token SmolLM2 prompts)."""
        pc = self.prefix_cache
        if pc is None:
            return set()
        ahead = [(e, c, arrays[i] if c < len(arrays[i]) else None) for i, (c, e) in wave.items() if e is not None]
        dead = pc.dead(matches + ahead)  # the rule supersede applies after the call, applied to it beforehand
        this_call = {id(kv) for kv in rows if kv is not None}
        return {i for i, (_, e) in wave.items() if e is not None and id(e) in dead and id(e["kv"]) not in this_call}

    def _prefill(self, rows: list[tuple[Any, int, Any, bool]], packed: bool, device: Any
                 ) -> list[list[tuple[Any, Any]]] | None:
        """Per row (ids, cached length c, prefix-cache entry, release): per layer (keys, values) of all of
        ``ids``, the first ``c`` taken from the entry and the rest computed: in packed forwards, or
        row by row through the model's own ``forward``. None if the model did not fill its cache.
        ``release`` (packed only): the entry's layers are freed as the forward reads them."""
        import torch
        from transformers import DynamicCache

        if packed:
            from negolib.agents.packed import PrefillRow, packed_prefill

            return packed_prefill(self.model, [PrefillRow(e["kv"] if e is not None and c > 0 else None, c, ids[c:],
                                                          release)
                                               for ids, c, e, release in rows])
        out = []
        for ids, c, entry, _ in rows:
            cache = DynamicCache(config=self.model.config)
            if entry is not None and c > 0:
                for layer, (k, v) in enumerate(entry["kv"]):
                    cache.update(k[:, :, :c], v[:, :, :c], layer)
            if c < len(ids):
                rest = torch.as_tensor(ids[c:], device=device)[None]
                pos = torch.arange(c, len(ids), device=device)[None]
                self.model(input_ids=rest, past_key_values=cache, position_ids=pos, use_cache=True,
                           **self._last_logits_only)
            if cache.get_seq_length() != len(ids):
                return None
            out.append([(layer.keys, layer.values) for layer in cache.layers])
        return out


def _common_prefix(a: Any, b: Any) -> int:
    """Length of the longest common prefix of two 1-D integer arrays."""
    import numpy as np

    n = min(len(a), len(b))
    eq = a[:n] == b[:n]
    return n if eq.all() else int(np.argmin(eq))


__all__ = ["DEFAULT_PROMPT_CAP", "HISTORY_DROP_BLOCK", "GenerationStats", "HFAgent", "PrefixCache",
           "PromptTruncationWarning", "cap_bound", "fit_prompt", "context_prompt_cap", "model_context_length",
           "EVAL_CONTEXT_TOKENS", "TRAINING_PROMPT_CAP"]
