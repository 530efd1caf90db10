"""One forward and backward over a GRPO group's shared prompt instead of one per rollout (exact, ours).

A GRPO group is ``G`` rollouts of one scenario: every row of its micro-batch starts with the same prompt tokens
(the same left padding too), and only the completion's tokens are scored. TRL's stock scoring runs the whole
``(rows, prompt + completion)`` batch through the model, so a 750-token prompt is computed, and back-propagated,
``G`` times. Here the prompt (all but its last token) runs once, as a batch of one, into a key/value cache that
keeps its autograd graph; the cache is repeated to the micro-batch's rows; the last prompt token and the
completions run on top of it. The log-probabilities are those of the stock path (the same positions, masks and
weights; float rounding aside) and so are the gradients: the repeat's backward sums the rows' gradients into the
one prompt pass, which is what the stock path's ``G`` identical prompt passes add up to.

Contract::

    ok = shareable(input_ids, attention_mask, logits_to_keep)     # every row's prompt part identical?
    logps, entropy = shared_prefix_logps(model, input_ids, attention_mask, logits_to_keep, compute_entropy)
    # logps: (rows, logits_to_keep), as TRL's ``_get_per_token_logps_and_entropies`` returns

Not used with gradient checkpointing (a checkpointed layer re-runs its forward, which would write the cache
twice) nor for prompts shorter than two tokens; :func:`shareable` says when it applies.
"""

from __future__ import annotations

from typing import Any

MIN_SHARED_TOKENS = 2  # the prefix pass needs at least one token before the last prompt token


def shareable(input_ids: Any, attention_mask: Any, logits_to_keep: int) -> bool:
    """Whether every row of ``input_ids`` / ``attention_mask`` (``(rows, length)`` tensors) has the same prompt
    part (all but the last ``logits_to_keep`` columns), so the prompt can be computed once for all rows."""
    rows, length = input_ids.shape
    prompt = length - int(logits_to_keep)
    if rows < 2 or prompt < MIN_SHARED_TOKENS:
        return False
    ids, mask = input_ids[:, :prompt], attention_mask[:, :prompt]
    return bool((ids == ids[:1]).all()) and bool((mask == mask[:1]).all())


def _causal_lm(model: Any) -> Any:
    """The causal LM module under accelerate/PEFT wrappers (the one TRL's fused LM head patched)."""
    inner = getattr(model, "module", model)  # DistributedDataParallel / accelerate wrappers
    if hasattr(inner, "get_base_model"):  # PEFT: the adapted modules live inside the base model
        inner = inner.get_base_model()
    return inner


def shared_prefix_logps(model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int,
                        compute_entropy: bool = False) -> tuple[Any, Any]:
    """Per-token log-probabilities (and entropies) of the last ``logits_to_keep`` tokens of each row, computing
    the rows' shared prompt once. Shapes: ``input_ids``/``attention_mask`` ``(rows, length)`` with
    :func:`shareable` true; returns ``(rows, logits_to_keep)`` tensors (entropy ``None`` unless asked). The model
    must carry TRL's fused LM head (``model(..., labels=, fused_lm_head=True)``), as TRL's GRPO trainer adds it."""
    rows, length = input_ids.shape
    keep = int(logits_to_keep)
    split = length - keep - 1  # the prefix pass: the prompt but its last token (that one predicts the first kept)
    lm = _causal_lm(model)
    backbone = lm.base_model
    prefix = backbone(input_ids=input_ids[:1, :split], attention_mask=attention_mask[:1, :split], use_cache=True)
    cache = prefix.past_key_values
    cache.batch_repeat_interleave(rows)
    labels = input_ids[:, split:].masked_fill(attention_mask[:, split:] == 0, -100)
    labels[:, :1] = -100  # the last prompt token is context, not scored
    out = model(input_ids=input_ids[:, split:], attention_mask=attention_mask, past_key_values=cache,
                labels=labels, fused_lm_head=True)
    logps = out.log_probs[:, -keep:]
    entropy = out.entropy[:, -keep:] if compute_entropy else None
    return logps, entropy


__all__ = ["MIN_SHARED_TOKENS", "shareable", "shared_prefix_logps"]
