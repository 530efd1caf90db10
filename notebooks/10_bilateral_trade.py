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
# # 10. A second game: bilateral price bargaining with tool calls (after Bergemann et al.)
#
# The harness is not welded to the paper's multi-issue game: a game is a plug-in
# (`negolib.games`), and the rollout machinery, the tournament, the statistics and the book are
# shared. This notebook proves it with the game of Bergemann et al. (arXiv 2604.16472, the paper's
# reference [7]; we have its abstract, `related_systems_abstracts.txt`): one item, one price, a
# seller with a private cost and a buyer with a private value, binding offers made by **tool calls**
# apart from the natural-language message. It regenerates:
#
# * the game's rules, and which of them are ours (the `bilateral_rules` table, computed from the
#   code's constants) and the scripted strategies (`bilateral_agents`);
# * a round-robin tournament of the scripted strategies in both roles: the cross-table heatmap
#   (`bilateral_cross_table`), each agent's surplus share and deal rate with seed-cluster intervals
#   (`bilateral_agent_summary`), Bradley-Terry ratings with intervals (`bilateral_ratings`), and the
#   metrics by price tier (`bilateral_tiers`, `bilateral_tier_share`);
# * a language model trained on the game in two stages, supervised fine-tuning on the tournament's
#   best transcripts and then GRPO against a fixed opponent, and the trade-off table of base, SFT and
#   SFT+GRPO (`bilateral_tradeoff`) beside the source paper's qualitative finding, labelled as theirs.
#
# Every number below is computed by this run; the next cell reports how long this notebook took on
# this profile the last time the book runner executed it.

# %%
# %matplotlib inline
import time

import pandas as pd
from IPython.display import display

from negolib.agents.factory import local_folder, sampling_config
from negolib.book import open_book, summarize_warnings
from negolib.formatting import fmt_ci
from negolib.games import get_game
from negolib.games.bilateral.env import BilateralConfig
from negolib.games.bilateral.metrics import tier_metrics
from negolib.games.bilateral.scenarios import (
    COST_RANGE,
    EVAL_SEED_START,
    TIERS,
    TRAIN_SEED_BLOCK,
    VALUE_RANGE,
    eval_seeds,
    scenario_set,
)
from negolib.games.bilateral.scripted import make_scripted
from negolib.games.bilateral.tools import MAX_PRICE, TOOL_NAMES
from negolib.games.bilateral.training import (
    evaluate_stages,
    run_grpo,
    run_sft,
    sft_dataset,
)
from negolib.games.toolcalls import money
from negolib.report.booktable import BookTable
from negolib.report.tournament import (
    RATING_LABEL,
    agent_summary_display,
    cross_table_display,
    cross_table_figure,
    ratings_display,
    ratings_figure,
)
from negolib.tournament import agent_summary, cross_table, ratings, read_matches, run_tournament

t_start = time.perf_counter()

# %% tags=["parameters"]
params_path: str = "../params/smoke.yaml"  # the profile to run (the book injects its own)
output_dir: str = ""  # empty: write under outputs/<profile> as the profile says

# %%
B = open_book(params_path, output_dir or None)
P, S = B.params, B.params.statistics
G = P.game("bilateral", "notebook 10")  # checked at load: every name, recipe and seed count, naming its field
game = get_game("bilateral")
sft_config, grpo_config = G.sft.config, G.grpo  # the game's recipes under the profile's overrides
last = B.last_run("10_bilateral_trade")
print(f"profile {P.profile!r}: {len(G.tournament.agents)} tournament agents, {G.tournament.seeds_per_tier} seeds "
      f"per price tier; language model: {G.lm.base.display}")
print(f"this notebook's last run by the book runner on this profile: {last['duration_s']:.0f} s "
      f"({last['status']}, finished {last['finished']})" if last.get("duration_s") is not None
      else "this notebook's last run by the book runner on this profile: none recorded yet (see the last cell)")

