"""The tables of negolib.study.report.paper_checks: ours beside the paper's values, paper-only rows saying why."""

from __future__ import annotations

import pandas as pd
from paper_frames import paper_setup

from negolib.study.analysis.read_points import adjacent_reads, held_out_mc_band, turn_ranges
from negolib.study.analysis.serving import size_topology
from negolib.study.analysis.transcript_checks import nodeal_counters, turn_totals
from negolib.study.report.paper_checks import (
    NOT_HERE,
    adjacent_reads_table,
    app_a_shares_table,
    held_out_mc_table,
    nodeal_counter_table,
    topology_table,
    turn_ranges_table,
    turn_totals_table,
)


def test_tables_show_the_papers_values_beside_ours(tmp_path):
    p, paper, _, _ = paper_setup()
    est = pd.DataFrame([{"arm": a, "metric": m, "estimate": v, "ci_low": v - 0.01, "ci_high": v + 0.01}
                        for a, m, v in (("e2b_lr10_56", "accept_with_terms", 0.5), ("e2b_lr10_56", "off_schema_rate",
                                                                                    0.05),
                                        ("g12b_lr3_56", "accept_with_terms", 0.07), ("e2b_base", "score", 0.42),
                                        ("e2b_shared_104", "score", 0.43))])
    a = app_a_shares_table(est[est["metric"] != "score"], p, paper).frame
    assert a.loc["e2b_lr10_56", "paper: accept-with-terms share"] == "56%"
    assert a.loc["g12b_lr3_56", "paper: accept-with-terms share"].startswith("5%–10%")
    assert a.loc["e2b_lr10_56", "off-schema share of named terms"] == "5.0% [4.0%, 6.0%]"
    records = [{"arm": "e2b_lr10_56", "status": "no_deal", "turns": [
        {"role": "seller", "prose": "x", "action": {"action": "COUNTER"}}]}]
    n = nodeal_counter_table(nodeal_counters(records), p, paper).frame
    assert n.loc["e2b_lr10_56", "paper: counter share"] == "95.0%"
    tt = turn_totals_table(turn_totals(pd.DataFrame({"arm": ["e2b_lr10_56"], "turns": [10], "seller_turns": [5],
                                                      "seller_bad_parses": [0]})), p, paper).frame
    assert tt.loc["e2b_lr10_56", "paper: unfilled placeholders"] == 131
    assert tt.loc["paper: Gemma 4 31B, 3× LR, 56 steps", "turns"].startswith(NOT_HERE)  # no such arm played
    adj = adjacent_reads_table(adjacent_reads(pd.DataFrame(columns=est.columns), p), paper).frame
    assert adj["paper: largest movement"].tolist() == ["0.004", "0.056"]
    assert all(v.startswith(NOT_HERE) for v in adj["reads (arm@steps)"])
    r = turn_ranges_table(turn_ranges(pd.DataFrame(columns=est.columns), p), paper).frame
    assert r["paper"].tolist() == ["9.9 to 12.8", "7.3 to 14.4"]
    held = pd.DataFrame([{"arm_a": "e2b_lr3_56", "arm_b": "e2b_base", "metric": "score", "estimate": 0.05,
                          "ci_low": 0.02, "ci_high": 0.08, "se_low": 0.001, "se_high": 0.001}])
    h = held_out_mc_table(held_out_mc_band(held), p, paper)
    assert h.frame.iloc[0]["paper: verdict"] == "clears the band" and h.frame.iloc[0]["ours: verdict"] == \
        "clears the band"
    topo = topology_table(size_topology(p), paper)
    assert topo.frame.loc["Gemma 4 31B", "paper: train TP"] == 4 and topo.frame.loc["Gemma 4 31B",
                                                                                     "eval: accelerators (TP)"] == "4"
    for size, row in topo.frame.iterrows():  # the paper profile trains every size at the paper's Table 8 topology
        assert row["train: TP"] == str(row["paper: train TP"]), size
    for t in (h, topo):
        assert t.save(tmp_path)
