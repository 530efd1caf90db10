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
# trained seller could learn that exploit. Scripted agents follow the same rule. The rule is the profile's
# `evaluation.accept_needs_offer` (its `accept_rule_why` says why; training takes it too, and the prompt states it):
# `paper.yaml` plays the paper's rule (`false`: any ACCEPT closes), and notebook 9 shows what the rule changes.
#
# This notebook regenerates **Figure 1** (the loop: the ledger after each turn), shows the
# domains, the reward of **Eq. 1**, and gives two interactive tools: an episode explorer and a
# play-as-the-buyer game.

# %%
import pandas as pd
from IPython.display import Markdown, display

from negolib.book.context import open_book
from negolib.book.widgets import BuyerSession, EpisodeExplorer
from negolib.games.multi_issue.domains import load_domains
from negolib.games.multi_issue.env import EnvConfig, reward
from negolib.study.report.booktable import simple_table
from negolib.study.report.environment import domain_table, domains_overview, figure1

# %% tags=["parameters"]
params_path: str = "../params/smoke.yaml"  # the profile to run (the book injects its own)
output_dir: str = ""  # empty: write under outputs/<profile> as the profile says

# %%
book = open_book(params_path, output_dir or None)
params = book.params
print(f"profile {params.profile!r}: outputs under {book.paths.root}")

# %% [markdown]
# ## Domains
# Nine contract schemas: eight training domains and the held-out used-car sale. Continuous terms
# are *distributive* (the parties want opposite directions); categorical and binary terms are
# *integrative* (each party independently draws a preferred level, so trades can create value).

# %%
domains = load_domains()
book.save_table(domains_overview(domains))

# %%
book.save_table(domain_table(domains["car"]))

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
# score $S$ is the outcome term. The table evaluates Eq. 1 (`negolib.games.multi_issue.env.reward`) on a few example
# outcomes to show the size of each penalty.

# %%
cfg = EnvConfig()  # the paper's constants
examples = {  # outcome: (S, seller bad parses, seller turns, rounds)
    "deal at U~ = 0.60 in 8 rounds": (0.60, 0, 8, 8), "deal at U~ = 0.60 in 12 rounds": (0.60, 0, 12, 12),
    "deal at U~ = 0.60, 1 bad parse of 8": (0.60, 1, 8, 8), "no deal (12 rounds)": (-0.3, 0, 12, 12)}
rows = pd.DataFrame([{"outcome": k, "S": v[0], "reward r": round(reward(*v, cfg), 4)} for k, v in examples.items()])
book.save_table(simple_table("reward_examples", "Eq. 1 on example outcomes", rows.set_index("outcome")))

# %% [markdown]
# ## Figure 1: the loop, one episode turn by turn
# The paper quotes turns 6-7 of seed 5000053 on the held-out car domain (its 12B 3× LR seller against
# GPT-5.6-Terra). We replay the same scenario with a scripted seller and buyer of this profile (scripted
# strategies when the profile has none, so this runs on any machine). Each row is the ledger after a
# turn; colour is the seller's feature $\phi$ of the
# term; the right panel gives both parties' $\tilde U$ of that ledger.

# %%
explorer = EpisodeExplorer(book)
seller, buyer = explorer.demo_parties()
record = explorer.play("car", 5_000_053, seller, buyer)
fig = figure1(record)
book.save_figure(fig, "figure1_ledger")

# %% [markdown]
# The same episode as text: turn 7's prose and the ledger after it, with each party's per-term
# contribution to $\tilde U$ (they sum exactly to $\tilde U$).

# %%
turn, table = explorer.turn(record, min(7, len(record["turns"])))
print(f"turn {turn['turn']} ({turn['role']}): {turn['prose']}")
display(table)

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
session = BuyerSession(book, seller=seller, domain="car", seed=5_000_053, cache=explorer.cache)
display(session.brief())
session.widget()

# %%
display(Markdown(f"Tables written to `{book.paths.tables}`, figures to `{book.paths.figures}`."))

