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
# # 6. The full grid and the held-out panel (paper App. B, C)
#
# **Table 3** decomposes each arm's score into deal rate, utility per closed deal and joint welfare;
# **Table 4** lists every evaluated arm with S on all domains and on the held-out domain, deal rate,
# turns and the bad-parse rate; **Figure 3** plots (a) the paired gain over base against optimizer
# steps and (b) deal rate against deal-only utility; the **held-out panel** gives the gains on the
# withheld car domain alone. Columns labelled `paper: ...` are the paper's reported numbers.

# %%
from IPython.display import display

from negolib.analysis.contrasts import held_out_contrasts, held_out_extension_trigger, trained_pairs
from negolib.analysis.quoted import quoted_contrasts
from negolib.analysis.quoted_diagnostics import deal_rate_by_domain
from negolib.book import open_book
from negolib.report.appendix_b_c import extension_trigger_table, figure3, heldout_table, table3, table4
from negolib.report.quoted import deal_rate_domain_table, quoted_table

# %% tags=["parameters"]
params_path: str = "../params/smoke.yaml"  # the profile to run (the book injects its own)
output_dir: str = ""  # empty: write under outputs/<profile> as the profile says

# %%
B = open_book(params_path, output_dir or None)
P, paper = B.params, B.paper
R = B.results()
print(f"{len(R.an.df)} evaluated episodes over {len(R.arms)} arms" if not R.empty else
      "no transcripts yet: run notebook 04_evaluation first")

# %% [markdown]
# ## Table 3: the outcome decomposition behind Figure 2a
# An arm that closes fewer but better deals can score higher on deal-only utility and lower on S.

# %%
display(B.save_table(table3(R.est, R.arms, P, paper)))

# %% [markdown]
# ## Table 4: every evaluated arm
# Scripted arms play the full scenario set, language-model arms the profile's declared subset (the
# `episodes` column); held-out is the car domain.

# %%
display(B.save_table(table4(R.est, R.arms, P, paper)))

# %% [markdown]
# ## Figure 3
# (a) Paired gain over the same-size base against combined optimizer steps for the shared-recipe arms
# only, as the paper's panel (ours: every evaluated shared-recipe checkpoint; the 3x-LR arms are another
# recipe and are not joined onto the curve; paper: its shared-LR gains at 104 steps, with the gain from
# the last 40/48 steps as labels). (b) Deal rate against utility per closed deal for every arm; arrows
# go from a base to its trained arms (the paper's 2.3B shared recipe lowered the deal rate while raising deal-only U~).

# %%
fig = figure3(P, R.est, R.contrasts, paper)
B.save_figure(fig, "figure3")

# %% [markdown]
# The gains Figure 3's labels quote: per size, what the continuation added (S at 104 steps minus S at the
# intermediate read, paired by scenario; the paper labels point estimates only).

# %%
Q = quoted_contrasts(R.an, P, sections=("B", "C"))
display(B.save_table(quoted_table(Q, "B", paper)))

# %% [markdown]
# Where the smallest size's deal rate moved, domain by domain (App. B: the paper's 2.3B shared-recipe decline is
# concentrated in acquisition, job_offer and partnership_dissolution, 0.74-0.80; media_rights 0.90; five of the
# other six above 0.93). Ours: every trained arm of the first size group against its base, paired by scenario.

# %%
small = [(a, b) for a, b in trained_pairs(P) if P.design.sizes and b == P.design.sizes[0].base]
display(B.save_table(deal_rate_domain_table(deal_rate_by_domain(R.an, small), P, paper)))

# %% [markdown]
# ## The held-out panel (App. C)
# The same paired gains restricted to the withheld domain. At the paper's n = 128 per arm a 95%
# interval has a half-width of about ±0.03; ours has as many episodes as the `episodes` column of
# Table 4 shows on that domain, so read its intervals accordingly. Every held-out contrast is
# exploratory (App. C): none is in the Holm family, so an interval excluding zero is marked `e`, never `*`.

# %%
held_contrasts = held_out_contrasts(R.an.df, P) if not R.empty else R.contrasts
display(B.save_table(heldout_table(held_contrasts, P, paper)))

# %% [markdown]
# Two further contrasts App. C quotes by panel: the two frontier sellers (training domains, pooled, held out) and
# the 31B arm read at step 56 against the 104-step 12B arm (pooled, held out). Exploratory, unadjusted.

# %%
display(B.save_table(quoted_table(Q, "C", paper)))

# %% [markdown]
# ## The held-out-panel extension (App. C, K)
# The protocol prespecified one adaptive step: double the held-out panel if the held-out gain's interval
# straddles zero for the largest trained model (the shared recipe's arm; the paper's second round also read its
# 3× LR arm). The paper's trigger fired twice and the extension was not run. Here the trigger is evaluated on our
# held-out gains; running the extension (a second, doubled held-out evaluation) is not automated.

# %%
display(B.save_table(extension_trigger_table(held_out_extension_trigger(held_contrasts, P), paper)))
