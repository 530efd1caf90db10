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

from negolib.book.context import open_results
from negolib.games.multi_issue.domains import load_domains
from negolib.study.analysis.arms import arm_estimates
from negolib.study.analysis.guards import guard_comparators, guards_frame
from negolib.study.analysis.quoted import quoted_contrasts
from negolib.study.analysis.quoted_diagnostics import kl_at_read, off_schema_ledger_share, walkaways
from negolib.study.analysis.read_points import turn_ranges
from negolib.study.analysis.serving import serving_frame
from negolib.study.analysis.training import training_summary
from negolib.study.analysis.transcript_checks import APP_A_METRICS, nodeal_counters, prose_guard, turn_totals
from negolib.study.diagnostics import HAND_READ_PER_FAMILY, hand_read_sample, style_table
from negolib.study.report.appendix_d_e import (
    guards_table,
    style_diag_table,
    table5,
    table6_from_style,
    template_tag_table,
)
from negolib.study.report.paper_checks import (
    app_a_shares_table,
    nodeal_counter_table,
    prose_guard_table,
    turn_ranges_table,
    turn_totals_table,
)
from negolib.study.report.quoted import kl_read_table, off_schema_ledger_table, quoted_table, walkaway_table
from negolib.study.report.training import training_table
from negolib.study.runs import describe_models

# %% tags=["parameters"]
params_path: str = "../params/smoke.yaml"  # the profile to run (the book injects its own)
output_dir: str = ""  # empty: write under outputs/<profile> as the profile says

# %%
book, params, paper, results, records, imported = open_results(params_path, output_dir)
runs = [(r, s) for r, spec in params.training.runs.items() for s in spec.seeds]
# (trained arm, same-size base); the base need not be evaluated: the guards compare with the starting policy
trained = [(a, g.base) for g in params.design.sizes for a in (g.shared_early, g.shared, g.lr3, g.lr10, *g.extra)
           if a and a in results.arms]
print(f"{len(records)} transcripts; {len(runs)} training runs; trained arms evaluated: {[a for a, _ in trained]}")

# %% [markdown]
# ## Training diagnostics (App. D)
# From each run's step log: reward, score, deal rate, the logged k3 KL to the initial policy and the
# policy entropy (first → last step), validation S, wall time, and the training FLOPs of App. I
# (2·N·D_gen + 6·N·D_train from the logged token counts; N from the loaded initial weights).

# %%
inits = {r: params.training.runs[r].init.split("@")[0] for r, _ in runs}
init_arms = sorted({a for a in inits.values() if a in params.arms})
sizes = {row["arm"]: row.get("params") for row in describe_models(params, init_arms)}
logs = {(r, s): book.training_log(r, s) for r, s in runs}
vals = {(r, s): book.training_log(r, s, "validation") for r, s in runs}
n_params = {r: sizes.get(a) for r, a in inits.items()}
display(book.save_table(training_table(training_summary(logs, vals, n_params), paper, params)))

# %% [markdown]
# App. I's premise that matched steps are roughly matched tokens: the range of mean episode turns over the base and
# shared-recipe arms (the paper: 9.9 to 12.8) and over every evaluated arm of the design (7.3 to 14.4).

# %%
display(book.save_table(turn_ranges_table(turn_ranges(results.est, params), paper)))

# %% [markdown]
# The KL at the step each trained arm was read, not only first and last (App. D: the paper's step-56 KL is 0.437
# for the 31B 3× LR arm, 0.027 at step 56 of the 31B shared run, 0.126 at 12B 3× LR and 0.313 for the 10× LR arm;
# at the end of the shared-recipe continuations 0.0088 to 0.0485 by size).

# %%
display(book.save_table(kl_read_table(kl_at_read(logs, params, [a for a, _ in trained]), params, paper)))

