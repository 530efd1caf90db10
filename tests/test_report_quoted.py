"""The quoted contrasts' book tables: ours beside the paper's value in every row, "not run in this profile" where the
profile lacks an arm, the App. K re-run table and the held-out extension's trigger."""

from __future__ import annotations

from paper_frames import ROOT, paper_setup
from test_analysis_quoted import known_frame

from negolib.games.multi_issue.metrics import synthetic_episodes
from negolib.params import load_params
from negolib.study.analysis.contrasts import held_out_contrasts, held_out_extension_trigger
from negolib.study.analysis.quoted import quoted_contrasts
from negolib.study.analysis.resamplers import Analysis
from negolib.study.report.appendix_b_c import extension_trigger_table
from negolib.study.report.quoted import NOT_RUN, PAPER_PATHS, SECTIONS, quoted_table, rerun_table


def test_every_quoted_key_has_a_paper_value():
    _, paper, _, _ = paper_setup()
    from negolib.study.analysis.quoted import QUOTED
    for q in QUOTED:
        assert paper.get(*PAPER_PATHS[q.key]) is not None, q.key


def test_section_tables_show_ours_beside_the_papers():
    p, paper, _, _ = paper_setup()
    q = quoted_contrasts(Analysis(known_frame(), n_resamples=200, refine_resamples=400), p)
    t = quoted_table(q, "5", paper)
    within = t.frame.loc["gain difference within the conventional pair (31B − 12B)"]
    assert within["ours"] == "+0.020e [+0.020, +0.020]" and within["paper"] == "+0.015 [+0.001, +0.029]"
    assert within["ours: arms"] == "(g31b_shared_104 − g31b_base) − (g12b_shared_104 − g12b_base)"
    assert t.frame.loc["4.5B 3× LR, step 56 − step 64 (one run)", "paper"] == "-0.003 [-0.015, +0.008]"
    b = quoted_table(q, "B", paper)
    assert list(b.frame["paper"]) == ["-0.004", "+0.015", "+0.038", "+0.055"]
    e = quoted_table(q, "E", paper).frame
    split = e.loc["2.3B 10× LR buyer split − base's buyer split"]
    assert split["ours"] == "+0.120e [+0.120, +0.120]" and split["paper"] == "+0.124 [+0.089, +0.160]"
    assert "vs buyer_terra" in split["ours: arms"] and "vs buyer_sonnet5" in split["ours: arms"]
    c = quoted_table(q, "C", paper).frame
    assert c["paper"].tolist()[:3] == ["+0.004 [-0.010, +0.018]", "+0.011 [-0.001, +0.023]", "+0.068 [+0.028, +0.107]"]
    assert {SECTIONS[s][0] for s in SECTIONS} == {"gain_differences", "continuation_gains", "held_out_contrasts_text",
                                                  "lr10_by_buyer"}


def test_rerun_table_shows_both_resample_counts_and_the_papers_lower_bounds():
    p, paper, _, _ = paper_setup()
    q = quoted_contrasts(Analysis(known_frame(), n_resamples=200, refine_resamples=400), p, sections=("K",))
    t = rerun_table(q, paper).frame
    assert len(t) == 2 and t["paper: lower bound at 10^5"].tolist() == ["+0.0008", "+0.0028"]
    assert t.iloc[0]["ours (profile's resamples)"].endswith("at B = 200")
    assert t.iloc[0]["ours (re-run)"].endswith("at B = 400")
    assert t.iloc[0]["ours: lower bound ± MC SE (re-run)"].startswith("+0.0200 ± ")


def test_a_profile_without_the_arms_reads_not_run_beside_the_papers_value():
    p = load_params(ROOT / "params" / "default.yaml")
    _, paper, _, _ = paper_setup()
    q = quoted_contrasts(Analysis(synthetic_episodes(["smollm2_base", "smollm2_grpo"], n_seeds=4), n_resamples=50), p)
    for s in SECTIONS:
        f = quoted_table(q, s, paper).frame
        assert len(f) and f["ours"].str.startswith(NOT_RUN).all() and not (f["paper"] == "—").any()
    assert quoted_table(q, "E", paper).frame["ours"].iloc[0] == f"{NOT_RUN} (no E2B.lr10)"
    k = rerun_table(q, paper).frame
    assert len(k) == 2 and k["ours (re-run)"].str.startswith(NOT_RUN).all() and not k["ours (re-run)"].str.contains(
        "B = ").any()


def test_extension_trigger_table_states_the_verdict():
    p, paper, _, _ = paper_setup()
    df = known_frame()
    t = extension_trigger_table(held_out_extension_trigger(held_out_contrasts(df, p), p), paper)
    assert "does not fire" in t.caption and list(t.frame["straddles zero"]) == ["no", "no"]
    assert list(t.frame["paper: straddles zero"]) == ["yes", "yes"]
    assert t.frame["paper: held-out gain"].tolist() == ["+0.008 [-0.019, +0.037]", "+0.006 [-0.030, +0.040]"]
    car = df["domain"] == "car"
    df.loc[(df["arm"] == "g31b_shared_104") & car, "score"] = df.loc[(df["arm"] == "g31b_base") & car,
                                                                     "score"].to_numpy()
    fired = extension_trigger_table(held_out_extension_trigger(held_out_contrasts(df, p), p), paper)
    assert "ours: the trigger fires" in fired.caption
    assert list(fired.frame["arm"]) == ["g31b_shared_104", "g31b_lr3_56"]
    p2 = load_params(ROOT / "params" / "default.yaml")          # one size, no shared-recipe arm: no "nan" cell
    trig = held_out_extension_trigger(held_out_contrasts(synthetic_episodes(["smollm2_base", "smollm2_grpo"],
                                                                            n_seeds=4), p2), p2)
    shown = extension_trigger_table(trig, paper)
    assert shown.frame["arm"].tolist() == ["—", "smollm2_grpo"] and "read on the 3× LR arm" in shown.caption
    none = extension_trigger_table(held_out_extension_trigger(held_out_contrasts(df[~car], p), p), paper)
    assert "cannot be evaluated" in none.caption


