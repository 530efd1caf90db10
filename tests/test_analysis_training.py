"""Training summaries in numbers (first and last of each logged series, FLOPs) and Table 8's compute."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from paper_frames import assert_tidy

from negolib.study.analysis.training import size_compute, training_summary
from negolib.training.flops import flops_from_log


def _log(n: int = 3, tokens: bool = True) -> pd.DataFrame:
    df = pd.DataFrame({"step": range(1, n + 1), "reward": [0.1, np.nan, 0.3][:n], "score": [0.2, 0.3, 0.4][:n],
                       "kl": [0.0, 0.01, 0.02][:n], "wall_time_s": [1.0, 2.0, 3.5][:n]})
    if tokens:
        df["tokens_generated"], df["tokens_trained"] = 100, 80
    return df


def test_training_summary_first_and_last_and_flops():
    val = pd.DataFrame({"step": [0, 2], "score": [0.1, 0.25]})
    s = training_summary({("a", 0): _log(), ("b", 1): _log(tokens=False), ("empty", 0): pd.DataFrame()},
                         {("a", 0): val}, {"a": 1e6, "b": 1e6})
    assert_tidy(s, identifiers=("run",))
    s = s.set_index("run")
    assert list(s.index) == ["a", "b"]
    assert s.loc["a", "steps"] == 3 and s.loc["a", "reward_first"] == 0.1 and s.loc["a", "reward_last"] == 0.3
    assert s.loc["a", "validation_score_first"] == 0.1 and s.loc["a", "validation_score_last"] == 0.25
    assert np.isnan(s.loc["b", "validation_score_first"]) and np.isnan(s.loc["a", "entropy_first"])
    assert s.loc["a", "wall_time_s"] == 3.5
    assert s.loc["a", "flops_counted"] and not s.loc["b", "flops_counted"]
    want = flops_from_log(_log().to_dict("records"), 1e6)[-1]["cum_flops"]
    assert s.loc["a", "training_flops"] == pytest.approx(want)
    assert np.isnan(s.loc["b", "training_flops"])


def test_size_compute_is_relative_to_the_first_size():
    c = size_compute([{"label": "small", "params": 1e8}, {"label": "large", "params": 4e8, "device": "GPU",
                                                          "non_embedding_params": 3e8}, {"label": "unknown"}])
    assert_tidy(c, identifiers=("size", "device"))
    assert list(c["rel_flops"].fillna(-1)) == [1.0, 4.0, -1]
    assert list(c["device"]) == ["CPU", "GPU", "CPU"] and np.isnan(c.loc[0, "non_embedding_params"])