# %% [markdown]
# ## The game's rules, and what is ours
#
# The abstract fixes the shape of the game: bilateral trade under incomplete information, binding
# offers as tool calls separate from messages in an event-driven simulator, items in price tiers, a
# round-robin tournament, and SFT followed by GRPO against a fixed frontier opponent. It leaves the
# rest open, and each such rule below is **ours**: the tiers' scales, the draws of cost and value (so
# that the zone of possible agreement is sometimes empty), the deadline, the three tools and their
# arguments, that a turn carries at most one call, that an accept closes only at the counterpart's
# *standing* offer, and how a call that does not parse is counted. The table is written from the
# game's constants (`negolib.games.bilateral`), so it cannot drift from the code that plays.

# %%
cfg = BilateralConfig()
tier_names = list(TIERS)
ref = scenario_set(eval_seeds(1000), tiers=tier_names[:1])  # tiers only scale a seed's draws: one tier suffices
no_zone = sum(not s.has_zone for s in ref) / len(ref)
rules = pd.DataFrame([
    ("price tiers", ", ".join(money(v) for v in TIERS.values()), "tiers: theirs; these scales: ours"),
    ("seller's cost", f"log-uniform in [{COST_RANGE[0]:g}, {COST_RANGE[1]:g}] x the tier's scale, private", "ours"),
    ("buyer's value", f"log-uniform in [{VALUE_RANGE[0]:g}, {VALUE_RANGE[1]:g}] x the tier's scale, private", "ours"),
    ("no zone of agreement (value <= cost)", f"{no_zone:.1%} of the first {len(ref)} evaluation seeds", "ours"),
    ("scenario seeds", f"evaluation from {EVAL_SEED_START:,} (paired across tiers); training "
     f"{TRAIN_SEED_BLOCK.start}-{TRAIN_SEED_BLOCK.stop - 1}", "ours"),
    ("deadline", f"{cfg.deadline_turns} turns in all ({cfg.turns_of('seller')} seller, {cfg.turns_of('buyer')} "
     f"buyer); the {cfg.first_mover} opens; no deal at the deadline", "ours"),
    ("a turn", f"a message plus at most one tool call among {', '.join(n + '()' for n in TOOL_NAMES)}",
     "tool calls apart from messages: theirs; the tools: ours"),
    ("make_offer(price)", f"a binding offer, 0 < price <= {money(MAX_PRICE)}; replaces the mover's standing offer",
     "ours"),
    ("accept_offer()", "closes at the counterpart's standing offer only; with none standing: an invalid accept "
     "(a bad parse, a no-op)", "ours"),
    ("walk_away()", "ends the episode without a deal", "ours"),
    ("bad parse", "malformed JSON, unknown tool, missing/extra/ill-typed arguments, a bad price, two or more "
     "calls: the turn is a no-op, counted per party", "ours"),
    ("prose-only turn", "no call: not a bad parse; offers stand as they were", "ours"),
    ("surplus share", "(price - cost) / (value - cost) over deals with a zone; IR violation: a deal below cost "
     "or above value", "theirs (metrics); formula ours"),
], columns=["rule", "value", "source"]).set_index("rule")
display(B.save_table(BookTable("bilateral_rules", "Bilateral price bargaining: rules and their source", rules,
                               "Every value is read from the game's constants (negolib.games.bilateral).")))

# %%
agents = pd.DataFrame([make_scripted(n, "seller", 0).settings() for n in game.scripted_strategies()])
agents = agents.drop(columns=["backend", "name", "seed"]).set_index(pd.Index(game.scripted_strategies(), name="agent"))
display(B.save_table(BookTable("bilateral_agents", "Scripted strategies (both roles) and their parameters",
                               agents.astype(object).where(agents.notna(), "").astype(str),
                               "markup: opening above cost (seller) or below value (buyer); e: Faratin concession "
                               "exponent (Boulware < 1 < Conceder); margin: the fixed price's; min_concession: "
                               "tit-for-tat's smallest step.")))

