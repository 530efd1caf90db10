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

from negolib.book import open_book
from negolib.params import train_config
from negolib.report.booktable import simple_table
from negolib.report.setup import arm_matrix, recipe_table, sampling_table, scenario_set_table, table8
from negolib.training.runs import describe_models

# %% tags=["parameters"]
params_path: str = "../params/smoke.yaml"  # the profile to run (the book injects its own)
output_dir: str = ""  # empty: write under outputs/<profile> as the profile says

# %%
B = open_book(params_path, output_dir or None)
P, paper = B.params, B.paper
print(f"profile {P.profile!r}: {len(P.arms)} seller arms, {len(P.buyers)} buyers")

# %% [markdown]
# ## The arm matrix
# An *arm* is a seller plus its sampling and scaffold. Scripted arms play the full scenario set;
# language-model arms play the profile's declared subset. `paper row` names the paper's arm each of
# ours is shown beside in later tables.

# %%
B.save_table(arm_matrix(P))

# %% [markdown]
# ## The paired scenario set
# Every arm meets the identical scenarios: the same evaluation seeds (from the reserved block three
# orders of magnitude above every training seed), the same private weight draws, both buyers, all
# domains. Intervals resample *seeds* as clusters, so the effective sample size is the number of seeds.

# %%
B.save_table(scenario_set_table(P, paper))

# %% [markdown]
# ## Sampling, as declared per language-model party

# %%
B.save_table(sampling_table(P, paper))

# %% [markdown]
# ## The GRPO recipe (App. H) of each training run

# %%
for run in P.training.runs:
    cfg = train_config(P, run)
    display(B.save_table(recipe_table({**cfg.to_dict(), "peak_lr": cfg.peak_lr}, paper, run)))
if not P.training.runs:
    print("this profile trains nothing")

# %% [markdown]
# ## Table 8 and the chat-template check (App. I, J)
# Ours: the base language models of the profile, loaded here (parameter counts from the weights; the
# relative FLOPs per step at matched steps and similar token counts is N over the first size's N,
# App. I). The chat-template check derives each model's turn tags by differencing two renders of a
# test dialogue and asserts that a multi-turn history rebuilt from them round-trips (App. J).

# %%
bases = [g.base for g in P.design.sizes if P.arms[g.base].backend in ("hf", "vllm")]
models = pd.DataFrame(describe_models(P, bases))
sizes = [{"label": g.label, **r} for g, r in zip(P.design.sizes, models.to_dict("records")) if "params" in r]
if sizes:
    display(B.save_table(table8(sizes, paper)))
else:
    print("no language model of this profile could be loaded here:", models.get("error", pd.Series()).tolist())

# %%
if len(models):
    cols = [c for c in ("arm", "model", "generation_prompt", "generation_prompt_tokens", "roundtrip", "error")
            if c in models]
    sizes_paper = paper.get("sizes", default={})
    note = {"generation prompt tokens": " / ".join(f"{k}: {v['gen_prompt_tokens']}" for k, v in sizes_paper.items())}
    display(B.save_table(simple_table("chat_template", "Chat-template turn tags and round-trip (App. J)",
                                      models[cols].set_index("arm"), paper_values=note)))
