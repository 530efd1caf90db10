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
# # 5. Results (paper §5)
#
# Computed from the transcripts notebook 4 wrote: **Table 1** (paired gains by size and learning
# rate), **Figure 2** ((a) arm-level score S with intervals, (b) the primary contrasts),
# **Table 2** (what the trained sellers do differently: openings and the distributive/integrative
# decomposition) and the reference-seller contrasts. All intervals are 95% percentile bootstraps
# resampling evaluation seeds as clusters, on within-scenario paired differences; the prespecified
# primary family is Holm-corrected (`*`), every other interval is exploratory (`e` where it excludes
# zero). Columns labelled `paper: ...` are the paper's reported numbers, for comparison only: our
# models, buyers and scale differ from the paper's.

# %%
import pandas as pd
from IPython.display import display

from negolib.book.context import open_results
from negolib.core.formatting import fmt_ci, fmt_p
from negolib.study.analysis.contrasts import trained_pairs
from negolib.study.analysis.decomposition import decomposition
from negolib.study.analysis.quoted import quoted_contrasts
from negolib.study.analysis.quoted_diagnostics import gain_shares, integrative_split, late_close_change, self_play_split
from negolib.study.analysis.read_points import adjacent_reads
from negolib.study.diagnostics import openings_table
from negolib.study.report.paper_checks import adjacent_reads_table
from negolib.study.report.quoted import (
    gain_shares_table,
    integrative_table,
    late_close_table,
    quoted_table,
    self_play_table,
)
from negolib.study.report.results import (
    figure2,
    frontier_table,
    openings_book_table,
    primary_family_table,
    table1,
    table2,
)

# %% tags=["parameters"]
params_path: str = "../params/smoke.yaml"  # the profile to run (the book injects its own)
output_dir: str = ""  # empty: write under outputs/<profile> as the profile says

# %%
book, params, paper, results, records, imported = open_results(params_path, output_dir)
print(f"{len(results.an.df)} evaluated episodes over {len(results.arms)} arms" if not results.empty else
      "no transcripts yet: run notebook 04_evaluation first")

# %% [markdown]
# ## The prespecified primary family
# Each contrast is S(trained) − S(reference) on the scenarios both arms played; bootstrap p-values invert the
# percentile interval (p < 0.05 exactly when the 95% interval excludes 0), are never shown below 1/(B+1) for B
# resamples (a p of exactly 0 is not a result: it only says no resample reached zero) and are Holm-corrected
# over the family. Intervals print at the precision that decides their bounds: +0.0001, not +0.000.
#
# With few seed clusters the percentile bootstrap is not to be trusted: over C clusters it has at most
# C(2C−1, C) distinct resamples (126 at 5) and under-covers (a nominal 95% interval of a normal mean covers
# about 85% at 5 clusters). Rows with fewer than 30 clusters carry `†` (Cameron, Gelbach & Miller 2008;
# MacKinnon & Webb 2017). Beside the bootstrap the table gives an exact **sign-flip (randomisation) test**
# over the clusters, two-sided, and the smallest p it can give, 2/2^C: 1/16 at 5 clusters, above 0.05, so
# at 5 clusters no test at that level can reject, whatever the gain.
#
# The paper's family is the four shared-LR gains at 104 steps (App. K: p ≤ 1.4e-4 at 4.5B, 12B and 31B;
# p = 0.91 at 2.3B, over 64 seed clusters). The family is the profile's `statistics.primary`: where a
# run has a format warm-up (the embedded default), its reference arm is the warm-up (the policy GRPO
# started from), so the contrast measures what GRPO itself added; the raw base arm is still reported.
#
# `mde` is the **minimum detectable effect** (ours): the smallest true gain this many paired seed
# clusters would detect with 80% power at the family's alpha, from the contrast's bootstrap standard
# error `se` (an exact paired-t power calculation, `negolib.stats.minimum_detectable_effect`). A
# contrast whose interval covers zero while its `mde` is larger than any plausible gain says "too few
# episodes to tell", not "no gain".

