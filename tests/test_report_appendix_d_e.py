"""Notebook 7's report: the guards worded as before, Table 5, Table 6 and the style diagnostics, ours
beside the paper's."""

from __future__ import annotations

import pandas as pd
from paper_frames import paper_setup, played

from negolib.core.formatting import DASH
from negolib.study.analysis.guards import guards_frame
from negolib.study.analysis.resamplers import Analysis
from negolib.study.report.appendix_d_e import guards_display, guards_table, style_diag_table, table5, table6


def test_table5():
    p, paper, _, est = paper_setup()
    t5 = table5(est, None, p.design.sizes[0], p, paper)
    assert list(t5.frame.index) == ["e2b_base", "e2b_shared_64", "e2b_shared_104", "e2b_lr3_56", "e2b_lr10_56"]
    assert t5.frame.loc["e2b_lr10_56", "paper: bad-parse (seller)"] == "0.0282"
    assert t5.frame.loc["e2b_lr10_56", "paper: buyer split"] == "+0.175"
    assert t5.frame.loc["e2b_lr10_56", "buyer split"] == DASH  # no split computed here: never invented


def test_guards_are_worded_from_their_numbers():
    _, df = played()
    g = guards_frame(Analysis(df, n_resamples=200, seed=0), [("conceder", "boulware")])
    shown = guards_display(g)
    assert list(shown.columns) == ["arm", "compared with", "comparator", "guard", "metric", "comparator value",
                                   "arm value", "delta", "ci", "threshold", "passed", "note", "n_paired"]
    assert set(shown["comparator"]) == {"given"} and set(shown["compared with"]) == {"boulware"}
    by = shown.set_index("guard")
    assert list(by["threshold"]) == ["delta >= -0.05", "delta <= 0.01", "delta <= 0.01", "arm < 24", "manual"]
    deal = g[g["metric"] == "deal_rate"].iloc[0]
    assert by.loc["deal rate holds while U~ rises", "note"] == f"delta deal-only U~ {deal['d_deal_utility']:+.3f}"
    assert by.loc["deal rate holds while U~ rises", "ci"] == (
        f"{deal['ci_estimate']:+.3f} [{deal['ci_low']:+.3f}, {deal['ci_high']:+.3f}]")
    cap = g[g["metric"] == "mean_turns"].iloc[0]["share_at_cap"]
    assert by.loc["mean turns below the cap", "note"] == f"{cap:.1%} of episodes at the cap"
    assert by.loc["flat parse-failure rate", "note"] == "over the seller's own turns"
    assert pd.isna(by.loc["transcripts read by hand", "ci"]) and by.loc["transcripts read by hand", "passed"] is None
    t = guards_table(g)
    assert list(t.frame.index.names) == ["arm", "guard"] and t.name == "guards"
    assert "policy its training started from" in t.caption
    assert guards_table(pd.DataFrame()).frame.empty


def test_style_and_table6_beside_the_papers_rates():
    p, paper, _, _ = paper_setup()
    style = pd.DataFrame([{"arm": "g31b_lr3_56", "n_episodes": 10, "n_seller_turns": 40, "top_opener": "i can offer",
                           "top_opener_share": 0.25, "top3_share": 0.5, "repeated_opener_rate": 0.1,
                           "i_appreciate_rate": 0.0, "json_leak_rate": 0.0, "buyer_voice_opening": 0.2}])
    t = style_diag_table(style, p, paper).frame
    assert t.loc["g31b_lr3_56", "top_opener_share"] == "25.0%" and t.loc["g31b_lr3_56", "paper: top_opener_share"] \
        == "30.3%"
    assert t.loc["g31b_lr3_56", "paper: top3_share"] == "63.7%"
    assert "paper: json_leak_rate" not in t  # the paper reports none for this arm: no empty paper column
    t6 = table6({"e2b_base": 0.1}, p, paper).frame
    assert t6.loc["e2b_base", "buyer's-voice openers (car)"] == "10.0%"
    assert t6.loc["e2b_base", "paper: rate"] == (DASH if paper.arm("e2b_base").get("buyer_voice_car") is None else
                                                 f"{100 * paper.arm('e2b_base')['buyer_voice_car']:.1f}%")


def test_template_tag_guard_counts_what_the_agents_stripped_and_can_fail():
    """Tags an agent stripped from a seller reply (``tags_stripped`` in its extra) reach the turn record, the
    episode table and the per-arm guard, which fails for that arm and passes for a clean one."""
    from negolib.agents.base import Agent, AgentReply
    from negolib.core.transcripts import episodes_frame
    from negolib.games.multi_issue.env import EnvConfig
    from negolib.games.multi_issue.rollout import make_specs, run_episodes
    from negolib.games.multi_issue.scenarios import scenario_set
    from negolib.games.multi_issue.scripted import make_scripted
    from negolib.study.analysis.serving import serving_frame
    from negolib.study.report.appendix_d_e import template_tag_table

    class Leaky(Agent):
        name = "leaky"

        def __init__(self):
            self.inner = make_scripted("hardliner")

        def act_batch(self, views):
            return [AgentReply(r.text, extra={"tags_stripped": 2}) for r in self.inner.act_batch(views)]

    sc, cfg = scenario_set([1, 2], ["car"]), EnvConfig(max_rounds=3)
    agents = {"leaky": Leaky(), "clean": make_scripted("hardliner"), "b": make_scripted("conceder")}
    recs = []
    for arm in ("leaky", "clean"):
        recs += run_episodes(make_specs(arm, arm, ["b"], sc, cfg), agents, progress=False).records
    assert all(t["tags_stripped"] == (2 if r["arm"] == "leaky" and t["role"] == "seller" else 0)
               for r in recs for t in r["turns"])
    sv = serving_frame(episodes_frame(recs)).set_index("arm")
    n_seller = sum(t["role"] == "seller" for r in recs if r["arm"] == "leaky" for t in r["turns"])
    assert sv.loc["leaky", "n_tags_stripped"] == 2 * n_seller and sv.loc["leaky", "n_tag_episodes"] == 2
    assert sv.loc["clean", "n_tags_stripped"] == 0
    t = template_tag_table(sv.reset_index()).frame
    assert t.loc["leaky", "passed"] is False or not t.loc["leaky", "passed"]
    assert t.loc["clean", "passed"] and t.loc["leaky", "tags stripped"] == 2 * n_seller
    assert "paper: leaks" in t.columns