# %% [markdown]
# ## The four prespecified guards, per trained arm (App. E), plus ours
# Each trained arm against the policy its training started from, on their paired episodes, with paired
# seed-cluster intervals on each change: where a run begins with a format warm-up that is the warm-up
# (the run's step 0), not the raw base, which writes no parseable action and closes no deal, so a
# deal rate compared with it "holds" whatever GRPO did. The warm-up itself is compared with the base it
# started from; the paper's runs have no warm-up, so theirs is the base. Where no arm holding the
# starting policy was evaluated the comparator falls back to the base, and the `comparator` column says
# so. The fourth guard is the transcripts at the end of this notebook. A fifth
# guard is ours: **accepts only offers** (the seller's invalid-accept rate, ACCEPTs with no buyer
# COUNTER to accept, may rise by at most 0.01), which catches a seller that learned to try closing on
# its own terms after a buyer turn that failed to parse.

# %%
display(book.save_table(guards_table(guards_frame(results.an, guard_comparators(params, trained, results.an.has)))))

# %% [markdown]
# ## The template-tag guard, per arm (App. J)
# The agents strip chat-template tags and special tokens from a reply before it is parsed or reaches the
# buyer, so no tag can leak; what they stripped is counted per turn in the transcript records, and the
# guard passes for an arm whose seller replies needed none stripped (the paper: no arm produced a leak).

# %%
display(book.save_table(template_tag_table(serving_frame(results.an.df), params)))

# %% [markdown]
# ## The prose guard (App. K)
# The paper's second guard on every arm: the seller's prose reaches the buyer. Per arm, the seller turns whose
# prose (the text the buyer reads) is blank.

# %%
display(book.save_table(prose_guard_table(prose_guard(records), params, paper)))

# %% [markdown]
# ## Table 5: the guards side by side at each size
# S, deal rate, deal-only U~, the seller's own bad-parse rate, turns and the post-hoc buyer split
# (S against the first buyer of `design.buyer_split` minus S against the second: in the paper,
# GPT-5.6-Terra, which shares the training pool's model family, minus Claude Sonnet 5).

# %%
for g in params.design.sizes:
    display(book.save_table(table5(results.est, results.est, g, params, paper)))

# %% [markdown]
# The 10× LR arm by buyer (App. E): its gain over base against each evaluation buyer, its buyer split minus
# base's (a difference of the two per-buyer gains on the same resamples, paired by scenario) and its S against
# the 3× LR arm. Exploratory, unadjusted.

# %%
display(book.save_table(quoted_table(quoted_contrasts(results.an, params, sections=("E",)), "E", paper)))

# %% [markdown]
# ## Table 6: buyer's-voice openers on the held-out domain
# One detector over every arm's opening turns on the withheld domain. Absolute rates depend on the
# detector's breadth; only within-table comparisons are meaningful.

# %%
held = {d for d, dom in load_domains().items() if dom.held_out}
held_records = [r for r in records if r["domain"] in held]
held_style = style_table(held_records) if held_records else pd.DataFrame()
display(book.save_table(table6_from_style(held_style, params, paper)))

# %% [markdown]
# ## Style diagnostics (post hoc, App. E)
# Opener concentration, repeated openers, "I appreciate", JSON leakage into the prose, unfilled
# placeholders, buyer voice, closing turns that name the concession, and deals closed at or after
# turn 16. The paper reports these for a few arms (e.g. its 31B 3× LR arm: 30.3% of seller turns
# begin with the same three words).

# %%
style_all = style_table(records, scenarios=imported) if records else pd.DataFrame()
display(book.save_table(style_diag_table(style_all, params, paper)))

# %% [markdown]
# The counts behind App. E's text: turns, seller bad parses and unfilled placeholders per arm (the paper: 131
# placeholders over the 10× LR arm's 1,152 episodes; no bad parse across the 31B 3× LR arm's 8,400 turns), and
# in each arm's no-deal episodes the share of seller turns that counter (the 10× LR arm: 95%).

# %%
display(book.save_table(turn_totals_table(turn_totals(results.an.df, style_all), params, paper)))
display(book.save_table(nodeal_counter_table(nodeal_counters(records), params, paper)))

# %% [markdown]
# Walk-aways and episodes at the turn cap (App. E: the 31B 3× LR arm has zero of each), and the share of deals
# that close with an off-schema term on the ledger (App. A: 55% for the 10× LR arm, 27-44% for every other arm).

