"""Prefill of many prompts in one packed forward pass (Llama-family models on CPU).

A batched engine prefills each live episode's new prompt tokens before the wave decodes. Row by
row, each prefill is a model forward over that row's new tokens only, a few hundred a turn (the
training chat grows by the counterpart's reply; the evaluation scaffold re-renders the history's
tail, the current offer and the reminder). A CPU runs those matrix products below its peak: on
2 cores SmolLM2's linear layers take ~0.89 ms a token at 160 tokens a row and ~0.70 at a few
thousand. Packing every row's new tokens into ONE sequence lets all linear layers, norms and the
MLP run once over all rows, as a serving engine's varlen prefill does; only attention stays per
row (each row's queries attend to its own cached prefix and its own new tokens, causally).
Padding is never computed, so rows of any lengths pack without waste.

The forward is Llama's, written out over the model's own modules (embedding, RMSNorms, projections,
rotary embedding, MLP), with :func:`torch.nn.functional.scaled_dot_product_attention` reading the
grouped key/value heads in place (``enable_gqa``), so results equal transformers' own prefill up
to float rounding (tested). :func:`supports_packed_prefill` says which models take this path;
others are prefilled row by row through their own ``forward``. Import lazily: it imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

#: Attention implementations whose result the packed forward reproduces (the SDPA family).
SDPA_IMPLEMENTATIONS = frozenset({"sdpa", "negolib_grouped_sdpa"})

#: Most new tokens one packed forward takes (bounds activation memory; GEMMs saturate far below).
MAX_PACKED_TOKENS = 4096


@dataclass
class PrefillRow:
    """One prompt to prefill: ``cached`` holds per layer (keys, values) of shape (1, kv_heads, start,
    dim) for its first ``start`` tokens (``None`` when ``start`` is 0); ``ids`` are the tokens after.
    ``release``: the caller will drop ``cached`` after this prefill (a prefix-cache entry the row supersedes), so
    its layers are freed as the forward passes them: an old entry and its row's new states are never both
    whole in memory."""

    cached: list[tuple[Any, Any]] | None
    start: int
    ids: Sequence[int]
    release: bool = False  # drop each layer of ``cached`` (set it to None) once the forward has read it


def supports_packed_prefill(model: Any) -> bool:
    """True for a transformers ``LlamaForCausalLM`` on the CPU, in eval mode, with SDPA attention:
    the models whose prefill :func:`packed_prefill` reproduces. Anything else (another architecture,
    eager or flash attention, a GPU, a model in training mode) keeps its own ``forward``."""
    if type(model).__name__ != "LlamaForCausalLM" or getattr(model, "training", False):
        return False
    config = getattr(model, "config", None)
    if getattr(config, "_attn_implementation", None) not in SDPA_IMPLEMENTATIONS:
        return False
    try:
        if next(model.parameters()).device.type != "cpu":
            return False
        base = model.model
        layer = base.layers[0]
        needed = (base.embed_tokens, base.rotary_emb, layer.input_layernorm, layer.post_attention_layernorm,
                  layer.mlp, layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj,
                  layer.self_attn.o_proj, layer.self_attn.head_dim, layer.self_attn.scaling)
    except (AttributeError, IndexError, StopIteration):
        return False
    return all(x is not None for x in needed)


def packed_prefill(model: Any, rows: Sequence[PrefillRow]) -> list[list[tuple[Any, Any]]]:
    """Run every row's new tokens through ``model`` in packed forwards of at most
    :data:`MAX_PACKED_TOKENS` tokens; returns per row, per layer, (keys, values) of shape
    (1, kv_heads, start + len(ids), dim): the cached prefix followed by the new tokens' states.
    Rows with no new tokens return their cached states. Call under ``torch.inference_mode()``."""
    out: list[list[tuple[Any, Any]]] = [[] for _ in rows]
    groups: list[list[int]] = [[]]
    size = 0
    for i, row in enumerate(rows):
        if not len(row.ids):
            if row.cached is None:
                raise ValueError("a prefill row needs cached states or new tokens")
            out[i] = [(k[:, :, : row.start], v[:, :, : row.start]) for k, v in row.cached]
            continue
        if groups[-1] and size + len(row.ids) > MAX_PACKED_TOKENS:
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += len(row.ids)
    for group in groups:
        if group:
            for i, kv in zip(group, _packed_forward(model, [rows[j] for j in group])):
                out[i] = kv
    return out


def _packed_forward(model: Any, rows: Sequence[PrefillRow]) -> list[list[tuple[Any, Any]]]:
    """One forward over the concatenated new tokens of ``rows`` (Llama's decoder, per-row attention)."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    base = model.model
    device = base.embed_tokens.weight.device
    ids = torch.tensor([t for r in rows for t in r.ids], dtype=torch.long, device=device)[None]
    positions = torch.cat([torch.arange(r.start, r.start + len(r.ids), device=device) for r in rows])[None]
    spans, end = [], 0
    for r in rows:
        spans.append((end, end + len(r.ids)))
        end += len(r.ids)
    masks = [_causal_tail_mask(r.start, len(r.ids), device) for r in rows]
    hidden = base.embed_tokens(ids)
    cos, sin = base.rotary_emb(hidden, position_ids=positions)
    states: list[list[tuple[Any, Any]]] = [[] for _ in rows]
    tokens = ids.shape[1]
    for index, layer in enumerate(base.layers[: model.config.num_hidden_layers]):
        attn = layer.self_attn
        x = layer.input_layernorm(hidden)
        shape = (1, tokens, -1, attn.head_dim)
        q = attn.q_proj(x).view(shape).transpose(1, 2)
        k = attn.k_proj(x).view(shape).transpose(1, 2)
        v = attn.v_proj(x).view(shape).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        mixed = q.new_empty((1, tokens, q.shape[1], attn.head_dim))
        for r, (s, e), mask, kv in zip(rows, spans, masks, states):
            keys, values = k[:, :, s:e], v[:, :, s:e]
            if r.cached is not None:
                ck, cv = r.cached[index]
                keys, values = torch.cat([ck[:, :, : r.start], keys], 2), torch.cat([cv[:, :, : r.start], values], 2)
                if r.release:
                    r.cached[index] = None  # type: ignore[call-overload]
            else:
                keys, values = keys.contiguous(), values.contiguous()
            kv.append((keys, values))
            o = torch.nn.functional.scaled_dot_product_attention(
                q[:, :, s:e], keys, values, attn_mask=mask, is_causal=mask is None and e - s > 1,
                scale=attn.scaling, enable_gqa=True)
            mixed[:, s:e] = o.transpose(1, 2)
        hidden = hidden + attn.o_proj(mixed.view(1, tokens, -1))
        hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
    return states


def _causal_tail_mask(start: int, n: int, device: Any) -> Any:
    """Boolean mask (n, start + n): new token ``i`` (at position ``start + i``) sees positions up to
    its own. ``None`` when there is no cached prefix (plain causal attention does it)."""
    if start == 0:
        return None
    return torch.arange(start + n, device=device)[None] <= torch.arange(start, start + n, device=device)[:, None]


__all__ = ["MAX_PACKED_TOKENS", "PrefillRow", "packed_prefill", "supports_packed_prefill"]
