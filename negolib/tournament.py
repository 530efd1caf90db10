"""Round-robin tournament of a registered game's agents, resumable, with paired seed-cluster statistics.

Contract: :func:`run_tournament` plays every agent against every agent (self-play included) as seller and as
buyer over one paired scenario set, appending one JSON line per episode to ``<out_dir>/matches.jsonl`` (a rerun
plays only incomplete matches; other settings are refused; every line is checked on read,
:mod:`negolib.games.matches`). Analysis reads the tidy episode frame only:
:func:`cross_table`, :func:`agent_summary` and :func:`ratings` (Bradley-Terry, Hunter's MM algorithm, on an
Elo-like scale) return numeric frames with percentile intervals over seed clusters (:mod:`negolib.stats`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from negolib.core.files import locked_append
from negolib.core.progress import ProgressBar as tqdm
from negolib.games.base import Game
from negolib.games.matches import (
    MATCHES_FILE,
    MatchRecord,
    TournamentError,
    TournamentSettings,
    check_episode,
    check_lines,
    check_settings,
    drop_torn_tail,
    latest_matches,
    plain_settings,
    read_lines,
    read_matches,
    run_lock,
)
from negolib.stats import ClusterResampler, RatioStat, resample_stats, summarize

ELO_SCALE = 400.0 / math.log(10.0)
"""Natural-log strength -> Elo-like points: 400 points = a factor 10 in strength (odds 10:1)."""
TIE_TOL = 1e-9
"""Two payoff totals closer than this are a tie (half a win each)."""

FRAME_COLUMNS = ("seller", "buyer", "scenario_key", "cluster", "seller_payoff", "buyer_payoff", "deal", "valid")


# ---------------------------------------------------------------------------------------------
# Playing
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TournamentResult:
    """A tournament's episodes and what this call did.

    ``frame`` has one row per (seller, buyer, scenario) with :data:`FRAME_COLUMNS` (``seller``/``buyer``
    categorical in the order of ``agents``; error episodes kept with ``valid`` False); ``played`` and
    ``skipped`` count matches (ordered seller-buyer pairs), ``n_errors`` episodes with ``valid`` False.
    """

    path: Path
    settings: TournamentSettings
    agents: tuple[str, ...]
    frame: pd.DataFrame = field(repr=False)
    played: int
    skipped: int
    n_errors: int

    @property
    def n_matches(self) -> int:
        return len(self.agents) ** 2


def run_tournament(game: Game, agents: Sequence[str] | None, n_seeds: int, out_dir: str | Path, seed: int = 0,
                   progress: bool = True, retry_errors: bool = False) -> TournamentResult:
    """Play the round robin of ``agents`` (``K`` names: ``K**2`` matches, self-play included; None:
    ``game.default_agents()``) on ``game.tournament_scenarios(n_seeds)``, resuming ``<out_dir>/matches.jsonl``.

    Each match gets fresh agents (``game.make_agent(name, role, seed)``) and one ``game.play`` call, so its
    episodes depend only on the pair, the scenarios and ``seed``; its records are checked like those read back
    and appended in one locked write. A match is complete when every scenario has a record (``retry_errors``: a
    valid one); an incomplete match is played again whole and the records of its missing (``retry_errors``: and
    error) episodes are appended, so one episode never has two different valid records. Unknown agents raise
    before anything is played; a file of another game or other settings (:meth:`Game.settings` included), a bad
    line, a conflicting duplicate or a scenario outside this tournament raises :class:`TournamentError` naming
    the file and line (:mod:`negolib.games.matches`).
    """
    names = [str(a) for a in (game.default_agents() if agents is None else agents)]
    if not names:
        raise ValueError("a tournament needs at least one agent")
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate agents in {names}")
    if int(n_seeds) != n_seeds or n_seeds < 1:
        raise ValueError(f"n_seeds must be a positive integer, got {n_seeds!r}")
    for name in names:  # unknown names fail here, naming the game's agents, before any match is played
        game.make_agent(name, "seller", seed)
    settings = TournamentSettings(game.name, int(seed), int(n_seeds), plain_settings(game.settings()))
    scenarios = game.tournament_scenarios(int(n_seeds))
    keys = [game.scenario_key(sc) for sc in scenarios]
    if len(set(keys)) != len(keys):
        raise ValueError(f"game {game.name!r} returned duplicate scenario keys")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / MATCHES_FILE
    with run_lock(path):
        drop_torn_tail(path)
        lines = read_lines(path)
        check_settings(path, [r for _, r in lines], settings, [n for n, _ in lines])
        check_lines(path, lines, game)
        known = set(keys)
        for n, r in lines:
            if r.scenario_key not in known:
                raise TournamentError(f"{path}:{n}: scenario {r.scenario_key!r} is not one of this tournament's "
                                      f"{len(keys)} scenarios")
        latest = latest_matches(path, lines, game)

        def needed(s: str, b: str, k: str) -> bool:
            r = latest.get((s, b, k))
            return r is None or (retry_errors and not game.payoffs(r.record).valid)

        pairs = [(s, b) for s in names for b in names]
        todo = [p for p in pairs if any(needed(*p, k) for k in keys)]
        bar = tqdm(total=len(pairs), initial=len(pairs) - len(todo), desc=f"tournament {game.name}",
                   unit="match", disable=not progress)
        try:
            for s, b in todo:
                bar.set_postfix_str(f"{s} vs {b}", refresh=False)
                records = game.play(game.make_agent(s, "seller", seed), game.make_agent(b, "buyer", seed),
                                    scenarios, seed=int(seed), progress=False)
                got = [str(r.get("scenario_key")) for r in records]
                if got != keys:
                    raise ValueError(f"game {game.name!r}: play returned records for {len(got)} scenarios "
                                     f"not matching the {len(keys)} scenarios asked for")
                batch = [MatchRecord(settings.game, settings.agent_seed, settings.n_seeds, s, b, k, r,
                                     settings.game_settings) for k, r in zip(keys, records) if needed(s, b, k)]
                for m in batch:
                    check_episode(game, m.record, f"{path} (appending {s} vs {b} on {m.scenario_key!r})")
                locked_append(path, "".join(m.to_line() for m in batch).encode("utf-8"))
                latest.update({m.key: m for m in batch})
                bar.update(1)
        finally:
            bar.close()
    frame = episode_frame(game, [latest[(s, b, k)] for s, b in pairs for k in keys], names)
    return TournamentResult(path, settings, tuple(names), frame, len(todo), len(pairs) - len(todo),
                            int((~frame["valid"]).sum()))


def episode_frame(game: Game, records: Sequence[MatchRecord], agents: Sequence[str]) -> pd.DataFrame:
    """The tidy episode frame (:data:`FRAME_COLUMNS`, one row per record, in order) read through
    ``game.payoffs`` and ``game.cluster``; ``seller``/``buyer`` are categoricals over ``agents``."""
    rows = []
    for r in records:
        p = game.payoffs(r.record)
        rows.append((r.seller, r.buyer, r.scenario_key, str(game.cluster(r.scenario_key)),
                     float(p.seller) if p.valid else np.nan, float(p.buyer) if p.valid else np.nan,
                     bool(p.deal) and p.valid, bool(p.valid)))
    df = pd.DataFrame(rows, columns=list(FRAME_COLUMNS))
    for col in ("seller", "buyer"):
        df[col] = pd.Categorical(df[col], categories=list(agents))
    return df


# ---------------------------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------------------------

def _agents(frame: pd.DataFrame) -> list[str]:
    """The agent order: the categories of ``seller`` when categorical, else the sorted names."""
    if isinstance(frame["seller"].dtype, pd.CategoricalDtype):
        return [str(c) for c in frame["seller"].cat.categories]
    return sorted({*map(str, frame["seller"]), *map(str, frame["buyer"])})


def _codes(frame: pd.DataFrame, col: str, agents: Sequence[str]) -> np.ndarray:
    return pd.Categorical(frame[col].astype(str), categories=list(agents)).codes.astype(np.int64)


def cross_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (seller agent, buyer agent) cell, ``K**2`` rows indexed by (seller, buyer) in agent order: mean
    ``seller_payoff`` and ``buyer_payoff`` and ``deal_rate`` over the valid episodes, ``n_episodes`` (valid)
    and ``n_errors`` (left out). Cells without a valid episode hold NaN."""
    agents = _agents(frame)
    idx = pd.MultiIndex.from_product([agents, agents], names=["seller", "buyer"])
    f = frame.assign(seller=frame["seller"].astype(str), buyer=frame["buyer"].astype(str),
                     deal=frame["deal"].astype(float))
    valid = f[f["valid"]]
    g = valid.groupby(["seller", "buyer"])
    out = pd.DataFrame({"seller_payoff": g["seller_payoff"].mean(), "buyer_payoff": g["buyer_payoff"].mean(),
                        "deal_rate": g["deal"].mean(), "n_episodes": g.size()}).reindex(idx)
    out["n_episodes"] = out["n_episodes"].fillna(0).astype(int)
    errors = f[~f["valid"]].groupby(["seller", "buyer"]).size()
    out["n_errors"] = errors.reindex(idx).fillna(0).astype(int)
    return out