# %%
display(book.save_table(walkaway_table(walkaways(results.an.df, 2 * params.evaluation.max_rounds), params, paper)))
off_schema = off_schema_ledger_share(results.an.df, scenarios=imported)
display(book.save_table(off_schema_ledger_table(off_schema, params, paper)))

# %% [markdown]
# App. A's two shares per arm: off-schema names among the terms the seller names (the paper: 4-6% in every arm) and
# closing accepts that carried terms (0-5% base and shared LR, 5-10% 3× LR above 2.3B, 56% 10× LR).

# %%
display(book.save_table(app_a_shares_table(arm_estimates(results.an, results.arms, APP_A_METRICS), params, paper)))

# %% [markdown]
# ## Transcripts of every trained arm (the hand-read guard)
# As the paper: five seeded transcripts per trained arm per domain family, the family being the eight
# training domains or the held-out car domain (our reading; the paper names no other grouping). Each shows
# the prose the counterpart read and the parsed action of every turn, then the final ledger.

# %%
for arm, _ in trained:
    sample = hand_read_sample(records, arm, seed=params.seed, per_family=HAND_READ_PER_FAMILY, max_chars=300,
                              scenarios=imported)
    for row in sample.itertuples():
        print(f"=== {arm} | {row.family} | {row.domain} | seed {row.seed} | {row.buyer}: {row.status}, "
              f"S = {row.score:.3f}")
        print(row.transcript[:3000], "\n")
if not trained:
    print("no trained arm evaluated in this profile")

# %% [markdown]
# ## Exercises
# Each exercise is a task (the markdown), sometimes given material (a cell tagged `exercise`), a
# solution (tagged `solution`) and a check (tagged `check`). In the book the solutions run and the
# checks pass; in the course handout (`python -m negolib book handout`) every solution is replaced by
# `...  # your code here` and its check fails, with a message saying what is missing, until you
# answer. Each exercise runs on its own: you need none of the cells above it.
#
# ### Exercise 7.1: the guards by hand
# Below, a synthetic episode table of a trained arm and its base on the same 48 scenarios. Evaluate
# the four numeric guards of App. E (plus ours) by hand: the trained arm's change from base in deal
# rate, in deal-only U~, in the seller's bad-parse rate and in its invalid-accept rate, as a dict
# `ex71_delta` keyed `deal_rate`, `deal_utility`, `seller_bad_parse_rate`, `invalid_accept_rate`;
# the trained arm's mean turns `ex71_mean_turns`; and which guards pass, a dict `ex71_passed` keyed
# `deal_rate` (the deal rate falls by at most 0.05), `seller_bad_parse_rate` and
# `invalid_accept_rate` (each rises by at most 0.01) and `mean_turns` (below the cap of 24). A rate
# per seller turn is the arm's total count over its total seller turns (a ratio of sums, as every
# metric of `negolib.games.multi_issue.metrics`), not the mean of per-episode rates. A good answer matches
# `negolib.study.diagnostics.guards_table` and says which guard the short episodes would fail under the
# other reading.

# %% tags=["exercise"]
import numpy as np
import pandas as pd

ex71_rng = np.random.default_rng(2)
ex71_rows, ex71_i = [], 0
for ex71_seed in range(5_000_000, 5_000_012):
    for ex71_domain in ("car", "job_offer"):
        for ex71_buyer in ("buyer_linear", "buyer_hardheaded"):
            ex71_i += 1
            for ex71_arm, ex71_p, ex71_u in (("base", 0.92, 0.55), ("trained", 0.78, 0.64)):
                ex71_short = ex71_arm == "trained" and ex71_i % 16 == 5  # three short episodes with a bad parse
                ex71_turns = 4 if ex71_short else int(ex71_rng.integers(10, 19))
                ex71_st = (ex71_turns + 1) // 2  # the seller opens: it plays the odd turns
                ex71_deal = bool(ex71_rng.random() < ex71_p) and not ex71_short
                ex71_rows.append({
                    "arm": ex71_arm, "domain": ex71_domain, "seed": ex71_seed, "buyer": ex71_buyer, "deal": ex71_deal,
                    "seller_utility": (round(float(np.clip(ex71_u + ex71_rng.normal(0, 0.08), 0, 1)), 4) if ex71_deal
                                       else np.nan),
                    "turns": ex71_turns, "seller_turns": ex71_st,
                    "seller_bad_parses": 1 if ex71_short else int(ex71_rng.binomial(ex71_st, 0.01)),
                    "seller_invalid_accepts": int(ex71_rng.binomial(ex71_st, 0.0 if ex71_arm == "base" else 0.03))})
