"""Group-normalized advantages with NeMo-RL's leave-one-out baseline [paper §3 "Optimization"].

For a group of ``G`` rollouts of one scenario with rewards ``r_1 .. r_G``, rollout ``i`` gets::

    b_i = mean(r_j, j != i)                                   (leave-one-out baseline)
    s_i = sqrt( sum_{j != i} (r_j - b_i)^2 / (G - 1 - ddof) )  (leave-one-out std)
    A_i = (r_i - b_i) / s_i   if s_i > 0,   else   r_i - b_i

``ddof = 1`` (default) is the Bessel-corrected std of the ``G - 1`` other rewards, as in NeMo-RL's
``calculate_baseline_and_std_per_prompt`` (``(E[r^2] - E[r]^2) * n / (n - 1)`` over the ``n = G - 1``
others, NaN -> 0; computed here in two passes, which is exact where that form cancels); ``ddof = 0``
is its earlier, uncorrected form. With ``G = 2`` and ``ddof = 1`` the
std of one reward is undefined and taken as 0, so the advantage is the plain difference. A group of
one gets advantage 0 (NeMo-RL sets the baseline to the reward). No epsilon is added: a rollout whose
other rewards are all equal (std at most :data:`STD_TOLERANCE`) is left unscaled rather than blown up.
"""

from __future__ import annotations

import numpy as np

STD_TOLERANCE = 1e-6  # a leave-one-out std at or below this is float noise from equal rewards: zero


def loo_baseline_and_std(
    rewards: np.ndarray, group_size: int, ddof: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Leave-one-out baseline and std per rollout.

    rewards: (B * G,) in group-major order (the G rollouts of a scenario are consecutive).
    Returns (baseline, std), each (B * G,). The std is computed from the deviations of the others
    from their own mean (two passes), not as E[r^2] - E[r]^2: with equal other rewards that form
    cancels to ~1e-17 instead of 0, and dividing by its square root blew a lone reward's advantage
    up to ~1e9. A std at or below :data:`STD_TOLERANCE` counts as zero.
    """
    r = np.asarray(rewards, dtype=np.float64)
    if group_size < 1 or r.size % group_size:
        raise ValueError(f"{r.size} rewards do not split into groups of {group_size}")
    g = r.reshape(-1, group_size)
    n = group_size - 1
    if n == 0:
        return r.copy(), np.zeros_like(r)
    others = np.broadcast_to(g[:, None, :], (g.shape[0], group_size, group_size))[:, ~np.eye(group_size, dtype=bool)]
    others = others.reshape(g.shape[0], group_size, n)  # [b, i, :] = the rewards of group b but the i-th
    base = others.mean(axis=-1)
    if n - ddof > 0:
        std = np.sqrt(((others - base[..., None]) ** 2).sum(axis=-1) / (n - ddof))
        std = np.where(std <= STD_TOLERANCE, 0.0, std)
    else:
        std = np.zeros_like(base)
    return base.reshape(-1), std.reshape(-1)


def loo_advantages(rewards: np.ndarray, group_size: int, ddof: int = 1, normalize: bool = True,
                   std_floor: float = 0.0) -> np.ndarray:
    """A_i = (r_i - b_i) / max(s_i, std_floor) where s_i > 0, else r_i - b_i. rewards and result: (B * G,).

    ``std_floor = 0`` is NeMo-RL's rule; a positive floor (ours) bounds |A_i| by |r_i - b_i| / floor
    when the other rollouts of the group nearly agree."""
    r = np.asarray(rewards, dtype=np.float64)
    base, std = loo_baseline_and_std(r, group_size, ddof)
    adv = r - base
    if normalize:
        pos = std > 0
        adv[pos] = adv[pos] / np.maximum(std[pos], std_floor)
    return adv


def loo_advantages_torch(rewards, group_size: int, ddof: int = 1, normalize: bool = True,  # noqa: ANN001, ANN201
                         std_floor: float = 0.0):
    """Torch wrapper of :func:`loo_advantages` (same device and dtype as ``rewards``, shape (B * G,)).

    NaN rewards (unscorable rollouts) get advantage 0 and are excluded from nothing else: the caller
    is expected to pass finite rewards (the environment always produces one).
    """
    import torch

    arr = rewards.detach().float().cpu().numpy()
    nan = np.isnan(arr)
    adv = loo_advantages(np.where(nan, 0.0, arr), group_size, ddof, normalize, std_floor)
    adv[nan] = 0.0
    return torch.as_tensor(adv, dtype=rewards.dtype, device=rewards.device)
