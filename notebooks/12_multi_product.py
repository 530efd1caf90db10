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
# # 12. A multi-product market with a four-part message protocol
#
# The second of the two market systems the paper positions itself against
# (`../shared/reference/related_systems_abstracts.txt`, second abstract; we have only its abstract): a
# seller with a catalog of K substitutable products (private costs) and M buyers with private
# valuations per product, each buying at most one item, under a limit on the seller's messages.
# Every seller message follows a **four-part protocol** that maps language to a checked decision.
# The game is a plug-in of the harness (`negolib.games.multi_product`); the tournament, the GRPO
# trainer and the statistics are shared with the paper's game. This notebook regenerates:
#
# * the rules and which of them are ours (`multi_product_rules`, written from the game's constants)
#   and the markets: the training market and the generalisation arms (`multi_product_markets`);
# * the scripted sellers (a greedy matcher, a random seller and the revenue-maximising oracle, an
#   **upper bound** that reads the buyers' valuations) against the scripted buyer pool, through the
#   tournament machinery, with the three metric families of the source paper (constraint adherence,
#   revenue against the best feasible allocation, welfare against the optimal assignment) and
#   seed-cluster intervals (`multi_product_sellers`, `multi_product_constraints`), per market arm
#   (`multi_product_arms`);
# * the profile's language model as a seller before and after training (SFT on the scripted sellers' best
#   sales where the profile has it, then GRPO) with the normalised surplus as the
#   reward (`multi_product_lm`), and beside it the source paper's qualitative findings, labelled as
#   theirs (`multi_product_findings`).
#
# Every number below is computed by this run; the next cell reports how long this notebook took on
# this profile the last time the book runner executed it.

# %%
# %matplotlib inline
import time

import matplotlib.pyplot as plt
from IPython.display import display

from negolib.agents.factory import local_folder, sampling_config
from negolib.book.context import open_book, summarize_warnings
from negolib.core.formatting import fmt_last_run
from negolib.games import get_game
from negolib.games.multi_product import study
from negolib.games.training import grpo_line, grpo_log, run_stages
from negolib.tournament import run_tournament

t_start = time.perf_counter()

# %% tags=["parameters"]
params_path: str = "../params/smoke.yaml"  # the profile to run (the book injects its own)
output_dir: str = ""  # empty: write under outputs/<profile> as the profile says

# %%
book = open_book(params_path, output_dir or None)
profile, stats = book.params, book.params.statistics
market = profile.game("multi_product", "notebook 12")  # checked at load: every name, recipe and seed count
game = get_game("multi_product")
print(study.profile_line(profile.profile, market))
print(fmt_last_run(book.last_run("12_multi_product")))

# %% [markdown]
# ## The game's rules, and what is ours
#
# The abstract fixes the shape: substitutable products, buyers with private heterogeneous
# valuations who each buy at most one item, a limit on total communication turns, a four-part
# message protocol mapping language to a parsable, regulated decision, an RLVR reward, and a metric
# suite of constraint adherence, seller surplus extraction and allocation quality. It does not name
# the four parts nor give the draws, the budget or the buyers' rule, so those are **ours**. Our four
# parts: **TO** (the recipient, `buyer_<m>`), **PRODUCT** (`product_<k>`), **PRICE** (dollars) and
# **MESSAGE** (free text to that buyer), one per line in this order. A message that fails any part
# is a bad parse; a parsable offer that breaks a market rule (a product already sold, a buyer who
# already bought, a price below cost) is refused. Both reach nobody and still spend a turn. The table
# is written from the game's constants, so it cannot drift from the code that plays.

# %%
display(book.save_table(study.rules_table()))
display(book.save_table(study.markets_table()))

# %% [markdown]
# ## The scripted sellers against the buyer pool
# A market's round robin is each seller against the scripted buyer pool (a buyer name in the
# seller's place reads as the pool), so the tournament plays its diagonal: one resumable match per
# seller on the same scenarios, every market, the same seeds in each. **greedy** uses public
# information only (each buyer in turn is offered the open product with the highest list price at a
# descending high ask); **random** offers random open pairs at random prices above cost; **oracle**
# reads every buyer's valuations and sells the revenue-maximising allocation at full value, so it is
# an **upper bound, not a baseline** (no seller can know the valuations). The metrics are means over
# episodes with percentile intervals over seed clusters (a seed is one cluster across markets), and
# every difference is paired by scenario.

# %%
sellers = market.tournament.agents
for seller in sellers:  # one match each (seller vs the pool), all in one resumable matches file
    played = run_tournament(game, [seller], market.tournament.seeds_per_tier,
                            book.paths.game_tournament("multi_product"), seed=market.tournament.agent_seed,
                            progress=False)