def _resampler(frame: pd.DataFrame, n_resamples: int, seed: int) -> ClusterResampler | None:
    clusters = np.sort(np.asarray(pd.unique(frame.loc[frame["valid"], "cluster"].astype(str)), dtype=str))
    return ClusterResampler(clusters, n_resamples, seed) if clusters.size else None


def agent_summary(frame: pd.DataFrame, n_resamples: int = 10_000, seed: int = 0,
                  alpha: float = 0.05) -> pd.DataFrame:
    """Per agent (``K`` rows, agent order): mean ``payoff`` over both roles and all opponents (a self-play
    episode counts once per role) and ``deal_rate``, each with its ``1 - alpha`` percentile interval
    (``*_low``/``*_high``) from ``n_resamples`` seed-cluster resamples; ``payoff_as_seller``,
    ``payoff_as_buyer``, ``n_episodes`` (valid agent-episodes), ``n_clusters`` and ``n_errors`` (error
    episodes the agent played, left out)."""
    agents = _agents(frame)
    cols = ["payoff", "payoff_low", "payoff_high", "deal_rate", "deal_rate_low", "deal_rate_high",
            "payoff_as_seller", "payoff_as_buyer", "n_episodes", "n_clusters", "n_errors"]
    out = pd.DataFrame(np.nan, index=pd.Index(agents, name="agent"), columns=cols)
    s_code, b_code = _codes(frame, "seller", agents), _codes(frame, "buyer", agents)
    invalid = ~frame["valid"].to_numpy(bool)
    for i, a in enumerate(agents):
        out.loc[a, "n_errors"] = int(np.count_nonzero(invalid & ((s_code == i) | (b_code == i))))
    res = _resampler(frame, n_resamples, seed)
    if res is None:
        out[["n_episodes", "n_clusters"]] = 0
        return out.astype({"n_episodes": int, "n_clusters": int, "n_errors": int})
    ok = ~invalid
    cl = res.positions(frame["cluster"].to_numpy(dtype=str)[ok])
    g = res.n_clusters
    s_code, b_code = s_code[ok], b_code[ok]
    pay = {"seller": frame["seller_payoff"].to_numpy(float)[ok], "buyer": frame["buyer_payoff"].to_numpy(float)[ok]}
    deal = frame["deal"].to_numpy(float)[ok]
    stats, one = [], np.ones(1)
    for i in range(len(agents)):
        num_p, num_d, den = np.zeros(g), np.zeros(g), np.zeros(g)
        for role, code in (("seller", s_code), ("buyer", b_code)):
            m = code == i
            num_p += np.bincount(cl[m], pay[role][m], g)
            num_d += np.bincount(cl[m], deal[m], g)
            den += np.bincount(cl[m], minlength=g)
        stats += [RatioStat(num_p[:, None], den[:, None], one, 1), RatioStat(num_d[:, None], den[:, None], one, 1)]
        a = agents[i]
        out.loc[a, "payoff"], out.loc[a, "deal_rate"] = stats[-2].value(), stats[-1].value()
        out.loc[a, "payoff_as_seller"] = pay["seller"][s_code == i].mean() if np.any(s_code == i) else np.nan
        out.loc[a, "payoff_as_buyer"] = pay["buyer"][b_code == i].mean() if np.any(b_code == i) else np.nan
        out.loc[a, "n_episodes"] = den.sum()
        out.loc[a, "n_clusters"] = np.count_nonzero(den)
    dists = resample_stats(res, stats)
    for i, a in enumerate(agents):
        for j, name in enumerate(("payoff", "deal_rate")):
            iv = summarize(dists[:, 2 * i + j], alpha)
            out.loc[a, f"{name}_low"], out.loc[a, f"{name}_high"] = iv.ci_low, iv.ci_high
    return out.astype({"n_episodes": int, "n_clusters": int, "n_errors": int})


