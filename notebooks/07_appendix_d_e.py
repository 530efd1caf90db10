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
# # 7. Training diagnostics and guards (paper App. D, E)
#
# App. D reads the training logs: did the optimizer move the policy (KL to the initial policy), did
# it stop exploring (entropy), how much compute did it spend (FLOPs, App. I)? App. E checks each
# trained arm against the **four prespecified guards** (deal rate holds while U~ rises, flat
# parse-failure rate, mean turns below the cap, transcripts read by hand) and our fifth (accepts only
# offers), then **Table 5** (the
# guards side by side at one size, with the post-hoc buyer split), **Table 6** (buyer's-voice openers
# on the held-out domain) and the post-hoc **style diagnostics**. Sampled transcripts of every
# trained arm close the notebook: the hand-read guard.

# %%
import pandas as pd
from IPython.display import display

from negolib.analysis.guards import guards_frame
from negolib.analysis.quoted import quoted_contrasts
from negolib.analysis.quoted_diagnostics import kl_at_read, off_schema_ledger_share, walkaways
from negolib.analysis.serving import serving_frame
from negolib.analysis.training import training_summary
from negolib.book import open_book
from negolib.diagnostics import HAND_READ_PER_FAMILY, hand_read_sample, style_table
from negolib.domains import load_domains
from negolib.report.appendix_d_e import guards_table, style_diag_table, table5, table6_from_style, template_tag_table
from negolib.report.quoted import kl_read_table, off_schema_ledger_table, quoted_table, walkaway_table
from negolib.report.training import training_table
from negolib.training.runs import describe_models

# %% tags=["parameters"]
params_path: str = "../params/smoke.yaml"  # the profile to run (the book injects its own)
output_dir: str = ""  # empty: write under outputs/<profile> as the profile says

# %%
B = open_book(params_path, output_dir or None)
P, paper = B.params, B.paper
R = B.results()
records = B.records()
runs = [(r, s) for r, spec in P.training.runs.items() for s in spec.seeds]
trained = [(a, g.base) for g in P.design.sizes for a in (g.shared_early, g.shared, g.lr3, g.lr10, *g.extra)
           if a and a in R.arms and g.base in R.arms]
print(f"{len(records)} transcripts; {len(runs)} training runs; trained arms evaluated: {[a for a, _ in trained]}")

# %% [markdown]
# ## Training diagnostics (App. D)
# From each run's step log: reward, score, deal rate, the logged k3 KL to the initial policy and the
# policy entropy (first → last step), validation S, wall time, and the training FLOPs of App. I
# (2·N·D_gen + 6·N·D_train from the logged token counts; N from the loaded initial weights).

# %%
inits = {r: P.training.runs[r].init.split("@")[0] for r, _ in runs}
init_arms = sorted({a for a in inits.values() if a in P.arms})
sizes = {row["arm"]: row.get("params") for row in describe_models(P, init_arms)}
logs = {(r, s): B.training_log(r, s) for r, s in runs}
vals = {(r, s): B.training_log(r, s, "validation") for r, s in runs}
n_params = {r: sizes.get(a) for r, a in inits.items()}
display(B.save_table(training_table(training_summary(logs, vals, n_params), paper)))

# %% [markdown]
# The KL at the step each trained arm was read, not only first and last (App. D: the paper's step-56 KL is 0.437
# for the 31B 3× LR arm, 0.027 at step 56 of the 31B shared run, 0.126 at 12B 3× LR and 0.313 for the 10× LR arm;
# at the end of the shared-recipe continuations 0.0088 to 0.0485 by size).

# %%
display(B.save_table(kl_read_table(kl_at_read(logs, P, [a for a, _ in trained]), P, paper)))

