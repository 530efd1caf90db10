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
# # 1. The negotiation environment (paper §3)
#
# A seller and a buyer negotiate a contract of 7-10 issues. Each turn is two or three sentences of
# prose followed by one JSON action, `COUNTER` (naming terms) or `ACCEPT`. Terms named in a counter
# overwrite a persistent **ledger**; the counterpart reads the prose and the resulting ledger, never
# the JSON. An accept closes the episode on the current ledger; 12 rounds (24 turns) without one is
# a no-deal.
#
# **Fair ACCEPT (ours, a departure from the paper).** An `ACCEPT` closes the episode only when the
# counterpart's most recent turn parsed as a `COUNTER`: a party can accept only what the other party
# put forward. An `ACCEPT` on the first turn, or after a counterpart turn that did not parse, is an
# *invalid action*: the ledger is unchanged, the episode goes on, and the turn counts as a bad parse
# of the accepting party (its `invalid_accept_rate` is reported per arm and guarded in notebook 7).
# Under the paper's rule a seller could name its best terms, wait for a buyer reply that fails to
# parse and accept its own ledger at S = 1, or accept the empty ledger on turn 1 at S = 0.5; a
# trained seller could learn that exploit. Scripted agents follow the same rule;
# `EnvConfig(accept_needs_offer=False)` restores the paper's rule for ablations.
#
# This notebook regenerates **Figure 1** (the loop: the ledger after each turn), shows the
# domains, the reward of **Eq. 1**, and gives two interactive tools: an episode explorer and a
# play-as-the-buyer game.

# %%
import pandas as pd
from IPython.display import Markdown, display

from negolib.book import open_book
from negolib.domains import load_domains
from negolib.env import EnvConfig, reward
from negolib.report.booktable import simple_table
from negolib.report.environment import domain_table, domains_overview, figure1
from negolib.widgets import BuyerSession, EpisodeExplorer

# %% tags=["parameters"]
params_path: str = "../params/smoke.yaml"  # the profile to run (the book injects its own)
output_dir: str = ""  # empty: write under outputs/<profile> as the profile says

# %%
B = open_book(params_path, output_dir or None)
P = B.params
print(f"profile {P.profile!r}: outputs under {B.paths.root}")

# %% [markdown]
# ## Domains
# Nine contract schemas: eight training domains and the held-out used-car sale. Continuous terms
# are *distributive* (the parties want opposite directions); categorical and binary terms are
# *integrative* (each party independently draws a preferred level, so trades can create value).

# %%
domains = load_domains()
B.save_table(domains_overview(domains))

# %%
B.save_table(domain_table(domains["car"]))

# %% [markdown]
# ## Utility and the reward (Eq. 1)
#
# Each party scores a ledger with $U(x)=\sum_k w_k\,\phi_k(x)$, weights $w\sim\mathrm{Dirichlet}(0.3)$,
# $\phi_k\in[-1,1]$ (0 for a term never named), normalized to $\tilde U=(U+1)/2\in[0,1]$. The seller's
# training reward is
#
# $$r=\big[\tilde U\ \text{on agreement},\ -\lambda\ \text{on no-deal}\big]
# -g_{\mathrm{fmt}}\frac{n_{\mathrm{bad}}}{n_{\mathrm{policy}}}
# -g_{\mathrm{len}}\frac{\max(0,n-t_{\mathrm{soft}})}{T-t_{\mathrm{soft}}}$$
#
# with $\lambda=0.3$, $g_{\mathrm{fmt}}=g_{\mathrm{len}}=0.05$, $t_{\mathrm{soft}}=0.75\,T$, $T=12$ rounds. The
# score $S$ is the outcome term. The table evaluates Eq. 1 (`negolib.env.reward`) on a few example
# outcomes to show the size of each penalty.

# %%
cfg = EnvConfig()  # the paper's constants
examples = {  # outcome: (S, seller bad parses, seller turns, rounds)
    "deal at U~ = 0.60 in 8 rounds": (0.60, 0, 8, 8), "deal at U~ = 0.60 in 12 rounds": (0.60, 0, 12, 12),
    "deal at U~ = 0.60, 1 bad parse of 8": (0.60, 1, 8, 8), "no deal (12 rounds)": (-0.3, 0, 12, 12)}
