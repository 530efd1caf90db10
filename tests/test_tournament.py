"""The round-robin tournament: resumable play over one paired scenario set, the cross-table, per-agent
summaries and Bradley-Terry ratings with seed-cluster intervals, the report layer and the CLI."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest

from negolib.cli import main
from negolib.games import REGISTRY, get_game
from negolib.games.base import Game, Payoffs, UnknownAgent
from negolib.study.report.tournament import (
    agent_summary_display,
    cross_table_display,
    cross_table_figure,
    cross_table_matrix,
    ratings_display,
    ratings_figure,
)
from negolib.tournament import (
    ELO_SCALE,
    MATCHES_FILE,
    TournamentError,
    agent_summary,
    bradley_terry,
    cross_table,
    pairwise_comparisons,
    ratings,
    read_matches,
    run_tournament,
)

STRENGTHS = {"strong": 4.0, "mid": 1.0, "weak": 0.25}
TRUE_RATINGS = {a: 400 * math.log10(s) for a, s in STRENGTHS.items()}  # mean 0 already: 4 * 1 * 0.25 = 1


# -- a tiny fake game with known strengths ------------------------------------------------------------

@dataclass(frozen=True)
class FakeAgent:
    name: str
    role: str
    seed: int


class Interrupted(Exception):
    """Stands for a kill in the middle of a tournament."""


class FakeGame(Game):
    """Agents with Bradley-Terry strengths; scenarios: two strata x ``n_seeds`` seeds (cluster = seed).

    ``noisy``: in each episode the seller wins (payoffs 1, 0) with probability ``p_s / (p_s + p_b)``, else
    the buyer (0, 1), from a hash of (scenario, seller, buyer), so an agent's expected comparison score
    against another is its BT win probability. Otherwise the payoffs are the shares ``p_s / (p_s + p_b)``
    and ``p_b / (p_s + p_b)``, and self-play never deals. ``errors`` holds (seller, buyer, seed) triples
    whose episodes fail; ``fail_at`` raises :class:`Interrupted` on that ``play`` call (1-based)."""

    summary = "a fake game for tests"
    payoff_label = "share"

    def __init__(self, noisy: bool = False, errors: frozenset = frozenset(), name: str = "fake",
                 fail_at: int | None = None) -> None:
        self.noisy, self.errors, self.name, self.fail_at = noisy, errors, name, fail_at
        self.calls: list[tuple[str, str]] = []

    def scripted_strategies(self) -> tuple[str, ...]:
        return tuple(STRENGTHS)

    def make_agent(self, name: str, role: str, seed: int) -> FakeAgent:
        if name not in STRENGTHS:
            raise UnknownAgent(self.name, name, self.scripted_strategies())
        return FakeAgent(name, role, seed)

    def tournament_scenarios(self, n_seeds: int) -> list[tuple[str, int]]:
        return [(stratum, seed) for stratum in ("low", "high") for seed in range(n_seeds)]

    def scenario_key(self, scenario: tuple[str, int]) -> str:
        return f"{scenario[0]}|{scenario[1]}"

    def cluster(self, scenario_key: str) -> str:
        return scenario_key.split("|")[1]

    def play(self, seller: Any, buyer: Any, scenarios: Sequence[Any], seed: int,
             progress: bool = False) -> list[dict[str, Any]]:
        assert (seller.role, buyer.role) == ("seller", "buyer") and seller.seed == buyer.seed == seed
        self.calls.append((seller.name, buyer.name))
        if self.fail_at is not None and len(self.calls) == self.fail_at:
            raise Interrupted
        out = []
        for sc in scenarios:
            key = self.scenario_key(sc)
            if (seller.name, buyer.name, sc[1]) in self.errors:
                out.append({"scenario_key": key, "status": "error"})
                continue
            ps, pb = STRENGTHS[seller.name], STRENGTHS[buyer.name]
            q = ps / (ps + pb)
            if self.noisy:
                h = hashlib.sha256(f"{key}|{seller.name}|{buyer.name}".encode()).digest()
                won = int.from_bytes(h[:8], "big") / 2**64 < q
                out.append({"scenario_key": key, "s": float(won), "b": float(not won), "deal": True})
            elif seller.name == buyer.name:
                out.append({"scenario_key": key, "s": 0.0, "b": 0.0, "deal": False})
            else:
                out.append({"scenario_key": key, "s": q, "b": 1 - q, "deal": True})
        return out

    def payoffs(self, record: dict[str, Any]) -> Payoffs:
        if record.get("status") == "error":
            return Payoffs(0.0, 0.0, False, valid=False)
        return Payoffs(record["s"], record["b"], record["deal"])


AGENTS = ["strong", "mid", "weak"]


# -- Bradley-Terry fit ----------------------------------------------------------------------------------

def _scipy_bt(wins: np.ndarray) -> np.ndarray:
    """Independent fit: maximise sum_ij w_ij log(e^t_i / (e^t_i + e^t_j)) with scipy; centred log-strengths."""
    from scipy.optimize import minimize

    k = wins.shape[0]
    w = np.where(np.eye(k, dtype=bool), 0.0, wins)

    def nll(t: np.ndarray) -> tuple[float, np.ndarray]:
        d = t[:, None] - t[None, :]
        prob = 1 / (1 + np.exp(-d))  # P(i beats j)
        value = -np.sum(w * np.log(prob))
        # d/dt_k: sum_j w_kj (1 - P(k beats j)) - sum_i w_ik P(k beats i)
        grad = -(np.sum(w * (1 - prob), axis=1) - np.sum(w.T * prob, axis=1))
        return value, grad

    res = minimize(nll, np.zeros(k), jac=True, method="BFGS", options={"gtol": 1e-12, "maxiter": 10_000})
    return res.x - res.x.mean()


def test_bt_mm_matches_an_independent_maximum_likelihood_fit():
    rng = np.random.default_rng(7)
    for k in (2, 3, 5, 8):
        wins = rng.integers(1, 30, (k, k)).astype(float) + rng.integers(0, 2, (k, k)) * 0.5
        np.testing.assert_allclose(bradley_terry(wins), _scipy_bt(wins), atol=1e-6)
        prior = 1.0  # virtual ties: the same fit on the wins with half a win added each way
        np.testing.assert_allclose(bradley_terry(wins, prior), _scipy_bt(wins + prior / 2), atol=1e-6)


def test_bt_recovers_known_strengths_and_fits_batches_row_by_row():
    logp = np.log([8.0, 2.0, 1.0, 0.25])
    n = 40.0
    expected_wins = n / (1 + np.exp(logp[None, :] - logp[:, None]))  # n * p_i / (p_i + p_j)
    np.testing.assert_allclose(bradley_terry(expected_wins), logp - logp.mean(), atol=1e-9)
    rng = np.random.default_rng(0)
    batch = rng.integers(0, 20, (6, 4, 4)).astype(float)
    batch[2] = np.triu(batch[2] + 1, 1)  # agent 0 beats everyone, never loses: no finite MLE
    fit = bradley_terry(batch)
    assert np.isnan(fit[2]).all() and not np.isnan(np.delete(fit, 2, axis=0)).any()
    for b in (0, 1, 3, 4, 5):
        np.testing.assert_allclose(fit[b], bradley_terry(batch[b]), atol=1e-12)
    assert np.isfinite(bradley_terry(batch[2], prior=1.0)).all()
    with pytest.raises(ValueError, match="shape"):
        bradley_terry(np.zeros((2, 3)))


# -- ratings, summary, cross-table on the fake game -----------------------------------------------------

def test_ratings_recover_the_known_order_and_intervals_contain_the_true_ratings(tmp_path):
    res = run_tournament(FakeGame(noisy=True), AGENTS, 150, tmp_path, progress=False)
    r = ratings(res.frame, n_resamples=2000, seed=1)
    assert list(r.sort_values("rating", ascending=False).index) == AGENTS
    assert abs(r["rating"].mean()) < 1e-9
    for a in AGENTS:
        assert r.loc[a, "ci_low"] < TRUE_RATINGS[a] < r.loc[a, "ci_high"], (a, r.loc[a].to_dict())
        assert r.loc[a, "ci_high"] - r.loc[a, "ci_low"] < 200
    assert (r["comparisons"] == 2 * 300).all() and (r["n_excluded"] == 0).all() and (r["n_undefined"] == 0).all()
    assert r["wins"].sum() == pytest.approx(3 * 300)  # one point per comparison
    # the deterministic game: stronger always wins; no finite MLE without the prior, an ordered fit with it
    det = run_tournament(FakeGame(), AGENTS, 3, tmp_path / "det", progress=False).frame
    assert np.isnan(ratings(det, n_resamples=50, prior=0.0)["rating"]).all()
    r1 = ratings(det, n_resamples=50)
    assert r1.loc["strong", "rating"] > r1.loc["mid", "rating"] > r1.loc["weak", "rating"]
    assert list(r1["score"]) == [1.0, 0.5, 0.0]


def test_pairwise_comparisons_add_both_roles():
    res_frame = pd.DataFrame({
        "seller": ["a", "b", "a", "b"], "buyer": ["b", "a", "b", "a"], "scenario_key": ["x", "x", "y", "y"],
        "cluster": ["0", "0", "1", "1"], "seller_payoff": [0.9, 0.2, 0.5, 0.5], "buyer_payoff": [0.1, 0.3, 0.5, 0.5],
        "deal": True, "valid": True})
    cmp = pairwise_comparisons(res_frame).set_index("scenario_key")
    assert cmp.loc["x", "total_a"] == pytest.approx(0.9 + 0.3) and cmp.loc["x", "total_b"] == pytest.approx(0.3)
    assert cmp.loc["x", "score_a"] == 1.0 and cmp.loc["y", "score_a"] == 0.5  # 1.0 vs 1.0: a tie
    w = ratings(res_frame, n_resamples=20)["wins"]
    assert w["a"] == 1.5 and w["b"] == 0.5


def test_cross_table_shape_and_values(tmp_path):
    res = run_tournament(FakeGame(), AGENTS, 2, tmp_path, progress=False)
    assert len(res.frame) == 9 * 4 and res.played == 9 and res.skipped == 0
    cross = cross_table(res.frame)
    assert cross.shape == (9, 5) and list(cross.index.get_level_values("seller")[::3]) == AGENTS
    for s in AGENTS:
        for b in AGENTS:
            q = STRENGTHS[s] / (STRENGTHS[s] + STRENGTHS[b])
            row = cross.loc[(s, b)]
            if s == b:
                assert (row["seller_payoff"], row["buyer_payoff"], row["deal_rate"]) == (0, 0, 0)
            else:
                assert row["seller_payoff"] == pytest.approx(q) and row["buyer_payoff"] == pytest.approx(1 - q)
                assert row["deal_rate"] == 1.0
            assert row["n_episodes"] == 4 and row["n_errors"] == 0
    summary = agent_summary(res.frame, n_resamples=200)
    for a in AGENTS:  # both roles, all opponents, self-play (no deal) included
        shares = [STRENGTHS[a] / (STRENGTHS[a] + STRENGTHS[b]) for b in AGENTS if b != a]
        assert summary.loc[a, "payoff"] == pytest.approx(sum(shares) / 3)
        assert summary.loc[a, "deal_rate"] == pytest.approx(2 / 3)
        assert summary.loc[a, "n_episodes"] == 2 * 3 * 4 and summary.loc[a, "n_clusters"] == 2


def test_agent_summary_interval_is_the_scipy_seed_cluster_bootstrap(tmp_path):
    from scipy.stats import bootstrap

    res = run_tournament(FakeGame(noisy=True), AGENTS, 12, tmp_path, progress=False)
    summary = agent_summary(res.frame, n_resamples=999, seed=3)
    f = res.frame
    for a in ("mid", "weak"):
        rows = pd.concat([f[f["seller"] == a].assign(v=f["seller_payoff"]),
                          f[f["buyer"] == a].assign(v=f["buyer_payoff"])])
        per = rows.groupby("cluster")["v"].agg(["sum", "count"]).sort_index()
        ci = bootstrap((per["sum"].to_numpy(), per["count"].to_numpy(float)),
                       lambda n, d, axis: n.sum(axis=axis) / d.sum(axis=axis), paired=True, vectorized=True,
                       n_resamples=999, method="percentile", rng=3).confidence_interval
        assert summary.loc[a, "payoff"] == pytest.approx(per["sum"].sum() / per["count"].sum())
        assert (summary.loc[a, "payoff_low"], summary.loc[a, "payoff_high"]) == pytest.approx((ci.low, ci.high))
        assert summary.loc[a, "payoff_low"] < summary.loc[a, "payoff_high"]


def test_error_records_are_left_out_and_counted(tmp_path):
    game = FakeGame(errors=frozenset({("weak", "mid", 0)}))
    res = run_tournament(game, AGENTS, 3, tmp_path, progress=False)
    assert res.n_errors == 2 and (~res.frame["valid"]).sum() == 2  # seed 0 in both strata
    cross = cross_table(res.frame)
    cell = cross.loc[("weak", "mid")]
    assert cell["n_errors"] == 2 and cell["n_episodes"] == 4
    assert cell["seller_payoff"] == pytest.approx(0.2)  # errors not averaged in as zeros
    assert cross["n_errors"].sum() == 2
    summary = agent_summary(res.frame, n_resamples=100)
    assert summary["n_errors"].to_dict() == {"strong": 0, "mid": 2, "weak": 2}
    assert summary.loc["weak", "n_episodes"] == 2 * 3 * 6 - 2
    r = ratings(res.frame, n_resamples=100)
    assert r["n_excluded"].to_dict() == {"strong": 0, "mid": 2, "weak": 2}
    assert r.loc["weak", "comparisons"] == 2 * 6 - 2 and r.loc["strong", "comparisons"] == 2 * 6
    assert "[2 err]" in cross_table_display(cross).loc["weak", "mid"]
    # errors are final on a plain rerun; retry_errors plays only the match that holds them
    again = FakeGame()
    assert run_tournament(again, AGENTS, 3, tmp_path, progress=False).n_errors == 2 and again.calls == []
    fixed = run_tournament(again, AGENTS, 3, tmp_path, progress=False, retry_errors=True)
    assert again.calls == [("weak", "mid")] and fixed.n_errors == 0 and fixed.played == 1


# -- resuming --------------------------------------------------------------------------------------------

def test_a_killed_run_resumes_with_the_missing_matches_only(tmp_path):
    with pytest.raises(Interrupted):
        run_tournament(FakeGame(fail_at=5), AGENTS, 2, tmp_path, progress=False)
    assert len(read_matches(tmp_path / MATCHES_FILE)) == 4 * 4
    game = FakeGame()
    res = run_tournament(game, AGENTS, 2, tmp_path, progress=False)
    all_pairs = [(s, b) for s in AGENTS for b in AGENTS]
    assert game.calls == all_pairs[4:] and (res.played, res.skipped) == (5, 4)
    again = FakeGame()
    assert run_tournament(again, AGENTS, 2, tmp_path, progress=False).played == 0 and again.calls == []
    # adding an agent plays only its matches; an unknown one fails before anything is played
    grow = tmp_path / "grow"
    run_tournament(FakeGame(), AGENTS[:2], 2, grow, progress=False)
    more = FakeGame()
    res = run_tournament(more, AGENTS, 2, grow, progress=False)
    assert sorted(more.calls) == sorted(p for p in all_pairs if "weak" in p) and res.skipped == 4
    with pytest.raises(ValueError, match="known: strong, mid, weak"):
        run_tournament(more, [*AGENTS, "nobody"], 2, grow, progress=False)
    assert len(more.calls) == 5


def test_a_torn_last_line_is_dropped_and_its_match_played_again(tmp_path):
    full = run_tournament(FakeGame(), AGENTS, 2, tmp_path, progress=False).frame
    path = tmp_path / MATCHES_FILE
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-2]) + lines[-2][: len(lines[-2]) // 2])  # kill mid-write of the last match
    assert len(read_matches(path)) == len(lines) - 2  # the torn line is not read
    game = FakeGame()
    res = run_tournament(game, AGENTS, 2, tmp_path, progress=False)
    assert game.calls == [("weak", "weak")] and res.played == 1
    data = path.read_bytes()
    assert data.endswith(b"\n") and all(json.loads(x) for x in data.splitlines())  # torn tail truncated
    pd.testing.assert_frame_equal(res.frame, full)


def test_other_settings_are_refused_naming_the_file_and_what_differs(tmp_path):
    run_tournament(FakeGame(), AGENTS, 2, tmp_path, progress=False)
    path = tmp_path / MATCHES_FILE
    before = path.read_bytes()
    with pytest.raises(TournamentError, match=r"matches\.jsonl.*n_seeds: 2 in the file, 3 in this run"):
        run_tournament(FakeGame(), AGENTS, 3, tmp_path, progress=False)
    with pytest.raises(TournamentError, match=r"game: 'fake' in the file, 'other' in this run"):
        run_tournament(FakeGame(name="other"), AGENTS, 2, tmp_path, progress=False)
    with pytest.raises(TournamentError, match=r"agent_seed: 0 in the file, 5 in this run"):
        run_tournament(FakeGame(), AGENTS, 2, tmp_path, seed=5, progress=False)
    assert path.read_bytes() == before
    path.write_bytes(before + b"{not json\n")
    line = before.count(b"\n") + 1
    with pytest.raises(TournamentError, match=rf"{MATCHES_FILE}:{line}: unreadable"):
        run_tournament(FakeGame(), AGENTS, 2, tmp_path, progress=False)


# -- the report layer ----------------------------------------------------------------------------------

def test_report_tables_and_figures(tmp_path):
    res = run_tournament(FakeGame(), AGENTS, 2, tmp_path, progress=False)
    cross = cross_table(res.frame)
    mat = cross_table_matrix(cross)
    assert list(mat.index) == AGENTS and list(mat.columns) == AGENTS
    assert mat.loc["strong", "weak"] == pytest.approx(4 / 4.25)
    assert cross_table_display(cross).loc["strong", "weak"] == "0.94 / 0.06 (100%)"
    fig = cross_table_figure(cross)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == [f"{v:.2f}" for v in mat.to_numpy().ravel()]
    r = ratings(res.frame, n_resamples=50)
    assert list(ratings_display(r).index) == AGENTS
    labels = [t.get_text() for t in ratings_figure(r).axes[0].get_yticklabels()]
    assert labels == AGENTS[::-1]  # highest on top
    s = agent_summary_display(agent_summary(res.frame, n_resamples=50))
    assert list(s.index) == AGENTS and s.loc["strong", "deal rate [95% CI]"] == "67% [67%, 67%]"
    fig.savefig(tmp_path / "x.png")
    assert (tmp_path / "x.png").stat().st_size > 1000


# -- the command line ----------------------------------------------------------------------------------

SCRIPTED = ["boulware", "conceder", "fixed_offer"]


def test_cli_tournament_on_the_paper_game_writes_files_and_resumes(tmp_path, capsys, monkeypatch):
    game_cls = type(get_game("multi_issue"))
    calls = []
    real_play = game_cls.play

    def counted(self, seller, buyer, scenarios, seed, progress=False):  # type: ignore[no-untyped-def]
        calls.append((seller.name, buyer.name))
        return real_play(self, seller, buyer, scenarios, seed, progress)

    monkeypatch.setattr(game_cls, "play", counted)
    args = ["tournament", "--game", "multi_issue", "--agents", ",".join(SCRIPTED), "--seeds", "1",
            "--out", str(tmp_path), "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "9 matches played, 0 already complete" in out and "81 episodes" in out
    assert len(calls) == 9
    for text in ("cross-table", "per agent", "ratings", "rating [95% CI]", "payoff [95% CI]"):
        assert text in out
    for name in ("cross_table.csv", "agents.csv", "ratings.csv", "cross_table.png", "ratings.png"):
        assert (tmp_path / name).stat().st_size > 0
    cross = pd.read_csv(tmp_path / "cross_table.csv").set_index(["seller", "buyer"])
    assert cross.shape == (9, 5) and (cross["n_episodes"] == 9).all()
    game = get_game("multi_issue")  # the cell read back against the game played directly
    sc = game.tournament_scenarios(1)
    recs = real_play(game, game.make_agent("boulware", "seller", 0), game.make_agent("conceder", "buyer", 0), sc, 0)
    direct = np.mean([game.payoffs(r).seller for r in recs])
    assert cross.loc[("boulware", "conceder"), "seller_payoff"] == pytest.approx(direct, abs=1e-12)
    assert cross.loc[("fixed_offer", "fixed_offer"), "deal_rate"] == 0.0
    agents = pd.read_csv(tmp_path / "agents.csv", index_col="agent")
    rates = pd.read_csv(tmp_path / "ratings.csv", index_col="agent")
    assert set(agents.index) == set(rates.index) == set(SCRIPTED)
    assert abs(rates["rating"].mean()) < 1e-9 and (rates["comparisons"] == 2 * 9).all()
    calls.clear()
    assert main(args) == 0
    assert "0 matches played, 9 already complete" in capsys.readouterr().out and calls == []
    assert main([*args[:6], "2", *args[7:]]) == 2  # --seeds 2 on the same folder: refused, one line
    err = capsys.readouterr().err
    assert err.startswith("error:") and "n_seeds: 1 in the file, 2 in this run" in err and calls == []


def test_cli_unknown_game_or_agent_is_one_line_without_traceback(tmp_path, capsys):
    assert main(["tournament", "--game", "chess", "--agents", "a,b", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: no game 'chess'; registered: " + ", ".join(sorted(REGISTRY))
    assert main(["tournament", "--game", "multi_issue", "--agents", "boulware,nobody", "--out",
                 str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "game 'multi_issue' has no agent 'nobody'; known: boulware" in err
    assert not (tmp_path / MATCHES_FILE).exists()
    r = subprocess.run([sys.executable, "-m", "negolib", "tournament", "--game", "chess", "--agents", "x",
                        "--out", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.startswith("error: no game 'chess'")


@pytest.mark.parametrize("name", sorted(set(REGISTRY) - {"multi_issue"}))
def test_cli_tournament_on_every_other_registered_game(name, tmp_path, capsys, monkeypatch):
    """Every other registered game (the bilateral price game among them) through the same command."""
    game = get_game(name)
    agents = list(game.scripted_strategies())[:3]
    calls = []
    real_play = type(game).play

    def counted(self, seller, buyer, scenarios, seed, progress=False):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real_play(self, seller, buyer, scenarios, seed, progress)

    monkeypatch.setattr(type(game), "play", counted)
    args = ["tournament", "--game", name, "--agents", ",".join(agents), "--seeds", "1", "--out", str(tmp_path),
            "--no-progress"]
    assert main(args) == 0
    n_episodes = 9 * len(game.tournament_scenarios(1))
    assert "9 matches played, 0 already complete" in capsys.readouterr().out and len(calls) == 9
    for file in ("cross_table.csv", "agents.csv", "ratings.csv", "cross_table.png", "ratings.png"):
        assert (tmp_path / file).stat().st_size > 0
    cross = pd.read_csv(tmp_path / "cross_table.csv")
    assert cross.shape == (9, 7) and cross["n_episodes"].sum() + cross["n_errors"].sum() == n_episodes
    rates = pd.read_csv(tmp_path / "ratings.csv", index_col="agent")
    assert list(rates.index) == agents and np.isfinite(rates["rating"]).all()
    assert main(args) == 0
    assert "0 matches played, 9 already complete" in capsys.readouterr().out and len(calls) == 9


def test_elo_scale_is_400_log10():
    assert ELO_SCALE * math.log(10) == pytest.approx(400)
