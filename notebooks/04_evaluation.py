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
from negolib.book.context import open_book, summarize_warnings
from negolib.core.transcripts import TranscriptStore
from negolib.study.analysis.contrasts import extension_fires
from negolib.study.analysis.serving import serving_frame
from negolib.study.cost import dry_run
from negolib.study.evaluation import (
    DeviationLog,
    build_specs,
    evaluate_arms_apart,
    freeze,
    pilot_gate,
    protocol_from_params,
    run_held_out_extension,
    short_hash,
)
from negolib.study.report.booktable import simple_table
from negolib.study.report.evaluation import pilot_gate_table, prompt_cap_table
from negolib.study.runs import LazyAgents

# %% tags=["parameters"]
params_path: str = "../params/smoke.yaml"  # the profile to run (the book injects its own)
output_dir: str = ""  # empty: write under outputs/<profile> as the profile says

# %%
book = open_book(params_path, output_dir or None)
params = book.params
print(f"profile {params.profile!r}: {len(params.eval_arms())} arms x {len(params.evaluation.buyers)} buyers")

# %% [markdown]
# ## Freeze the protocol
# Written once to `evaluation/protocol.yaml` with its SHA-256; a later run with a *different* profile
# refuses to overwrite it (start a fresh output folder, or log the departure as a deviation).

# %%
protocol = protocol_from_params(params)
protocol_file = book.paths.protocol
phash = freeze(protocol, protocol_file)
deviations = DeviationLog.for_protocol(protocol_file)
print(f"protocol {short_hash(phash)} frozen at {protocol_file}")
print(f"{len(build_specs(protocol))} paired episodes in the protocol; primary family: {list(protocol.primary)}")

# %% [markdown]
# ## Which arms can play now
# A `trained` arm needs its checkpoint from notebook 3; an arm that cannot play yet is listed with the
# reason and stays in the protocol (a later run completes it).

# %%
ready, missing = book.ready_arms()
for arm, why in missing.items():
    print(f"not evaluated now: {arm}: {why}")
print("arms evaluated now:", ", ".join(ready))

# %% [markdown]
# ## Dry run: expected API calls and cost (App. G)
# Only API-served parties are billed; the estimate uses the paper-derived default of ~10 turns per
# episode and ~1.7k input / 235 output tokens per call (`negolib.study.cost`).

# %%
store = TranscriptStore(book.paths.transcripts)
prices, unpriced = book.prices()
if book.api_models():
    if unpriced:
        print(f"no price configured for {unpriced}: their USD is left out (set params.prices); calls and "
              "tokens are counted")
    est = dry_run(build_specs(protocol, ready), book.api_models(), prices, done=store.completed_keys())
else:
    print("no API-served party in this profile: nothing is billed")

# %% [markdown]
# ## The agents
# Each agent is built when it first plays (`LazyAgents`): local models load once and are shared; an API agent
# reads its key from the environment variable the profile names (a missing key stops there, before any call).
# A local model that first plays in the evaluation below plays in a process of its own, so the notebook's
# memory peaks at one model's, not at all of them together.

# %%
agents = LazyAgents(params, ready + list(params.evaluation.buyers), cache=ModelCache())
print({name: params.agent(name).backend for name in agents})

# %% [markdown]
# ## Pilot gate
# A few episodes per arm x buyer cell, spread over domains; a cell passes with zero bad parses over
# all its turns and zero error rows. A failed cell does not abort the run: it is logged as a
# deviation with the decision taken (the paper ran its failing 10x LR x Sonnet 5 cell regardless).
# With `evaluation.pilot_ahead: false` the gate is read after the evaluation from its own first episodes of
# every cell (the same episodes the pilot would choose), so nothing is played twice.


# %%
def gate(store_of_pilot: TranscriptStore) -> None:
    """Play (or read back from ``store_of_pilot``) the pilot's episodes, log failing cells, show the table."""
    with summarize_warnings():  # e.g. prompts truncated to the arm's prompt cap
        pilot = pilot_gate(protocol, agents, params.evaluation.pilot_episodes, arms=ready,
                           store=store_of_pilot, log=book.paths.pilot_log, progress=True)
    if not pilot.passed:
        pilot.log_failures(deviations, "ran regardless (the pilot gate is logged, not enforced)", phash)
    display(book.save_table(pilot_gate_table(pilot.to_frame().set_index(["arm", "buyer"]), book.paper)))


