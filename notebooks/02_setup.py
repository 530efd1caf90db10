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
# # 2. Experimental setup (paper §4, App. H, I, J)
#
# What is compared, on which scenarios, with which decoding and which training recipe: the **arm
# matrix**, the **paired scenario set**, the **sampling** settings, the GRPO **recipe** beside App. H,
# **Table 8** (per-size parameters and relative training compute, App. I) and the **chat-template
# check** of App. J. Columns labelled `paper: ...` are the paper's reported values.

# %%
import pandas as pd
from IPython.display import display

from negolib.book.context import open_book
from negolib.params import train_config
from negolib.study.report.booktable import simple_table
from negolib.study.report.setup import arm_matrix, recipe_table, sampling_table, scenario_set_table, table8
from negolib.study.runs import describe_models

# %% tags=["parameters"]
params_path: str = "../params/smoke.yaml"  # the profile to run (the book injects its own)
output_dir: str = ""  # empty: write under outputs/<profile> as the profile says

# %%
book = open_book(params_path, output_dir or None)
params, paper = book.params, book.paper
print(f"profile {params.profile!r}: {len(params.arms)} seller arms, {len(params.buyers)} buyers")

# %% [markdown]
# ## The arm matrix
# An *arm* is a seller plus its sampling and scaffold. Scripted arms play the full scenario set;
# language-model arms play the profile's declared subset. `paper row` names the paper's arm each of
# ours is shown beside in later tables.

# %%
book.save_table(arm_matrix(params))

# %% [markdown]
# ## The paired scenario set
# Every arm meets the identical scenarios: the same evaluation seeds (from the reserved block three
# orders of magnitude above every training seed), the same private weight draws, both buyers, all
# domains. Intervals resample *seeds* as clusters, so the effective sample size is the number of seeds.

# %%
book.save_table(scenario_set_table(params, paper))

# %% [markdown]
# ## Sampling, as declared per language-model party

# %%
book.save_table(sampling_table(params, paper))

# %% [markdown]
# ## The GRPO recipe (App. H) of each training run

# %%
for run in params.training.runs:
    cfg = train_config(params, run)
    display(book.save_table(recipe_table({**cfg.to_dict(), "peak_lr": cfg.peak_lr}, paper, run)))
if not params.training.runs:
    print("this profile trains nothing")

# %% [markdown]
# ## Table 8 and the chat-template check (App. I, J)
# Ours: the base language models of the profile, loaded here (parameter counts from the weights; the
# relative FLOPs per step at matched steps and similar token counts is N over the first size's N,
# App. I). The chat-template check derives each model's turn tags by differencing two renders of a
# test dialogue and asserts that a multi-turn history rebuilt from them round-trips (App. J).

# %%
bases = [g.base for g in params.design.sizes if params.arms[g.base].backend in ("hf", "vllm")]
models = pd.DataFrame(describe_models(params, bases))
sizes = [{"label": g.label, **r} for g, r in zip(params.design.sizes, models.to_dict("records")) if "params" in r]
if sizes:
    display(book.save_table(table8(sizes, paper)))
else:
    print("no language model of this profile could be loaded here:", models.get("error", pd.Series()).tolist())

# %%
if len(models):
    cols = [c for c in ("arm", "model", "generation_prompt", "generation_prompt_tokens", "roundtrip", "error")
            if c in models]
    sizes_paper = paper.get("sizes", default={})
    note = {"generation prompt tokens": " / ".join(f"{k}: {v['gen_prompt_tokens']}" for k, v in sizes_paper.items())}
    display(book.save_table(simple_table("chat_template", "Chat-template turn tags and round-trip (App. J)",
                                      models[cols].set_index("arm"), paper_values=note)))

# %% [markdown]
# ## Exercises
# Each exercise is a task, a solution (tagged `solution`) and a check (tagged `check`); the course
# handout (`python -m negolib book handout`) replaces the solutions by `...  # your code here`, and
# each check then fails, saying what is missing, until you answer. Each runs on its own.
#
# ### Exercise 2.1: the paired scenario set of the default profile, by hand
# Read `params/default.yaml` with `negolib.params.load_params` and, from its `evaluation` section
# and its arms alone (`params.lm_arms()` lists the language-model arms), count for a scripted arm and for
# a language-model arm the episodes it plays and the seed clusters its intervals resample, and the
# episodes of the whole protocol. Put them in a dict `ex21_counts` with keys `scripted_episodes`,
# `lm_episodes`, `scripted_clusters`, `lm_clusters` and `episodes_total`. A good answer multiplies
# seeds x domains x buyers (which domains does an LM arm play?) and knows that a cluster is a seed,
# not an episode.