# %%
display(book.save_table(primary_family_table(results.contrasts, paper)))
for r in results.primary().itertuples():
    verdict = "is significant after Holm" if r.significant else "is not significant after Holm"
    few = "; too few clusters for the interval to be trusted" if r.few_clusters else ""
    print(f"{r.arm_a} − {r.arm_b}: {fmt_ci(r.estimate, r.ci_low, r.ci_high, signed=True)} over {r.n_clusters} seed "
          f"clusters: bootstrap p {fmt_p(r.p_value, floor=1 / (r.n_resamples + 1))}, Holm p {fmt_p(r.p_holm)} "
          f"({verdict}); exact sign-flip p {fmt_p(r.p_signflip)} (its smallest attainable p "
          f"{fmt_p(r.p_signflip_min)}){few}; minimum detectable effect (80% power) {r.mde:.3f}")
primary_rows = [{"arms": [r.arm_a, r.arm_b], "metric": "S", "estimate": r.estimate, "ci_low": r.ci_low,
                 "ci_high": r.ci_high, "p_value": r.p_value, "p_holm": r.p_holm, "p_signflip": r.p_signflip,
                 "mde": r.mde, "n_paired": getattr(r, "n_episodes", None), "n_clusters": r.n_clusters,
                 "few_clusters": bool(r.few_clusters)} for r in results.primary().itertuples()]
book.update_headline(primary=primary_rows)  # outputs/<profile>/headline.json: the README's results table reads it

# %% [markdown]
# ## Table 1: paired gains by size and learning rate
# Columns follow the paper's design (`design.sizes` in the params). In the embedded default profile the
# single short GRPO run (lr 1e-5) fills the 3×LR column and the base is the raw SmolLM2, which writes no
# parseable action: its "3×LR − base" gain is mostly the format warm-up's work. The primary family
# above isolates what GRPO added.

# %%
display(book.save_table(table1(results.contrasts, results.est, params, paper)))

# %% [markdown]
# ## The gain differences behind contribution (i)
# The paper's text quotes how the shared-LR gain changes between sizes: within the E-series pair (4.5B − 2.3B),
# across the architecture boundary (12B − 4.5B) and within the conventional pair (31B − 12B), each a difference of
# two paired gains on the same resamples; the 31B − 12B 3× LR difference; and the 4.5B 3× LR run read at steps 56
# and 64. All exploratory and unadjusted. A profile without the arms a row needs says "not run in this profile"
# (naming the design role it lacks) beside the paper's value.

# %%
display(book.save_table(quoted_table(quoted_contrasts(results.an, params, sections=("5",)), "5", paper)))

# %% [markdown]
# Each arm was trained once, so there is no run-to-run variance; as a rough stability check the paper gives the
# largest movement in S between adjacent read points of the shared recipe (Table 4), 0.004 at 2.3B to 0.056 at 31B.
# Ours: per size, the shared recipe's evaluated reads in order of combined steps and the adjacent pair that moved most.

# %%
display(book.save_table(adjacent_reads_table(adjacent_reads(results.est, params), paper)))

# %% [markdown]
# ## Figure 2
# (a) Attained seller score S per arm (arm-level means with seed-cluster intervals); horizontal lines
# are reference sellers (solid: frontier sellers; dotted: other arms of the profile, e.g. the
# scripted baselines). (b) The primary contrasts (`statistics.primary`, e.g. GRPO − its format warm-up:
# what GRPO added, not the warm-up's work that a difference from the raw base would mostly show), with
# paired 95% intervals (on within-scenario differences, not comparable with (a)'s; † too few clusters).
# Left: ours; right: the paper's reported values (its primary family, shared LR − base).

# %%
fig = figure2(params, results.est, results.contrasts, paper)
book.save_figure(fig, "figure2")

# %% [markdown]
# ## Table 2: what the trained sellers do differently (post hoc)
# *Opens with terms*: the share of episodes in which the seller names at least one domain term at
# turn 1 (base → arm). The Δ columns are paired differences from the same-size base over the
# scenarios both arms closed, split exactly by term into distributive and integrative parts (they
# sum to the seller's deal-only change; adding the buyer's gives the change in joint welfare). The
# paper's `e` marks are shown as the paper printed them, not re-derived from its rounded intervals
# (its 2.3B 3× LR Δ buyer U~, -0.011 [-0.022, -0.000], carries an `e`).