if params.evaluation.pilot_ahead:
    gate(TranscriptStore(book.paths.pilot_transcripts))
else:
    print("the pilot gate is read from the evaluation's own episodes, after it (evaluation.pilot_ahead: false)")

# %% [markdown]
# ## Run the evaluation (resumable)

# %%
with summarize_warnings():
    result = evaluate_arms_apart(protocol, agents, store, progress=True, arms=ready, deviations=deviations,
                                 max_batch=params.evaluation.batch_size)
print(f"played {len(result.records)} episodes now, {result.skipped} were already complete; "
      f"{len(result.errors)} error rows (a re-run completes them)")
if not params.evaluation.pilot_ahead:
    gate(store)  # every pilot episode is complete in the evaluation's store: read, not played

# %% [markdown]
# ## The held-out-panel extension (App. C, K)
# The protocol prespecified one adaptive step: double the held-out panel if the held-out gain's interval straddles
# zero for the largest trained model (the paper's trigger fired and it did not run the extension). When the profile
# asks for it (`evaluation.held_out_extension`) and the trigger fires on the evaluation above, every arm that played
# the held-out domain plays it again against every buyer on the **next block of reserved evaluation seeds**, as many
# again as the main panel, under a second protocol frozen in its own file, into its own transcript file (resumable
# as the main run). Notebook 6 reads the doubled panel.

# %%
ext_on = params.evaluation.held_out_extension
fires = extension_fires(book.held_out_extension_trigger()) if ext_on else None
with summarize_warnings():
    extension = run_held_out_extension(protocol, agents, TranscriptStore(book.paths.held_out_extension_transcripts),
                                       book.paths.held_out_extension_protocol, enabled=ext_on, fires=fires, arms=ready,
                                       progress=True, max_batch=params.evaluation.batch_size)
if extension is None:
    why = ("the profile does not ask for it (evaluation.held_out_extension)" if not ext_on else
           "its trigger cannot be evaluated yet (no held-out gain of the largest size)" if fires is None else
           "its trigger does not fire")
    print(f"held-out-panel extension not run: {why}")
else:
    print(f"held-out-panel extension (the trigger fired; protocol {book.paths.held_out_extension_protocol.name}): "
          f"played {len(extension.records)} episodes now, {extension.skipped} were already complete; "
          f"{len(extension.errors)} error rows")

# %% [markdown]
# ## What was played
# Episodes per arm and buyer in the transcript store, the seller turns where an arm's prompt cap bound,
# and the deviation log so far. A self-served seller is evaluated with its arm's context length (the
# paper's 16k serving context, or the model's if shorter, less one reply), not the training driver's
# 2,048-token cap; a turn that still met its cap (oldest history dropped, or the prompt cut) is logged in
# its transcript record and counted here.

# %%
df = book.episodes(include_errors=True)
counts = pd.crosstab(df["arm"], [df["buyer"], df["status"]])
display(book.save_table(simple_table("episodes_played", "Episodes in the transcript store", counts)))
display(book.save_table(prompt_cap_table(serving_frame(df))))
log = deviations.deviations_frame()
print("deviation log:", "empty" if log.empty else "")
if not log.empty:
    display(book.save_table(simple_table("deviations", "Deviation log", log)))

