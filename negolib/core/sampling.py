"""Sampling settings, exactly as sent [paper App. A "Sampling"].

Every self-served arm samples with the training rollout's settings (temperature 1.0, top-p 0.95,
top-k 64, thinking off, 768 new tokens per turn). Each backend records the settings it actually
sends; :func:`warn_drift` warns at run start when they differ from the arm's declared settings or
when a provider rejected a parameter (the paper's Claude Sonnet 5 rejected temperature).
"""

from __future__ import annotations

import hashlib
import logging
import math
import numbers
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

log = logging.getLogger(__name__)


class SamplingDriftWarning(UserWarning):
    """The settings sent to a backend differ from the arm's declared settings."""


def _whole(x: Any, lo: int) -> bool:
    """True for a whole number >= ``lo`` (not a bool)."""
    return not isinstance(x, bool) and isinstance(x, numbers.Real) and math.isfinite(x) and x >= lo and x == int(x)


def sampling_problems(temperature: float, top_p: float, top_k: int, max_new_tokens: int) -> list[tuple[str, str]]:
    """(setting, problem) for each decoding value no backend can send; empty when all are valid.

    The one owner of these rules: :class:`Decoding` (and so :class:`SamplingConfig`) raises on the first
    problem, and the params loader reports it at load, naming the profile file and field.
    """
    out = []
    if not (temperature > 0 and math.isfinite(temperature)):
        out.append(("temperature", f"must be a finite number > 0, got {temperature}"))
    if not 0 < top_p <= 1:
        out.append(("top_p", f"must be in (0, 1], got {top_p}"))
    if not _whole(top_k, 0):
        out.append(("top_k", f"must be an integer >= 0 (0 = off), got {top_k}"))
    if not _whole(max_new_tokens, 1):
        out.append(("max_new_tokens", f"must be an integer >= 1, got {max_new_tokens}"))
    return out


_D = TypeVar("_D", bound="Decoding")


@dataclass(frozen=True)
class Decoding:
    """Decoding settings as an arm declares them (a profile's ``sampling``); defaults are the paper's.

    ``top_k=0`` / ``top_p=1`` switch those filters off. The one schema of these settings: the params loader
    builds it from a profile (a bad value names the file and field) and :class:`SamplingConfig` adds the seed.
    """

    temperature: float = 1.0
    top_p: float = 0.95
    top_k: int = 64
    max_new_tokens: int = 768
    thinking: bool = False

    def __post_init__(self) -> None:
        problems = sampling_problems(self.temperature, self.top_p, self.top_k, self.max_new_tokens)
        if problems:
            key, problem = problems[0]
            raise ValueError(f"{type(self).__name__}.{key} {problem}")  # the loader names the field from this

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_mapping(cls: type[_D], data: Mapping[str, Any]) -> _D:
        """Build from a params mapping; unknown keys are an error naming the allowed ones."""
        allowed = {f.name for f in fields(cls)}
        unknown = set(data) - allowed
        if unknown:
            raise ValueError(f"unknown sampling keys {sorted(unknown)}; allowed: {sorted(allowed)}")
        return cls(**dict(data))


@dataclass(frozen=True)
class SamplingConfig(Decoding):
    """What a backend sends: an arm's :class:`Decoding` plus the agent's sampling ``seed``."""

    seed: int = 0

    @classmethod
    def seeded(cls, decoding: Decoding, seed: int = 0) -> SamplingConfig:
        """``decoding``'s settings with sampling seed ``seed``."""
        return cls(**{f.name: getattr(decoding, f.name) for f in fields(Decoding)}, seed=seed)


PAPER_SAMPLING = SamplingConfig()
_COMPARED = ("temperature", "top_p", "top_k", "max_new_tokens", "thinking")


def drift(declared: SamplingConfig | Mapping[str, Any], sent: Mapping[str, Any],
          keys: Sequence[str] = _COMPARED) -> list[str]:
    """Human-readable differences between declared and sent settings (empty when they agree).

    A key absent from ``sent`` or set to None there counts as "not sent" (provider default).
    """
    want = declared.as_dict() if isinstance(declared, SamplingConfig) else dict(declared)
    out = []
    for key in keys:
        if key not in want:
            continue
        d, s = want[key], sent.get(key)
        if s is None:
            out.append(f"{key}: declared {d!r}, not sent (provider default)")
        elif isinstance(d, float) or isinstance(s, float):
            if not math.isclose(float(d), float(s), rel_tol=1e-9, abs_tol=1e-12):
                out.append(f"{key}: declared {d!r}, sent {s!r}")
        elif d != s:
            out.append(f"{key}: declared {d!r}, sent {s!r}")
    return out


def warn_drift(arm: str, declared: SamplingConfig | Mapping[str, Any], sent: Mapping[str, Any],
               rejected: Iterable[str] = ()) -> list[str]:
    """Warn (``warnings`` and logging) if ``sent`` drifts from ``declared`` or a provider rejected
    parameters; returns the messages (empty when all agree)."""
    msgs = drift(declared, sent)
    msgs += [f"{name}: rejected by the provider (runs at its default)" for name in rejected]
    if msgs:
        text = f"sampling drift for arm {arm!r}: " + "; ".join(msgs)
        log.warning(text)
        warnings.warn(text, SamplingDriftWarning, stacklevel=2)
    return msgs


def derive_seed(seed: int, episode_ids: Sequence[str], turns: Sequence[int]) -> int:
    """A 63-bit seed from (agent seed, the batch's episode ids, their turn numbers)."""
    h = hashlib.sha256(str(int(seed)).encode())
    for eid, turn in zip(episode_ids, turns, strict=True):
        h.update(b"\0" + str(eid).encode() + b"\0" + str(int(turn)).encode())
    return int.from_bytes(h.digest()[:8], "big") & ((1 << 63) - 1)


__all__ = ["PAPER_SAMPLING", "Decoding", "SamplingConfig", "SamplingDriftWarning", "derive_seed", "drift",
           "sampling_problems", "warn_drift"]
