"""Trim a micro-batch to its own longest trajectory before the loss (ours).

TRL pads a whole generation batch (every episode of a step) to its longest prompt (on the left) and its longest
completion (on the right), then splits it into micro-batches that keep that width. A micro-batch of short
episodes then runs its forward and backward over columns that are padding in every one of its rows.
:func:`trim_micro_batch` drops exactly those columns: the prompt's leading columns that are padding in every row and
the completion's trailing columns that are padding in every row (``completion_mask`` 0), from every per-token
tensor of the micro-batch. Nothing a row attends to or is scored on is dropped; the surviving real tokens keep
their order and relative positions (rotary position embeddings depend only on those), and the token-level loss
normaliser counts masked tokens only, so the loss is unchanged up to floating-point rounding (tested).

Shapes: ``prompt_ids``/``prompt_mask`` ``(B, P)``; ``completion_ids``, ``completion_mask`` and every other
completion-aligned tensor (``tool_mask``, the old/reference/sampling log-probs, a per-token importance ratio or
advantage) ``(B, C)``. A micro-batch holding any other two-dimensional tensor (multimodal inputs) is returned
unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PROMPT_KEYS = ("prompt_ids", "prompt_mask")
COMPLETION_KEYS = ("completion_ids", "completion_mask", "tool_mask", "old_per_token_logps", "ref_per_token_logps",
                   "sampling_per_token_logps", "importance_sampling_ratio", "advantages")


def trim_widths(prompt_mask: Any, completion_mask: Any) -> tuple[int, int]:
    """``(first prompt column kept, completion columns kept)``: the prompt's all-padding leading columns and the
    completion's all-padding trailing columns are cut; at least one completion column is kept."""
    import torch

    any_prompt = prompt_mask.bool().any(dim=0)
    start = int(torch.nonzero(any_prompt)[0]) if bool(any_prompt.any()) else 0
    any_completion = completion_mask.bool().any(dim=0)
    width = int(torch.nonzero(any_completion)[-1]) + 1 if bool(any_completion.any()) else 1
    return start, width


def trim_micro_batch(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """``inputs`` with the columns that are padding in every row dropped (see the module docstring)."""
    import torch

    out = dict(inputs)
    comp_w = inputs["completion_ids"].shape[1]
    known = set(PROMPT_KEYS) | set(COMPLETION_KEYS)
    for key, value in inputs.items():  # anything else per-token (e.g. multimodal token types): leave it all alone
        if isinstance(value, torch.Tensor) and value.dim() >= 2 and key not in known:
            return out
    start, width = trim_widths(inputs["prompt_mask"], inputs["completion_mask"])
    if start == 0 and width == comp_w:
        return out
    for key in PROMPT_KEYS:
        out[key] = inputs[key][:, start:]
    for key in COMPLETION_KEYS:
        value = inputs.get(key)
        if isinstance(value, torch.Tensor) and value.dim() == 2 and value.shape[1] == comp_w:
            out[key] = value[:, :width]
    return out


__all__ = ["COMPLETION_KEYS", "PROMPT_KEYS", "trim_micro_batch", "trim_widths"]