episodes, scripted = study.scripted_stages(played.path, sellers, stats)
per_seller = ", ".join(f"{s}: {n}" for s, n in episodes.groupby("stage", sort=False).size().items())
print(f"{len(episodes)} episodes ({per_seller}), {int((~episodes['valid'].astype(bool)).sum())} error episodes left "
      f"out; {episodes['cluster'].nunique()} seed clusters")

# %%
display(book.save_table(study.sellers_table(scripted)))
display(book.save_table(study.constraints_table(episodes, sellers)))

# %% [markdown]
# ## The generalisation arms
# The same sellers in every market: the training market, unseen sizes, correlated valuations and
# price ranges ten times below and above the training range. The scripted sellers were not trained,
# so for them the arms show how hard each market is; for a trained model they show generalisation.

# %%
display(book.save_table(study.arms_table(scripted, sellers)))
arms_figure = study.arms_figure(scripted, sellers)
book.save_figure(arms_figure, "multi_product_arms")
plt.show()
print(study.price_arm_note(scripted, sellers))

# %% [markdown]
# ## The language-model seller before and after training
# * **Base**: the profile's model (the embedded SmolLM2 in the default profile; in the smoke profile a
#   tiny Llama built from a config with random weights, whose numbers check the pipeline and are not
#   findings). It writes the four-part text from the chat of `negolib.games.multi_product.prompts`.
# * **SFT** (when the profile has `games.multi_product.sft`; ours): the base model fine-tuned on the
#   tournament's best clean sale of each scenario by a scripted seller that does not read valuations (the
#   oracles are upper bounds, never demonstrations), replayed into the same chat (`negolib.games.sft`, loss
#   on the seller's messages only). A base model that writes no valid message gives every GRPO rollout the
#   same reward: no gradient.
# * **GRPO**: the shared trainer (`negolib.training.grpo`) from the SFT model when there is one, else the base
#   model, the seller against
#   the profile's buyers, the reward the normalised surplus minus a small penalty per refused message
#   (`negolib.games.multi_product.training`). The default profile runs one small step to keep the
#   book under an hour on two cores (sized by an estimate, not a timing: the first cell reports the
#   runner's measured time once it has run); its numbers show the pipeline working, not an effect size.
# * **Evaluation**: both stages on the same reserved scenarios (past the tournament's seeds) with the
#   same sampling seed; the difference is paired by scenario, with seed-cluster intervals.

# %%
spec = study.stage_spec(market, stats, base_model=local_folder(market.lm.base, profile),
                        sampling=sampling_config(market.lm.base, profile.seed), seed=profile.seed,
                        training_dir=book.paths.game("multi_product") / "training", tournament=played.path)
with summarize_warnings():  # e.g. conversations cut to max_length, prompts cut to a prompt cap
    stages = run_stages(spec)  # base -> SFT -> GRPO as the profile has them, then evaluated
print(study.sft_line(stages))
print(grpo_line(stages, spec.opponent, "multi_product", f" on {', '.join(market.grpo.markets)}"))
display(grpo_log(stages, study.GRPO_LOG))

# %%
display(book.save_table(study.lm_table(stages, spec, market.lm.base.display)))
display(study.refusals(stages))

# %% [markdown]
# ## Their findings beside ours
# The source paper's abstract states its findings **qualitatively and gives no numbers**, so the
# "theirs" column quotes or paraphrases the abstract and holds no number; we invent none. "Ours" is
# what this run measured (a direction is stated only where the interval excludes zero), or says
# that this profile did not measure it.

# %%
display(book.save_table(study.findings_table(stages, spec, scripted, sellers)))
if profile.profile == "smoke":
    print("smoke profile: the language model is a tiny random LM; its rows check the pipeline and are not findings")

# %%
print(f"notebook 12 ran {time.perf_counter() - t_start:.0f} s on profile {profile.profile!r} (this kernel, this run)")