# %%
openings = openings_table(records, scenarios=imported) if records else pd.DataFrame()
opens = openings.set_index("arm")["opens_with_terms"].to_dict() if len(openings) else {}
decomp = decomposition(results.an, trained_pairs(params), scenarios=imported)
display(book.save_table(table2(decomp, opens, params, paper)))

# %% [markdown]
# ## Where the seller's gain comes from (post hoc)
# Three readings of Table 2 the paper's §5 quotes. (1) The distributive, integrative and buyer-loss shares of the
# seller's deal-only gain (ratios of Table 2's point estimates; paper: distributive 75-81% at 12B and 31B, the
# buyer's loss 88%/93% of the gain under the shared LR and 55%/48% under the 3× LR). (2) Both parties' changes
# split by term type, and the seller's integrative − distributive gap on the same resamples (paper: at 31B shared
# the buyer loses -0.040 on integrative terms while the seller gains +0.016; the gap excludes zero only at 4.5B
# shared, +0.012). (3) Late closes: the share of deals closed at or after turn 16, when each prompt says to
# converge, and its paired change on the scenarios both arms closed (paper: 3.7-20.0% of base deals; training
# moves it by -7.5 to +5.0 points, +13.0 for the 10× LR arm).

# %%
display(book.save_table(gain_shares_table(gain_shares(decomp), params, paper)))
integrative = integrative_split(results.an, trained_pairs(params), scenarios=imported)
display(book.save_table(integrative_table(integrative, params, paper)))
display(book.save_table(late_close_table(late_close_change(results.an, trained_pairs(params)), params, paper)))

# %% [markdown]
# ## Openings (post hoc)
# Among the openings that name terms: how many terms, the seller's U~ if the buyer accepted the
# opening as it stands, and how far below it the deals ended (the paper's 3× LR sellers at 12B and
# 31B open with 6.6 and 6.2 terms, openings worth 0.741 and 0.757, deals 0.128 and 0.135 lower).

# %%
display(book.save_table(openings_book_table(openings, params, paper)))

# %% [markdown]
# ## Reference (frontier) sellers, exploratory
# The paper ran two frontier models as sellers; a profile without frontier arms shows nothing here.

# %%
if params.design.frontier:
    display(book.save_table(frontier_table(results.contrasts, params, paper)))
    # App. A: each reference seller meets a buyer running its own model on half its episodes (self-play)
    display(book.save_table(self_play_table(self_play_split(results.an, params), params, paper)))
else:
    print("no frontier reference sellers in this profile (see notebook 9 for the scripted baselines)")

# %% [markdown]
# ## Exercises
# Each exercise is a task (the markdown), sometimes given material (a cell tagged `exercise`), a
# solution (tagged `solution`) and a check (tagged `check`). In the book the solutions run and the
# checks pass; in the course handout (`python -m negolib book handout`) every solution is replaced by
# `...  # your code here` and its check fails, with a message saying what is missing, until you
# answer. Each exercise runs on its own: you need none of the cells above it.
#
# ### Exercise 5.1: Holm's correction by hand
# A primary family of four contrasts (trained minus base at four sizes) came back with the raw
# p-values below, in the family's order. Compute Holm's step-down adjusted p-values `ex51_adjusted`
# (a list in the same order as the input) and which contrasts are significant at alpha = 0.05 after
# the correction, `ex51_significant` (a list of four bools). A good answer sorts the p-values, scales
# the i-th smallest by (m - i + 1), keeps the adjusted values non-decreasing in that order (a running
# maximum), caps them at 1, puts them back in the input's order, and matches `negolib.stats.holm`; it
# says how many contrasts an uncorrected reading would have called significant.

# %% tags=["exercise"]
ex51_family = ["2.3B", "4.5B", "12B", "31B"]
ex51_p = [0.91, 0.004, 0.03, 0.02]  # raw p-values, in the family's order