# %% tags=["solution"]
# Exercise 2.1: episodes and seed clusters of the default profile's paired scenario set.
from negolib.games.multi_issue.domains import load_domains
from negolib.params import load_params

ex21_P = load_params("../params/default.yaml")
ex21_ev = ex21_P.evaluation
ex21_domains = len(ex21_ev.domains or load_domains())
ex21_lm_domains = len(ex21_ev.lm_domains or ex21_ev.domains or load_domains())
ex21_lm_seeds = ex21_ev.lm_seeds_per_domain or ex21_ev.seeds_per_domain
ex21_n_lm = len(ex21_P.lm_arms())
ex21_counts = {
    "scripted_episodes": ex21_ev.seeds_per_domain * ex21_domains * len(ex21_ev.buyers),
    "lm_episodes": ex21_lm_seeds * ex21_lm_domains * len(ex21_ev.buyers),
    "scripted_clusters": ex21_ev.seeds_per_domain,
    "lm_clusters": ex21_lm_seeds,
}
ex21_counts["episodes_total"] = ((len(ex21_P.arms) - ex21_n_lm) * ex21_counts["scripted_episodes"]
                                 + ex21_n_lm * ex21_counts["lm_episodes"])
print(ex21_counts)

# %% tags=["check"]
from negolib.book.exercises import expect
from negolib.params import load_params
from negolib.study.analysis.design import scenario_set_counts

ex21_counts = expect(globals(), "ex21_counts", exercise="2.1")
ex21_ref = scenario_set_counts(load_params("../params/default.yaml")).set_index("quantity")
ex21_want = {"scripted_episodes": ("episodes_per_arm", "scripted"), "lm_episodes": ("episodes_per_arm", "lm"),
             "scripted_clusters": ("seed_clusters", "scripted"), "lm_clusters": ("seed_clusters", "lm"),
             "episodes_total": ("episodes_total", "scripted")}
assert isinstance(ex21_counts, dict) and set(ex21_want) <= set(ex21_counts),\
    f"exercise 2.1: ex21_counts must be a dict with the keys {sorted(ex21_want)}"
for ex21_key, (ex21_q, ex21_col) in ex21_want.items():
    ex21_true = int(ex21_ref.loc[ex21_q, ex21_col])
    assert ex21_counts[ex21_key] == ex21_true,\
        f"exercise 2.1: {ex21_key} = {ex21_counts[ex21_key]} is wrong (count again: seeds x domains x buyers per arm)"
print("exercise 2.1: correct")

# %% [markdown]
# ### Exercise 2.2: the compute of one GRPO step (App. I)
# One GRPO step costs about $C = 2ND_{gen} + 6ND_{train}$ FLOPs: $N$ parameters, $D_{gen}$ tokens the
# policy samples (one forward each) and $D_{train}$ tokens the update runs forward and backward
# (every token of every trained sequence, masked ones included). Take a step of SmolLM2-135M
# ($N = 134.5\times10^6$) on 8 episodes, each a 900-token prompt followed by 1,400 completion tokens of
# which 600 the seller sampled. Compute `ex22_flops` (C for that step) and `ex22_gen_share` (the
# fraction of C spent generating). A good answer counts prompt tokens in $D_{train}$ but only the
# sampled tokens in $D_{gen}$, and finds that the update, not the sampling, dominates the FLOPs
# (on a CPU the wall clock says otherwise: generation is sequential).

# %% tags=["solution"]
# Exercise 2.2: C = 2 N D_gen + 6 N D_train for one step, and generation's share of it.
ex22_n = 134.5e6
ex22_d_gen = 8 * 600
ex22_d_train = 8 * (900 + 1_400)
ex22_flops = 2 * ex22_n * ex22_d_gen + 6 * ex22_n * ex22_d_train
ex22_gen_share = 2 * ex22_n * ex22_d_gen / ex22_flops
print(f"C = {ex22_flops:.3e} FLOPs, {ex22_gen_share:.1%} of it in generation")

# %% tags=["check"]
from negolib.book.exercises import expect
from negolib.training.flops import step_flops

ex22_flops, ex22_gen_share = expect(globals(), "ex22_flops", "ex22_gen_share", exercise="2.2")
ex22_true = step_flops(134.5e6, 8 * 600, 8 * (900 + 1_400))
assert abs(ex22_flops / ex22_true - 1) < 1e-9,\
    (f"exercise 2.2: C = {ex22_flops:.4e}, expected {ex22_true:.4e}: D_gen counts the sampled tokens, "
     "D_train every token of the sequences (prompt included)")
assert abs(ex22_gen_share - 2 * 134.5e6 * 8 * 600 / ex22_true) < 1e-9,\
    "exercise 2.2: ex22_gen_share is not the generation's share 2 N D_gen / C"
print("exercise 2.2: correct")
