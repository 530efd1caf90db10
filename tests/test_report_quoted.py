"""The quoted contrasts' book tables: ours beside the paper's value in every row, "not run in this profile" where the
profile lacks an arm, the App. K re-run table and the held-out extension's trigger."""

from __future__ import annotations

from paper_frames import ROOT, paper_setup
from test_analysis_quoted import known_frame

from negolib.analysis.contrasts import held_out_contrasts, held_out_extension_trigger
from negolib.analysis.quoted import quoted_contrasts
from negolib.analysis.resamplers import Analysis
from negolib.metrics import synthetic_episodes
from negolib.params import load_params
from negolib.report.appendix_b_c import extension_trigger_table
from negolib.report.quoted import NOT_RUN, PAPER_PATHS, SECTIONS, quoted_table, rerun_table


def test_every_quoted_key_has_a_paper_value():
    _, paper, _, _ = paper_setup()
    from negolib.analysis.quoted import QUOTED
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
    assert len(k) == 2 and k["ours (re-run)"].str.startswith(NOT_RUN).all()


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
    none = extension_trigger_table(held_out_extension_trigger(held_out_contrasts(df[~car], p), p), paper)
    assert "cannot be evaluated" in none.caption
