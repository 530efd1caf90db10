"""One interval formatter for every table and frame: the caller states the sign rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from negolib import evaluation, paired
from negolib.formatting import DASH, fmt_ci, fmt_num, fmt_pct
from negolib.report import appendix_d_e, booktable, cells, training


def test_signed_and_unsigned_intervals():
    assert fmt_ci(0.023, 0.011, 0.035, signed=True) == "+0.023 [+0.011, +0.035]"
    assert fmt_ci(0.422, 0.4, 0.446, signed=False) == "0.422 [0.400, 0.446]"
    assert fmt_ci(-0.0001, -0.0224, 0.0004, signed=True) == "-0.000 [-0.022, +0.000]"
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