# %% [markdown]
# ## A round-robin tournament of the scripted strategies
# Every agent plays every agent (itself included) as seller and as buyer, on one paired scenario set
# (the same seeds in every price tier); the matches file resumes. A cell of the cross-table is the
# seller's mean surplus share (zero without a deal) against that buyer. Per agent: the mean surplus
# share over both roles and all opponents and the deal rate, with percentile intervals over seed
# clusters. Ratings: Bradley-Terry on paired comparisons (an agent's two episodes against another on
# a scenario, one in each role, against the other's two).

# %%
T = G.tournament
res = run_tournament(game, T.agents, T.seeds_per_tier, B.paths.game_tournament("bilateral"), seed=T.agent_seed)
cross = cross_table(res.frame)
summary = agent_summary(res.frame, S.n_resamples, S.seed, S.alpha)
rating = ratings(res.frame, S.n_resamples, S.seed, S.alpha)
print(f"{res.n_matches} matches ({res.played} played now, {res.skipped} already complete), {len(res.frame)} "
      f"episodes, {res.n_errors} error episodes left out")

# %%
display(B.save_table(BookTable(
    "bilateral_cross_table", "Tournament cross-table: seller's / buyer's mean surplus share (deal rate)",
    cross_table_display(cross), "Rows: the seller agent; columns: the buyer agent.", data=cross.reset_index())))
heatmap = cross_table_figure(cross, label="seller's surplus share")
B.save_figure(heatmap, "bilateral_cross_table")
display(heatmap)
display(B.save_table(BookTable(
    "bilateral_agent_summary", "Per agent: surplus share and deal rate over both roles (seed-cluster 95% CI)",
    agent_summary_display(summary), f"{summary['n_clusters'].max()} seed clusters, {S.n_resamples} resamples.",
    data=summary.reset_index())))
display(B.save_table(BookTable("bilateral_ratings", "Tournament ratings", ratings_display(rating), RATING_LABEL,
                               data=rating.reset_index())))
forest = ratings_figure(rating)
B.save_figure(forest, "bilateral_ratings")
display(forest)

# %% [markdown]
# ## By price tier
# The metrics as the source paper reports them, by tier: deal rate, surplus share, individual-
# rationality violations, and efficiency (trade exactly when the zone is non-empty), over every
# episode of the tournament (`tier_metrics`); then each seller agent's surplus share per tier.

# %%
latest = {(m.seller, m.buyer, m.scenario_key): m for m in read_matches(res.path)}  # a replayed match: latest wins
outcomes = [dict(m.record, seller_agent=m.seller) for m in latest.values()]
tiers = tier_metrics(outcomes, overall=True)
show = ["tier", "n", "deal_rate", "surplus_share", "ir_violations", "efficiency", "deal_rate_with_zone",
        "no_deal_rate_without_zone", "gains_realised", "bad_parses_per_episode"]
display(B.save_table(BookTable("bilateral_tiers", "Tournament metrics by price tier (tier_metrics)",
                               tiers[show].set_index("tier").round(3), data=tiers)))
by_seller = pd.concat({a: tier_metrics([r for r in outcomes if r["seller_agent"] == a]).set_index("tier")
                       ["surplus_share"] for a in T.agents}, axis=1).T
spread = float((by_seller.max(axis=1) - by_seller.min(axis=1)).max())
display(B.save_table(BookTable("bilateral_tier_share", "Seller agent's surplus share by price tier",
                               by_seller.round(3), data=by_seller.reset_index(names="seller"))))
print(f"largest difference across tiers of one seller's surplus share: {spread:.4f} (the scripted strategies are "
      "scale-free: they act on prices relative to their reservation, so tiers differ only by rounding to the cent)")