# %% [markdown]
# ## Exercises
# Each exercise is a task, sometimes given material (tagged `exercise`), a solution (tagged
# `solution`) and a check (tagged `check`); the course handout (`python -m negolib book handout`)
# replaces the solutions by `...  # your code here`, and each check then fails, saying what is
# missing, until you answer. Each runs on its own, on small synthetic data or a replayed episode.
#
# ### Exercise 4.1: a paired cluster bootstrap by hand
# Below is a synthetic episode table: two arms (`trained`, `base`) on the identical 72 scenarios (12
# evaluation seeds x 3 domains x 2 buyers). Compute the contrast of mean score S, trained minus base,
# and its 95% percentile interval by resampling *seeds* (clusters) with replacement, 2,000 times,
# with the draws `np.random.default_rng(0).integers(0, G, (2000, G))` over the sorted seeds. Give
# `ex41_estimate`, `ex41_ci` (a pair) and `ex41_dist` (the 2,000 resampled contrasts). A good answer
# resamples whole seeds (every episode of a drawn seed, in both arms at once: the pairing), weights
# each seed by its episodes (S is a ratio of sums) and uses numpy's default (linear) quantile: it
# then agrees with `negolib.study.paired.paired_contrast` to rounding.

# %% tags=["exercise"]
import numpy as np
import pandas as pd

ex41_rng = np.random.default_rng(7)
ex41_rows = []
for ex41_seed in range(5_000_000, 5_000_012):
    ex41_hard = ex41_rng.normal(0, 0.15)  # a seed's scenarios are hard or easy for both arms alike
    for ex41_domain in ("car", "job_offer", "media_rights"):
        for ex41_buyer in ("buyer_linear", "buyer_hardheaded"):
            ex41_base = 0.6 + ex41_hard + ex41_rng.normal(0, 0.1)
            for ex41_arm, ex41_gain in (("trained", 0.04), ("base", 0.0)):
                ex41_rows.append({"arm": ex41_arm, "domain": ex41_domain, "seed": ex41_seed, "buyer": ex41_buyer,
                                  "score": round(ex41_base + ex41_gain + ex41_rng.normal(0, 0.08), 4), "deal": True})
ex41_df = pd.DataFrame(ex41_rows)
ex41_df.head()

# %% tags=["solution"]
# Exercise 4.1: resample seeds with replacement; the contrast of ratio means on each resample.
ex41_seeds = np.sort(ex41_df["seed"].unique())
ex41_sums = {arm: ex41_df[ex41_df["arm"] == arm].groupby("seed")["score"].agg(["sum", "size"]).reindex(ex41_seeds)
             for arm in ("trained", "base")}
ex41_idx = np.random.default_rng(0).integers(0, ex41_seeds.size, (2000, ex41_seeds.size))
ex41_counts = np.stack([np.bincount(row, minlength=ex41_seeds.size) for row in ex41_idx])  # (B, G)


def ex41_mean(arm: str, counts: np.ndarray) -> np.ndarray:
    return counts @ ex41_sums[arm]["sum"].to_numpy() / (counts @ ex41_sums[arm]["size"].to_numpy())


ex41_estimate = float(ex41_mean("trained", np.ones(ex41_seeds.size)) - ex41_mean("base", np.ones(ex41_seeds.size)))
ex41_dist = ex41_mean("trained", ex41_counts) - ex41_mean("base", ex41_counts)
ex41_ci = tuple(np.quantile(ex41_dist, [0.025, 0.975]))
print(f"trained - base: {ex41_estimate:+.4f}, 95% CI [{ex41_ci[0]:+.4f}, {ex41_ci[1]:+.4f}]")

# %% tags=["check"]
import numpy as np

from negolib.book.exercises import expect
from negolib.stats import ClusterResampler
from negolib.study.paired import paired_contrast

ex41_estimate, ex41_ci, ex41_dist = expect(globals(), "ex41_estimate", "ex41_ci", "ex41_dist", exercise="4.1")
ex41_c = paired_contrast(ex41_df, "trained", "base", "score", ClusterResampler.from_frame(ex41_df, 2000, seed=0))
assert abs(ex41_estimate - ex41_c.estimate) < 1e-9,\
    f"exercise 4.1: the estimate {ex41_estimate:+.6f} is not the paired contrast of mean S ({ex41_c.estimate:+.6f})"
assert np.shape(ex41_dist) == (2000,),\
    f"exercise 4.1: ex41_dist must hold 2,000 resampled contrasts, not {np.shape(ex41_dist)}"