# %% [markdown]
# ## Exercises
# Each exercise is a task (the markdown), sometimes given material (a cell tagged `exercise`), a
# solution (tagged `solution`) and a check (tagged `check`). In the book the solutions run and the
# checks pass; in the course handout (`python -m negolib book handout`) every solution is replaced by
# `...  # your code here` and its check fails, with a message saying what is missing, until you
# answer. Each exercise runs on its own: you need none of the cells above it.
#
# ### Exercise 1.1: the reward of Eq. 1 by hand
# Below, a Boulware seller and a linear buyer play the car scenario of Figure 1, except that two of
# the seller's turns lose their JSON action. The transcript's outcome has been removed. From the
# turns alone (and the seller's preferences, `ex1_episode.scenario.seller`, with
# `negolib.games.multi_issue.utility.normalized_utility`), work out the score `ex1_S` (the outcome term) and the reward
# `ex1_reward` of Eq. 1. A good answer counts the seller's turns and its bad parses, the rounds played
# (a round is one turn of each party), and applies both penalties: it matches what the environment
# paid to the last decimal.

# %% tags=["exercise"]
from negolib.games.multi_issue.domains import load_domains
from negolib.games.multi_issue.env import EnvConfig, Episode
from negolib.games.multi_issue.scenarios import make_scenario
from negolib.games.multi_issue.scripted import make_scripted

ex1_cfg = EnvConfig()  # the paper's constants: lambda = 0.3, g_fmt = g_len = 0.05, T = 12 rounds
ex1_episode = Episode(make_scenario(load_domains()["car"], 5_000_053), ex1_cfg)
ex1_parties = {"seller": make_scripted("boulware"), "buyer": make_scripted("linear")}
while not ex1_episode.done:
    ex1_view = ex1_episode.view()
    ex1_text = ex1_parties[ex1_view.role].act_batch([ex1_view])[0].text
    if ex1_view.role == "seller" and ex1_view.turn in (5, 9):  # these two turns lose their JSON
        ex1_text = ex1_text.split("\n")[0]
    ex1_episode.step(ex1_text)
ex1_transcript = ex1_episode.record(arm="boulware", seller="boulware", buyer="linear")
del ex1_transcript["outcome"]  # what you are asked to work out
for t in ex1_transcript["turns"]:
    kind = t["action"]["action"] if t["action"] else f"no action ({t['parse_error']})"
    print(f"turn {t['turn']:2d} {t['role']:6s} {kind}")

# %% tags=["solution"]
# Exercise 1.1: S and the reward r of Eq. 1 from the transcript's turns.
from negolib.games.multi_issue.utility import normalized_utility

ex1_turns = ex1_transcript["turns"]
ex1_last = ex1_turns[-1]
ex1_deal = bool(ex1_last["action"]) and ex1_last["action"]["action"] == "ACCEPT"
ex1_S = (normalized_utility(ex1_episode.scenario.domain, ex1_episode.scenario.seller, ex1_last["ledger"])
         if ex1_deal else -ex1_cfg.no_deal_penalty)
