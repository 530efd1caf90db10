# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 9. Beyond the paper: what its Limitations section says is missing (App. A)
#
# * **Scripted baselines.** "A scripted seller, for example one that names a fixed offer and waits for
#   the buyer to accept it, would show how much of each arm's score a fixed strategy already reaches
#   against these buyers; we did not run one." We did: every language-model arm against every scripted
#   seller, paired on the scenarios both played.
# * **Pareto and Nash efficiency.** "We did not compute Nash distance or Pareto efficiency": the exact
#   frontier of each scenario, each deal's distance to it, the Pareto-optimal share, the distance to
#   the Nash and Kalai points, and the welfare ratio.
# * **Turn order.** "The seller always opens, so turn-order effects are untested": the same sellers
#   with the buyer opening (played as logged deviations of the frozen protocol).
# * **Fixed openings.** "Testing whether the opening causes the gains would need sellers held to a
#   fixed opening": sellers whose first turn is fixed, against the same seller free to open.
# * **Training seeds** and **training on the evaluation scaffold** (the prompt shift), when the profile
#   has them.

# %%
import pandas as pd
from IPython.display import display

from negolib.analysis.beyond import (
    fixed_opening_contrasts,
    scripted_baseline_contrasts,
    seeds_scaffold_arms,
    turn_order_contrasts,
)
from negolib.analysis.resamplers import Analysis
from negolib.book import open_book
from negolib.diagnostics import openings_table
from negolib.efficiency import efficiency_frame, per_arm_efficiency
from negolib.report.beyond import (
    efficiency_table,
    fixed_openings_table,
    pareto_figure,
    scripted_baselines_table,
    seeds_scaffold_table,
    turn_order_table,
)

# %% tags=["parameters"]
params_path: str = "../params/smoke.yaml"  # the profile to run (the book injects its own)
output_dir: str = ""  # empty: write under outputs/<profile> as the profile says

# %%
B = open_book(params_path, output_dir or None)
P, paper = B.params, B.paper
R = B.results()
records = B.records()
print(f"{len(records)} transcripts over {len(R.arms)} arms")

# %% [markdown]
# ## Scripted baselines: how much of an LM arm's score does a fixed strategy reach?
# Rows: the scripted sellers (their S with its seed-cluster interval). Columns: each language-model
# arm's paired difference in S against that scripted seller on the scenarios both played.

# %%
display(B.save_table(scripted_baselines_table(R, scripted_baseline_contrasts(R))))

# %% [markdown]
# ## Pareto and Nash efficiency of the deals
# Utility is additive across issues, so each scenario's exact Pareto frontier in (seller U~, buyer
# U~) is merged issue by issue. Per arm, over its deals: the Pareto-optimal share, the mean distance
# to the frontier, to the Nash point and to the Kalai-Smorodinsky point (disagreement point: the two
# reservation values), and the welfare ratio (joint welfare over the scenario's maximum).

# %%
eff = per_arm_efficiency(efficiency_frame(R.an.df)) if not R.empty and P.beyond.efficiency else pd.DataFrame()
display(B.save_table(efficiency_table(eff, P)))

# %%
if records:
    key = ("car", 5_000_053) if any(r["domain"] == "car" and r["seed"] == 5_000_053 for r in records) else \
        (records[0]["domain"], records[0]["seed"])
    fig = pareto_figure(records, *key, title=f"{key[0]}, seed {key[1]}: frontier, Nash/Kalai points and deals")
    B.save_figure(fig, "pareto_frontier")

# %% [markdown]
# ## Turn order: the buyer opens
# The listed sellers replay the scenario set with the buyer moving first (stored apart from the
# protocol's transcripts and logged as deviations of the frozen protocol).

# %%
variants = B.evaluate_variant(P.beyond.buyer_opens) if P.beyond.buyer_opens and not R.empty else []
both = pd.concat([R.an.df, B.episodes(beyond=True)], ignore_index=True) if variants else R.an.df
display(B.save_table(turn_order_table(turn_order_contrasts(Analysis.from_params(both, P), variants), variants)))

# %% [markdown]
# ## Fixed openings: does the opening cause the gain?
# Each fixed-opening arm plays its inner seller's strategy after a fixed first turn; the contrast is
# against the same seller opening freely, with the share of episodes opening with terms beside it.

# %%
fixed = [a for a in P.beyond.fixed_openings if a in R.arms and P.arms[a].inner in R.arms]
opens = openings_table(records).set_index("arm")["opens_with_terms"].to_dict() if records else {}
display(B.save_table(fixed_openings_table(fixed_opening_contrasts(R.an, P, fixed), P, fixed, opens)))

# %% [markdown]
# ## Training seeds and training on the evaluation scaffold
# The paper trained each arm once (no run-to-run variance) and on a training prompt that differs from
# the evaluation scaffold (a prompt shift). Runs of the profile with several seeds, or trained on the
# `evaluation` scaffold, are listed here (empty when the profile has none).

# %%
display(B.save_table(seeds_scaffold_table(seeds_scaffold_arms(P, R.arms), R.est)))
