"""The notebooks: jupytext pairs in sync, one parameters cell each, and the whole book executes
under papermill on params/smoke.yaml with the expected tables and no error outputs (the CI smoke).

The paper's game (notebooks 01-09) runs as one book; notebook 10 (the second game) reads nothing the others
write, so it runs alone (``pytest -k 10_bilateral`` runs only it)."""

from __future__ import annotations

import json
from pathlib import Path

import jupytext
import nbformat
import pytest

from negolib.book.runner import run_book
from negolib.params import NOTEBOOKS

ROOT = Path(__file__).resolve().parent.parent
NB_DIR = ROOT / "notebooks"
# Titles each executed notebook must show (tables and figures it regenerates).
EXPECTED = {
    "01_environment": ["The nine domains", "Domain `car`", "Eq. 1 on example outcomes", "image/png"],
    "02_setup": ["Arm matrix", "The paired evaluation scenario set", "Sampling settings", "GRPO recipe",
                 "Table 8", "Chat-template turn tags"],
    "03_training": ["Learning ladder: the CI rung and its sabotaged twins (ours)", "Format warm-up per run (ours)",
                    "Training diagnostics (App. D)", "image/png"],
    "04_evaluation": ["protocol", "Pilot gate", "Episodes in the transcript store"],
    "05_results": ["Primary family", "Table 1", "Gain differences behind contribution", "Table 2",
                   "Where the seller", "Integrative terms", "Late closes", "Openings", "image/png"],
    "06_appendix_b_c": ["Table 3", "Table 4", "Held-out panel", "Continuation gains labelled in Figure 3",
                        "Deal rate by domain", "Frontier sellers, 31B@56", "Held-out-panel extension",
                        "image/png"],
    "07_appendix_d_e": ["Training diagnostics", "KL to the initial policy at the read step", "Prespecified guards",
                        "Table 5", "LR arm by buyer", "Table 6", "Style diagnostics", "Walk-aways",
                        "off-schema term on the ledger"],
    "08_appendix_g_k": ["Table 7", "Cost per episode", "Monte Carlo error", "re-run at 10^5 resamples", "Table 9"],
    "09_beyond": ["Scripted baseline sellers", "Deal efficiency", "Turn order", "Fixed openings", "image/png",
                  "limitations (App. A)", "run-to-run spread", "Accept-terms applied", "third evaluation buyer",
                  "Self-play split", "Learning-rate sweep", "Matched FLOPs", "The ACCEPT rule"],
    "10_bilateral_trade": ["rules and their source", "Scripted strategies", "Tournament cross-table",
                           "Per agent: surplus share and deal rate", "Tournament ratings",
                           "Tournament metrics by price tier", "surplus share by price tier", "SFT: ", "GRPO: ",
                           "Trade-off of the training stages", "Bergemann et al. (theirs", "Ours, SFT vs base",
                           "notebook 10 ran", "image/png"],
    "11_multi_buyer": ["rules and their source", "Scripted buyer styles", "Scripted sellers and their parameters",
                       "Scripted sellers vs the buyer pool", "Normalised surplus by market arm", "GRPO: ",
                       "Liu et al. (theirs", "Ours, base model", "Ours, SFT vs base", "Ours, SFT+GRPO vs base",
                       "Ours, SFT+GRPO vs SFT", "SFT: 2 conversations", "notebook 11 ran", "image/png"],
    "12_multi_product": ["rules and their source", "Markets: the training market", "Scripted sellers vs the buyer pool",
                         "upper bound", "Constraint adherence of the scripted sellers", "by market arm", "GRPO: ",
                         "before and after training", "SFT: 2 conversations", "qualitative findings (theirs)",
                         "no numbers given",
                         "notebook 12 ran", "image/png"],
}
BILATERAL = "10_bilateral_trade"
MULTI_PRODUCT = "12_multi_product"
MULTI_BUYER = "11_multi_buyer"
PAPER_GAME = [n for n in NOTEBOOKS if n not in (BILATERAL, MULTI_BUYER, MULTI_PRODUCT)]


