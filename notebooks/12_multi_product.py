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
import numpy as np
import pandas as pd
from IPython.display import display

from negolib.agents.factory import local_folder, sampling_config
from negolib.book import open_book, summarize_warnings
from negolib.formatting import fmt_ci
from negolib.games import get_game
from negolib.games.multi_product.buyers import RULES
from negolib.games.multi_product.env import VIOLATIONS
from negolib.games.multi_product.metrics import market_metrics
from negolib.games.multi_product.protocol import MAX_MESSAGE_CHARS, MAX_PRICE, PARTS
from negolib.games.multi_product.scenarios import (
    COST_SHARE,
    EVAL_SEED_START,
    LIST_RANGE,
    MARKETS,
    TRAIN_MARKETS,
    VALUE_SIGMA,
)
from negolib.games.multi_product.training import (
    RewardConfig,
    episodes_frame,
    format_stage_table,
    play_stages,
    run_grpo,
    sft_dataset,
    stage_table,
)
from negolib.games.sft import run_sft
from negolib.report.booktable import BookTable
from negolib.tournament import read_matches, run_tournament

t_start = time.perf_counter()

# %% tags=["parameters"]
params_path: str = "../params/smoke.yaml"  # the profile to run (the book injects its own)
output_dir: str = ""  # empty: write under outputs/<profile> as the profile says

# %%
B = open_book(params_path, output_dir or None)
P, S = B.params, B.params.statistics
G = P.game("multi_product", "notebook 12")  # checked at load: every name, recipe and seed count, naming its field
game = get_game("multi_product")
T, LM = G.tournament, G.lm
grpo_config = G.grpo  # the game's recipe under the profile's overrides
last = B.last_run("12_multi_product")
print(f"profile {P.profile!r}: sellers {', '.join(T.agents)}; {T.seeds_per_tier} seeds per market; language model: "
      f"{LM.base.display} ({' -> '.join(['base', *(['SFT'] if G.sft else []), *(['GRPO'] if G.train else [])])})")
print(f"this notebook's last run by the book runner on this profile: {last['duration_s']:.0f} s "
      f"({last['status']}, finished {last['finished']})" if last.get("duration_s") is not None
      else "this notebook's last run by the book runner on this profile: none recorded yet (see the last cell)")

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
base = MARKETS[TRAIN_MARKETS[0]]
rules = pd.DataFrame([
    ("products and buyers", f"K = {base.n_products} products, M = {base.n_buyers} unit-demand buyers in the training "
     "market (other sizes in the arms)", "theirs (shape); the sizes: ours"),
    ("turn budget", f"{base.turn_budget} seller messages in the training market; each message is one turn, "
     "valid or not; a buyer answers the message addressed to it at once", "a limit: theirs; the rule: ours"),
    ("list prices and costs", f"list price uniform in [{LIST_RANGE[0]:g}, {LIST_RANGE[1]:g}] x the market's scale "
     f"(public); cost a uniform [{COST_SHARE[0]:g}, {COST_SHARE[1]:g}] share of it (private)", "ours"),
    ("valuations", f"log-normal around the list price (sigma {VALUE_SIGMA:g}), correlation rho between one buyer's "
     "products (0: independent)", "heterogeneous and private: theirs; the draw: ours"),
    ("the four parts", " / ".join(PARTS) + ", one per line in this order (blank lines and one code fence "
     "tolerated)", "a four-part protocol: theirs; these parts: ours"),
    ("TO", "buyer_1 .. buyer_M; anything else (an unknown buyer, several, 'all') is a bad parse of TO", "ours"),
    ("PRODUCT", "product_1 .. product_K; anything else is a bad parse of PRODUCT", "ours"),
    ("PRICE", f"a positive number of dollars, at most two decimals, at most {MAX_PRICE:,.0f}; no commas, units or "
     "ranges", "ours"),
    ("MESSAGE", f"non-empty, at most {MAX_MESSAGE_CHARS} characters, no line starting with a part label", "ours"),
    ("refused offers", ", ".join(VIOLATIONS) + ": counted by kind, no effect", "constraint adherence: theirs; "
     "the kinds: ours"),
    ("buyers", "; ".join(f"{n}: accepts iff value - price >= {r.min_share:g} x value and no standing offer gives "
                         "it more" for n, r in RULES.items()) + " (pool: the training buyers; picky: held out)",
     "ours"),
    ("seller's reward", f"its surplus over the optimal welfare, in [0, 1], minus {RewardConfig().refusal_penalty:g} x "
     "the refused share of its messages", "surplus as RLVR reward: theirs; normaliser and penalty: ours"),
    ("allocation quality", "realised welfare / the welfare of the optimal assignment (linear_sum_assignment, at most "
     "turn-budget sales)", "theirs (metric); the oracle: ours"),
    ("scenario seeds", f"pure functions of (market, seed); evaluation from {EVAL_SEED_START:,}, the same seeds in "
     "every market", "ours"),
], columns=["rule", "value", "source"]).set_index("rule")
display(B.save_table(BookTable("multi_product_rules", "Multi-product market: rules and their source", rules,
                               "Every value is read from the game's constants (negolib.games.multi_product).")))