# %% [markdown]
# ## A language model in the game: base, SFT, then GRPO
# * **Base**: the profile's model (the embedded SmolLM2 in the default profile; in the smoke profile a
#   tiny Llama built from a config with random weights, whose numbers check the pipeline and are not
#   findings). It speaks the game through its chat template: native tool calls where the template
#   renders tools, else the tool schemas in its system prompt and a JSON call in its text.
# * **SFT**: TRL's `SFTTrainer` on the seller's side of the tournament's best deal of each scenario (by
#   the scripted sellers), the loss on the seller's own turns only.
# * **SFT+GRPO**: the shared GRPO trainer (`negolib.training.grpo`), starting from the SFT model, the
#   seller against the profile's fixed opponent.
# * **Evaluation**: the three stages as sellers against that opponent on the same reserved scenarios
#   (disjoint from the tournament's, which SFT learned from) with the same sampling seed; the
#   differences are paired by scenario, with seed-cluster intervals.

# %%
LM = G.lm
base_dir = local_folder(LM.base, P)  # a packaged model converted once, or the tiny model written under outputs
examples = sft_dataset(res.path, select=G.sft.select, min_share=G.sft.min_share, max_examples=G.sft.max_examples)
sft = run_sft(base_dir, examples, B.paths.game_training("bilateral", "sft"), sft_config, progress=True)
picked = pd.DataFrame([(e.seller, e.buyer, e.surplus_share) for e in examples], columns=["seller", "buyer", "share"])
print(f"SFT: {sft.examples} conversations ({', '.join(f'{k}: {v}' for k, v in picked['seller'].value_counts().items())}"
      f"; mean surplus share {picked['share'].mean():.3f}), {sft.steps} steps in {sft.seconds:.0f} s; loss on the "
      f"seller's tokens {sft.loss_before:.3f} -> {sft.loss_after:.3f}")

# %%
with summarize_warnings():  # e.g. prompts cut to the recipe's max_prompt_tokens
    grpo = run_grpo(sft.model_dir, B.paths.game_training("bilateral", "grpo"), grpo_config, opponent=LM.opponent,
                    progress=True, resume=False)  # SFT was just redone: GRPO starts afresh from it
log = pd.DataFrame(grpo.log)
print(f"GRPO: {grpo.steps} steps against {LM.opponent!r}; final checkpoint {grpo.checkpoint.name}")
display(log[[c for c in ("step", "reward", "score", "deal_rate", "kl", "seconds") if c in log]].round(3))

# %%
stages = {"base": base_dir, "SFT": sft.model_dir, "SFT+GRPO": grpo.checkpoint}
with summarize_warnings():  # e.g. prompts cut to the model's prompt cap
    table = evaluate_stages(stages, [LM.opponent], LM.eval_seeds_per_tier, LM.eval_tiers, P.seed,
                            sampling_config(LM.base, P.seed), n_resamples=S.n_resamples, alpha=S.alpha,
                            max_batch=LM.base.batch_size or 16, prompt_cap=LM.base.prompt_cap or 2048, progress=True)
pooled = table[table["tier"] == "all"].set_index(["kind", "stage", "baseline", "metric"])

# %% [markdown]
# ## The trade-off: base, SFT and SFT+GRPO
# Deal rate (of all episodes), surplus share (the seller's share of the gains, over deals with a
# zone), individual-rationality violations (deals below cost or above value: a count, and a share of
# deals), each with its seed-cluster interval; then each stage's difference from the stages before it.
# Beside it, the source paper's qualitative finding, **theirs** (Bergemann et al., abstract): *"SFT
# approximately doubles surplus share but reduces deal rates, while RL recovers deal rates but erodes
# surplus gains."* Ours is stated below the table as measured, whichever way it comes out.

# %%
THEIRS = {("SFT", "base"): "surplus share about doubles; deal rate falls",
          ("SFT+GRPO", "SFT"): "deal rate recovers; surplus share erodes"}
METRICS = ["deal_rate", "surplus_share", "ir_violations", "ir_violation_rate"]


def cell(kind, stage, baseline, metric):
    r = pooled.loc[(kind, stage, baseline, metric)]
    if metric == "ir_violations":
        return f"{r['estimate']:+.0f}" if kind == "difference" else f"{r['estimate']:.0f}"
    return fmt_ci(r["estimate"], r["ci_low"], r["ci_high"], signed=kind == "difference")