def pairwise_comparisons(frame: pd.DataFrame) -> pd.DataFrame:
    """The paired comparisons behind :func:`ratings`, one row per unordered pair {a, b} (a before b in agent
    order) and scenario: ``a``, ``b``, ``scenario_key``, ``cluster``, ``total_a`` (a's payoff as seller vs b
    plus as buyer vs b), ``total_b``, ``score_a`` (1 win, 0.5 tie within :data:`TIE_TOL`, 0 loss; NaN when
    either episode is an error) and ``valid``."""
    agents = _agents(frame)
    f = frame.assign(i=_codes(frame, "seller", agents), j=_codes(frame, "buyer", agents))
    f = f[(f["i"] >= 0) & (f["j"] >= 0)]
    first, second = f[f["i"] < f["j"]], f[f["i"] > f["j"]]
    m = first.merge(second, left_on=["i", "j", "scenario_key"], right_on=["j", "i", "scenario_key"],
                    suffixes=("_1", "_2"))
    total_a = m["seller_payoff_1"] + m["buyer_payoff_2"]
    total_b = m["buyer_payoff_1"] + m["seller_payoff_2"]
    valid = m["valid_1"] & m["valid_2"]
    diff = (total_a - total_b).to_numpy(float)
    score = np.where(np.abs(diff) <= TIE_TOL, 0.5, np.where(diff > 0, 1.0, 0.0))
    return pd.DataFrame({"a": [agents[k] for k in m["i_1"]], "b": [agents[k] for k in m["j_1"]],
                         "scenario_key": m["scenario_key"].to_numpy(), "cluster": m["cluster_1"].to_numpy(dtype=str),
                         "total_a": total_a.to_numpy(float), "total_b": total_b.to_numpy(float),
                         "score_a": np.where(valid, score, np.nan), "valid": valid.to_numpy(bool)})


