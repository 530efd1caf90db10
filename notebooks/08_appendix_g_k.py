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
# # 8. Serving, cost and the protocol record (paper App. G, K)
#
# **Table 7** sets each arm's score beside what it takes to serve; the **cost per episode** comes
# from the token counts every turn of every transcript records (the paper's reference point: $0.069
# per frontier-seller episode). App. K is the protocol's own record: the frozen protocol and its
# hash on every transcript, the **deviation log**, the **pilot-gate** log, the Monte Carlo error of
# the interval endpoints (and which contrasts were re-run at 10^5 resamples) and **Table 9**
# (Table 2 with every paired interval).

# %%
import pandas as pd
from IPython.display import display

from negolib.book.context import open_results
from negolib.study.analysis.contrasts import trained_pairs
from negolib.study.analysis.cost import cost_by_arm
from negolib.study.analysis.decomposition import decomposition
from negolib.study.analysis.quoted import quoted_contrasts
from negolib.study.analysis.read_points import read_validation
from negolib.study.analysis.serving import size_topology
from negolib.study.cost import cost_frame
from negolib.study.diagnostics import openings_table
from negolib.study.evaluation import DeviationLog, PilotLog, check_protocol_hashes, load_protocol, protocol_hash
from negolib.study.report.appendix_g_k import cost_table, mc_error_table, table7, table9
from negolib.study.report.booktable import simple_table
from negolib.study.report.paper_checks import read_validation_table, topology_table
from negolib.study.report.quoted import rerun_table
from negolib.study.runs import describe_models

# %% tags=["parameters"]
params_path: str = "../params/smoke.yaml"  # the profile to run (the book injects its own)
output_dir: str = ""  # empty: write under outputs/<profile> as the profile says

# %%
book, params, paper, results, records, imported = open_results(params_path, output_dir)
print(f"{len(records)} transcripts over {len(results.arms)} arms")

# %% [markdown]
# ## Table 7: score beside the serving footprint
# Ours: parameter count and weight size of each language-model arm as loaded here (CPU, float32 in
# the embedded profiles); scripted arms need no accelerator. The paper's rows are its 48 GB devices.

# %%
lm_arms = [a for a in results.arms if params.is_lm(a) and params.arms[a].backend in ("hf", "trained", "vllm")]
serving = {r["arm"]: r for r in describe_models(params, lm_arms) if "params" in r}
serving.update({a: {"device": "CPU (scripted)"} for a in results.arms if not params.is_lm(a)})
display(book.save_table(table7(results.est, serving, params, paper)))

# %% [markdown]
# Table 8's topology: how each size is served in evaluation (backend, device, tensor-parallel degree, memory
# fraction) and trained (tensor-parallel degree and generation memory fraction of the runs starting from it),
# beside the paper's accelerators, tensor-parallel degree and memory fraction.

# %%
display(book.save_table(topology_table(size_topology(params), paper)))

# %% [markdown]
# ## Cost per episode (App. G)
# Tokens billed per episode (both parties) from the transcripts; USD where `params.prices` lists the
# model. Scripted and self-served parties are not billed.

# %%
prices, unpriced = book.prices()
api = book.api_models()
costs = cost_frame(records, prices, api) if records else pd.DataFrame()
display(book.save_table(cost_table(cost_by_arm(costs, params, api, unpriced), paper)))

# %% [markdown]
# ## The frozen protocol and its hash on every transcript (App. K)
# Every record carries the hash of the protocol it was played under; records of another protocol
# are refused unless a logged deviation names their arm.

# %%
protocol_file = book.paths.protocol
if protocol_file.exists():
    phash = protocol_hash(load_protocol(protocol_file))
    deviations = DeviationLog.for_protocol(protocol_file)
    display(check_protocol_hashes(records, phash, deviations))
else:
    print("no frozen protocol yet: run notebook 04_evaluation first")

# %% [markdown]
# ## Deviation log and pilot gate
# Every departure from the frozen protocol, with the arms it applies to, and every pilot-gate cell.

# %%
if protocol_file.exists():
    dev = deviations.deviations_frame()
    display(book.save_table(simple_table("deviation_log", "Deviation log (App. K)", dev)) if len(dev)
            else "deviation log: no departures logged")
if book.paths.pilot_log.exists():
    display(book.save_table(simple_table("pilot_log", "Pilot-gate log", PilotLog(book.paths.pilot_log).frame())))

# %% [markdown]
# ## Monte Carlo error of the interval endpoints
# The binomial/order-statistic standard error of each endpoint. With `statistics.refine` on (ours, beyond the
# paper: off in paper.yaml), contrasts whose endpoint lay within three Monte Carlo SEs of 0 were re-run at
# `statistics.refine_resamples` (`refined (ours)`). The paper: about ±0.001 at 10^4 resamples, ±0.0001 after
# re-running the two contrasts below at 10^5.