ex71_df = pd.DataFrame(ex71_rows)
ex71_df.head()

# %% tags=["solution"]
# Exercise 7.1: the guards' changes (trained - base), the trained arm's mean turns, and which guards pass.
def ex71_values(rows: pd.DataFrame) -> dict[str, float]:
    return {"deal_rate": rows["deal"].mean(),
            "deal_utility": rows.loc[rows["deal"], "seller_utility"].mean(),
            "seller_bad_parse_rate": rows["seller_bad_parses"].sum() / rows["seller_turns"].sum(),
            "invalid_accept_rate": rows["seller_invalid_accepts"].sum() / rows["seller_turns"].sum()}


ex71_a, ex71_b = (ex71_values(ex71_df[ex71_df["arm"] == arm]) for arm in ("trained", "base"))
ex71_delta = {k: float(ex71_a[k] - ex71_b[k]) for k in ex71_a}
ex71_mean_turns = float(ex71_df.loc[ex71_df["arm"] == "trained", "turns"].mean())
ex71_passed = {"deal_rate": ex71_delta["deal_rate"] >= -0.05,
               "seller_bad_parse_rate": ex71_delta["seller_bad_parse_rate"] <= 0.01,
               "invalid_accept_rate": ex71_delta["invalid_accept_rate"] <= 0.01,
               "mean_turns": ex71_mean_turns < 24}
for k, v in ex71_delta.items():
    print(f"change in {k}: {v:+.4f}")
print(f"trained mean turns {ex71_mean_turns:.2f}; passed: {ex71_passed}")

# %% tags=["check"]
from negolib.book.exercises import expect
from negolib.study.diagnostics import guards_table

ex71_delta, ex71_mean_turns, ex71_passed = expect(globals(), "ex71_delta", "ex71_mean_turns", "ex71_passed",
                                                  exercise="7.1")
ex71_g = guards_table(ex71_df, "base", "trained").set_index("metric")
ex71_t = ex71_df[ex71_df["arm"] == "trained"]
ex71_b_rows = ex71_df[ex71_df["arm"] == "base"]
ex71_naive = ((ex71_t["seller_bad_parses"] / ex71_t["seller_turns"]).mean()
              - (ex71_b_rows["seller_bad_parses"] / ex71_b_rows["seller_turns"]).mean())
assert abs(ex71_delta["seller_bad_parse_rate"] - ex71_naive) > 1e-6,\
    "exercise 7.1: that bad-parse change averages per-episode rates; the metric is total bad parses / seller turns"
for ex71_k in ("deal_rate", "seller_bad_parse_rate", "invalid_accept_rate"):
    assert abs(ex71_delta[ex71_k] - ex71_g.loc[ex71_k, "delta"]) < 1e-9,\
        f"exercise 7.1: the change in {ex71_k} is {ex71_delta[ex71_k]:+.4f}, not {ex71_g.loc[ex71_k, 'delta']:+.4f}"
    assert bool(ex71_passed[ex71_k]) == bool(ex71_g.loc[ex71_k, "passed"]),\
        f"exercise 7.1: the {ex71_k} guard {'passes' if ex71_g.loc[ex71_k, 'passed'] else 'fails'} here"
assert abs(ex71_delta["deal_utility"] - ex71_g.loc["deal_rate", "d_deal_utility"]) < 1e-9,\
    "exercise 7.1: the change in deal-only U~ is wrong (the mean U~ over each arm's deals only)"
assert abs(ex71_mean_turns - ex71_g.loc["mean_turns", "arm_value"]) < 1e-9 and\
    bool(ex71_passed["mean_turns"]) == bool(ex71_g.loc["mean_turns", "passed"]),\
    "exercise 7.1: the trained arm's mean turns, or its guard (below 24), is wrong"
