"""TRL's chunked log-prob kernel on CPU, folded in place: the same bits, a fraction of the memory.

TRL (>= 1.16) scores a GRPO micro-batch with ``trl.kernels.chunked_logprob``: the LM head runs on
``[4,096 tokens, 32,768 vocabulary]`` tiles (512 MB in float32) and, on devices without Triton, each tile is folded
by ``_forward_tile`` / ``_backward_tile``, written as chains of out-of-place torch ops. Every op of the chain
allocates a new tile-sized tensor, so one fold holds up to ten of them at once: on the default book's transfer run
the process grew from 4.1 to 10.25 GB inside these two functions (issue 28's memory hunt).

:func:`forward_tile` and :func:`backward_tile` compute the same arithmetic, op for op and in the same order, in
the tile itself (the kernel's own scratch buffer, recomputed for every tile), plus at most one extra tile when the
entropy is wanted together with the exponentials. Results are bitwise those of TRL's functions
(``tests/test_lean_tiles.py`` compares them on every flag combination, contiguous and strided tiles).

:func:`lean_logprob_tiles` swaps them into TRL's module for the duration of a ``with`` block and puts TRL's back
after; it changes nothing where TRL's kernel module has another shape (another TRL version) or on Triton devices,
where TRL never calls these functions. Import lazily: it imports torch.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

FORWARD_ARGS = ("tile", "tile_stride", "targets", "running_max", "sum_exp", "x_sum_exp", "sq_sum_exp", "z_sum",
                "max_before_target", "target_logit", "vocab_start", "n_cols", "logit_scale", "softcap", "inv_t",
                "HAS_SOFTCAP", "HAS_ENTROPY", "HAS_LOG_SUM_SQ_PROBS", "HAS_MEAN_LOGITS", "HAS_IS_TOP1", "BLOCK_SIZE")
BACKWARD_ARGS = ("tile", "tile_stride", "targets", "log_z", "entropy", "grad_logprobs", "grad_entropy",
                 "vocab_start", "n_cols", "logit_scale", "softcap", "inv_t", "HAS_SOFTCAP", "HAS_LOGPROB_GRAD",
                 "HAS_ENTROPY_GRAD", "BLOCK_SIZE")


def _logits(tile: torch.Tensor, logit_scale: float, softcap: float, inv_t: float,
            has_softcap: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(z, t): TRL's transform of a tile, z = softcap * tanh(tile * scale / softcap) * inv_t (tanh only with a
    softcap), computed in ``tile`` itself when it is float32 (else in a float32 copy, as TRL's ``tile.float()``);
    t = the tanh term the backward needs (None without a softcap)."""
    z = tile if tile.dtype == torch.float32 else tile.float()
    z.mul_(logit_scale)
    t = None
    if has_softcap:
        t = z.div(softcap).tanh_()
        z.copy_(t).mul_(softcap)
    return z.mul_(inv_t), t


def forward_tile(tile: torch.Tensor, tile_stride: int, targets: torch.Tensor, running_max: torch.Tensor,
                 sum_exp: torch.Tensor, x_sum_exp: torch.Tensor, sq_sum_exp: torch.Tensor, z_sum: torch.Tensor,
                 max_before_target: torch.Tensor, target_logit: torch.Tensor, vocab_start: int, n_cols: int,
                 logit_scale: float, softcap: float, inv_t: float, HAS_SOFTCAP: bool,  # noqa: N803 (TRL's names)
                 HAS_ENTROPY: bool, HAS_LOG_SUM_SQ_PROBS: bool, HAS_MEAN_LOGITS: bool,  # noqa: N803
                 HAS_IS_TOP1: bool, BLOCK_SIZE: int) -> None:  # noqa: N803
    """TRL's ``_forward_tile`` in place: fold one [tokens, n_cols] tile of logits into the running
    online-logsumexp statistics (per token, shape [tokens]). ``tile`` is scratch and is overwritten."""
    z, _ = _logits(tile, logit_scale, softcap, inv_t, HAS_SOFTCAP)
    local = targets - vocab_start
    if HAS_MEAN_LOGITS:
        z_sum += z.sum(-1)
    if HAS_IS_TOP1:
        before_target = torch.arange(n_cols, device=z.device) < local.unsqueeze(-1)
        max_before_target.copy_(torch.maximum(max_before_target, z.masked_fill(~before_target, -math.inf).amax(-1)))
    new_m = torch.maximum(running_max, z.amax(-1))
    rescale = torch.exp(running_max - new_m)
    in_tile = (local >= 0) & (local < n_cols)
    target_z = z.gather(-1, local.clamp(0, n_cols - 1).unsqueeze(-1)).squeeze(-1)
    if HAS_ENTROPY or HAS_LOG_SUM_SQ_PROBS:  # e and z are both needed: one extra tile
        e = torch.sub(z, new_m.unsqueeze(-1)).exp_()
        sum_exp.mul_(rescale).add_(e.sum(-1))
        if HAS_ENTROPY:
            x_sum_exp.mul_(rescale).add_(z.mul_(e).sum(-1))
        if HAS_LOG_SUM_SQ_PROBS:
            sq_sum_exp.mul_(rescale * rescale).add_(e.mul_(e).sum(-1))
    else:
        sum_exp.mul_(rescale).add_(z.sub_(new_m.unsqueeze(-1)).exp_().sum(-1))
    running_max.copy_(new_m)
    target_logit.copy_(torch.where(in_tile, target_z, target_logit))


