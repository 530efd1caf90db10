"""The book runner: executes notebooks with papermill, resumes, names a failing notebook and cell,
writes the index; and the interactive helpers of notebook 01 (headless)."""

from __future__ import annotations

from pathlib import Path

import pytest

from negolib.book.context import BookPaths, BuyerSession, EpisodeExplorer, open_book, open_results
from negolib.book.runner import BookError, resolve_notebooks, run_book
from negolib.params import NOTEBOOKS

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "params" / "smoke.yaml"

HEADER = """# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---
"""
PARAMS = """
# %% tags=["parameters"]
params_path: str = "../params/smoke.yaml"
output_dir: str = ""
"""
GOOD = HEADER + PARAMS + """
# %%
from pathlib import Path
from negolib.book.context import open_book
B = open_book(params_path, output_dir or None)
(B.paths.tables / "marker.md").write_text(B.params.profile)
"""
BAD = HEADER + PARAMS + """
# %%
x = 1

# %%
raise ValueError("boom in the second cell")
"""


def test_resolve_notebooks_by_prefix():
    assert resolve_notebooks(["05", "01_environment"]) == ["01_environment", "05_results"]
    assert resolve_notebooks(None)[0] == "01_environment" and resolve_notebooks(None) == list(NOTEBOOKS)
    assert resolve_notebooks(["10"]) == ["10_bilateral_trade"]
    with pytest.raises(ValueError, match="no notebook matches"):
        resolve_notebooks(["99"])


def test_runner_executes_resumes_and_indexes(tmp_path):
    nbs = tmp_path / "nb"
    nbs.mkdir()
    (nbs / "01_environment.py").write_text(GOOD)
    (nbs / "02_setup.py").write_text(GOOD.replace("marker", "marker2"))
    out = tmp_path / "out"
    r1 = run_book(SMOKE, output_dir=out, folder=nbs, progress=False)
    assert r1.ok, r1.error
    assert r1.executed == ["01_environment", "02_setup"]
    assert (out / "notebooks" / "01_environment.ipynb").exists()
    assert (out / "tables" / "marker.md").read_text() == "smoke"
    index = (out / "index.md").read_text()
    assert "notebooks/01_environment.ipynb" in index and "notebooks/02_setup.ipynb" in index
    assert (out / "index.html").exists()
    timing = open_book(SMOKE, out).last_run("02_setup")  # what a notebook reads of its own last run
    assert timing["status"] == "ok" and timing["duration_s"] > 0 and timing["finished"]
    assert open_book(SMOKE, out).last_run("09_beyond") == {}
    r2 = run_book(SMOKE, output_dir=out, folder=nbs, progress=False)
    assert r2.skipped == ["01_environment", "02_setup"] and r2.executed == []
    (nbs / "02_setup.py").write_text(GOOD.replace("marker", "marker3"))
    r3 = run_book(SMOKE, output_dir=out, folder=nbs, progress=False)
    assert r3.skipped == ["01_environment"] and r3.executed == ["02_setup"]
    r4 = run_book(SMOKE, output_dir=out, folder=nbs, progress=False, resume=False)
    assert r4.executed == ["01_environment", "02_setup"]
    assert "budget" in str(r4)