ROLE = {"base": "training market", "small": "unseen size (smaller)", "large": "unseen size (larger)",
        "correlated": "correlated valuations", "cheap": "prices 10x below training",
        "premium": "prices 10x above training"}
markets = pd.DataFrame([{"market": n, "K": c.n_products, "M": c.n_buyers, "turn budget": c.turn_budget, "rho": c.rho,
                         "scale": c.scale, "arm": ROLE.get(n, "")} for n, c in MARKETS.items()]).set_index("market")
display(B.save_table(BookTable("multi_product_markets", "Markets: the training market and the generalisation arms",
                               markets, "Sizes, valuation correlation and price scale of each market (ours).")))

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
for seller in T.agents:  # one match each (seller vs the pool), all in one resumable matches file
    res = run_tournament(game, [seller], T.seeds_per_tier, B.paths.game_tournament("multi_product"),
                         seed=T.agent_seed, progress=False)
latest = {(m.seller, m.buyer, m.scenario_key): m for m in read_matches(res.path)}  # a replayed match: latest wins
records = {s: [m.record for (a, b, _), m in latest.items() if a == b == s] for s in T.agents}
scripted = pd.concat([episodes_frame(records[s], s, "pool") for s in T.agents], ignore_index=True)
table = stage_table(scripted, list(T.agents), S.n_resamples, S.seed, S.alpha)
print(f"{len(scripted)} episodes ({', '.join(f'{s}: {len(records[s])}' for s in T.agents)}), "
      f"{int((~scripted['valid'].astype(bool)).sum())} error episodes left out; "
      f"{scripted['cluster'].nunique()} seed clusters")

# %%
LABEL = {"oracle": "oracle (upper bound: reads valuations)", "oracle_surplus": "oracle_surplus (upper bound)"}
shown = format_stage_table(table).rename(index=lambda s: LABEL.get(s, s))
display(B.save_table(BookTable(
    "multi_product_sellers", "Scripted sellers vs the buyer pool, every market pooled (seed-cluster 95% CI)", shown,
    "normalised_surplus: seller surplus / optimal welfare; revenue_ratio: revenue / best feasible revenue; "
    "allocation_quality: realised welfare / optimal assignment; constraint_adherence: valid messages / messages; "
    "'a - b' rows: paired differences.", data=table)))
cons = pd.concat({s: market_metrics(scripted[scripted["stage"] == s], overall=True).set_index("market").loc["all"]
                  for s in T.agents}, axis=1).T
cols = ["n", "constraint_adherence", "bad_parses", "offers_sold_product", "offers_to_buyer_who_bought",
        "offers_below_cost", "sold_twice", "sales_below_cost", "overshoots"]
display(B.save_table(BookTable("multi_product_constraints", "Constraint adherence of the scripted sellers (counts)",
                               cons[cols].round(3), "sold_twice and sales_below_cost re-check the realised sales.",
                               data=cons[cols].reset_index(names="seller"))))

# %% [markdown]
# ## The generalisation arms
# The same sellers in every market: the training market, unseen sizes, correlated valuations and
# price ranges ten times below and above the training range. The scripted sellers were not trained,
# so for them the arms show how hard each market is; for a trained model they show generalisation.

# %%
arm = table[(table["kind"] == "stage") & (table["market"] != "all")]
arm_show = arm.pivot_table(index="market", columns=["metric", "stage"], values="estimate", sort=False)
arm_cells = pd.DataFrame({(m, s): [fmt_ci(*arm[(arm["market"] == mk) & (arm["stage"] == s) & (arm["metric"] == m)]
                                          [["estimate", "ci_low", "ci_high"]].iloc[0], signed=False)
                                   for mk in arm_show.index]
                          for m in ("normalised_surplus", "allocation_quality") for s in T.agents},
                         index=arm_show.index)
