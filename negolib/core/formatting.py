"""Number formatting shared by the book's tables and the tidy frames' ``ci`` columns.

One rule for every interval: :func:`fmt_ci` prints ``estimate [low, high]`` with ``digits`` decimals,
signed (``+0.023 [+0.011, +0.035]``, for differences) or not (``0.422 [0.400, 0.446]``, for levels) as
the caller says; a missing or non-finite estimate is :data:`DASH`, a missing bound drops the interval.
A bound that is not zero but would print as zero gets more decimals, the whole cell with it, until its
sign is decided (:func:`decisive_digits`): ``+0.0365 [+0.0001, +0.1042]``, never ``[+0.000, +0.104]``
for an interval that excludes zero. P-values print with :func:`fmt_p`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

DASH = "—"
"""A cell with nothing to show (no number is ever invented)."""


def is_number(x: Any) -> bool:
    """True for a finite real number (not a bool)."""
    return isinstance(x, (int, float, np.floating, np.integer)) and not isinstance(x, bool) and math.isfinite(x)


def fmt_num(x: Any, digits: int = 3, signed: bool = False) -> str:
    """``x`` with ``digits`` decimals (a leading sign when ``signed``); :data:`DASH` when not a finite number."""
    if not is_number(x):
        return DASH
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def decisive_digits(*values: Any, digits: int = 3, max_digits: int = 6) -> int:
    """The fewest decimals ``>= digits`` (at most ``max_digits``) at which no finite nonzero value of
    ``values`` rounds to zero, so that each prints with its sign decided (``0.0001`` needs 4)."""
    d = digits
    for v in values:
        if is_number(v) and v != 0:
            while d < max_digits and round(abs(float(v)), d) == 0:
                d += 1
    return d


def fmt_p(p: Any, floor: Any = None) -> str:
    """A p-value: 3 significant digits from 0.001 up (``0.0312``, ``0.312``), scientific below (``1.0e-04``);
    ``floor`` (e.g. a bootstrap's ``1 / (B + 1)``) prints a value at it as ``<= floor``, since the resampling
    cannot resolve a smaller one. :data:`DASH` when not a finite number."""
    if not is_number(p):
        return DASH
    s = f"{p:.3g}" if p >= 1e-3 else f"{p:.1e}"
    if is_number(floor) and p <= floor:
        return "≤ " + s
    return s


def fmt_pct(x: Any, digits: int = 1) -> str:
    """A share in [0, 1] as a percentage."""
    return DASH if not is_number(x) else f"{100 * x:.{digits}f}%"


def fmt_ci(est: Any, lo: Any, hi: Any, digits: int = 3, *, signed: bool, mark: str = "",
           missing: str | None = DASH, decisive: bool = True) -> str:
    """``0.422 [0.400, 0.446]`` (levels, ``signed=False``) or ``+0.023* [+0.011, +0.035]`` (differences,
    ``signed=True``, with a significance ``mark``). A non-finite ``est`` prints ``missing`` (:data:`DASH`)
    and a non-finite bound leaves the interval out; ``missing=None`` prints every value as a number,
    ``nan`` included (the tidy frames' ``ci`` column: ``+nan [+nan, +nan]`` for an undefined contrast).
    With ``decisive`` the cell takes the decimals its bounds need to show their sign (:func:`decisive_digits`)."""
    if decisive:
        digits = decisive_digits(lo, hi, digits=digits)
    if missing is None:
        f = f"{{:{'+' if signed else ''}.{digits}f}}"
        return f"{f.format(est)}{mark or ''} [{f.format(lo)}, {f.format(hi)}]"
    if not is_number(est):
        return missing
    s = fmt_num(est, digits, signed) + (mark or "")
    if is_number(lo) and is_number(hi):
        s += f" [{fmt_num(lo, digits, signed)}, {fmt_num(hi, digits, signed)}]"
    return s


def fmt_last_run(last: Mapping[str, Any]) -> str:
    """A notebook's last run by the book runner (``Book.last_run``'s record: duration_s, status, finished)."""
    if last.get("duration_s") is None:
        return "this notebook's last run by the book runner on this profile: none recorded yet (see the last cell)"
    return (f"this notebook's last run by the book runner on this profile: {last['duration_s']:.0f} s "
            f"({last['status']}, finished {last['finished']})")


__all__ = ["DASH", "decisive_digits", "fmt_ci", "fmt_last_run", "fmt_num", "fmt_p", "fmt_pct", "is_number"]
