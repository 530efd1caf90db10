"""Benchmark: the whole analysis of notebooks 05-09 on a paper-scale transcript set (issue 16, section 5).

Writes a synthetic but valid transcript set in the real schema through :class:`TranscriptStore`
(``params/paper.yaml``'s 21 arms x 1,152 episodes = 64 evaluation seeds x 9 domains x 2 buyers).
Episodes are played by the real environment with scripted parties (a pool of seller strategies
against two scripted buyers standing in for the paper's frontier buyers), so outcomes follow Eq. 1
and pass the validators; each arm draws its episode per scenario from the pool with its own weights
and its own bad-parse rate, so arms differ and contrasts are non-trivial. Then it times, on one core,
what notebooks 05-09 compute from those transcripts: reading and validating, arm estimates (every
metric of Tables 3-5), contrasts (design contrasts, held-out contrasts and App. K's two re-runs at
10^5 resamples: the primary family and the held-out gains), decomposition (Tables 2 and 9 with
openings), guards and diagnostics (App. E guards, style tables, transcript samples, cost), efficiency
(Pareto frontiers of every deal, notebook 09), the quoted contrasts, smaller diagnostics and App. A
limitation tables of notebooks 05-09 (:func:`quoted_stage`), what the paper reports beside its tables
(:func:`paper_checks_stage`) and tables/figures (every report table and figure).

Baseline, measured in the same run, A-B-A alternated: the reading stage against ``json.loads`` of
the same lines (A), around each full analysis (B). Prints medians and ranges.

Run: ``python benchmarks/bench_analysis.py [--smoke] [--repeats N]`` (threads are pinned to one;
pin the process with ``taskset -c 0``). Target: under 60 s on one core at full scale.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
             "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")

import argparse  # noqa: E402
import copy  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from negolib.book.context import Book, open_book  # noqa: E402
from negolib.core.transcripts import TranscriptStore, episodes_frame  # noqa: E402
from negolib.games.multi_issue.domains import load_domains  # noqa: E402
from negolib.games.multi_issue.env import EnvConfig  # noqa: E402
from negolib.games.multi_issue.metrics import buyer_split  # noqa: E402
from negolib.games.multi_issue.rollout import make_specs, run_episodes  # noqa: E402
from negolib.games.multi_issue.scenarios import eval_seeds, scenario_set  # noqa: E402
from negolib.games.multi_issue.scripted import make_scripted  # noqa: E402
from negolib.study.analysis.arms import TABLE3_METRICS, TABLE4_METRICS, TABLE5_METRICS, Results, arm_estimates  # noqa: E402
from negolib.study.analysis.contrasts import design_contrasts, held_out_contrasts, run_pairs, trained_pairs  # noqa: E402
from negolib.study.analysis.cost import cost_by_arm  # noqa: E402
from negolib.study.analysis.decomposition import decomposition  # noqa: E402
from negolib.study.analysis.guards import guards_frame  # noqa: E402
from negolib.study.analysis.resamplers import Analysis  # noqa: E402
from negolib.study.analysis.training import training_summary  # noqa: E402
from negolib.study.cost import cost_frame  # noqa: E402
from negolib.study.diagnostics import openings_table, sample_transcripts, style_table  # noqa: E402
from negolib.study.efficiency import efficiency_frame, per_arm_efficiency  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "params" / "paper.yaml"
SELLER_POOL = ("conceder", "linear", "tit_for_tat", "boulware", "hardheaded")
"""Scripted seller strategies the arms draw their episodes from (roughly weakest to toughest)."""
BUYER_STAND_INS = ("conceder", "hardheaded")
"""Scripted strategies standing in for the profile's two evaluation buyers."""
SMOKE_ARMS = ("e2b_base", "e2b_shared_104", "e2b_lr3_56", "e4b_base", "e4b_shared_104", "sonnet5", "terra")
STAGES = ("reading/validating", "arm estimates", "contrasts", "decomposition", "guards", "efficiency",
          "quoted/limitations", "paper checks", "figures")