display(B.save_table(BookTable("multi_product_arms", "Scripted sellers by market arm (seed-cluster 95% CI)", arm_cells,
                               "Columns: (metric, seller).", data=arm)))
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
order = list(arm_show.index)
for ax, metric in zip(axes, ("normalised_surplus", "allocation_quality")):
    width = 0.8 / len(T.agents)
    for j, s in enumerate(T.agents):
        r = arm[(arm["stage"] == s) & (arm["metric"] == metric)].set_index("market").reindex(order)
        x = np.arange(len(order)) + (j - (len(T.agents) - 1) / 2) * width
        err = np.vstack([r["estimate"] - r["ci_low"], r["ci_high"] - r["estimate"]]).clip(0)
        ax.bar(x, r["estimate"], width, yerr=err, capsize=2, label=LABEL.get(s, s))
    ax.set_xticks(np.arange(len(order)), order, rotation=30)
    ax.set_title(metric.replace("_", " "))
    ax.set_ylim(0, 1.05)
axes[0].legend(fontsize=8, loc="lower left")
fig.tight_layout()
B.save_figure(fig, "multi_product_arms")
plt.show()
surplus = arm[arm["metric"] == "normalised_surplus"].pivot(index="stage", columns="market", values="estimate")
priced = [m for m in ("cheap", "premium") if m in surplus and "base" in surplus]
if priced:
    gap = surplus[priced].sub(surplus["base"], axis=0).abs().max(axis=1)
    print("largest difference of a seller's normalised surplus between a price arm and the training market: "
          + ", ".join(f"{s} {gap[s]:.4f}" for s in T.agents) + " (the price arms draw the same scenarios at another "
          "scale: a seller acting on prices relative to list prices and costs scores the same up to rounding to the "
          "cent; the random seller seeds its draws with the market's name, so its episodes differ)")

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
base_dir = local_folder(LM.base, P)  # a packaged model converted once, or the tiny model written under outputs
stages, start_dir = {"base": base_dir}, base_dir
if G.sft is not None:
    sft_config = G.sft.config
    examples = sft_dataset(res.path, select=G.sft.select, min_share=G.sft.min_share, max_examples=G.sft.max_examples)
    with summarize_warnings():  # e.g. conversations cut to max_length
        sft = run_sft(base_dir, examples, B.paths.game_training("multi_product", "sft"), sft_config, progress=True)
    print(f"SFT: {sft.examples} conversations (the best clean sale of each scenario: "
          f"{', '.join(sorted({e.seller for e in examples}))}; mean normalised surplus "
          f"{np.mean([e.payoff for e in examples]):.3f}), {sft.steps} optimizer steps, {sft.seconds:.0f} s; "
          f"seller-message loss {sft.loss_before:.3f} -> {sft.loss_after:.3f}")
    stages["SFT"] = start_dir = sft.model_dir
TRAINED = "SFT+GRPO" if G.sft is not None else "GRPO"
if G.train:
    with summarize_warnings():  # e.g. prompts cut to the recipe's max_prompt_tokens
        grpo = run_grpo(start_dir, B.paths.game_training("multi_product", "grpo"), grpo_config, opponent=LM.opponent,
                        progress=True, resume=False)
    stages[TRAINED] = grpo.checkpoint
    log = pd.DataFrame(grpo.log)
    print(f"GRPO: {grpo.steps} steps against {LM.opponent!r} on {', '.join(grpo_config.markets)}; final checkpoint "
          f"{grpo.checkpoint.name}")
    display(log[[c for c in ("step", "reward", "score", "deal_rate", "bad_parse_rate", "truncated_rate", "kl",
                                           "seconds") if c in log]]
            .round(3))
else:
    print("GRPO: not run on this profile (games.multi_product.train is false): the base model is evaluated alone")

# %%
with summarize_warnings():  # e.g. prompts cut to the model's prompt cap
    lm_eps = play_stages(stages, [LM.opponent], LM.eval_seeds_per_tier, LM.eval_tiers, P.seed,
                         sampling_config(LM.base, P.seed), max_batch=LM.base.batch_size or 16,
                         prompt_cap=LM.base.prompt_cap or 2048, progress=True)