def _cells(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_pair_in_sync_and_stripped(name):
    py, ipynb = NB_DIR / f"{name}.py", NB_DIR / f"{name}.ipynb"
    assert py.exists() and ipynb.exists(), f"{name}: both the .py source and the paired .ipynb are needed"
    src = jupytext.read(py, fmt="py:percent")
    paired = nbformat.read(ipynb, as_version=4)
    assert _cells(src) == _cells(paired), f"{name}.ipynb drifted from {name}.py: run `jupytext --sync`"
    for c in paired.cells:
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None, f"{name}.ipynb holds outputs"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_exactly_one_parameters_cell(name):
    nb = jupytext.read(NB_DIR / f"{name}.py", fmt="py:percent")
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, f"{name}: {len(params)} parameters cells"
    assert 'params_path: str = "../params/smoke.yaml"' in params[0].source
    assert "output_dir: str" in params[0].source


@pytest.mark.parametrize("name", [BILATERAL, MULTI_BUYER, MULTI_PRODUCT])
def test_game_notebooks_are_thin(name):
    """Notebooks 10-12 call their game's study module and the stage contract: at most ~80 lines of code before the
    exercises, no cell over 20 lines, and names that say what they hold (no one- or two-letter capitals)."""
    import re

    nb = jupytext.read(NB_DIR / f"{name}.py", fmt="py:percent")
    first_exercise = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and "## Exercises" in c.source)
    code = [c.source for c in nb.cells[:first_exercise] if c.cell_type == "code"]
    sizes = [sum(1 for line in src.splitlines() if line.strip()) for src in code]
    assert sum(sizes) <= 80, f"{name}: {sum(sizes)} lines of study code before the exercises"
    assert max(sizes) <= 20, f"{name}: a cell of {max(sizes)} lines"
    short = {m for src in code for m in re.findall(r"^([A-Z]{1,2})\b\s*(?:,|=)", src, flags=re.M)}
    assert not short, f"{name}: globals named {sorted(short)}"
    assert any("run_stages(" in src for src in code), f"{name}: the stages do not go through run_stages"


def test_no_notebook_names_a_global_with_one_or_two_capitals():
    """Every notebook's globals say what they hold (``book``, ``params``, ``results``), not ``B``/``P``/``R``."""
    import re

    for path in sorted(NB_DIR.glob("[0-9][0-9]_*.py")):
        nb = jupytext.read(path, fmt="py:percent")
        code = [c.source for c in nb.cells if c.cell_type == "code"]
        short = {m for src in code for m in re.findall(r"^([A-Z]{1,2})\b\s*(?:,|=[^=])", src, flags=re.M)}
        assert not short, f"{path.name}: globals named {sorted(short)}"
    assert re.findall(r"^([A-Z]{1,2})\b\s*(?:,|=[^=])", "B = open_book(p)\nP, paper = B.params, 1", flags=re.M) == \
        ["B", "P"]  # the check catches them