def _pin_torch() -> None:
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def paper_arms(params: Any) -> list[str]:
    """The paper's 21 arms: every arm of the design's size groups and its frontier sellers, in profile order
    (limitation arms a profile adds beyond the paper's design are left out)."""
    design = {a for g in params.design.sizes for a in (g.base, g.shared_early, g.shared, g.lr3, g.lr10, *g.extra) if a}
    return [a for a in params.arms if a in design | set(params.design.frontier)]


def arm_profile(params: Any, arm: str) -> tuple[np.ndarray, float]:
    """(weights over :data:`SELLER_POOL`, seller bad-parse rate) of one arm: trained arms lean to the
    tougher strategies, larger sizes more, bases of small sizes parse worst."""
    skill, bad = 0.0, 0.01
    for i, g in enumerate(params.design.sizes):
        roles = {g.base: 0.0, g.shared_early: 0.15, g.shared: 0.3, g.lr3: 0.45, g.lr10: 0.2,
                 **{a: 0.4 for a in g.extra}}
        if arm in roles:
            skill = 0.2 * i + roles[arm]
            bad = 0.04 / (1 + i) if arm == g.base else (0.06 if arm == g.lr10 else 0.005)
    if arm in params.design.frontier:
        skill, bad = 0.6 + 0.1 * params.design.frontier.index(arm), 0.0
    x = np.arange(len(SELLER_POOL), dtype=float)
    w = np.exp(-((x - 4 * skill / 1.2) ** 2) / 2.0)
    return w / w.sum(), bad


def play_pool(params: Any, n_seeds: int, domains: list[str] | None) -> list[list[dict[str, Any]]]:
    """Every scenario x buyer played by each pool seller (same spec order for every seller)."""
    buyers = list(params.evaluation.buyers)
    agents = {b: make_scripted(s) for b, s in zip(buyers, BUYER_STAND_INS)}
    agents.update({f"pool_{s}": make_scripted(s) for s in SELLER_POOL})
    scen = scenario_set(eval_seeds(n_seeds), domains)
    ev = params.evaluation
    cfg = EnvConfig(max_rounds=ev.max_rounds, first_mover=ev.first_mover, accept_needs_offer=ev.accept_needs_offer)
    return [run_episodes(make_specs("pool", f"pool_{s}", buyers, scen, cfg), agents, progress=False).records
            for s in SELLER_POOL]


def _bad_parse(rec: dict[str, Any], rng: np.random.Generator, penalty: float) -> dict[str, Any]:
    """One seller turn (not the closing one) becomes a bad parse: no action, a parse error, counted."""
    seller_turns = [i for i, t in enumerate(rec["turns"][:-1]) if t["role"] == "seller"]
    if not seller_turns:
        return rec
    rec = dict(rec, turns=list(rec["turns"]), outcome=dict(rec["outcome"]))
    i = int(rng.choice(seller_turns))
    t = copy.deepcopy(rec["turns"][i])
    t.update(raw=t["prose"] + "\n{\"action\": \"COUNTER\", \"terms\": [", action=None, invalid_terms=[],
             off_schema_terms=[], parse_error="no parseable JSON action (unterminated object)")
    rec["turns"][i] = t
    out = rec["outcome"]
    out["seller_bad_parses"] += 1
    out["bad_parses"] += 1
    out["reward"] = float(out["reward"]) - penalty
    return rec


def write_transcripts(book: Book, arms: list[str], n_seeds: int, domains: list[str] | None, seed: int) -> int:
    """Write the synthetic evaluation transcripts of ``arms`` through the real store; returns the count."""
    pool = play_pool(book.params, n_seeds, domains)
    store = TranscriptStore(book.paths.transcripts)
    rng = np.random.default_rng(seed)
    penalty = float(pool[0][0]["config"].get("format_penalty", 0.05))
    n = 0
    for arm in arms:
        w, bad = arm_profile(book.params, arm)
        pick = rng.choice(len(SELLER_POOL), size=len(pool[0]), p=w)
        bads = np.zeros(len(pool[0]), dtype=bool)  # an exact share (at least one when the rate is positive)
        bads[rng.choice(len(bads), size=max(1, round(bad * len(bads))) if bad > 0 else 0, replace=False)] = True
        recs = []
        for j, (k, b) in enumerate(zip(pick, bads)):
            rec = dict(pool[k][j], arm=arm, seller=arm)
            recs.append(_bad_parse(rec, rng, penalty) if b else rec)
        n += store.append(recs)
    return n