# %% tags=["solution"]
# Exercise 5.1: Holm-adjusted p-values (input order) and the significance marks at alpha = 0.05.
ex51_order = sorted(range(len(ex51_p)), key=lambda i: ex51_p[i])
ex51_adjusted = [0.0] * len(ex51_p)
ex51_running = 0.0
for rank, i in enumerate(ex51_order):
    ex51_running = max(ex51_running, (len(ex51_p) - rank) * ex51_p[i])  # the running maximum
    ex51_adjusted[i] = min(1.0, ex51_running)
ex51_significant = [a < 0.05 for a in ex51_adjusted]
for name, p, a, s in zip(ex51_family, ex51_p, ex51_adjusted, ex51_significant):
    print(f"{name}: raw p {p:.3f}, Holm {a:.3f}{'  *' if s else ''}")

# %% tags=["check"]
import numpy as np

from negolib.book.exercises import expect
from negolib.stats import holm

ex51_adjusted, ex51_significant = expect(globals(), "ex51_adjusted", "ex51_significant", exercise="5.1")
assert np.shape(ex51_adjusted) == (4,), "exercise 5.1: ex51_adjusted must hold one adjusted p-value per contrast"
ex51_bonferroni = np.minimum(1.0, 4 * np.asarray(ex51_p))
assert not np.allclose(ex51_adjusted, ex51_bonferroni),\
    "exercise 5.1: these are Bonferroni's values (every p times 4); Holm scales the i-th smallest by m - i + 1"
assert np.allclose(ex51_adjusted, holm(ex51_p), atol=1e-12),\
    (f"exercise 5.1: {np.round(ex51_adjusted, 4).tolist()} are not Holm's adjusted p-values (keep them "
     "non-decreasing in the sorted order and report them in the input's order)")
assert [bool(s) for s in ex51_significant] == [bool(a < 0.05) for a in holm(ex51_p)],\
    "exercise 5.1: the significance marks must follow the adjusted p-values (adjusted p < 0.05)"
print("exercise 5.1: correct")

# %% [markdown]
# ### Exercise 5.2: a difference of two gains, on the same resamples
# Contribution (i) compares paired gains *between* sizes: does the large model gain more from training
# than the small one? Below, a synthetic episode table of four arms on the same 80 scenarios (20
# evaluation seeds x 2 domains x 2 buyers). Compute the difference of gains
# (S(trained_large) - S(base_large)) - (S(trained_small) - S(base_small)) and its 95% percentile interval by
# resampling seeds 2,000 times with the draws `np.random.default_rng(0).integers(0, G, (2000, G))` over
# the sorted seeds, both gains on each resample: `ex52_estimate`, `ex52_ci` (a pair). Then the
# interval you would get by treating the two gains as independent, `ex52_naive_ci`: the estimate
# plus or minus 1.96 times the square root of the sum of the two gains' bootstrap variances. A good
# answer matches `negolib.study.paired.contrast_difference` of the two `paired_contrast`s (one
# `ClusterResampler` shared), notes that only one of the two intervals excludes zero, and explains why
# the naive interval is wider here (what do the two gains share on a seed?).

# %% tags=["exercise"]
import numpy as np
import pandas as pd

ex52_rng = np.random.default_rng(11)
ex52_rows = []
for ex52_seed in range(5_000_000, 5_000_020):
    ex52_hard = ex52_rng.normal(0, 0.12)  # a seed's scenarios are hard or easy for every arm
    ex52_gain = ex52_rng.normal(0.04, 0.05)  # ... and training helps more on some seeds than others, at both sizes
    for ex52_domain in ("car", "job_offer"):
        for ex52_buyer in ("buyer_linear", "buyer_hardheaded"):
            for ex52_arm, ex52_g in (("base_small", 0.0), ("trained_small", ex52_gain),
                                     ("base_large", 0.05), ("trained_large", 0.05 + ex52_gain + 0.02)):
                ex52_rows.append({"arm": ex52_arm, "domain": ex52_domain, "seed": ex52_seed, "buyer": ex52_buyer,
                                  "score": round(0.55 + ex52_hard + ex52_g + ex52_rng.normal(0, 0.03), 4),
                                  "deal": True})