def _strongly_connected(beats: np.ndarray) -> np.ndarray:
    """``(B, K, K)`` boolean "i beat j at least partly" -> ``(B,)``: every agent reaches every other."""
    k = beats.shape[-1]
    reach = beats | np.eye(k, dtype=bool)
    for _ in range(max(1, math.ceil(math.log2(max(k, 2))))):
        reach = np.matmul(reach.astype(float), reach.astype(float)) > 0
    return reach.all(axis=(-2, -1))


def bradley_terry(wins: np.ndarray, prior: float = 0.0, tol: float = 1e-12,
                  max_iter: int = 100_000) -> np.ndarray:
    """Bradley-Terry log-strengths (natural log, mean 0) by Hunter's (2004) MM algorithm.

    ``wins`` is ``(K, K)`` or ``(B, K, K)``: ``wins[i, j]`` counts i's wins over j (a tie adds 0.5 both
    ways; the diagonal is ignored). ``prior`` adds that many virtual tied comparisons to every pair (a
    shrinkage towards equal strengths that keeps the estimate finite when an agent wins or loses every
    comparison). Returns ``(K,)`` or ``(B, K)``; NaN where the maximum-likelihood estimate does not exist
    (the "beat" graph is not strongly connected). The update ``p_i <- W_i / sum_j n_ij / (p_i + p_j)`` runs
    until no log-strength moves by more than ``tol``.
    """
    w = np.array(wins, dtype=float)
    single = w.ndim == 2
    if w.ndim not in (2, 3) or w.shape[-1] != w.shape[-2]:
        raise ValueError(f"wins must be (K, K) or (B, K, K), got shape {w.shape}")
    if np.any(w < 0) or prior < 0:
        raise ValueError("wins and prior must be non-negative")
    w = w.reshape(-1, *w.shape[-2:])
    k = w.shape[-1]
    off = ~np.eye(k, dtype=bool)
    w = np.where(off, w + prior / 2.0, 0.0)
    n = w + np.swapaxes(w, 1, 2)
    total = w.sum(axis=2)
    out = np.full(w.shape[:2], np.nan)
    active = np.flatnonzero(_strongly_connected(w > 0))
    p = np.ones(w.shape[:2])
    for _ in range(max_iter):
        if active.size == 0:
            break
        pa = p[active]
        new = total[active] / (n[active] / (pa[:, :, None] + pa[:, None, :])).sum(axis=2)
        logp = np.log(new)
        logp -= logp.mean(axis=1, keepdims=True)
        moved = np.abs(logp - np.log(pa)).max(axis=1)
        p[active] = np.exp(logp)
        done = moved <= tol
        out[active[done]] = logp[done]
        active = active[~done]
    if active.size:
        raise RuntimeError(f"Bradley-Terry MM did not converge in {max_iter} iterations")
    return out[0] if single else out