# -- the smaller diagnostics -----------------------------------------------------------------------------------

def test_diagnostic_tables_put_the_papers_values_beside_ours():
    import numpy as np
    import pandas as pd

    from negolib.study.report.quoted import (
        deal_rate_domain_table,
        gain_shares_table,
        integrative_table,
        kl_read_table,
        late_close_table,
        off_schema_ledger_table,
        self_play_table,
        walkaway_table,
    )

    p, paper, _, _ = paper_setup()
    ci = {"estimate": 0.05, "ci_low": 0.01, "ci_high": 0.09, "significant": True}
    late = pd.DataFrame([{"arm_a": a, "arm_b": "e2b_base", "base_share": 0.1, "arm_share": 0.2, **ci,
                          "n_clusters": 8, "n_episodes": 40} for a in ("e2b_shared_104", "e2b_lr10_56")])
    t = late_close_table(late, p, paper).frame
    assert t["change, both closed (points)"].iloc[0] == "+5.0e [+1.0, +9.0]"
    assert t["paper: change (points)"].tolist() == ["-7.5 to +5.0", "+13.0"]
    assert t["paper: base late closes"].iloc[0] == "3.7%–20.0%"

    split = pd.DataFrame([{"arm_a": "g31b_shared_104", "arm_b": "g31b_base", "metric": m, **ci, "n_clusters": 8,
                           "n_episodes": 40} for m in ("buyer_integrative", "seller_integrative")])
    t = integrative_table(split, p, paper).frame.iloc[0]
    assert t["paper: Δ buyer, integrative"] == "-0.040 [-0.051, -0.029]"
    assert t["Δ buyer, integrative"] == "+0.050e [+0.010, +0.090]" and t["Δ buyer, distributive"] == "—"

    shares = pd.DataFrame([{"arm_a": "g12b_shared_104", "arm_b": "g12b_base", "seller_gain": 0.065,
                            "distributive_share": 0.75, "integrative_share": 0.25, "buyer_loss_share": 0.88}])
    t = gain_shares_table(shares, p, paper).frame.iloc[0]
    assert (t["paper: distributive share"], t["paper: buyer's loss / seller's gain"]) == ("75.0%–81.0%", "88.0%")

    sp = pd.DataFrame([{"arm": "sonnet5", "buyer": b, "self_play": s, "estimate": 0.5, "ci_low": 0.4, "ci_high": 0.6,
                        "n_episodes": 9} for b, s in (("buyer_sonnet5", True), ("buyer_terra", False))])
    assert self_play_table(sp, p, paper).frame["paper: S"].tolist() == ["0.518", "0.513"]

    kl = pd.DataFrame([{"arm": "g31b_lr3_56", "run": "g31b_lr3", "seed": 0, "step": 56, "kl": 0.4, "kl_first": 0.0,
                        "kl_last": 0.5},
                       {"arm": "g12b_shared_104", "run": "g12b_shared_cont", "seed": 0, "step": 40, "kl": np.nan,
                        "kl_first": np.nan, "kl_last": np.nan}])
    t = kl_read_table(kl, p, paper).frame
    assert t["paper: KL at read"].tolist() == ["0.4370", "0.0220"] and t["KL at read"].iloc[1] == "—"

    rates = pd.DataFrame([{"arm_a": "e2b_shared_104", "arm_b": "e2b_base", "domain": d, "base_rate": 0.9,
                           "arm_rate": 0.8, **ci, "n_episodes": 16} for d in ("job_offer", "media_rights", "car")])
    assert deal_rate_domain_table(rates, p, paper).frame["paper: arm deal rate"].tolist() == [
        "0.74–0.80", "0.90", "> 0.93 (5 of the other 6)"]

    walk = pd.DataFrame([{"arm": a, "n_episodes": 10, "n_no_deal": 1, "walkaways": 0, "at_cap": 1}
                         for a in ("g31b_lr3_56", "e2b_base")])
    assert walkaway_table(walk, p, paper).frame["paper: walk-aways"].tolist() == [0, "—"]

    off = pd.DataFrame([{"arm": a, "n_deals": 10, "n_off_schema_deals": 3, "off_schema_deal_share": 0.3}
                        for a in ("e2b_lr10_56", "g12b_shared_104", "e4b_base", "boulware")])
    assert off_schema_ledger_table(off, p, paper).frame["paper: share"].tolist() == ["55%", "27.0%–32.0%",
                                                                                     "27.0%–44.0%", "—"]