def raw_read(path: Path) -> int:
    """The reading baseline: ``json.loads`` of every line, the last record per key, no checks."""
    latest = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            latest[(rec["arm"], rec["domain"], rec["seed"], rec["buyer"])] = rec
    return len(latest)


def run_analysis(book: Book, refine_resamples: int) -> tuple[dict[str, float], dict[str, pd.DataFrame]]:
    """What notebooks 05-09 compute, stage by stage: (seconds per stage, the computed frames)."""
    import matplotlib.pyplot as plt

    from negolib.study.analysis.beyond import scripted_baseline_contrasts, seeds_scaffold_arms
    from negolib.study.report.appendix_b_c import figure3, heldout_table, table3, table4
    from negolib.study.report.appendix_d_e import guards_table, style_diag_table, table5, table6_from_style
    from negolib.study.report.appendix_g_k import cost_table, mc_error_table, table7, table9
    from negolib.study.report.beyond import (
        efficiency_table,
        pareto_figure,
        scripted_baselines_table,
        seeds_scaffold_table,
    )
    from negolib.study.report.results import (
        figure2,
        frontier_table,
        openings_book_table,
        primary_family_table,
        table1,
        table2,
    )
    from negolib.study.report.training import training_table

    P, paper = book.params, book.paper
    t: dict[str, float] = {}
    out: dict[str, pd.DataFrame] = {}

    t0 = time.perf_counter()
    records = book.records()
    df = episodes_frame(records)
    t["reading/validating"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    an = Analysis.from_params(df, P)
    arms = [a for a in P.arms if an.has(a)]
    metrics: list[Any] = list(dict.fromkeys(TABLE4_METRICS + TABLE3_METRICS + TABLE5_METRICS))
    if len(P.design.buyer_split) == 2:
        metrics.append(buyer_split(*P.design.buyer_split))
    est = arm_estimates(an, arms, metrics)
    t["arm estimates"] = time.perf_counter() - t0
    out["estimates"] = est

    t0 = time.perf_counter()
    contrasts = design_contrasts(an, P)
    R = Results(P, an, est, contrasts)
    held = held_out_contrasts(df, P)
    # App. K's two re-runs at 10^5 resamples: the primary family, and the held-out gains of the trained arms
    an5 = Analysis(df, refine_resamples, P.statistics.seed, P.statistics.alpha, False, refine_resamples)
    held_domains = [d for d, dom in load_domains().items() if dom.held_out]
    rerun_primary = run_pairs(an5, [tuple(p) for p in P.statistics.primary], ("score",), P.statistics.primary)
    rerun_held = run_pairs(an5, trained_pairs(P), ("score",), domains=held_domains)
    t["contrasts"] = time.perf_counter() - t0
    out.update(contrasts=contrasts, held_out=held, rerun_primary=rerun_primary, rerun_held=rerun_held)

    t0 = time.perf_counter()
    openings = openings_table(records)
    opens = openings.set_index("arm")["opens_with_terms"].to_dict() if len(openings) else {}
    decomp = decomposition(an, trained_pairs(P))
    t["decomposition"] = time.perf_counter() - t0
    out.update(decomposition=decomp, openings=openings)

    t0 = time.perf_counter()
    trained = [(a, g.base) for g in P.design.sizes for a in (g.shared_early, g.shared, g.lr3, g.lr10, *g.extra)
               if a and a in R.arms and g.base in R.arms]
    guards = guards_frame(an, trained)
    held_set = {d for d, dom in load_domains().items() if dom.held_out}
    style_held = style_table([r for r in records if r["domain"] in held_set])
    style_all = style_table(records)
    samples = [sample_transcripts(records, arm, n=2, seed=P.seed, max_chars=300) for arm, _ in trained]
    prices, unpriced = book.prices()
    api = book.api_models()
    costs = cost_by_arm(cost_frame(records, prices, api), P, api, unpriced)
    t["guards"] = time.perf_counter() - t0
    out.update(guards=guards, style=style_all, costs=costs)

    t0 = time.perf_counter()
    eff = per_arm_efficiency(efficiency_frame(an.df))
    t["efficiency"] = time.perf_counter() - t0
    out["efficiency"] = eff

    t0 = time.perf_counter()
    quoted = quoted_stage(book, R, records, contrasts, held, decomp, trained)
    t["quoted/limitations"] = time.perf_counter() - t0
    out["n_quoted_tables"] = pd.DataFrame({"n": [len(quoted)]})

    t0 = time.perf_counter()
    checks = paper_checks_stage(book, R, records, held, style_all)
    t["paper checks"] = time.perf_counter() - t0
    out["n_paper_check_tables"] = pd.DataFrame({"n": [len(checks)]})

    t0 = time.perf_counter()
    tables = [primary_family_table(contrasts, paper), table1(contrasts, est, P, paper),
              table2(decomp, opens, P, paper), openings_book_table(openings, P, paper),
              frontier_table(contrasts, P, paper), table3(est, R.arms, P, paper), table4(est, R.arms, P, paper),
              heldout_table(held, P, paper), training_table(training_summary({}, {}, {}), paper, P),
              guards_table(guards), *[table5(est, est, g, P, paper) for g in P.design.sizes],
              table6_from_style(style_held, P, paper), style_diag_table(style_all, P, paper),
              table7(est, {}, P, paper), cost_table(costs, paper), mc_error_table(contrasts, paper),
              table9(decomp, opens, P, paper), scripted_baselines_table(R, scripted_baseline_contrasts(R)),
              efficiency_table(eff, P), seeds_scaffold_table(seeds_scaffold_arms(P, R.arms), est)]
    for tab in tables:
        book.save_table(tab)
    key = (records[0]["domain"], records[0]["seed"])
    for name, fig in (("figure2", figure2(P, est, contrasts, paper)), ("figure3", figure3(P, est, contrasts, paper)),
                      ("pareto_frontier", pareto_figure(records, *key, title="frontier"))):
        book.save_figure(fig, name)
        plt.close(fig)
    t["figures"] = time.perf_counter() - t0
    out["n_tables"] = pd.DataFrame({"n": [len(tables)]})
    out["samples"] = pd.concat(samples, ignore_index=True) if samples else pd.DataFrame()
    return t, out


def quoted_stage(book: Book, R: Results, records: list[dict[str, Any]], contrasts: pd.DataFrame,
                 held: pd.DataFrame, decomp: pd.DataFrame, trained: list[tuple[str, str]]) -> list[Any]:
    """What notebooks 05-09 add beyond the paper's tables, as they call it: every quoted contrast and gain
    difference (sections 5, B, C, E, K), the smaller diagnostics, the held-out extension trigger, the serving and
    hand-reading guards, and notebook 09's App. A limitation tables (the limitation arms themselves are not in this
    set: their tables are computed on what is there). Returns the report tables, saved."""
    from negolib.study.analysis.beyond import fixed_opening_contrasts
    from negolib.study.analysis.contrasts import held_out_extension_trigger
    from negolib.study.analysis.limitations import (
        buyer_panel,
        limitations_frame,
        lr_sweep,
        lr_sweep_arms,
        matched_flops,
        seed_spread,
        trained_base_pairs,
    )
    from negolib.study.analysis.limitations import self_play_split as limitation_self_play
    from negolib.study.analysis.quoted import quoted_contrasts
    from negolib.study.analysis.quoted_diagnostics import (
        deal_rate_by_domain,
        gain_shares,
        integrative_split,
        kl_at_read,
        late_close_change,
        off_schema_ledger_share,
        self_play_split,
        walkaways,
    )
    from negolib.study.analysis.serving import serving_frame
    from negolib.study.diagnostics import HAND_READ_PER_FAMILY, hand_read_sample
    from negolib.study.report.appendix_b_c import extension_trigger_table
    from negolib.study.report.appendix_d_e import template_tag_table
    from negolib.study.report.beyond import (
        buyer_panel_table,
        fixed_openings_table,
        limitations_table,
        lr_sweep_table,
        matched_flops_table,
        seed_spread_table,
        self_play_split_table,
    )
    from negolib.study.report.quoted import (
        deal_rate_domain_table,
        gain_shares_table,
        integrative_table,
        kl_read_table,
        late_close_table,
        off_schema_ledger_table,
        quoted_table,
        rerun_table,
        self_play_table,
        walkaway_table,
    )

    P, paper, an = book.params, book.paper, R.an
    pairs = trained_pairs(P)
    small = [(a, b) for a, b in pairs if P.design.sizes and b == P.design.sizes[0].base]
    base0 = P.design.sizes[0].base if P.design.sizes else None
    fixed = [a for a in P.beyond.fixed_openings if a in R.arms and P.arms[a].inner in R.arms]
    tables = [quoted_table(quoted_contrasts(an, P, sections=(sec,)), sec, paper) for sec in ("5", "E")]
    tables += [quoted_table(quoted_contrasts(an, P, sections=("B", "C")), "B", paper),
               rerun_table(quoted_contrasts(an, P, sections=("K",)), paper),
               gain_shares_table(gain_shares(decomp), P, paper),
               integrative_table(integrative_split(an, pairs), P, paper),
               late_close_table(late_close_change(an, pairs), P, paper),
               self_play_table(self_play_split(an, P), P, paper),
               deal_rate_domain_table(deal_rate_by_domain(an, small), P, paper),
               extension_trigger_table(held_out_extension_trigger(held, P), paper),
               kl_read_table(kl_at_read({}, P, [a for a, _ in trained]), P, paper),
               template_tag_table(serving_frame(an.df), P),
               walkaway_table(walkaways(an.df, 2 * P.evaluation.max_rounds), P, paper),
               off_schema_ledger_table(off_schema_ledger_share(an.df), P, paper),
               limitations_table(limitations_frame(P, R.arms, None)),
               fixed_openings_table(fixed_opening_contrasts(an, P, fixed), P, fixed, {}),
               seed_spread_table(seed_spread(R.est, P, R.arms)),
               buyer_panel_table(buyer_panel(an, P.beyond.extra_buyer_arms), P),
               self_play_split_table(limitation_self_play(an, P, R.arms), P, paper),
               lr_sweep_table(lr_sweep(run_pairs(an, [(a, base0) for a in lr_sweep_arms(P)] if base0 else []), P),
                              P, paper),
               matched_flops_table(matched_flops(run_pairs(an, trained_base_pairs(P)), P), P, paper)]
    for arm, _ in trained:
        hand_read_sample(records, arm, seed=P.seed, per_family=HAND_READ_PER_FAMILY, max_chars=300)
    for tab in tables:
        book.save_table(tab)
    return tables


def paper_checks_stage(book: Book, R: Results, records: list[dict[str, Any]], held: pd.DataFrame,
                       style_all: pd.DataFrame) -> list[Any]:
    """What notebooks 05-08 add for what the paper reports beside its tables (issue 28, section 5): the prose
    guard, App. A's shares with intervals, countering turns in no-deal episodes, turn and placeholder totals, the
    largest adjacent-read movement, App. I's turn ranges, App. K's read-point validation (no training logs here),
    the held-out contrasts against the Monte Carlo band and Table 8's topology. Returns the report tables, saved."""
    from negolib.study.analysis.read_points import adjacent_reads, held_out_mc_band, read_validation, turn_ranges
    from negolib.study.analysis.serving import size_topology
    from negolib.study.analysis.transcript_checks import APP_A_METRICS, nodeal_counters, prose_guard, turn_totals
    from negolib.study.report.paper_checks import (
        adjacent_reads_table,
        app_a_shares_table,
        held_out_mc_table,
        nodeal_counter_table,
        prose_guard_table,
        read_validation_table,
        topology_table,
        turn_ranges_table,
        turn_totals_table,
    )

    P, paper = book.params, book.paper
    tables = [prose_guard_table(prose_guard(records), P, paper),
              app_a_shares_table(arm_estimates(R.an, R.arms, APP_A_METRICS), P, paper),
              nodeal_counter_table(nodeal_counters(records), P, paper),
              turn_totals_table(turn_totals(R.an.df, style_all), P, paper),
              adjacent_reads_table(adjacent_reads(R.est, P), paper), turn_ranges_table(turn_ranges(R.est, P), paper),
              read_validation_table(read_validation({}, P, R.arms), P, paper),
              held_out_mc_table(held_out_mc_band(held), P, paper), topology_table(size_topology(P), paper)]
    for tab in tables:
        book.save_table(tab)
    return tables


def _spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} s [{min(xs):.2f}, {max(xs):.2f}]"


