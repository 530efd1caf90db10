"""Learning-rate schedule: linear warmup into cosine decay to a floor [App. H "Optimizer"].

Step ``k = 1 .. total`` is the k-th optimizer update of one schedule. With peak ``p``, floor
``f = p * min_ratio`` and ``W`` warmup steps::

    lr(k) = p * k / W                                              for k <= W
    lr(k) = f + (p - f) * (1 + cos(pi * (k - W) / (total - W))) / 2  for W < k <= total

so the first update already runs at ``p / W`` (not 0), the W-th at the peak and the last at the
floor. The paper's arms scale peak and floor together (1e-6 -> 1e-7, 3e-6 -> 3e-7, 1e-5 -> 1e-6).
A continuation restarts this schedule from its own warmup instead of resuming the parent cosine,
so a 104-step arm runs two schedules back to back (64 + 40 or 56 + 48).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class WarmupCosine:
    """One warmup-cosine schedule of ``total`` optimizer steps."""

    peak: float
    total: int
    warmup: int = 5
    min_ratio: float = 0.1

    def __post_init__(self) -> None:
        if self.total < 1 or self.warmup < 0 or self.peak < 0 or not 0 <= self.min_ratio <= 1:
            raise ValueError(f"invalid schedule {self}")

    @property
    def floor(self) -> float:
        return self.peak * self.min_ratio

    def lr(self, k: int) -> float:
        """Learning rate of optimizer update ``k`` (1-based); steps past ``total`` stay at the floor."""
        if k < 1:
            raise ValueError(f"optimizer steps are 1-based, got {k}")
        w = min(self.warmup, self.total)
        if k <= w:
            return self.peak * k / w
        if self.total == w or k >= self.total:
            return self.floor if self.total > w else self.peak
        progress = (k - w) / (self.total - w)
        return self.floor + (self.peak - self.floor) * 0.5 * (1.0 + math.cos(math.pi * progress))

    def factor(self, index: int) -> float:
        """Multiplier for ``torch.optim.lr_scheduler.LambdaLR`` (0-based ``index`` = update ``index + 1``)."""
        return self.lr(index + 1) / self.peak if self.peak > 0 else 0.0

    def values(self) -> list[float]:
        """The learning rate of every update, length ``total``."""
        return [self.lr(k) for k in range(1, self.total + 1)]


def combined_schedule(schedules: list[WarmupCosine]) -> list[float]:
    """Back-to-back schedules (an initial run plus continuations): the lr of every combined step."""
    return [v for s in schedules for v in s.values()]


def lambda_scheduler(optimizer, schedule: WarmupCosine):  # noqa: ANN001, ANN201 (torch types lazily)
    """A ``LambdaLR`` on ``optimizer`` whose base lr is the schedule's peak."""
    from torch.optim.lr_scheduler import LambdaLR

    for group in optimizer.param_groups:
        group["lr"] = schedule.peak
        group["initial_lr"] = schedule.peak
    return LambdaLR(optimizer, schedule.factor)