# %% [markdown]
# ## The four prespecified guards, per trained arm (App. E), plus ours
# Each trained arm against its same-size base on their paired episodes, with paired seed-cluster
# intervals on each change. The fourth guard is the transcripts at the end of this notebook. A fifth
# guard is ours: **accepts only offers** (the seller's invalid-accept rate, ACCEPTs with no buyer
# COUNTER to accept, may rise by at most 0.01), which catches a seller that learned to try closing on
# its own terms after a buyer turn that failed to parse.

# %%
display(B.save_table(guards_table(guards_frame(R.an, trained))))

# %% [markdown]
# ## The template-tag guard, per arm (App. J)
# The agents strip chat-template tags and special tokens from a reply before it is parsed or reaches the
# buyer, so no tag can leak; what they stripped is counted per turn in the transcript records, and the
# guard passes for an arm whose seller replies needed none stripped (the paper: no arm produced a leak).

# %%
display(B.save_table(template_tag_table(serving_frame(R.an.df), P)))

# %% [markdown]
# ## Table 5: the guards side by side at each size
# S, deal rate, deal-only U~, the seller's own bad-parse rate, turns and the post-hoc buyer split
# (S against the first buyer of `design.buyer_split` minus S against the second: in the paper,
# GPT-5.6-Terra, which shares the training pool's model family, minus Claude Sonnet 5).

# %%
for g in P.design.sizes:
    display(B.save_table(table5(R.est, R.est, g, P, paper)))

# %% [markdown]
# The 10× LR arm by buyer (App. E): its gain over base against each evaluation buyer, its buyer split minus
# base's (a difference of the two per-buyer gains on the same resamples, paired by scenario) and its S against
# the 3× LR arm. Exploratory, unadjusted.

# %%
display(B.save_table(quoted_table(quoted_contrasts(R.an, P, sections=("E",)), "E", paper)))

# %% [markdown]
# ## Table 6: buyer's-voice openers on the held-out domain
# One detector over every arm's opening turns on the withheld domain. Absolute rates depend on the
# detector's breadth; only within-table comparisons are meaningful.

# %%
held = {d for d, dom in load_domains().items() if dom.held_out}
held_records = [r for r in records if r["domain"] in held]
display(B.save_table(table6_from_style(style_table(held_records) if held_records else pd.DataFrame(), P, paper)))

# %% [markdown]
# ## Style diagnostics (post hoc, App. E)
# Opener concentration, repeated openers, "I appreciate", JSON leakage into the prose, unfilled
# placeholders, buyer voice, closing turns that name the concession, and deals closed at or after
# turn 16. The paper reports these for a few arms (e.g. its 31B 3× LR arm: 30.3% of seller turns
# begin with the same three words).

# %%
display(B.save_table(style_diag_table(style_table(records) if records else pd.DataFrame(), P, paper)))

# %% [markdown]
# Walk-aways and episodes at the turn cap (App. E: the 31B 3× LR arm has zero of each), and the share of deals
# that close with an off-schema term on the ledger (App. A: 55% for the 10× LR arm, 27-44% for every other arm).

# %%
display(B.save_table(walkaway_table(walkaways(R.an.df, 2 * P.evaluation.max_rounds), P, paper)))
display(B.save_table(off_schema_ledger_table(off_schema_ledger_share(R.an.df), P, paper)))

# %% [markdown]
# ## Transcripts of every trained arm (the hand-read guard)
# As the paper: five seeded transcripts per trained arm per domain family, the family being the eight
# training domains or the held-out car domain (our reading; the paper names no other grouping). Each shows
# the prose the counterpart read and the parsed action of every turn, then the final ledger.

# %%
for arm, _ in trained:
    sample = hand_read_sample(records, arm, seed=P.seed, per_family=HAND_READ_PER_FAMILY, max_chars=300)
    for row in sample.itertuples():
        print(f"=== {arm} | {row.family} | {row.domain} | seed {row.seed} | {row.buyer}: {row.status}, "
              f"S = {row.score:.3f}")
        print(row.transcript[:3000], "\n")
if not trained:
    print("no trained arm evaluated in this profile")
