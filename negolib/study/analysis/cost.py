"""Tokens and USD per episode by arm (App. G), from :func:`negolib.study.cost.cost_frame`.

Only API-served parties are billed; scripted and self-served parties never are. USD is NaN where the arm
is not billed or where an API party of its episodes has no price (``unpriced_models`` names them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from negolib.params import Params

BILLING = ("API", "self-served LM", "scripted")
"""Who pays for an arm's episodes: an API party, a language model we serve, or nobody."""


def cost_by_arm(frame: pd.DataFrame, params: Params, api_models: Mapping[str, str],
                unpriced: Sequence[str] = ()) -> pd.DataFrame:
    """Per arm (in the frame's order): ``billed`` (one of :data:`BILLING`), ``episodes``, input and output
    tokens per episode (both parties), ``usd_per_episode`` and ``unpriced_models`` (a tuple of the arm's
    API models without a price; ``unpriced`` lists every such model)."""
    rows = []
    for arm, g in (frame.groupby("arm", sort=False) if not frame.empty else ()):
        parties = set(g["seller"]) | set(g["buyer"])
        api = {api_models[p] for p in parties if p in api_models}
        missing = tuple(sorted(api & set(unpriced)))
        lm = params.is_lm(arm) if arm in params.arms else False
        n = len(g)
        rows.append({"arm": arm, "billed": "API" if api else ("self-served LM" if lm else "scripted"), "episodes": n,
                     "input_tokens_per_episode": (g["seller_input_tokens"] + g["buyer_input_tokens"]).sum() / n,
                     "output_tokens_per_episode": (g["seller_output_tokens"] + g["buyer_output_tokens"]).sum() / n,
                     "usd_per_episode": g["usd"].sum() / n if api and not missing else np.nan,
                     "unpriced_models": missing})
    return pd.DataFrame(rows, columns=["arm", "billed", "episodes", "input_tokens_per_episode",
                                       "output_tokens_per_episode", "usd_per_episode", "unpriced_models"])


__all__ = ["BILLING", "cost_by_arm"]