ex1_seller = [t for t in ex1_turns if t["role"] == "seller"]
ex1_bad = sum(t["action"] is None for t in ex1_seller)
ex1_rounds = -(-len(ex1_turns) // 2)  # ceil: a round is one turn of each party
ex1_over = max(0.0, ex1_rounds - ex1_cfg.soft_budget) / (ex1_cfg.max_rounds - ex1_cfg.soft_budget)
ex1_reward = ex1_S - ex1_cfg.format_penalty * ex1_bad / len(ex1_seller) - ex1_cfg.length_penalty * ex1_over
print(f"S = {ex1_S:.4f}; {ex1_bad} bad parse(s) in {len(ex1_seller)} seller turns, {ex1_rounds} rounds: "
      f"r = {ex1_reward:.4f}")

# %% tags=["check"]
from negolib.book.exercises import expect

ex1_S, ex1_reward = expect(globals(), "ex1_S", "ex1_reward", exercise="1.1")
assert abs(ex1_S - ex1_episode.outcome.score) < 1e-9,\
    f"exercise 1.1: S = {ex1_S:.4f} is not the outcome term (a deal pays the seller's U~ of the final ledger)"
assert abs(ex1_reward - ex1_S) > 0.01, "exercise 1.1: r equals S: the format and length penalties are missing"
assert abs(ex1_reward - ex1_episode.outcome.reward) < 1e-9,\
    (f"exercise 1.1: r = {ex1_reward:.6f} is not Eq. 1's value; count the seller's turns and bad parses "
     "and the rounds (a round is one turn of each party)")
print("exercise 1.1: correct")

# %% [markdown]
# ### Exercise 1.2: a scripted seller that beats Boulware
# Boulware (e = 0.2) concedes slowly and accepts an offer only when it is worth at least its own next
# bid. Against the linear buyer it is a strong baseline, but it still ends some scenarios without a
# deal, which costs $\lambda = 0.3$. Write a seller `ex2_seller` (a `negolib.games.multi_issue.scripted.ScriptedAgent`,
# e.g. a subclass of `TimeDependentAgent`, not the library's `HardHeadedAgent`) whose mean score S
# beats Boulware's against the linear buyer. The check plays both on the same paired scenario set (24
# evaluation seeds x 9 domains) and asks that the 95% interval of the paired seed-cluster bootstrap
# (`negolib.study.paired.paired_contrast`) of your seller minus Boulware lies above 0. A good answer says
# why it wins (hint: what is any deal above the reservation value worth, in the last turn, compared
# with no deal?).

# %% tags=["solution"]
# Exercise 1.2: a seller whose paired score beats Boulware's against the linear buyer.
from negolib.games.multi_issue.scripted import TimeDependentAgent


class LastCallBoulware(TimeDependentAgent):
    """Boulware, except that in its last turn it takes any offer above its reservation value: a deal
    there is worth more than the no-deal's -lambda."""

    def accepts(self, view, next_bid_utility):  # noqa: ANN001, ANN201
        last = view.history[-1] if view.history else None
        if last is None or last.role == view.role or not last.offered:
            return False  # fair ACCEPT: only an offer the buyer just made can be accepted
        if view.turn >= view.config.max_turns - 1:  # the seller's last turn
            return self.utility(view, view.ledger) >= view.prefs.reservation
        return super().accepts(view, next_bid_utility)


ex2_seller = LastCallBoulware("last_call_boulware", e=0.2)

# %% tags=["check"]
from negolib.agents.base import Agent
from negolib.book.exercises import expect
from negolib.core.transcripts import episodes_frame
from negolib.games.multi_issue.rollout import make_specs, run_episodes
from negolib.games.multi_issue.scenarios import eval_seeds, scenario_set
from negolib.games.multi_issue.scripted import HardHeadedAgent, make_scripted
from negolib.stats import ClusterResampler
from negolib.study.paired import paired_contrast

ex2_seller = expect(globals(), "ex2_seller", exercise="1.2")
assert isinstance(ex2_seller, Agent) and not isinstance(ex2_seller, HardHeadedAgent),\
    "exercise 1.2: ex2_seller must be an agent of your own (not the library's HardHeadedAgent)"
ex2_agents = {"yours": ex2_seller, "boulware": make_scripted("boulware"), "linear": make_scripted("linear")}
ex2_scenarios = scenario_set(eval_seeds(24))
ex2_records = [r for arm in ("yours", "boulware") for r in run_episodes(
    make_specs(arm, arm, ["linear"], ex2_scenarios), ex2_agents, progress=False).records]
ex2_frame = episodes_frame(ex2_records)
assert (ex2_frame["status"] != "error").all(), "exercise 1.2: some episodes of your seller ended in an error"
ex2_c = paired_contrast(ex2_frame, "yours", "boulware", "score", ClusterResampler.from_frame(ex2_frame, 2_000))
print(f"your seller - Boulware, mean S: {ex2_c.estimate:+.4f}, 95% CI [{ex2_c.ci_low:+.4f}, {ex2_c.ci_high:+.4f}] "
      f"over {ex2_c.n_clusters} seed clusters")
assert ex2_c.ci_low > 0, (f"exercise 1.2: your seller does not beat Boulware (paired difference in S "
                          f"{ex2_c.estimate:+.4f}, 95% CI [{ex2_c.ci_low:+.4f}, {ex2_c.ci_high:+.4f}] "
                          "includes 0 or lies below)")
print("exercise 1.2: correct")