ex52_df = pd.DataFrame(ex52_rows)
ex52_df.head()

# %% tags=["solution"]
# Exercise 5.2: the difference of the two paired gains on shared seed resamples, and the naive interval.
ex52_seeds = np.sort(ex52_df["seed"].unique())
ex52_idx = np.random.default_rng(0).integers(0, ex52_seeds.size, (2000, ex52_seeds.size))
ex52_counts = np.vstack([np.ones(ex52_seeds.size),  # row 0: the sample itself
                         np.stack([np.bincount(row, minlength=ex52_seeds.size) for row in ex52_idx])])


def ex52_mean(arm: str) -> np.ndarray:
    """Mean S of ``arm`` on the sample (element 0) and on each resample (S is a ratio of sums over seeds)."""
    sums = ex52_df[ex52_df["arm"] == arm].groupby("seed")["score"].agg(["sum", "size"]).reindex(ex52_seeds)
    return ex52_counts @ sums["sum"].to_numpy() / (ex52_counts @ sums["size"].to_numpy())


ex52_large = ex52_mean("trained_large") - ex52_mean("base_large")
ex52_small = ex52_mean("trained_small") - ex52_mean("base_small")
ex52_diff = ex52_large - ex52_small
ex52_estimate = float(ex52_diff[0])
ex52_ci = tuple(np.quantile(ex52_diff[1:], [0.025, 0.975]))
ex52_half = 1.96 * np.sqrt(ex52_large[1:].var(ddof=1) + ex52_small[1:].var(ddof=1))
ex52_naive_ci = (ex52_estimate - ex52_half, ex52_estimate + ex52_half)
print(f"gain difference {ex52_estimate:+.4f}, 95% CI [{ex52_ci[0]:+.4f}, {ex52_ci[1]:+.4f}]; as if independent: "
      f"[{ex52_naive_ci[0]:+.4f}, {ex52_naive_ci[1]:+.4f}]")

# %% tags=["check"]
import numpy as np

from negolib.book.exercises import expect
from negolib.stats import ClusterResampler
from negolib.study.paired import contrast_difference, paired_contrast

ex52_estimate, ex52_ci, ex52_naive_ci = expect(globals(), "ex52_estimate", "ex52_ci", "ex52_naive_ci",
                                               exercise="5.2")
ex52_res = ClusterResampler.from_frame(ex52_df, 2000, seed=0)
ex52_d = contrast_difference(paired_contrast(ex52_df, "trained_large", "base_large", "score", ex52_res),
                             paired_contrast(ex52_df, "trained_small", "base_small", "score", ex52_res))
assert abs(ex52_estimate - ex52_d.estimate) < 1e-9,\
    f"exercise 5.2: the estimate {ex52_estimate:+.6f} is not the difference of the two paired gains"
assert np.allclose(ex52_ci, (ex52_d.interval.ci_low, ex52_d.interval.ci_high), atol=1e-9),\
    (f"exercise 5.2: the interval {tuple(np.round(ex52_ci, 5))} is not contrast_difference's "
     f"({ex52_d.interval.ci_low:+.5f}, {ex52_d.interval.ci_high:+.5f}): compute both gains on each resample")
assert np.isclose(np.mean(ex52_naive_ci), ex52_estimate, atol=1e-9),\
    "exercise 5.2: the naive interval is centred on the estimate"
assert ex52_naive_ci[1] - ex52_naive_ci[0] > 1.5 * (ex52_ci[1] - ex52_ci[0]),\
    ("exercise 5.2: the naive interval should be much wider than the shared-resample one here (the gains share "
     "each seed's effect); add the two gains' bootstrap variances")
assert ex52_naive_ci[0] < 0 < ex52_ci[0],\
    "exercise 5.2: here the shared-resample interval excludes zero and the naive one does not"
print("exercise 5.2: correct")