rows = [(k, s, b) for k, s, b in dict.fromkeys((k, s, b) for k, s, b, _ in pooled.index)]
trade = pd.DataFrame([[cell(k, s, b, m) for m in METRICS] + [int(pooled.loc[(k, s, b, "deal_rate"), "n_episodes"]),
                       THEIRS.get((s, b), "")] for k, s, b in rows],
                     index=[s if k == "stage" else f"{s} - {b}" for k, s, b in rows],
                     columns=[*METRICS, "episodes", "Bergemann et al. (theirs, qualitative)"])
display(B.save_table(BookTable(
    "bilateral_tradeoff", "Trade-off of the training stages (ours) beside the source paper's finding (theirs)", trade,
    f"Seller vs {LM.opponent!r}, {LM.eval_seeds_per_tier} seed clusters x {len(set(table['tier'])) - 1} tier(s); "
    f"{1 - S.alpha:.0%} seed-cluster intervals, differences paired by scenario.", data=table)))

# %%
def change(stage, baseline, metric):
    """The measured direction of ``stage - baseline``: higher / lower when the interval excludes zero."""
    r, name = pooled.loc[("difference", stage, baseline, metric)], metric.replace("_", " ")
    if pd.isna(r["estimate"]):
        return f"{name} not measured (no deal with a zone in one of the two stages)"
    word = "no clear change" if r["ci_low"] <= 0 <= r["ci_high"] else ("higher" if r["estimate"] > 0 else "lower")
    return f"{name} {word} ({fmt_ci(r['estimate'], r['ci_low'], r['ci_high'], signed=True)})"


def level(stage, metric):
    return pooled.loc[("stage", stage, "", metric), "estimate"]


base_share, sft_share = level("base", "surplus_share"), level("SFT", "surplus_share")
ratio = f", SFT/base ratio {sft_share / base_share:.2f}" if base_share > 0 and pd.notna(sft_share) else ""
print(f"Ours, SFT vs base: {change('SFT', 'base', 'surplus_share')}{ratio}; {change('SFT', 'base', 'deal_rate')}.")
print(f"Ours, SFT+GRPO vs SFT: {change('SFT+GRPO', 'SFT', 'deal_rate')}; {change('SFT+GRPO', 'SFT', 'surplus_share')}.")
tiers_share = table[(table["kind"] == "stage") & (table["metric"] == "surplus_share") & (table["tier"] != "all")]
display(tiers_share.pivot(index="stage", columns="tier", values="estimate").reindex(list(stages)).round(3))

# %%
print(f"notebook 10 ran {time.perf_counter() - t_start:.0f} s on profile {P.profile!r} (this kernel, this run)")

# %% [markdown]
# ## Exercises
# Each exercise is a task (the markdown), sometimes given material (a cell tagged `exercise`), a
# solution (tagged `solution`) and a check (tagged `check`). In the book the solutions run and the
# checks pass; in the course handout (`python -m negolib book handout`) every solution is replaced by
# `...  # your code here` and its check fails, with a message saying what is missing, until you
# answer. Each exercise runs on its own: you need none of the cells above it.
#
# ### Exercise 10.1: the surplus share by hand
# Below, a tit-for-tat seller meets a Boulware buyer on 24 scenarios of the $100 tier, and the records'
# outcomes have been removed. From the records alone (each holds the scenario's `cost` and `value`
# and its `turns`: every turn's tool call `action`, or None, and the standing offers after it,
# `seller_offer` and `buyer_offer`), work out the deal rate `ex101_deal_rate` (the share of episodes
# that ended in a deal), the seller's surplus share `ex101_share` as the game's metrics define it (the
# mean of (price - cost) / (value - cost) over the deals of scenarios with a zone of agreement) and
# the share of the available gains from trade realised, `ex101_gains` (the sum of value - cost over
# deals, over the sum of value - cost over the scenarios with a zone). A good answer reads a deal's
# price from the standing offer that `accept_offer` closes (the call carries no price), keeps the
# no-deal episodes out of the surplus share (they are in the deal rate), matches
# `negolib.games.bilateral.metrics.tier_metrics` to the last decimal, and says what the unrealised
# gains were lost to (neither agent ever trades below its reservation: look at how those episodes end).

