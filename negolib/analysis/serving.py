"""What the serving of each arm did to its seller turns, counted per arm from the episode table.

* Prompt cap: a self-served seller is evaluated with its arm's context length (App. K), not the training
  driver's 2,048 (App. H); a turn whose prompt still met the cap (history dropped, or the prompt cut) is
  logged in its transcript record (``prompt_capped``) and counted here, so a binding cap is reported rather
  than silent. API sellers are never capped (zero).
* Template tags: the agents strip chat-template tags and special tokens from a reply before it is parsed
  or shown to the buyer; how many they stripped is logged per turn (``tags_stripped``) and counted here,
  so the template-tag guard (the paper: "no arm produced a template-tag leak", App. J) can fail: it passes
  for an arm whose sellers' replies needed no tag stripped.
"""

from __future__ import annotations

import pandas as pd

SERVING_COLUMNS = ["arm", "n_episodes", "n_seller_turns", "n_prompt_capped_turns", "n_prompt_capped_episodes",
                   "prompt_capped_episode_share", "n_tags_stripped", "n_tag_episodes", "tag_guard_passed"]


def serving_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Per arm: episodes, seller turns, seller turns whose prompt cap bound and the episodes with at least one
    such turn (count and share), template tags stripped from the seller's replies (``n_tags_stripped``; the
    episodes with any, ``n_tag_episodes``) and whether the template-tag guard passed (none stripped), from
    :func:`negolib.transcripts.episodes_frame` rows (records without the fields count zero)."""
    if df is None or df.empty:
        return pd.DataFrame(columns=SERVING_COLUMNS)
    d = df.copy()
    capped = d["n_prompt_capped_turns"] if "n_prompt_capped_turns" in d else pd.Series(0, index=d.index)
    d["_capped"] = capped.fillna(0).astype(int)
    d["_turns"] = d["seller_turns"].fillna(0).astype(int) if "seller_turns" in d else 0
    tags = d["n_tags_stripped"] if "n_tags_stripped" in d else pd.Series(0, index=d.index)
    d["_tags"] = tags.fillna(0).astype(int)
    g = d.groupby("arm", sort=False)
    out = pd.DataFrame({"n_episodes": g.size(), "n_seller_turns": g["_turns"].sum(),
                        "n_prompt_capped_turns": g["_capped"].sum(),
                        "n_prompt_capped_episodes": g["_capped"].apply(lambda s: int((s > 0).sum())),
                        "n_tags_stripped": g["_tags"].sum(),
                        "n_tag_episodes": g["_tags"].apply(lambda s: int((s > 0).sum()))})
    out["prompt_capped_episode_share"] = out["n_prompt_capped_episodes"] / out["n_episodes"]
    out["tag_guard_passed"] = out["n_tags_stripped"] == 0
    return out.reset_index()[SERVING_COLUMNS]


__all__ = ["SERVING_COLUMNS", "serving_frame"]