lm_table = stage_table(lm_eps, list(stages), S.n_resamples, S.seed, S.alpha)
display(B.save_table(BookTable(
    "multi_product_lm", f"The language-model seller before and after training ({LM.base.display}; ours)",
    format_stage_table(lm_table), f"Against {LM.opponent!r}, {LM.eval_seeds_per_tier} seed clusters in "
    f"{', '.join(LM.eval_tiers or MARKETS)}; {1 - S.alpha:.0%} seed-cluster intervals, differences paired by scenario.",
    data=lm_table)))
refused = lm_eps.groupby("stage", sort=False)[["messages", "valid_messages", "bad_parses", "offers_sold_product",
                                                "offers_to_buyer_who_bought", "offers_below_cost", "n_sales"]].sum()
display(refused.reindex(list(stages)))

# %% [markdown]
# ## Their findings beside ours
# The source paper's abstract states its findings **qualitatively and gives no numbers**, so the
# "theirs" column quotes or paraphrases the abstract and holds no number; we invent none. "Ours" is
# what this run measured (a direction is stated only where the interval excludes zero), or says
# that this profile did not measure it.

# %%
def ci_cell(tbl, kind, stage, baseline, market, metric):
    """``estimate [low, high]`` of one row of a stage table (signed for a difference)."""
    r = tbl.set_index(["kind", "stage", "baseline", "market", "metric"]).loc[(kind, stage, baseline, market, metric)]
    return fmt_ci(r["estimate"], r["ci_low"], r["ci_high"], signed=kind == "difference")


def ours_change(metric, market="all"):
    """The trained stage - base on ``metric`` as measured here (a direction only where the interval excludes
    zero), or why not."""
    if TRAINED not in stages:
        return "not measured: no GRPO on this profile"
    r = lm_table.set_index(["kind", "stage", "baseline", "market", "metric"]).loc[
        ("difference", TRAINED, "base", market, metric)]
    if pd.isna(r["estimate"]):
        return "not measured (undefined on these episodes)"
    word = "no clear change" if r["ci_low"] <= 0 <= r["ci_high"] else ("higher" if r["estimate"] > 0 else "lower")
    return f"{TRAINED} - base {word}: {ci_cell(lm_table, 'difference', TRAINED, 'base', market, metric)}"


frontier = [a for a in T.agents if ":" in a]
unseen = [m for m in (LM.eval_tiers or MARKETS) if m not in grpo_config.markets]
adherence = "; ".join(f"{s}: {ci_cell(lm_table, 'stage', s, '', 'all', 'constraint_adherence')}" for s in stages)
if frontier:
    versus = "; ".join(f"{a}: surplus {ci_cell(table, 'stage', a, '', 'all', 'normalised_surplus')}, allocation "
                       f"{ci_cell(table, 'stage', a, '', 'all', 'allocation_quality')}" for a in frontier)
    versus = f"frontier sellers in the tournament: {versus} (the trained model played other seeds: not paired)"
else:
    versus = "not measured: no frontier model sold in this profile's tournament"
if unseen and TRAINED in stages:
    general = "; ".join(f"{m}: {ours_change('normalised_surplus', m)}" for m in unseen) + " (normalised surplus)"
else:
    general = "not measured for the language model: its evaluation used only training markets on this profile"
findings = pd.DataFrame([
    ("a four-part protocol maps language to a parsable, regulated decision space; constraint adherence is measured",
     f"constraint adherence {adherence}"),
    ("the trained seller learns to match limited inventory to buyers more effectively",
     f"allocation quality: {ours_change('allocation_quality')}"),
    ("RLVR anchored on the economic outcome trains the seller's surplus extraction",
     f"normalised surplus: {ours_change('normalised_surplus')}"),
    ("it matches or outperforms trillion-parameter frontier models in surplus extraction and allocation quality",
     versus),
    ("the learned strategies generalise to unseen market structures, correlated valuations and price ranges",
     general),
], columns=["theirs (abstract, qualitative; no numbers given)", "ours (this run)"])
display(B.save_table(BookTable("multi_product_findings", "The source paper's qualitative findings (theirs) beside ours",
                               findings.set_index("theirs (abstract, qualitative; no numbers given)"),
                               "Theirs: second abstract of related_systems_abstracts.txt. Ours: measured above.")))
if P.profile == "smoke":
    print("smoke profile: the language model is a tiny random LM; its rows check the pipeline and are not findings")

# %%
print(f"notebook 12 ran {time.perf_counter() - t_start:.0f} s on profile {P.profile!r} (this kernel, this run)")

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

from negolib.exercises import expect
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
from negolib.exercises import expect
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
