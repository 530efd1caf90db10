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

from negolib.analysis.contrasts import trained_pairs
from negolib.analysis.cost import cost_by_arm
from negolib.analysis.decomposition import decomposition
from negolib.analysis.quoted import quoted_contrasts
from negolib.book import open_book
from negolib.cost import cost_frame
from negolib.diagnostics import openings_table
from negolib.evaluation import DeviationLog, PilotLog, check_protocol_hashes, load_protocol, protocol_hash
from negolib.report.appendix_g_k import cost_table, mc_error_table, table7, table9
from negolib.report.booktable import simple_table
from negolib.report.quoted import rerun_table
from negolib.training.runs import describe_models

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
# ## Table 7: score beside the serving footprint
# Ours: parameter count and weight size of each language-model arm as loaded here (CPU, float32 in
# the embedded profiles); scripted arms need no accelerator. The paper's rows are its 48 GB devices.

# %%
lm_arms = [a for a in R.arms if P.is_lm(a) and P.arms[a].backend in ("hf", "trained", "vllm")]
serving = {r["arm"]: r for r in describe_models(P, lm_arms) if "params" in r}
serving.update({a: {"device": "CPU (scripted)"} for a in R.arms if not P.is_lm(a)})
display(B.save_table(table7(R.est, serving, P, paper)))

# %% [markdown]
# ## Cost per episode (App. G)
# Tokens billed per episode (both parties) from the transcripts; USD where `params.prices` lists the
# model. Scripted and self-served parties are not billed.

# %%
prices, unpriced = B.prices()
api = B.api_models()
costs = cost_frame(records, prices, api) if records else pd.DataFrame()
display(B.save_table(cost_table(cost_by_arm(costs, P, api, unpriced), paper)))

# %% [markdown]
# ## The frozen protocol and its hash on every transcript (App. K)
# Every record carries the hash of the protocol it was played under; records of another protocol
# are refused unless a logged deviation names their arm.

# %%
protocol_file = B.paths.protocol
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
    display(B.save_table(simple_table("deviation_log", "Deviation log (App. K)", dev)) if len(dev)
            else "deviation log: no departures logged")
if B.paths.pilot_log.exists():
    display(B.save_table(simple_table("pilot_log", "Pilot-gate log", PilotLog(B.paths.pilot_log).frame())))

# %% [markdown]
# ## Monte Carlo error of the interval endpoints
# The binomial/order-statistic standard error of each endpoint; contrasts whose endpoint lay within
# three Monte Carlo SEs of 0 were re-run automatically at 10^5 resamples (`refined`). The paper:
# about ±0.001 at 10^4 resamples, ±0.0001 after re-running two contrasts at 10^5.

# %%
display(B.save_table(mc_error_table(R.contrasts, paper)))

# %% [markdown]
# App. K re-runs the two contrasts whose lower bound sat inside the 10^4 Monte Carlo band (the gain difference
# within the conventional pair, and 31B 3× LR − 12B 3× LR) at 10^5 resamples with the same seed. Ours: the same two
# at the profile's `n_resamples` and at its `refine_resamples`, each lower bound with its Monte Carlo SE.

# %%
display(B.save_table(rerun_table(quoted_contrasts(R.an, P, sections=("K",)), paper)))

# %% [markdown]
# ## Table 9: Table 2 with every paired interval

# %%
opens = openings_table(records).set_index("arm")["opens_with_terms"].to_dict() if records else {}
display(B.save_table(table9(decomposition(R.an, trained_pairs(P)), opens, P, paper)))
