"""The evaluation scenario set of a profile in numbers: seeds, domains, buyers and episodes per arm.

Scripted arms play the full set; language-model arms play the profile's declared subset of seeds and
domains (``evaluation.lm_seeds_per_domain``, ``evaluation.lm_domains``).
"""

from __future__ import annotations

import pandas as pd

from negolib.games.multi_issue.domains import load_domains
from negolib.params import Params

SCENARIO_QUANTITIES = ("seeds_per_domain", "domains", "buyers", "episodes_per_arm", "held_out_episodes_per_arm",
                       "seed_clusters", "arms", "episodes_total", "max_rounds", "max_turns")


def scenario_set_counts(params: Params) -> pd.DataFrame:
    """One row per quantity of :data:`SCENARIO_QUANTITIES`: its value for the scripted arms and for the
    language-model arms (``episodes_total``: both kinds of arm together, under ``scripted``; NaN under
    ``lm``)."""
    ev = params.evaluation
    domains = load_domains()
    doms = ev.domains or [*domains, *(ev.genius or {})]  # omitted: the shipped and the imported (Genius) ones
    held = [d for d in doms if d in domains and domains[d].held_out]
    lm_doms = ev.lm_domains or doms
    lm_seeds = ev.lm_seeds_per_domain or ev.seeds_per_domain
    nb = len(ev.buyers)
    n_lm = len(params.lm_arms())
    n_scr = len(params.arms) - n_lm
    total = n_scr * ev.seeds_per_domain * len(doms) * nb + n_lm * lm_seeds * len(lm_doms) * nb
    values = {
        "seeds_per_domain": (ev.seeds_per_domain, lm_seeds),
        "domains": (len(doms), len(lm_doms)),
        "buyers": (nb, nb),
        "episodes_per_arm": (ev.seeds_per_domain * len(doms) * nb, lm_seeds * len(lm_doms) * nb),
        "held_out_episodes_per_arm": (ev.seeds_per_domain * len(held) * nb,
                                      lm_seeds * len([d for d in lm_doms if d in held]) * nb),
        "seed_clusters": (ev.seeds_per_domain, lm_seeds),
        "arms": (n_scr, n_lm),
        "episodes_total": (total, None),
        "max_rounds": (ev.max_rounds, ev.max_rounds),
        "max_turns": (2 * ev.max_rounds, 2 * ev.max_rounds),
    }
    return pd.DataFrame([{"quantity": q, "scripted": values[q][0], "lm": values[q][1]} for q in SCENARIO_QUANTITIES],
                        columns=["quantity", "scripted", "lm"]).astype({"scripted": "Int64", "lm": "Int64"})


__all__ = ["SCENARIO_QUANTITIES", "scenario_set_counts"]
