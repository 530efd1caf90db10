"""Cost per episode by arm: tokens and USD in numbers, who is billed as an identifier."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from paper_frames import assert_tidy

from negolib.params import load_params
from negolib.study.analysis.cost import BILLING, cost_by_arm

ROOT = Path(__file__).resolve().parent.parent


def _frame() -> pd.DataFrame:
    rows = []
    for arm, seller, n, usd in (("boulware", "boulware", 2, 0.0), ("tiny_base", "tiny_base", 2, 0.0),
                                ("priced", "priced", 2, 0.01), ("unpriced", "unpriced", 1, 0.0)):
        for i in range(n):
            rows.append({"arm": arm, "seller": seller, "buyer": "buyer_linear", "seller_input_tokens": 100 + i,
                         "buyer_input_tokens": 0, "seller_output_tokens": 10, "buyer_output_tokens": 0, "usd": usd})
    return pd.DataFrame(rows)


def test_cost_by_arm_in_numbers():
    p = load_params(ROOT / "params" / "smoke.yaml")
    c = cost_by_arm(_frame(), p, {"priced": "model-a", "unpriced": "model-b"}, ["model-b"]).set_index("arm")
    assert_tidy(c.reset_index(), identifiers=("arm", "billed", "unpriced_models"))
    assert set(c["billed"]) <= set(BILLING)
    assert list(c["billed"]) == ["scripted", "self-served LM", "API", "API"]
    assert c.loc["boulware", "input_tokens_per_episode"] == pytest.approx(100.5)
    assert c.loc["priced", "usd_per_episode"] == pytest.approx(0.01)
    assert np.isnan(c.loc["unpriced", "usd_per_episode"]) and c.loc["unpriced", "unpriced_models"] == ("model-b",)
    assert np.isnan(c.loc["boulware", "usd_per_episode"])  # nobody is billed
    assert cost_by_arm(pd.DataFrame(), p, {}).empty