assert np.allclose(np.sort(ex41_dist), np.sort(ex41_c.distribution), atol=1e-9),\
    ("exercise 4.1: your resampled contrasts differ from negolib's: resample seeds (all their episodes, both arms "
     "together) with default_rng(0).integers(0, G, (2000, G)) over the sorted seeds")
assert np.allclose(ex41_ci, (ex41_c.ci_low, ex41_c.ci_high), atol=1e-9),\
    (f"exercise 4.1: the interval {tuple(np.round(ex41_ci, 5))} is not the 2.5 and 97.5 percentiles of the "
     f"resampled contrasts ({ex41_c.ci_low:+.5f}, {ex41_c.ci_high:+.5f})")
print("exercise 4.1: correct")

# %% [markdown]
# ### Exercise 4.2: why a naive episode bootstrap under-covers
# Resampling *episodes* treats the 288 episodes of a data set as independent, but the episodes of
# one seed share its scenarios (hard or easy for both arms), so they are not. Simulate it:
# `ex42_dataset(rng)` below draws one data set of paired per-episode differences (16 seeds x 18
# episodes, true mean gain 0.03, a shared seed effect). Draw at least 200 data sets; on each, compute
# a 95% percentile interval of the mean difference twice, resampling episodes and resampling seeds
# (400 resamples each is enough), and count how often each interval covers the true 0.03. Give
# `ex42_naive_coverage`, `ex42_cluster_coverage` and `ex42_n_datasets`. A good answer finds the
# cluster bootstrap close to 95% and the naive one far below it, and says why: the naive interval's
# width assumes 288 independent observations where the information is closer to 16.

# %% tags=["exercise"]
import numpy as np

ex42_true_gain = 0.03


def ex42_dataset(rng: np.random.Generator, n_seeds: int = 16, per_seed: int = 18) -> np.ndarray:
    """Paired differences (arm a - arm b), one row per seed: a shared seed effect plus episode noise."""
    seed_effect = rng.normal(0, 0.05, n_seeds)
    return ex42_true_gain + seed_effect[:, None] + rng.normal(0, 0.05, (n_seeds, per_seed))

# %% tags=["solution"]
# Exercise 4.2: coverage of the naive (episode) and the cluster (seed) bootstrap, by simulation.
ex42_rng = np.random.default_rng(1)
ex42_n_datasets, ex42_b = 300, 400
ex42_hits = {"naive": 0, "cluster": 0}
for _ in range(ex42_n_datasets):
    ex42_d = ex42_dataset(ex42_rng)
    ex42_flat = ex42_d.ravel()
    ex42_means = {"naive": ex42_flat[ex42_rng.integers(0, ex42_flat.size, (ex42_b, ex42_flat.size))].mean(axis=1),
                  "cluster": ex42_d[ex42_rng.integers(0, len(ex42_d), (ex42_b, len(ex42_d)))].mean(axis=(1, 2))}
    for ex42_kind, ex42_m in ex42_means.items():
        ex42_lo, ex42_hi = np.quantile(ex42_m, [0.025, 0.975])
        ex42_hits[ex42_kind] += bool(ex42_lo <= ex42_true_gain <= ex42_hi)
ex42_naive_coverage = ex42_hits["naive"] / ex42_n_datasets
ex42_cluster_coverage = ex42_hits["cluster"] / ex42_n_datasets
print(f"coverage of a nominal 95% interval: episodes {ex42_naive_coverage:.0%}, seeds {ex42_cluster_coverage:.0%}")

# %% tags=["check"]
from negolib.book.exercises import expect

ex42_naive_coverage, ex42_cluster_coverage, ex42_n_datasets = expect(
    globals(), "ex42_naive_coverage", "ex42_cluster_coverage", "ex42_n_datasets", exercise="4.2")
assert ex42_n_datasets >= 200, f"exercise 4.2: simulate at least 200 data sets, not {ex42_n_datasets}"
assert 0 <= ex42_naive_coverage <= 1 and 0 <= ex42_cluster_coverage <= 1,\
    "exercise 4.2: a coverage is a fraction of the data sets, between 0 and 1"