# %%
display(book.save_table(mc_error_table(results.contrasts, paper)))

# %% [markdown]
# App. K re-runs the two contrasts whose lower bound sat inside the 10^4 Monte Carlo band (the gain difference
# within the conventional pair, and 31B 3× LR − 12B 3× LR) at 10^5 resamples with the same seed. Ours: the same two
# at the profile's `n_resamples` and at its `refine_resamples`, each lower bound with its Monte Carlo SE.

# %%
display(book.save_table(rerun_table(quoted_contrasts(results.an, params, sections=("K",)), paper)))

# %% [markdown]
# ## Validation behind the read points (App. K)
# Reads follow the step-matching rule, not validation; App. K gives the validation values behind each substituted
# or off-peak read. Ours: each trained arm's validation S at its read step, its run's peak and last step.

# %%
runs = [(r, s) for r, spec in params.training.runs.items() for s in spec.seeds]
vals = {(r, s): book.training_log(r, s, "validation") for r, s in runs}
trained_arms = [a for a in results.arms if params.arms[a].backend == "trained"]
display(book.save_table(read_validation_table(read_validation(vals, params, trained_arms), params, paper)))

# %% [markdown]
# ## Table 9: Table 2 with every paired interval

# %%
opens = openings_table(records, scenarios=imported).set_index("arm")["opens_with_terms"].to_dict() if records else {}
split = decomposition(results.an, trained_pairs(params), scenarios=imported)
display(book.save_table(table9(split, opens, params, paper)))

# %% [markdown]
# ## Exercises
# Each exercise is a task (the markdown), sometimes given material (a cell tagged `exercise`), a
# solution (tagged `solution`) and a check (tagged `check`). In the book the solutions run and the
# checks pass; in the course handout (`python -m negolib book handout`) every solution is replaced by
# `...  # your code here` and its check fails, with a message saying what is missing, until you
# answer. Each exercise runs on its own: you need none of the cells above it.
#
# ### Exercise 8.1: the cost of an episode from its token counts
# Below, three episodes as the transcripts record them (every turn with the tokens its call billed) and
# a price table in USD per million input and output tokens. The seller is an API model in all three;
# the buyer is an API model in the first two and a scripted buyer (never billed) in the third. Compute
# the USD each episode cost, both sides together, `ex81_usd` (a list of three), and the share of the
# three episodes' total cost that paid for *input* tokens, `ex81_input_share`. A good answer bills each
# party at its own model's prices, leaves the scripted party out, matches `negolib.study.cost.cost_frame`,
# and says why input dominates although output tokens cost several times more each (what does every
# turn's prompt contain?).

# %% tags=["exercise"]
from negolib.params import Price

ex81_prices = {"frontier-a": Price(input=1.25, output=10.0), "frontier-b": Price(input=3.0, output=15.0)}
ex81_models = {"api_seller": "frontier-a", "api_buyer": "frontier-b"}  # agent name -> the priced model it calls


def ex81_episode(seed: int, n_turns: int, buyer: str) -> dict:
    """An episode record: the seller opens; each call re-sends the growing conversation as its input."""
    turns = [{"turn": t, "role": "seller" if t % 2 else "buyer", "input_tokens": 1_400 + 260 * (t - 1),
              "output_tokens": 180 + 7 * t} for t in range(1, n_turns + 1)]
    return {"arm": "frontier", "seller": "api_seller", "buyer": buyer, "domain": "car", "seed": seed,
            "status": "deal", "turns": turns}


ex81_records = [ex81_episode(5_000_000, 10, "api_buyer"), ex81_episode(5_000_001, 7, "api_buyer"),
                ex81_episode(5_000_002, 12, "buyer_linear")]

# %% tags=["solution"]
# Exercise 8.1: USD per episode (both sides) and the share of the cost that paid for input tokens.
ex81_usd, ex81_input_usd = [], 0.0
for rec in ex81_records:
    usd = 0.0
    for t in rec["turns"]:
        model = ex81_models.get(rec[t["role"]])  # None: scripted, not billed
        if model is None:
            continue
        price = ex81_prices[model]
        usd += (t["input_tokens"] * price.input + t["output_tokens"] * price.output) / 1e6
        ex81_input_usd += t["input_tokens"] * price.input / 1e6
    ex81_usd.append(usd)
ex81_input_share = ex81_input_usd / sum(ex81_usd)
print(f"USD per episode: {[round(u, 5) for u in ex81_usd]}; input tokens paid {ex81_input_share:.0%} of it")

# %% tags=["check"]
import numpy as np

from negolib.book.exercises import expect
from negolib.study.cost import cost_frame