# %% tags=["exercise"]
from negolib.games.bilateral.play import play_episodes as ex101_play
from negolib.games.bilateral.scenarios import eval_seeds as ex101_eval_seeds
from negolib.games.bilateral.scenarios import scenario_set as ex101_scenario_set
from negolib.games.bilateral.scripted import make_scripted as ex101_make_scripted

ex101_records = ex101_play(ex101_make_scripted("tit_for_tat", "seller"), ex101_make_scripted("boulware", "buyer"),
                           ex101_scenario_set(ex101_eval_seeds(24), tiers=["100"]))
for r in ex101_records:
    del r["outcome"]  # what you are asked to work out
    last = r["turns"][-1]
    print(f"{r['scenario_key']}: cost {r['cost']:7.2f}, value {r['value']:7.2f}; {len(r['turns']):2d} turns, "
          f"last {last['role']}: {last['action']['name'] if last['action'] else None}")

# %% tags=["solution"]
# Exercise 10.1: the deal rate, the seller's surplus share and the gains realised, from the turns.
ex101_deals, ex101_shares, ex101_realised, ex101_available = 0, [], 0.0, 0.0
for r in ex101_records:
    zone = r["value"] - r["cost"]
    ex101_available += max(0.0, zone)
    last = r["turns"][-1]
    if last["action"] is None or last["action"]["name"] != "accept_offer":
        continue  # a deadline, a walk-away (or a last turn that did not parse): no deal
    # the accept closes at the counterpart's standing offer
    price = last["buyer_offer"] if last["role"] == "seller" else last["seller_offer"]
    ex101_deals += 1
    ex101_realised += zone
    if zone > 0:
        ex101_shares.append((price - r["cost"]) / zone)
ex101_deal_rate = ex101_deals / len(ex101_records)
ex101_share = sum(ex101_shares) / len(ex101_shares)
ex101_gains = ex101_realised / ex101_available
print(f"deal rate {ex101_deal_rate:.3f}, surplus share {ex101_share:.4f} over {len(ex101_shares)} deals, "
      f"gains realised {ex101_gains:.4f}")

# %% tags=["check"]
from negolib.exercises import expect
from negolib.games.bilateral.metrics import tier_metrics
from negolib.games.bilateral.play import play_episodes
from negolib.games.bilateral.scenarios import eval_seeds, scenario_set
from negolib.games.bilateral.scripted import make_scripted

ex101_deal_rate, ex101_share, ex101_gains = expect(globals(), "ex101_deal_rate", "ex101_share", "ex101_gains",
                                                   exercise="10.1")
ex101_truth = tier_metrics(play_episodes(make_scripted("tit_for_tat", "seller"), make_scripted("boulware", "buyer"),
                                         scenario_set(eval_seeds(24), tiers=["100"]))).iloc[0]
assert abs(ex101_deal_rate - ex101_truth["deal_rate"]) < 1e-9, \
    f"exercise 10.1: deal rate {ex101_deal_rate:.4f} is wrong (a deal ends with an accept_offer call)"
assert abs(ex101_share - ex101_truth["deal_rate"] * ex101_truth["surplus_share"]) > 1e-6, \
    "exercise 10.1: the surplus share counts the no-deal episodes as 0; average over deals with a zone only"
assert abs(ex101_share - ex101_truth["surplus_share"]) < 1e-9, \
    (f"exercise 10.1: surplus share {ex101_share:.4f} is not the metric's; the price is the standing offer the "
     "accept closes, and only deals with value > cost count")
assert abs(ex101_gains - ex101_truth["gains_realised"]) < 1e-9, \
    f"exercise 10.1: gains realised {ex101_gains:.4f} is wrong (deals' value - cost over the positive zones)"
print("exercise 10.1: correct")