print("exercise 7.1: correct")

# %% [markdown]
# ### Exercise 7.2: the k3 estimator of the KL the trainer logs
# The GRPO loss (TRL's, as NeMo-RL's default) penalises the policy's divergence from the initial
# policy with the **k3** estimator: for a token sampled from the policy, with r = pi_ref(token) /
# pi(token), k3 = r - 1 - log r (k1 = -log r is the plain one). Below, a policy and a reference over
# five tokens, and 20,000 tokens sampled from the policy. Compute the exact KL(pi || pi_ref),
# `ex72_exact`; the per-sample k3 and k1, `ex72_k3` and `ex72_k1` (arrays of 20,000); and their means.
# A good answer shows that both estimators are unbiased (their means agree with the exact KL within
# Monte Carlo error) but that k3 is never negative and has the smaller spread, while single k1
# samples are often negative: why the logged KL can be trusted step by step.

# %% tags=["exercise"]
import numpy as np

ex72_pi = np.array([0.30, 0.25, 0.20, 0.15, 0.10])  # the policy
ex72_ref = np.array([0.26, 0.27, 0.22, 0.13, 0.12])  # the initial (reference) policy
ex72_tokens = np.random.default_rng(0).choice(5, size=20_000, p=ex72_pi)  # sampled from the policy

# %% tags=["solution"]
# Exercise 7.2: exact KL(pi || pi_ref), per-sample k3 and k1, and what their means and spreads show.
ex72_exact = float(np.sum(ex72_pi * np.log(ex72_pi / ex72_ref)))
ex72_log_r = np.log(ex72_ref[ex72_tokens]) - np.log(ex72_pi[ex72_tokens])
ex72_k1 = -ex72_log_r
ex72_k3 = np.exp(ex72_log_r) - 1 - ex72_log_r
print(f"exact KL {ex72_exact:.5f}; mean k1 {ex72_k1.mean():.5f} (sd {ex72_k1.std():.4f}, "
      f"{(ex72_k1 < 0).mean():.0%} negative); mean k3 {ex72_k3.mean():.5f} (sd {ex72_k3.std():.4f}, min "
      f"{ex72_k3.min():.2e})")

# %% tags=["check"]
import numpy as np
from scipy.stats import entropy

from negolib.book.exercises import expect

ex72_exact, ex72_k3, ex72_k1 = expect(globals(), "ex72_exact", "ex72_k3", "ex72_k1", exercise="7.2")
assert abs(ex72_exact - entropy(ex72_pi, ex72_ref)) < 1e-12,\
    "exercise 7.2: the exact KL(pi || pi_ref) is sum pi log(pi / pi_ref) (mind the direction)"
assert np.shape(ex72_k3) == np.shape(ex72_k1) == (20_000,), "exercise 7.2: one k3 and one k1 per sampled token"
ex72_lr = np.log(ex72_ref[ex72_tokens] / ex72_pi[ex72_tokens])
assert np.allclose(ex72_k3, np.exp(ex72_lr) - 1 - ex72_lr, atol=1e-12),\
    "exercise 7.2: k3 = r - 1 - log r with r = pi_ref(token) / pi(token), per sampled token"
assert np.allclose(ex72_k1, -ex72_lr, atol=1e-12), "exercise 7.2: k1 = -log r = log pi(token) - log pi_ref(token)"
for ex72_name, ex72_est in (("k3", ex72_k3), ("k1", ex72_k1)):
    ex72_se = ex72_est.std(ddof=1) / np.sqrt(ex72_est.size)
    assert abs(ex72_est.mean() - ex72_exact) < 4 * ex72_se,\
        f"exercise 7.2: the mean of {ex72_name} should match the exact KL within Monte Carlo error"
assert ex72_k3.min() >= 0 and (ex72_k1 < 0).any() and ex72_k3.std() < ex72_k1.std(),\
    "exercise 7.2: k3 should be non-negative with the smaller spread, k1 sometimes negative"
print("exercise 7.2: correct")