def main(argv: list[str] | None = None) -> dict[str, pd.DataFrame]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="7 arms, 4 seeds x 3 domains, 200 / 1,000 resamples")
    ap.add_argument("--repeats", type=int, default=2, help="full analyses (B), each between two baselines (A)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="", help="keep the transcripts and tables here (default: a temp folder); "
                    "transcripts already there are reused")
    ap.add_argument("--profile", default="", help="write a cProfile of the last analysis run to this file")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        book = open_book(PAPER, args.out or tmp)
        P = book.params
        arms, n_seeds, domains = paper_arms(P), P.evaluation.seeds_per_domain, P.evaluation.domains
        refine_resamples = P.statistics.refine_resamples
        if args.smoke:
            arms, n_seeds, domains = list(SMOKE_ARMS), 4, ["car", "acquisition", "commercial_lease"]
            refine_resamples = 1_000
            book.params = P = _with_stats(P, 200, refine_resamples)
        t0 = time.perf_counter()
        if args.out and book.paths.transcripts.exists():  # a kept set (same flags): read it again
            with open(book.paths.transcripts, "rb") as fh:
                n = sum(1 for _ in fh)
            verb = "reusing"
        else:
            n, verb = write_transcripts(book, arms, n_seeds, domains, args.seed), "wrote"
        size = book.paths.transcripts.stat().st_size
        print(f"{verb} {n} records ({len(arms)} arms x {n // len(arms)} episodes, {size / 1e6:.0f} MB) through "
              f"TranscriptStore in {time.perf_counter() - t0:.1f} s; {P.statistics.n_resamples} resamples, "
              f"re-runs at {refine_resamples}")
        _pin_torch()
        raw_read(book.paths.transcripts)  # warm the page cache
        base: list[float] = []
        runs: list[dict[str, float]] = []
        out: dict[str, pd.DataFrame] = {}

        def baseline() -> None:
            t1 = time.perf_counter()
            assert raw_read(book.paths.transcripts) == n
            base.append(time.perf_counter() - t1)

        baseline()
        for _ in range(max(1, args.repeats)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if args.profile:
                    import cProfile

                    prof = cProfile.Profile()
                    stages, out = prof.runcall(run_analysis, book, refine_resamples)
                    prof.dump_stats(args.profile)
                else:
                    stages, out = run_analysis(book, refine_resamples)
            runs.append(stages)
            print(f"run {len(runs)}: {sum(stages.values()):.1f} s (" +
                  ", ".join(f"{k} {v:.1f}" for k, v in stages.items()) + ")", flush=True)
            baseline()
        totals = [sum(r.values()) for r in runs]
        for s in STAGES:
            print(f"  {s:<20} {_spread([r[s] for r in runs])}")
        reads = [r["reading/validating"] for r in runs]
        print(f"  baseline json.loads of the same lines (A, {len(base)} runs around the analyses): {_spread(base)}")
        med, med_a = statistics.median(totals), statistics.median(base)
        print(f"ratio reading/validating (B) / json.loads (A), medians: {statistics.median(reads) / med_a:.2f}x; "
              f"whole analysis / json.loads: {med / med_a:.1f}x")
        target = "" if args.smoke else f"; target (< 60 s on one core): {'met' if med < 60 else 'MISSED'}"
        print(f"whole analysis over {len(runs)} run(s): {_spread(totals)}{target}")
        print(f"ANALYSIS: {len(arms)} arms, {n} episodes, {med:.1f} s")
        if args.out:  # the analysis frames, for the test and for reading
            frames = book.paths.root / "bench_frames"
            frames.mkdir(exist_ok=True)
            for name, frame in out.items():
                frame.to_csv(frames / f"{name}.csv", index=False)
    return out


def _with_stats(P: Any, n_resamples: int, refine_resamples: int) -> Any:
    import dataclasses

    return dataclasses.replace(P, statistics=dataclasses.replace(P.statistics, n_resamples=n_resamples,
                                                                 refine_resamples=refine_resamples))


if __name__ == "__main__":
    main()