# %% [markdown]
# ## Exercises
# Each exercise is a task (the markdown), sometimes given material (a cell tagged `exercise`), a
# solution (tagged `solution`) and a check (tagged `check`). In the book the solutions run and the
# checks pass; in the course handout (`python -m negolib book handout`) every solution is replaced by
# `...  # your code here` and its check fails, with a message saying what is missing, until you
# answer. Each exercise runs on its own: you need none of the cells above it.
#
# ### Exercise 12.1: the welfare-optimal allocation by hand
# Below, a market of three buyers and three products: each buyer's private valuations and the
# seller's private costs. Each buyer buys at most one product and each product sells at most once.
# Work out, without the library's oracle, the allocation that maximises welfare (the sum of valuation
# minus cost over the pairs sold): `ex121_pairs`, a set of (buyer, product) pairs with 0-based
# indices, and its welfare `ex121_welfare`; then the welfare of the greedy allocation that takes the
# heaviest remaining pair first, `ex121_greedy`. A good answer enumerates the matchings (there are
# only 3! = 6 full ones, and no pair here is worth less than nothing), matches the exact oracle
# (`scipy.optimize.linear_sum_assignment`, which `negolib.games.multi_product.oracle.best_assignment`
# wraps) and says why the greedy allocation, which starts with the single most valuable pair, ends
# up worse.

# %% tags=["exercise"]
import numpy as np

from negolib.games.multi_product.scenarios import MarketConfig as Ex121Config
from negolib.games.multi_product.scenarios import make_scenario as ex121_make_scenario

ex121_scenario = ex121_make_scenario(Ex121Config(n_products=3, n_buyers=3), 5_000_025, "exercise")
ex121_values = np.asarray(ex121_scenario.valuations)  # ex121_values[m, k]: buyer m's value of product k
ex121_costs = np.asarray(ex121_scenario.costs)  # ex121_costs[k]: the seller's cost of product k
print("valuations (rows: buyers, columns: products):\n", ex121_values, "\ncosts:", ex121_costs)

# %% tags=["solution"]
# Exercise 12.1: the welfare-optimal allocation, its welfare, and the greedy allocation's welfare.
import itertools

ex121_gain = ex121_values - ex121_costs[None, :]  # the welfare of each (buyer, product) pair
ex121_best_perm = max(itertools.permutations(range(3)), key=lambda p: sum(ex121_gain[m, p[m]] for m in range(3)))
ex121_pairs = {(m, k) for m, k in enumerate(ex121_best_perm) if ex121_gain[m, k] > 0}
ex121_welfare = float(sum(ex121_gain[m, k] for m, k in ex121_pairs))
ex121_free_m, ex121_free_k, ex121_greedy = set(range(3)), set(range(3)), 0.0
for flat in np.argsort(-ex121_gain, axis=None):
    m, k = divmod(int(flat), 3)
    if m in ex121_free_m and k in ex121_free_k and ex121_gain[m, k] > 0:
        ex121_greedy += float(ex121_gain[m, k])
        ex121_free_m.discard(m)
        ex121_free_k.discard(k)
print(f"optimal: {sorted(ex121_pairs)}, welfare {ex121_welfare:.2f}; greedy: welfare {ex121_greedy:.2f}")

# %% tags=["check"]
import numpy as np
from scipy.optimize import linear_sum_assignment

from negolib.book.exercises import expect
from negolib.games.multi_product.oracle import greedy_assignment
from negolib.games.multi_product.scenarios import MarketConfig, make_scenario

ex121_pairs, ex121_welfare, ex121_greedy = expect(globals(), "ex121_pairs", "ex121_welfare", "ex121_greedy",
                                                  exercise="12.1")
ex121_market = make_scenario(MarketConfig(n_products=3, n_buyers=3), 5_000_025, "exercise")
ex121_w = np.asarray(ex121_market.valuations) - np.asarray(ex121_market.costs)[None, :]
ex121_pairs = {(int(m), int(k)) for m, k in ex121_pairs}
assert len({m for m, _ in ex121_pairs}) == len({k for _, k in ex121_pairs}) == len(ex121_pairs), \
    "exercise 12.1: not an allocation: a buyer or a product appears in two pairs"
ex121_rows, ex121_cols = linear_sum_assignment(ex121_w, maximize=True)
ex121_oracle = float(ex121_w[ex121_rows, ex121_cols].sum())
assert abs(sum(ex121_w[m, k] for m, k in ex121_pairs) - ex121_welfare) < 1e-6, \
    "exercise 12.1: ex121_welfare is not the welfare of ex121_pairs (sum of valuation - cost over the pairs)"
assert abs(ex121_welfare - ex121_oracle) < 1e-6, \
    f"exercise 12.1: welfare {ex121_welfare:.2f} is below the optimum: try every matching"
assert ex121_pairs == set(zip(ex121_rows.tolist(), ex121_cols.tolist())) == set(ex121_market.best_welfare.pairs), \
    "exercise 12.1: your pairs are not the oracle's allocation"
assert abs(ex121_greedy - greedy_assignment(ex121_w).value) < 1e-6, \
    (f"exercise 12.1: greedy welfare {ex121_greedy:.2f} is wrong: take the heaviest pair whose buyer and product "
     "are both free, repeatedly")