def test_runner_records_each_kernels_peak_memory(tmp_path):
    """The headline carries the largest kernel's peak resident memory: a notebook that holds 600 MB sets it, and
    the small notebook before it (its sabotaged twin: the same code without the allocation) stays far below. The
    book runs in a fresh process, as `make book` does (a process's children's high-water mark only rises)."""
    import json
    import subprocess
    import sys

    nbs = tmp_path / "nb"
    nbs.mkdir()
    (nbs / "01_environment.py").write_text(GOOD)
    hold = "\nheld = bytearray(600 * 2**20)\nheld[::4096] = b'x' * len(held[::4096])\n"  # touch every page
    (nbs / "02_setup.py").write_text(GOOD + hold)
    out = tmp_path / "out"
    code = ("import json, sys; from negolib.book.runner import run_book; "
            f"r = run_book({str(SMOKE)!r}, output_dir={str(out)!r}, folder={str(nbs)!r}, progress=False); "
            "print(json.dumps([r.ok, [x.peak_memory_gb for x in r.runs], str(r)]))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ok, (small, big), text = json.loads(proc.stdout.strip().splitlines()[-1])
    assert ok
    assert small is not None and small < 0.55 and big is not None and big >= 0.6
    headline = json.loads((out / "headline.json").read_text())
    assert headline["peak_memory_gb"] == big
    assert headline["notebook_peak_memory_gb"] == {"01_environment": small, "02_setup": big}
    assert "peak" in text


def test_runner_names_the_failing_notebook_and_cell(tmp_path):
    nbs = tmp_path / "nb"
    nbs.mkdir()
    (nbs / "01_environment.py").write_text(GOOD)
    (nbs / "02_setup.py").write_text(BAD)
    out = tmp_path / "out"
    res = run_book(SMOKE, output_dir=out, folder=nbs, progress=False)
    assert not res.ok
    err = res.error
    assert isinstance(err, BookError)
    assert err.notebook == "02_setup" and err.cell_index == 2
    assert "raise ValueError" in err.first_line and "boom in the second cell" in str(err)
    assert "02_setup" in str(err) and "cell 2" in str(err)
    assert [r.status for r in res.runs] == ["ok", "failed"]
    with pytest.raises(BookError, match="02_setup failed at cell 2"):
        run_book(SMOKE, output_dir=out, folder=nbs, progress=False, raise_on_error=True)
    # the good notebook is not re-run after the failure
    again = run_book(SMOKE, output_dir=out, folder=nbs, progress=False)
    assert again.runs[0].status == "skipped"


def test_book_paths_and_context(tmp_path):
    b = open_book(SMOKE, tmp_path / "o")
    assert isinstance(b.paths, BookPaths)
    assert b.paths.transcripts.parent.is_dir() and b.paths.tables.is_dir()
    root = (tmp_path / "o").resolve()  # another game's outputs stay under the profile's output folder
    assert b.paths.game_tournament("bilateral").parent == b.paths.game("bilateral") == root / "games" / "bilateral"
    assert b.paths.game_training("bilateral", "sft").parent.parent == b.paths.game("bilateral")
    assert b.paths.game_training("bilateral", "sft") != b.paths.game_training("bilateral", "grpo")
    assert b.paths.state.parent == root
    assert b.episodes().empty and b.records() == []
    assert b.paper.arm("e2b_base")["deal_rate"] == 0.939



def test_open_results_is_the_results_notebooks_first_cell(tmp_path):
    """What notebooks 05, 07, 08 and 09 open with: the book, its params and paper, the results, the records and the
    imported scenarios, as their first cell computed them by hand (here before any evaluation: all empty)."""
    book, params, paper, results, records, imported = open_results(SMOKE, str(tmp_path / "o"))
    again = open_book(SMOKE, tmp_path / "o")
    assert book.paths == again.paths and params == again.params
    assert paper.arm("e2b_base") == again.paper.arm("e2b_base")
    assert results.empty and records == [] == again.records() and imported == {}
def test_explorer_and_buyer_session_headless(tmp_path):
    b = open_book(SMOKE, tmp_path / "o")
    ex = EpisodeExplorer(b)
    rec = ex.play("car", 5_000_053, "hardheaded", "buyer_linear")
    assert rec["status"] in ("deal", "no_deal") and rec["turns"]
    turn, table = ex.turn(rec, 1)
    assert turn["role"] == "seller" and "seller contribution" in table.columns
    assert set(table.index) >= {"price", "model"}
    s = BuyerSession(b, "boulware", "car", 5_000_053, cache=ex.cache)
    assert len(s.episode.turns) == 1  # the seller opened
    assert "weight" in s.brief().columns
    new = s.buyer_turn("I'd like a lower price.", {"price": 30})
    assert [t.role for t in new] == ["buyer", "seller"]
    s.buyer_turn("Deal.", accept=True)
    assert s.episode.done and "episode over" in s.status()


API_PROFILE = """
profile: apitest
evaluation:
  buyers: [buyer_linear, buyer_hardheaded]
  seeds_per_domain: 2
  domains: [job_offer, car]
  max_rounds: 3
  pilot_episodes: 1
arms:
  boulware: {backend: scripted, strategy: boulware}
  api_seller:
    backend: openai
    model: test-model
    base_url: BASE_URL
    api_key_env: NEGOBOOK_TEST_KEY
    sampling: {temperature: 1.0, top_p: 0.95, top_k: 64, max_new_tokens: 64}
buyers:
  buyer_linear: {backend: scripted, strategy: linear}
  buyer_hardheaded: {backend: scripted, strategy: hardheaded}
statistics: {n_resamples: 200, refine: false}
prices: {test-model: {input: 2.0, output: 8.0}}
"""


def test_api_arm_through_the_book_never_leaks_its_key(tmp_path, monkeypatch):
    """04 and 08 against a local OpenAI-compatible server over real HTTP: the dry run, the pilot gate,
    the evaluation and the cost table work, and the sentinel key appears in no output file."""
    from servers import ChatServer

    sentinel = "sk-SENTINEL-negobook-0123456789"
    monkeypatch.setenv("NEGOBOOK_TEST_KEY", sentinel)
    with ChatServer("openai") as server:
        prof = tmp_path / "api.yaml"
        prof.write_text(API_PROFILE.replace("BASE_URL", server.base_url))
        res = run_book(prof, notebooks=["04", "08"], output_dir=tmp_path / "out", progress=False)
        assert res.ok, res.error
        assert server.stats.requests > 0
    out = tmp_path / "out"
    cost = (out / "tables" / "cost.md").read_text()
    assert "api_seller" in cost and "API" in cost
    for path in out.rglob("*"):
        if path.is_file():
            assert sentinel not in path.read_text(errors="ignore"), f"key leaked into {path}"


def test_book_refuses_records_of_another_protocol(tmp_path):
    """Notebook 05 reads through the book: records stamped with another protocol's hash are refused
    once the frozen protocol exists (not only by the evaluation runner)."""
    import dataclasses

    from negolib.study.evaluation import ProtocolError, evaluate_arms, freeze, protocol_from_params
    from negolib.study.runs import build_agents

    b = open_book(SMOKE, tmp_path / "o")
    proto = protocol_from_params(b.params, arms=["boulware"])
    proto = dataclasses.replace(proto, arms=(dataclasses.replace(proto.arms[0], n_seeds=1, domains=("car",)),),
                                primary=())
    agents = build_agents(b.params, ["boulware", *proto.buyers])
    evaluate_arms(proto, agents, b.paths.transcripts)
    protocol_file = b.paths.evaluation / "protocol.yaml"
    freeze(dataclasses.replace(proto, bootstrap_seed=proto.bootstrap_seed + 1), protocol_file)
    with pytest.raises(ProtocolError, match="another protocol"):
        b.episodes()
    with pytest.raises(ProtocolError):
        b.records()
    freeze(proto, protocol_file, overwrite=True)
    assert len(b.episodes()) == len(b.records()) == len(proto.buyers)


def test_training_log_skips_a_torn_last_line(tmp_path):
    b = open_book(SMOKE, tmp_path / "o")
    run = next(iter(b.params.training.runs))
    d = b.training_dir(run)
    d.mkdir(parents=True, exist_ok=True)
    (d / "train_log.jsonl").write_text('{"step": 1, "reward": 0.1}\n{"step": 2, "rew', encoding="utf-8")
    with pytest.warns(UserWarning, match="partial last line"):
        log = b.training_log(run)
    assert list(log["step"]) == [1]