def backward_tile(tile: torch.Tensor, tile_stride: int, targets: torch.Tensor, log_z: torch.Tensor,
                  entropy: torch.Tensor, grad_logprobs: torch.Tensor, grad_entropy: torch.Tensor, vocab_start: int,
                  n_cols: int, logit_scale: float, softcap: float, inv_t: float,
                  HAS_SOFTCAP: bool, HAS_LOGPROB_GRAD: bool, HAS_ENTROPY_GRAD: bool,  # noqa: N803 (TRL's names)
                  BLOCK_SIZE: int) -> None:  # noqa: N803
    """TRL's ``_backward_tile`` in place: turn one recomputed [tokens, n_cols] tile of logits into the gradient
    of the loss with respect to those logits, written back into ``tile``."""
    z, t = _logits(tile, logit_scale, softcap, inv_t, HAS_SOFTCAP)
    log_p = z.sub_(log_z.unsqueeze(-1))
    term = None
    if HAS_ENTROPY_GRAD:  # TRL: grad -= grad_entropy * p * (log_p + entropy); log_p and p are both needed
        p = torch.exp(log_p)
        term = grad_entropy.unsqueeze(-1) * p
        term.mul_(log_p.add_(entropy.unsqueeze(-1)))
        grad = log_p.copy_(p)
        del p
    else:
        grad = log_p.exp_()  # p
    # TRL: grad = zeros; grad += grad_logprobs * (is_target - p); the zero start turns -0.0 into +0.0
    if HAS_LOGPROB_GRAD:
        grad.neg_()
        local = targets - vocab_start
        rows = torch.nonzero((local >= 0) & (local < n_cols)).squeeze(-1)
        grad[rows, local[rows]] += 1.0  # -p + 1 == 1 - p exactly
        grad.mul_(grad_logprobs.unsqueeze(-1)).add_(0.0)
    else:
        grad.zero_()
    if term is not None:
        grad.sub_(term)
        del term
    grad.mul_(inv_t)
    if t is not None:
        grad.mul_(t.mul_(t).neg_().add_(1.0))  # 1 - t * t
    grad.mul_(logit_scale)
    if grad.data_ptr() != tile.data_ptr():  # a tile in another dtype: write the gradient back
        tile.copy_(grad)


def _signature_matches(fn: Any, names: tuple[str, ...]) -> bool:
    try:
        return tuple(inspect.signature(fn).parameters) == names
    except (TypeError, ValueError):
        return False


@contextmanager
def lean_logprob_tiles(enabled: bool = True) -> Iterator[bool]:
    """Within the block, TRL's CPU tile folds are :func:`forward_tile` / :func:`backward_tile`; yields whether
    they were swapped in (False when disabled, or when TRL's kernel module is missing or has another shape)."""
    try:
        from trl.kernels import chunked_logprob as kernel
    except ImportError:
        kernel = None
    swap = (enabled and kernel is not None
            and _signature_matches(getattr(kernel, "_forward_tile", None), FORWARD_ARGS)
            and _signature_matches(getattr(kernel, "_backward_tile", None), BACKWARD_ARGS))
    if not swap:
        yield False
        return
    original = kernel._forward_tile, kernel._backward_tile
    kernel._forward_tile, kernel._backward_tile = forward_tile, backward_tile
    try:
        yield True
    finally:
        kernel._forward_tile, kernel._backward_tile = original


__all__ = ["backward_tile", "forward_tile", "lean_logprob_tiles"]