assert 0.85 <= ex42_cluster_coverage <= 0.99,\
    f"exercise 4.2: the seed (cluster) bootstrap should cover about 95%, got {ex42_cluster_coverage:.0%}"
assert ex42_naive_coverage < 0.75 and ex42_cluster_coverage - ex42_naive_coverage > 0.2,\
    (f"exercise 4.2: the episode bootstrap should cover far less than 95% (got {ex42_naive_coverage:.0%}): "
     "resample single episodes, ignoring their seeds")
print("exercise 4.2: correct")

# %% [markdown]
# ### Exercise 4.3: diagnosing a failed episode from its transcript
# Below is the transcript record of an episode that ended without a deal (its outcome removed): a
# seller arm against the linear buyer on a job-offer scenario. Read its turns (`raw` is what each
# party wrote, `action` what parsed, `parse_error` why not) and diagnose it: `ex43_cause`, one of
# `ex43_CAUSES`; `ex43_first_bad_turn`, the first turn whose action did not parse; and
# `ex43_bad_seller_turns`, how many of the seller's turns did not parse. A good answer names the
# seller's failure precisely (what in its raw text broke the action?) and knows that a turn that
# does not parse leaves the ledger as it was, so the seller's later offers never reached the buyer.

# %% tags=["exercise"]
from negolib.games.multi_issue.domains import load_domains
from negolib.games.multi_issue.env import Episode
from negolib.games.multi_issue.scenarios import make_scenario
from negolib.games.multi_issue.scripted import make_scripted

ex43_CAUSES = ("invalid_accept", "bad_json", "no_zone_of_agreement", "buyer_error")
ex43_episode = Episode(make_scenario(load_domains()["job_offer"], 5_000_007))
ex43_parties = {"seller": make_scripted("boulware"), "buyer": make_scripted("linear")}
while not ex43_episode.done:
    ex43_view = ex43_episode.view()
    ex43_text = ex43_parties[ex43_view.role].act_batch([ex43_view])[0].text
    if ex43_view.role == "seller" and ex43_view.turn >= 5:  # what went wrong here is for you to find
        ex43_prose, ex43_action = ex43_text.split("\n", 1)
        ex43_text = ex43_prose + "\n" + ex43_action.replace('"', "'")
    ex43_episode.step(ex43_text)
ex43_record = ex43_episode.record(arm="sft_seller", seller="sft_seller", buyer="buyer_linear")
del ex43_record["outcome"]
print(ex43_record["status"], "after", len(ex43_record["turns"]), "turns")
for t in ex43_record["turns"][:6]:
    print(f"--- turn {t['turn']} ({t['role']}), parse error: {t['parse_error']}\n{t['raw']}")

# %% tags=["solution"]
# Exercise 4.3: where the episode went wrong, from its turns.
ex43_bad = [t for t in ex43_record["turns"] if t["action"] is None]
ex43_first_bad_turn = ex43_bad[0]["turn"]
ex43_bad_seller_turns = sum(t["role"] == "seller" for t in ex43_bad)
print(ex43_bad[0]["raw"])  # single quotes: Python's repr of a dict, not JSON
ex43_cause = "bad_json"

# %% tags=["check"]
from negolib.book.exercises import expect

ex43_cause, ex43_first_bad_turn, ex43_bad_seller_turns = expect(
    globals(), "ex43_cause", "ex43_first_bad_turn", "ex43_bad_seller_turns", exercise="4.3")
assert ex43_cause in ex43_CAUSES, f"exercise 4.3: ex43_cause must be one of {ex43_CAUSES}"
assert ex43_first_bad_turn == 5,\
    f"exercise 4.3: turn {ex43_first_bad_turn} is not the first turn whose action failed to parse"
assert ex43_bad_seller_turns == ex43_episode.outcome.seller_bad_parses,\
    f"exercise 4.3: {ex43_bad_seller_turns} is not the number of seller turns that did not parse"
assert ex43_cause == "bad_json",\
    f"exercise 4.3: {ex43_cause!r} is not what broke this episode: read the raw text of turn 5 against turn 3"
print("exercise 4.3: correct")
