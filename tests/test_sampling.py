"""Sampling settings: one validator (``sampling_problems``) for the config and the params loader."""

from __future__ import annotations

import math

import numpy as np
import pytest

from negolib.core.sampling import PAPER_SAMPLING, SamplingConfig, sampling_problems


def test_paper_defaults_are_valid():
    assert sampling_problems(1.0, 0.95, 64, 768) == []
    assert PAPER_SAMPLING.as_dict()["temperature"] == 1.0
    SamplingConfig(top_k=np.int64(0), max_new_tokens=np.int64(5), top_p=1.0)  # numpy integers are fine


@pytest.mark.parametrize("key, value", [
    ("temperature", 0), ("temperature", -0.5), ("temperature", math.inf), ("temperature", math.nan),
    ("top_p", 0), ("top_p", 1.01), ("top_p", math.nan),
    ("top_k", -1), ("top_k", 2.5), ("top_k", True),
    ("max_new_tokens", 0), ("max_new_tokens", math.inf), ("max_new_tokens", 1.5),
])
def test_invalid_values_are_named(key, value):
    kw = {"temperature": 1.0, "top_p": 0.95, "top_k": 64, "max_new_tokens": 768, key: value}
    problems = sampling_problems(**kw)
    assert [k for k, _ in problems] == [key]
    with pytest.raises(ValueError, match=f"^SamplingConfig.{key} must be"):
        SamplingConfig(**kw)