# %% [markdown]
# ### Exercise 10.2: a seller that uses the deadline
# In this game the seller opens and the buyer has the last turn, and the scripted buyers accept on
# their last turn any standing offer at or below their value (see `ScriptedBargainer.accepts` in
# `negolib.games.bilateral.scripted`). Boulware (e = 0.2) is the scripted sellers' best against the
# linear buyer, yet on its own last turn it concedes down to its cost, or takes the buyer's offer.
# Write a seller `ex102_seller` (a `negolib.games.bilateral.scripted.ScriptedBargainer`, e.g. a subclass
# of `TimeDependentAgent`) whose mean surplus share (the game's payoff: 0 without a deal) beats
# Boulware's against the linear buyer. The check plays both on the same 200 scenarios of the $1k tier
# and asks that the 95% interval of the paired seed-cluster bootstrap (`negolib.paired.paired_contrast`)
# of your seller minus Boulware lies above 0. A good answer says what the seller learns from the
# buyer's offers and why its last offer is still accepted.

# %% tags=["solution"]
# Exercise 10.2: a seller whose paired surplus share beats Boulware's against the linear buyer.
from negolib.games.bilateral.scripted import TimeDependentAgent


class DeadlineSeller(TimeDependentAgent):
    """Boulware until its last turn; then, instead of conceding to its cost or taking the buyer's bid, it asks
    for the buyer's next bid extrapolated from its last two (less a cent): the buyer accepts it on its own last
    turn as long as it is at most its value. The linear buyer's bids rise by a fixed step, so the extrapolation
    lands on its value."""

    accept_last = False  # do not take the buyer's standing bid on the last turn: ask for more

    def price(self, view):  # noqa: ANN001, ANN201
        bids = [h.offer for h in view.history if h.role == "buyer" and h.offer is not None]
        if view.own_turns_left == 1 and len(bids) >= 2:
            return bids[-1] + (bids[-1] - bids[-2]) - 0.01
        return super().price(view)


ex102_seller = DeadlineSeller("deadline", e=0.2)

# %% tags=["check"]
import pandas as pd

from negolib.exercises import expect
from negolib.games import get_game
from negolib.games.bilateral.scenarios import eval_seeds, scenario_set
from negolib.games.bilateral.scripted import ScriptedBargainer, make_scripted
from negolib.paired import paired_contrast
from negolib.stats import ClusterResampler

ex102_seller = expect(globals(), "ex102_seller", exercise="10.2")
assert isinstance(ex102_seller, ScriptedBargainer), \
    "exercise 10.2: ex102_seller must be a ScriptedBargainer (e.g. a subclass of TimeDependentAgent)"
ex102_game = get_game("bilateral")
ex102_scenarios = scenario_set(eval_seeds(200), tiers=["1k"])
ex102_rows = []
for arm, seller in (("yours", ex102_seller), ("boulware", make_scripted("boulware", "seller"))):
    for r in ex102_game.play(seller, make_scripted("linear", "buyer"), ex102_scenarios, seed=0):
        p = ex102_game.payoffs(r)
        assert p.valid, f"exercise 10.2: an episode of your seller ended in an error: {r.get('error')}"
        ex102_rows.append({"arm": arm, "domain": r["tier"], "seed": r["seed"], "buyer": "linear",
                           "score": p.seller, "deal": p.deal})
ex102_frame = pd.DataFrame(ex102_rows)
ex102_c = paired_contrast(ex102_frame, "yours", "boulware", "score",
                          ClusterResampler.from_frame(ex102_frame, 2_000))
print(f"your seller - Boulware, mean surplus share: {ex102_c.estimate:+.4f}, 95% CI "
      f"[{ex102_c.ci_low:+.4f}, {ex102_c.ci_high:+.4f}] over {ex102_c.n_clusters} seed clusters")
assert ex102_c.ci_low > 0, (f"exercise 10.2: your seller does not beat Boulware (paired difference "
                            f"{ex102_c.estimate:+.4f}, 95% CI [{ex102_c.ci_low:+.4f}, {ex102_c.ci_high:+.4f}] "
                            "includes 0 or lies below)")
print("exercise 10.2: correct")