def ratings(frame: pd.DataFrame, n_resamples: int = 10_000, seed: int = 0, alpha: float = 0.05,
            prior: float = 1.0) -> pd.DataFrame:
    """Bradley-Terry ratings of the agents (``K`` rows, agent order) from :func:`pairwise_comparisons`.

    ``rating`` is ``400 log10`` of the strength, mean 0 over the agents (a 400-point gap: 10:1 odds of
    winning a comparison), fitted by :func:`bradley_terry` with ``prior`` virtual ties per pair;
    ``ci_low``/``ci_high`` the ``1 - alpha`` percentile interval over ``n_resamples`` seed-cluster
    resamples (each refitted); ``score`` the mean comparison score, ``wins`` and ``comparisons`` its
    numerator and denominator, ``n_excluded`` comparisons left out for an error episode, ``n_undefined``
    resamples without an estimate.
    """
    agents = _agents(frame)
    k = len(agents)
    cmp = pairwise_comparisons(frame)
    out = pd.DataFrame(np.nan, index=pd.Index(agents, name="agent"),
                       columns=["rating", "ci_low", "ci_high", "score", "wins", "comparisons", "n_excluded",
                                "n_undefined"])
    ia = pd.Categorical(cmp["a"], categories=agents).codes
    ib = pd.Categorical(cmp["b"], categories=agents).codes
    valid = cmp["valid"].to_numpy(bool)
    out["n_excluded"] = np.bincount(ia[~valid], minlength=k) + np.bincount(ib[~valid], minlength=k)
    res = _resampler(frame, n_resamples, seed)
    clusters = cmp["cluster"].to_numpy()[valid]
    ia, ib, score = ia[valid], ib[valid], cmp["score_a"].to_numpy(float)[valid]
    g = res.n_clusters if res is not None else 1
    cl = res.positions(clusters) if res is not None and clusters.size else np.zeros(0, dtype=np.int64)
    per_cluster = np.zeros((g, k, k))
    np.add.at(per_cluster, (cl, ia, ib), score)
    np.add.at(per_cluster, (cl, ib, ia), 1.0 - score)
    w = per_cluster.sum(axis=0)
    out["wins"] = w.sum(axis=1)
    out["comparisons"] = (w + w.T).sum(axis=1)
    out["score"] = out["wins"] / out["comparisons"].where(out["comparisons"] > 0)
    out["rating"] = ELO_SCALE * bradley_terry(w, prior)
    if res is None:
        out["n_undefined"] = n_resamples
    else:
        boot = ELO_SCALE * bradley_terry(res.apply(per_cluster.reshape(g, k * k)).reshape(-1, k, k), prior)
        for i, a in enumerate(agents):
            iv = summarize(boot[:, i], alpha)
            out.loc[a, ["ci_low", "ci_high", "n_undefined"]] = iv.ci_low, iv.ci_high, iv.n_undefined
    return out.astype({"comparisons": int, "n_excluded": int, "n_undefined": int})


__all__ = ["ELO_SCALE", "FRAME_COLUMNS", "MATCHES_FILE", "MatchRecord", "TournamentError", "TournamentResult",
           "TournamentSettings", "agent_summary", "bradley_terry", "check_settings", "cross_table", "episode_frame",
           "pairwise_comparisons", "ratings", "read_matches", "run_tournament"]