@pytest.fixture(scope="module")
def smoke_book(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke")
    return run_book(ROOT / "params" / "smoke.yaml", notebooks=PAPER_GAME, output_dir=out, progress=False)


@pytest.fixture(scope="module")
def bilateral_book(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke_bilateral")
    return run_book(ROOT / "params" / "smoke.yaml", notebooks=[BILATERAL], output_dir=out, progress=False)


@pytest.fixture(scope="module")
def multi_buyer_book(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke_multi_buyer")
    return run_book(ROOT / "params" / "smoke.yaml", notebooks=[MULTI_BUYER], output_dir=out, progress=False)


@pytest.fixture(scope="module")
def multi_product_book(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke_multi_product")
    return run_book(ROOT / "params" / "smoke.yaml", notebooks=[MULTI_PRODUCT], output_dir=out, progress=False)


def test_smoke_book_executes(smoke_book):
    assert smoke_book.ok, str(smoke_book.error)
    assert smoke_book.executed == PAPER_GAME
    assert (smoke_book.output_dir / "index.md").exists()


def test_every_notebook_is_in_a_smoke_run():
    assert sorted([*PAPER_GAME, MULTI_PRODUCT, BILATERAL, MULTI_BUYER]) == sorted(NOTEBOOKS) and BILATERAL in NOTEBOOKS


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_executed_notebook_has_tables_and_no_errors(request, name):
    fixture = {BILATERAL: "bilateral_book", MULTI_BUYER: "multi_buyer_book",
               MULTI_PRODUCT: "multi_product_book"}.get(name, "smoke_book")
    book = request.getfixturevalue(fixture)
    assert book.ok, str(book.error)
    path = book.output_dir / "notebooks" / f"{name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{name}: {errors[0].get('ename')}: {errors[0].get('evalue')}" if errors else ""
    text = json.dumps([c.get("outputs", []) for c in nb.cells])
    for needle in EXPECTED[name]:
        assert needle in text, f"{name}: executed copy shows no {needle!r}"


def test_smoke_outputs_on_disk(smoke_book):
    out = smoke_book.output_dir
    for name in ("table1", "table2", "table3", "table4", "table5", "table6", "table7", "table8", "table9"):
        assert (out / "tables" / f"{name}.csv").exists() and (out / "tables" / f"{name}.md").exists(), name
    for fig in ("figure1_ledger", "figure2", "figure3", "pareto_frontier", "learning_ladder"):
        assert (out / "figures" / f"{fig}.png").exists(), fig
    import pandas as pd

    ladder = pd.read_csv(out / "tables" / "learning_ladder.csv")
    assert len(ladder) == 5 and set(ladder["as required"]) == {"yes"}, ladder  # the rung learns, no twin does
    assert (out / "transcripts" / "evaluation.jsonl").exists()
    assert (out / "evaluation" / "protocol.yaml").exists()
    # the matched lesson (notebook 03): pre-registration, contrast and decomposition tables, its training log's
    # figure, and the run's headline with the lesson and the book's run fields
    for name in ("lesson_preregistration", "lesson_contrast", "lesson_decomposition"):
        assert (out / "tables" / f"{name}.csv").exists(), name
    for fig in ("lesson_training", "lesson_contrast"):
        assert (out / "figures" / f"{fig}.png").exists(), fig
    headline = json.loads((out / "headline.json").read_text())
    assert headline["profile"] == "smoke" and headline["minutes"] > 0 and headline["commit"]
    assert headline["lesson"]["n_paired"] == 4 and headline["lesson"]["arms"] == ["lesson_trained", "lesson_start"]
    assert len(list((out / "lesson").glob("*/run/train_log*"))) >= 1
    # pre-registered: the lesson's outcome, sample size and MDE are printed before any training cell runs
    nb = nbformat.read(out / "notebooks" / "03_training.ipynb", as_version=4)
    printed = [i for i, c in enumerate(nb.cells) if "PRE-REGISTERED" in json.dumps(c.get("outputs", []))]
    calls = ("train_lesson(", "train_run(", "run_isolated(train_lesson", "run_isolated(train_run")
    trains = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and any(k in c.source for k in calls)]
    assert printed and trains and printed[0] < min(trains)


def test_bilateral_notebook_outputs(bilateral_book):
    """Notebook 10 on the smoke profile: the tournament's tables hold what they claim, the trade-off table has the
    three stages and their paired differences beside the source paper's finding, everything under the profile's
    output folder (written through the paths object)."""
    import pandas as pd

    from negolib.games.bilateral.env import BilateralConfig
    from negolib.params import load_params

    assert bilateral_book.ok, str(bilateral_book.error)
    assert bilateral_book.executed == [BILATERAL]
    out = bilateral_book.output_dir
    agents = load_params(ROOT / "params" / "smoke.yaml").games.bilateral.tournament.agents
    cross = pd.read_csv(out / "tables" / "bilateral_cross_table_data.csv")
    assert len(cross) == len(agents) ** 2 == 25  # every seller against every buyer, itself included
    assert set(cross["seller"]) == set(cross["buyer"]) == set(agents)
    assert cross["seller_payoff"].between(0, 1).all() and cross["n_errors"].eq(0).all()
    summary = pd.read_csv(out / "tables" / "bilateral_agent_summary_data.csv")
    assert set(summary["agent"]) == set(agents)
    assert (summary["payoff_low"] <= summary["payoff"]).all() and (summary["payoff"] <= summary["payoff_high"]).all()
    rating = pd.read_csv(out / "tables" / "bilateral_ratings_data.csv")
    assert rating["rating"].notna().all() and abs(rating["rating"].mean()) < 1e-6
    tiers = pd.read_csv(out / "tables" / "bilateral_tiers_data.csv", keep_default_na=False)
    assert list(tiers["tier"]) == ["10", "100", "1k", "10k", "100k", "all"]
    assert (tiers["ir_violations"].astype(int) == 0).all()  # scripted agents never trade past a reservation
    assert (out / "games" / "bilateral" / "tournament" / "matches.jsonl").exists()
    for fig in ("bilateral_cross_table", "bilateral_ratings"):
        assert (out / "figures" / f"{fig}.png").exists(), fig
    stages = pd.read_csv(out / "tables" / "bilateral_tradeoff_data.csv", keep_default_na=False)
    levels = stages[stages["kind"] == "stage"]
    assert list(dict.fromkeys(levels["stage"])) == ["base", "SFT", "SFT+GRPO"]  # the three stages, in order
    assert {"deal_rate", "surplus_share", "ir_violations"} <= set(levels["metric"])
    diffs = stages[stages["kind"] == "difference"]
    assert set(zip(diffs["stage"], diffs["baseline"])) == {("SFT", "base"), ("SFT+GRPO", "base"), ("SFT+GRPO", "SFT")}
    shown = pd.read_csv(out / "tables" / "bilateral_tradeoff.csv", index_col=0)
    assert list(shown.index) == ["base", "SFT", "SFT+GRPO", "SFT - base", "SFT+GRPO - base", "SFT+GRPO - SFT"]
    theirs = shown["Bergemann et al. (theirs, qualitative)"].fillna("")
    assert "doubles" in theirs["SFT - base"] and "recovers" in theirs["SFT+GRPO - SFT"]  # labelled as theirs
    training = out / "games" / "bilateral" / "training"
    assert (training / "sft" / "model" / "config.json").exists()
    assert list((training / "grpo" / "checkpoints").glob("checkpoint-*/config.json"))
    rules = pd.read_csv(out / "tables" / "bilateral_rules.csv").set_index("rule")["value"]
    deadline = BilateralConfig().deadline_turns
    assert f"{deadline} turns in all" in rules["deadline"]  # the table is written from the game's constants


def test_multi_buyer_notebook_outputs(multi_buyer_book):
    """Notebook 11 on the smoke profile: every scripted seller on every market arm with intervals, no overshoot by a
    scripted buyer, the language-model table with base, SFT, SFT+GRPO and the scripted reference beside the paper's
    qualitative findings (labelled as theirs, no numbers), everything under the profile's output folder."""
    import pandas as pd

    from negolib.games.multi_buyer.scenarios import EVAL_MARKETS, MarketConfig
    from negolib.params import load_params

    assert multi_buyer_book.ok, str(multi_buyer_book.error)
    assert multi_buyer_book.executed == [MULTI_BUYER]
    out = multi_buyer_book.output_dir
    g = load_params(ROOT / "params" / "smoke.yaml").games.multi_buyer
    scripted = pd.read_csv(out / "tables" / "multi_buyer_scripted_data.csv", keep_default_na=False)
    stage = scripted[scripted["kind"] == "stage"]
    assert set(stage["stage"]) == set(g.tournament.agents) and set(stage["market"]) == {*EVAL_MARKETS, "all"}
    assert set(stage["n_clusters"]) == {g.tournament.seeds_per_tier}
    assert stage.loc[stage["metric"] == "overshoots", "estimate"].astype(float).eq(0).all()  # scripted buyers
    surplus = stage[stage["metric"] == "normalised_surplus"]
    assert ((surplus["ci_low"].astype(float) <= surplus["estimate"].astype(float))
            & (surplus["estimate"].astype(float) <= surplus["ci_high"].astype(float))).all()
    arms = pd.read_csv(out / "tables" / "multi_buyer_arms.csv", index_col=0)
    assert list(arms.index) == list(g.tournament.agents) and list(arms.columns) == [*EVAL_MARKETS, "all"]
    shown = pd.read_csv(out / "tables" / "multi_buyer_lm.csv", index_col=0)  # base -> SFT -> SFT+GRPO (smoke)
    assert list(shown.index)[:3] == ["base", "SFT", "SFT+GRPO"]
    assert {"SFT - base", "SFT+GRPO - base", "SFT+GRPO - SFT"} <= set(shown.index)
    theirs = shown["Liu et al. (theirs, qualitative; no numbers)"].fillna("")
    assert "fixat" in theirs["base"] and "higher surplus" in theirs["SFT+GRPO - base"]
    sft = json.loads((out / "games" / "multi_buyer" / "training" / "sft" / "sft_summary.json").read_text())
    assert sft["examples"] == g.sft.max_examples and sft["assistant_tokens"] > 0
    lm = pd.read_csv(out / "tables" / "multi_buyer_lm_data.csv", keep_default_na=False)
    assert set(lm["market"]) == {*g.lm.eval_tiers, "all"}
    assert set(lm.loc[lm["kind"] == "stage", "n_clusters"]) == {g.lm.eval_seeds_per_tier}
    assert (out / "games" / "multi_buyer" / "tournament" / "matches.jsonl").exists()
    assert list((out / "games" / "multi_buyer" / "training" / "grpo" / "checkpoints").glob("checkpoint-*/config.json"))
    assert (out / "figures" / "multi_buyer_arms.png").exists()
    rules = pd.read_csv(out / "tables" / "multi_buyer_rules.csv").set_index("rule")["value"]
    assert f"{MarketConfig().turn_budget} seller turns" in rules["turn budget"]  # written from the constants


def test_multi_product_notebook_outputs(multi_product_book):
    """Notebook 12 on the smoke profile: every scripted seller on every market arm with seed-cluster intervals, the
    oracle labelled an upper bound and never beaten, no broken rule by a scripted seller, the language model before
    and after SFT and GRPO with their paired differences, the source paper's findings labelled as theirs with no
    number."""
    import re

    import pandas as pd

    from negolib.games.multi_product.scenarios import EVAL_MARKETS
    from negolib.params import load_params

    assert multi_product_book.ok, str(multi_product_book.error)
    assert multi_product_book.executed == [MULTI_PRODUCT]
    out = multi_product_book.output_dir
    g = load_params(ROOT / "params" / "smoke.yaml").games.multi_product
    table = pd.read_csv(out / "tables" / "multi_product_sellers_data.csv", keep_default_na=False)
    stage = table[table["kind"] == "stage"]
    assert set(stage["stage"]) == set(g.tournament.agents) and set(stage["market"]) == {*EVAL_MARKETS, "all"}
    assert set(stage.loc[stage["market"] == "all", "n_clusters"]) == {g.tournament.seeds_per_tier}
    est = stage.set_index(["stage", "market", "metric"])["estimate"].astype(float)
    assert (est.xs("constraint_adherence", level="metric") == 1.0).all()  # scripted sellers break no rule
    for metric in ("normalised_surplus", "revenue_ratio", "allocation_quality"):
        by = est.xs(("all", metric), level=("market", "metric"))
        assert by.max() <= 1.0 + 1e-9 and by["oracle"] >= by.drop("oracle").max()  # the oracle bounds the others
    assert ((stage["ci_low"].astype(float) <= stage["estimate"].astype(float) + 1e-12)
            & (stage["estimate"].astype(float) <= stage["ci_high"].astype(float) + 1e-12)).all()
    shown = pd.read_csv(out / "tables" / "multi_product_sellers.csv", index_col=0)
    assert "oracle (upper bound: reads valuations)" in shown.index and "random - greedy" in shown.index
    cons = pd.read_csv(out / "tables" / "multi_product_constraints_data.csv")
    assert cons[["sold_twice", "sales_below_cost", "offers_below_cost", "bad_parses"]].eq(0).all().all()
    arms = pd.read_csv(out / "tables" / "multi_product_arms.csv", index_col=0, header=[0, 1])
    assert list(arms.index) == list(EVAL_MARKETS)
    assert (out / "figures" / "multi_product_arms.png").exists()
    assert (out / "games" / "multi_product" / "tournament" / "matches.jsonl").exists()
    lm = pd.read_csv(out / "tables" / "multi_product_lm.csv", index_col=0)
    assert list(lm.index) == ["base", "SFT", "SFT+GRPO", "SFT - base", "SFT+GRPO - base", "SFT+GRPO - SFT"]
    sft = json.loads((out / "games" / "multi_product" / "training" / "sft" / "sft_summary.json").read_text())
    assert sft["examples"] == g.sft.max_examples and sft["assistant_tokens"] > 0
    lm_data = pd.read_csv(out / "tables" / "multi_product_lm_data.csv", keep_default_na=False)
    assert set(lm_data["market"]) == {*g.lm.eval_tiers, "all"}
    assert set(lm_data.loc[lm_data["kind"] == "stage", "n_episodes"]) == {g.lm.eval_seeds_per_tier}
    grpo = out / "games" / "multi_product" / "training" / "grpo"
    assert list((grpo / "checkpoints").glob("checkpoint-*/config.json"))
    findings = pd.read_csv(out / "tables" / "multi_product_findings.csv", index_col=0)
    assert findings.index.name.startswith("theirs") and len(findings) == 5
    assert not any(re.search(r"\d", t) for t in findings.index)  # theirs: qualitative, no number invented
    rules = pd.read_csv(out / "tables" / "multi_product_rules.csv").set_index("rule")["value"]
    assert rules["the four parts"].startswith("TO / PRODUCT / PRICE / MESSAGE")
