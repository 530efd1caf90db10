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
# # 4. The paired evaluation (paper §4, App. K)
#
# Every seller arm plays the identical scenario set against every held-out buyer, in the evaluation
# environment (the full scaffold re-rendered every turn, terms attached to an accept ignored, 12
# rounds). Departure from the paper's protocol (ours): an ACCEPT closes only on the counterpart's
# parsed COUNTER (notebook 1); an ACCEPT with nothing to accept is an invalid action, counted per arm
# as `invalid_accept_rate`. The protocol (arms, seeds, buyers, metrics, primary family, bootstrap settings) is
# **frozen in a file before any arm runs** and its hash is stamped on every transcript; departures
# go to a deviation log. A **pilot gate** (a few episodes per arm x buyer cell, zero bad parses
# required) runs first. A **dry run** states the API calls and cost before any API arm starts.
# Transcripts are appended atomically and the run is resumable: re-executing skips complete episodes
# (and never re-bills an API call). Notebooks 5-9 read the transcripts written here.

# %%
import pandas as pd
from IPython.display import display

from negolib.agents.factory import ModelCache
from negolib.analysis.serving import serving_frame
from negolib.book import open_book, summarize_warnings
from negolib.cost import dry_run
from negolib.evaluation import (
    DeviationLog,
    build_specs,
    evaluate_arms,
    freeze,
    pilot_gate,
    protocol_from_params,
    short_hash,
)
from negolib.report.booktable import simple_table
from negolib.report.evaluation import pilot_gate_table, prompt_cap_table
from negolib.training.runs import build_agents
from negolib.transcripts import TranscriptStore

# %% tags=["parameters"]
params_path: str = "../params/smoke.yaml"  # the profile to run (the book injects its own)
output_dir: str = ""  # empty: write under outputs/<profile> as the profile says

# %%
B = open_book(params_path, output_dir or None)
P = B.params
print(f"profile {P.profile!r}: {len(P.eval_arms())} arms x {len(P.evaluation.buyers)} buyers")

# %% [markdown]
# ## Freeze the protocol
# Written once to `evaluation/protocol.yaml` with its SHA-256; a later run with a *different* profile
# refuses to overwrite it (start a fresh output folder, or log the departure as a deviation).

# %%
protocol = protocol_from_params(P)
protocol_file = B.paths.protocol
phash = freeze(protocol, protocol_file)
deviations = DeviationLog.for_protocol(protocol_file)
print(f"protocol {short_hash(phash)} frozen at {protocol_file}")
print(f"{len(build_specs(protocol))} paired episodes in the protocol; primary family: {list(protocol.primary)}")

# %% [markdown]
# ## Which arms can play now
# A `trained` arm needs its checkpoint from notebook 3; an arm that cannot play yet is listed with the
# reason and stays in the protocol (a later run completes it).

# %%
ready, missing = B.ready_arms()
for arm, why in missing.items():
    print(f"not evaluated now: {arm}: {why}")
print("arms evaluated now:", ", ".join(ready))

# %% [markdown]
# ## Dry run: expected API calls and cost (App. G)
# Only API-served parties are billed; the estimate uses the paper-derived default of ~10 turns per
# episode and ~1.7k input / 235 output tokens per call (`negolib.cost`).

# %%
store = TranscriptStore(B.paths.transcripts)
prices, unpriced = B.prices()
if B.api_models():
    if unpriced:
        print(f"no price configured for {unpriced}: their USD is left out (set params.prices); calls and "
              "tokens are counted")
    est = dry_run(build_specs(protocol, ready), B.api_models(), prices, done=store.completed_keys())
else:
    print("no API-served party in this profile: nothing is billed")

# %% [markdown]
# ## Build the agents
# Local models load once and are shared; API agents read their key from the environment variable the
# profile names (a missing key stops here, before any call is made).

# %%
agents = build_agents(P, ready + list(P.evaluation.buyers), cache=ModelCache())
print({name: agent.backend for name, agent in agents.items()})

# %% [markdown]
# ## Pilot gate
# A few episodes per arm x buyer cell, spread over domains; a cell passes with zero bad parses over
# all its turns and zero error rows. A failed cell does not abort the run: it is logged as a
# deviation with the decision taken (the paper ran its failing 10x LR x Sonnet 5 cell regardless).

# %%
with summarize_warnings():  # e.g. prompts truncated to the arm's prompt cap
    pilot = pilot_gate(protocol, agents, P.evaluation.pilot_episodes, arms=ready,
                       store=TranscriptStore(B.paths.pilot_transcripts), log=B.paths.pilot_log, progress=True)
if not pilot.passed:
    pilot.log_failures(deviations, "ran regardless (the pilot gate is logged, not enforced)", phash)
display(B.save_table(pilot_gate_table(pilot.to_frame().set_index(["arm", "buyer"]), B.paper)))

# %% [markdown]
# ## Run the evaluation (resumable)

# %%
with summarize_warnings():
    result = evaluate_arms(protocol, agents, store, progress=True, arms=ready, deviations=deviations,
                           max_batch=P.evaluation.batch_size)
print(f"played {len(result.records)} episodes now, {result.skipped} were already complete; "
      f"{len(result.errors)} error rows (a re-run completes them)")

# %% [markdown]
# ## What was played
# Episodes per arm and buyer in the transcript store, the seller turns where an arm's prompt cap bound,
# and the deviation log so far. A self-served seller is evaluated with its arm's context length (the
# paper's 16k serving context, or the model's if shorter, less one reply), not the training driver's
# 2,048-token cap; a turn that still met its cap (oldest history dropped, or the prompt cut) is logged in
# its transcript record and counted here.

# %%
df = B.episodes(include_errors=True)
counts = pd.crosstab(df["arm"], [df["buyer"], df["status"]])
display(B.save_table(simple_table("episodes_played", "Episodes in the transcript store", counts)))
display(B.save_table(prompt_cap_table(serving_frame(df))))
log = deviations.deviations_frame()
print("deviation log:", "empty" if log.empty else "")
if not log.empty:
    display(B.save_table(simple_table("deviations", "Deviation log", log)))
