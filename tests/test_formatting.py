"""One interval formatter for every table and frame: the caller states the sign rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from negolib.core.formatting import DASH, decisive_digits, fmt_ci, fmt_num, fmt_p, fmt_pct
from negolib.study import evaluation, paired
from negolib.study.report import appendix_d_e, booktable, cells, training


def test_signed_and_unsigned_intervals():
    assert fmt_ci(0.023, 0.011, 0.035, signed=True) == "+0.023 [+0.011, +0.035]"
    assert fmt_ci(0.422, 0.4, 0.446, signed=False) == "0.422 [0.400, 0.446]"
    assert fmt_ci(-0.0001, -0.0224, 0.0004, signed=True, decisive=False) == "-0.000 [-0.022, +0.000]"
    assert fmt_ci(np.float64(0.5), np.float32(0.25), 1, 2, signed=False) == "0.50 [0.25, 1.00]"
    assert fmt_ci(0.1, 0.0, 0.2, signed=True, mark="*") == "+0.100* [+0.000, +0.200]"


def test_missing_values():
    assert fmt_ci(math.nan, 0, 1, signed=True) == DASH
    assert fmt_ci(None, 0, 1, signed=False) == DASH
    assert fmt_ci(0.5, math.nan, 1, signed=False) == "0.500"  # a missing bound drops the interval
    assert fmt_ci(0.5, None, None, signed=True, mark="e") == "+0.500e"
    assert fmt_num(True) == DASH and fmt_num(math.inf) == DASH and fmt_pct(0.125) == "12.5%"


def test_missing_none_prints_every_value():
    """The tidy frames' ``ci`` column prints an undefined contrast as numbers (as it always has)."""
    assert fmt_ci(math.nan, math.nan, math.nan, signed=True, missing=None) == "+nan [+nan, +nan]"
    assert fmt_ci(0.5, math.nan, 1.0, signed=False, missing=None) == "0.500 [nan, 1.000]"
    assert fmt_ci(0.023, 0.011, 0.035, signed=True, missing=None) == fmt_ci(0.023, 0.011, 0.035, signed=True)
    assert fmt_ci(math.nan, 0, 1, signed=False, missing="n/a") == "n/a"


def test_the_sign_rule_is_explicit():
    with pytest.raises(TypeError):
        fmt_ci(0.1, 0.0, 0.2)  # type: ignore[call-arg]


def test_one_formatter_everywhere():
    """The modules that format intervals share the one function (no local variants with their own rules)."""
    assert paired.fmt_ci is evaluation.fmt_ci is fmt_ci
    assert booktable.fmt_ci is cells.fmt_ci is training.fmt_ci is appendix_d_e.fmt_ci is fmt_ci


def test_bounds_print_at_the_precision_that_decides_them():
    """Issue 27: "[+0.000, +0.104] ... the interval excludes zero" must read [+0.0001, +0.1042]."""
    assert fmt_ci(0.0365, 0.0001, 0.1042, signed=True, mark="*") == "+0.0365* [+0.0001, +0.1042]"
    assert fmt_ci(-0.0001, -0.0224, 0.0004, signed=True) == "-0.0001 [-0.0224, +0.0004]"
    assert fmt_ci(-0.011, -0.022, -0.0, signed=True) == "-0.011 [-0.022, -0.000]"  # a bound at zero is decided
    assert fmt_ci(0.02, 0.00004, 0.05, signed=True) == "+0.02000 [+0.00004, +0.05000]"
    assert fmt_ci(0.02, 3e-9, 0.05, signed=True).startswith("+0.020000 [+0.000000")  # at most 6 decimals
    assert fmt_ci(0.5, 0.0002, 0.9, 2, signed=False) == "0.5000 [0.0002, 0.9000]"
    assert fmt_ci(math.nan, math.nan, math.nan, signed=True, missing=None) == "+nan [+nan, +nan]"
    assert fmt_ci(0.1, -0.00004, math.nan, signed=True, missing=None) == "+0.10000 [-0.00004, +nan]"


@pytest.mark.parametrize(("values", "digits", "expected"), [
    ((0.011, 0.035), 3, 3), ((0.0001, 0.1), 3, 4), ((0.00049, -0.2), 3, 4), ((0.0005, 1.0), 3, 3),
    ((0.0, -0.0), 3, 3), ((math.nan, None, 0.00001), 3, 5), ((1e-12,), 3, 6), ((0.04,), 1, 2)])
def test_decisive_digits(values, digits, expected):
    assert decisive_digits(*values, digits=digits) == expected
    for v in values:  # each nonzero value prints as nonzero at the chosen precision, unless capped
        if isinstance(v, float) and math.isfinite(v) and v != 0 and expected < 6:
            assert float(f"{v:.{expected}f}") != 0


def test_p_values_print_with_their_floor():
    assert fmt_p(0.0312) == "0.0312" and fmt_p(0.5) == "0.5" and fmt_p(1.0) == "1"
    assert fmt_p(0.0625) == "0.0625"
    assert fmt_p(1 / 10_001) == "1.0e-04"
    assert fmt_p(1 / 10_001, floor=1 / 10_001) == "≤ 1.0e-04"  # the bootstrap cannot resolve a smaller p
    assert fmt_p(0.002, floor=1 / 10_001) == "0.002"
    assert fmt_p(math.nan) == DASH and fmt_p(None) == DASH