assert ex121_greedy < ex121_welfare - 1, "exercise 12.1: the greedy allocation should fall short of the optimum here"
print("exercise 12.1: correct")

# %% [markdown]
# ### Exercise 12.2: which messages parse?
# The seller speaks the four-part protocol of `negolib.games.multi_product.protocol` (its docstring
# states the rules: `TO`, `PRODUCT`, `PRICE`, `MESSAGE`, one per line and in this order, blank lines
# and one code fence tolerated; a price is digits with at most two decimals and an optional `$`).
# Below, ten messages a seller might write in a market of 4 buyers and 3 products. Without running the
# parser, say which are bad parses and which part fails: `ex122_bad`, a dict from the message's index
# to the failing part (`"TO"`, `"PRODUCT"`, `"PRICE"`, `"MESSAGE"`); and for each message that does
# parse, its offer as (buyer, product, price) with 0-based indices: `ex122_offers`, a dict from the
# index to that tuple. A good answer matches `parse_message` on every message and says which rule each
# bad one breaks.

# %% tags=["exercise"]
ex122_messages = [
    "TO: buyer_2\nPRODUCT: product_1\nPRICE: 123.45\nMESSAGE: A fair price for a fine product.",
    "TO: buyer_5\nPRODUCT: product_1\nPRICE: 99\nMESSAGE: Hello there.",
    "TO: buyer_1\nPRODUCT: product_3\nPRICE: $1,200.00\nMESSAGE: Our premium model.",
    "```\nTO: buyer_3\n\nPRODUCT: product_2\nPRICE: $80\nMESSAGE: Two lines\nof message.\n```",
    "TO: buyer_4\nPRODUCT: product_2\nPRICE: 75.5\nMESSAGE: Deal?\nPRICE: 70",
    "PRODUCT: product_1\nTO: buyer_1\nPRICE: 50\nMESSAGE: The parts in another order.",
    "TO: buyer_2\nPRODUCT: product_2\nPRICE: 60.125\nMESSAGE: A precise price.",
    "TO: buyer_1\nPRODUCT: product_3\nPRICE: 0\nMESSAGE: Free!",
    "TO: buyer_3\nPRODUCT: product_3\nPRICE: 140\nMESSAGE:",
    "Sure! Here is my offer.\nTO: buyer_1\nPRODUCT: product_1\nPRICE: 90\nMESSAGE: Hi.",
]
for i, m in enumerate(ex122_messages):
    print(f"--- message {i} ---\n{m}")

# %% tags=["solution"]
# Exercise 12.2: the failing part of each bad message, and the offer of each good one (0-based indices).
ex122_bad = {
    1: "TO",  # buyer_5: the market has buyers 1..4
    2: "PRICE",  # a thousands comma is not allowed
    4: "MESSAGE",  # a line of the message starts with a part label
    5: "TO",  # the parts come in a fixed order: the first line must be TO
    6: "PRICE",  # three decimals
    7: "PRICE",  # a price must be positive
    8: "MESSAGE",  # the message is empty
    9: "TO",  # prose before the four parts: the first line must be TO
}
ex122_offers = {0: (1, 0, 123.45), 3: (2, 1, 80.0)}  # the fence and the blank line are tolerated, and so is '$'

# %% tags=["check"]
from negolib.book.exercises import expect
from negolib.games.multi_product.protocol import parse_message

ex122_bad, ex122_offers = expect(globals(), "ex122_bad", "ex122_offers", exercise="12.2")
ex122_parsed = [parse_message(m, 4, 3) for m in ex122_messages]
ex122_true_bad = {i for i, p in enumerate(ex122_parsed) if p.bad}
assert set(ex122_bad) == ex122_true_bad, \
    (f"exercise 12.2: the bad parses are not messages {sorted(ex122_bad)}: "
     f"{len(set(ex122_bad) ^ ex122_true_bad)} message(s) misjudged")
ex122_wrong = [i for i in sorted(ex122_true_bad) if ex122_bad[i] != ex122_parsed[i].part]
assert not ex122_wrong, f"exercise 12.2: the failing part is wrong for message(s) {ex122_wrong}"
assert set(ex122_offers) == set(range(len(ex122_messages))) - ex122_true_bad, \
    "exercise 12.2: ex122_offers must hold the offer of every message that parses, and only those"
ex122_off = [i for i, o in ex122_offers.items() if tuple(o) != tuple(ex122_parsed[i].offer)]
assert not ex122_off, f"exercise 12.2: the offer is wrong for message(s) {ex122_off} (0-based buyer and product)"
print("exercise 12.2: correct")