ex81_usd, ex81_input_share = expect(globals(), "ex81_usd", "ex81_input_share", exercise="8.1")
ex81_truth = cost_frame(ex81_records, ex81_prices, ex81_models)
assert np.shape(ex81_usd) == (3,), "exercise 8.1: ex81_usd holds one cost per episode"
assert np.allclose(ex81_usd, ex81_truth["usd"], rtol=0, atol=1e-12),\
    (f"exercise 8.1: {np.round(ex81_usd, 5).tolist()} are not the episodes' costs "
     f"({np.round(ex81_truth['usd'], 5).tolist()}): bill each side at its model's price, the scripted side nothing")
ex81_in = sum(ex81_truth[f"{r}_input_tokens"] @ ex81_truth[f"{r}_model"].map(
    lambda m: ex81_prices[m].input / 1e6 if isinstance(m, str) else 0.0) for r in ("seller", "buyer"))
assert abs(ex81_input_share - ex81_in / ex81_truth["usd"].sum()) < 1e-9,\
    "exercise 8.1: the input share is the USD paid for input tokens over the total USD"
assert ex81_input_share > 0.5, "exercise 8.1: here input tokens should pay for most of the cost"
print("exercise 8.1: correct")

# %% [markdown]
# ### Exercise 8.2: the Monte Carlo error of an interval's endpoint
# A percentile interval from B bootstrap resamples is itself an estimate: with another bootstrap seed
# its endpoints move. App. K reports each endpoint's Monte Carlo standard error from the order
# statistics: the endpoint at level q (0.025 or 0.975) has an uncertainty in *level* of
# s = sqrt(q (1 - q) / B), so its SE is half the distance between the quantiles at q - s and q + s.
# Below, a bootstrap distribution of B = 10,000 contrasts. Compute the interval `ex82_ci` (a pair),
# the SEs of its two endpoints `ex82_se` (a pair), and the number of resamples that would bring the
# lower endpoint's SE down to 0.0001, `ex82_b_needed` (an int; the SE shrinks as 1 / sqrt(B)). A good
# answer uses numpy's default (linear) quantiles, matches `negolib.stats.summarize`, and checks its SE
# against the spread of the lower endpoint over fresh bootstrap-sized draws.

# %% tags=["exercise"]
import numpy as np

ex82_dist = np.random.default_rng(4).normal(0.021, 0.011, 10_000)  # B = 10,000 resampled contrasts

# %% tags=["solution"]
# Exercise 8.2: the 95% interval, the Monte Carlo SE of each endpoint, and the B for an SE of 0.0001.
import math

ex82_B = ex82_dist.size
ex82_ci, ex82_se = [], []
for q in (0.025, 0.975):
    s = math.sqrt(q * (1 - q) / ex82_B)
    ex82_ci.append(float(np.quantile(ex82_dist, q)))
    lo, hi = np.quantile(ex82_dist, [max(0.0, q - s), min(1.0, q + s)])
    ex82_se.append(float(hi - lo) / 2)
ex82_ci, ex82_se = tuple(ex82_ci), tuple(ex82_se)
ex82_b_needed = math.ceil(ex82_B * (ex82_se[0] / 0.0001) ** 2)
print(f"95% CI [{ex82_ci[0]:+.5f}, {ex82_ci[1]:+.5f}], endpoint SEs {ex82_se[0]:.5f} / {ex82_se[1]:.5f}; "
      f"an SE of 0.0001 needs about {ex82_b_needed:,} resamples")

# %% tags=["check"]
import math

import numpy as np

from negolib.book.exercises import expect
from negolib.stats import summarize

ex82_ci, ex82_se, ex82_b_needed = expect(globals(), "ex82_ci", "ex82_se", "ex82_b_needed", exercise="8.2")
ex82_s = summarize(ex82_dist)
assert np.allclose(ex82_ci, (ex82_s.ci_low, ex82_s.ci_high), atol=1e-12),\
    "exercise 8.2: the interval is the 2.5 and 97.5 percentiles (numpy's default linear quantiles)"
assert np.allclose(ex82_se, (ex82_s.se_low, ex82_s.se_high), atol=1e-12),\
    (f"exercise 8.2: endpoint SEs {np.round(ex82_se, 6).tolist()} are not summarize's "
     f"({ex82_s.se_low:.6f}, {ex82_s.se_high:.6f}): half the gap between the quantiles at q -+ sqrt(q(1-q)/B)")
ex82_lows = [np.quantile(np.random.default_rng(100 + i).normal(0.021, 0.011, 10_000), 0.025) for i in range(200)]
assert 0.7 < np.std(ex82_lows, ddof=1) / ex82_se[0] < 1.3,\
    "exercise 8.2: the lower endpoint's SE should match its spread over fresh draws"
ex82_b = 10_000 * (ex82_s.se_low / 0.0001) ** 2
assert isinstance(ex82_b_needed, int) and abs(ex82_b_needed - ex82_b) <= 1,\
    (f"exercise 8.2: about {math.ceil(ex82_b):,} resamples, not {ex82_b_needed}: B grows with the square of "
     "SE / 0.0001")
print("exercise 8.2: correct")