rows = pd.DataFrame([{"outcome": k, "S": v[0], "reward r": round(reward(*v, cfg), 4)} for k, v in examples.items()])
B.save_table(simple_table("reward_examples", "Eq. 1 on example outcomes", rows.set_index("outcome")))

# %% [markdown]
# ### Exercise 1
# How much reward does a deal at $\tilde U = 0.60$ lose by closing in the last round (12) instead of
# round 8? And what does one bad parse in eight seller turns cost? Use
# `reward(S, n_bad, n_policy, rounds, cfg)`. (In a course handout, `python -m negolib book handout`,
# the solution below is removed.)

# %% tags=["solution"]
# Exercise 1: the length and format penalties of Eq. 1, from the function itself.
late = reward(0.60, 0, 8, 8, cfg) - reward(0.60, 0, 12, 12, cfg)
one_bad = reward(0.60, 0, 8, 8, cfg) - reward(0.60, 1, 8, 8, cfg)
print(f"closing in round 12 instead of 8 costs {late:.4f}; one bad parse in 8 seller turns costs {one_bad:.4f}")

# %% [markdown]
# ## Figure 1: the loop, one episode turn by turn
# The paper quotes turns 6-7 of seed 5000053 on the held-out car domain (its 12B 3× LR seller against
# GPT-5.6-Terra). We replay the same scenario with a scripted seller and buyer of this profile (scripted
# strategies when the profile has none, so this runs on any machine). Each row is the ledger after a
# turn; colour is the seller's feature $\phi$ of the
# term; the right panel gives both parties' $\tilde U$ of that ledger.

# %%
explorer = EpisodeExplorer(B)
seller, buyer = explorer.demo_parties()
record = explorer.play("car", 5_000_053, seller, buyer)
fig = figure1(record)
B.save_figure(fig, "figure1_ledger")

# %% [markdown]
# The same episode as text: turn 7's prose and the ledger after it, with each party's per-term
# contribution to $\tilde U$ (they sum exactly to $\tilde U$).

# %%
turn, table = explorer.turn(record, min(7, len(record["turns"])))
print(f"turn {turn['turn']} ({turn['role']}): {turn['prose']}")
display(table)

# %% [markdown]
# ### Exercise 2
# Play the next car scenario (seed 5,000,054) with the same two parties. Did they agree, after how
# many turns, and which side got the larger $\tilde U$? (`explorer.play` returns the transcript
# record; its `outcome` holds `deal`, `seller_utility` and `buyer_utility`.)

# %% tags=["solution"]
# Exercise 2: one more episode, read from its transcript record.
other = explorer.play("car", 5_000_054, seller, buyer)
o = other["outcome"]
verdict = (f"deal: seller U~ {o['seller_utility']:.3f}, buyer U~ {o['buyer_utility']:.3f}" if o["deal"]
           else "no deal")
print(f"{seller} vs {buyer}, car seed 5,000,054: {verdict} after {len(other['turns'])} turns")

# %% [markdown]
# ## Interactive: the episode explorer
# Pick a domain, seed, seller and buyer, press *play episode*, then step through the turns with the
# slider. The widget needs a live kernel; in a static copy of this notebook, Figure 1 above is the
# same view.

# %%
explorer.widget(seller=seller, buyer=buyer)

# %% [markdown]
# ## Interactive: play the buyer
# You are the buyer on the car domain against a configured seller. Your private preferences are
# below. The game has one control per term of the schema: a slider within the term's range (its unit
# beside it) for a continuous term, a dropdown of its levels for the others. Tick the terms your
# counter names (changing a value ticks it; unticked terms stay as they are on the ledger), write two
# or three sentences and press COUNTER; or press ACCEPT to take the current ledger, which closes the
# deal only when the seller's last turn was a COUNTER (the status line says when an ACCEPT would be
# an invalid action). The seller's utility is revealed when the episode ends.

# %%
session = BuyerSession(B, seller=seller, domain="car", seed=5_000_053, cache=explorer.cache)
display(session.brief())
session.widget()

# %%
display(Markdown(f"Tables written to `{B.paths.tables}`, figures to `{B.paths.figures}`."))
