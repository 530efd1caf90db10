"""The evaluation scenario set's counts: scripted arms play the full set, LM arms the declared subset."""

from __future__ import annotations

from pathlib import Path

from paper_frames import assert_tidy

from negolib.params import load_params
from negolib.study.analysis.design import SCENARIO_QUANTITIES, scenario_set_counts

ROOT = Path(__file__).resolve().parent.parent


def test_smoke_scenario_set_counts():
    p = load_params(ROOT / "params" / "smoke.yaml")
    c = scenario_set_counts(p)
    assert_tidy(c, identifiers=("quantity",))
    c = c.set_index("quantity")
    assert list(c.index) == list(SCENARIO_QUANTITIES)
    ev, nb = p.evaluation, len(p.evaluation.buyers)
    assert c.loc["episodes_per_arm", "scripted"] == ev.seeds_per_domain * 9 * nb
    assert c.loc["episodes_per_arm", "lm"] == ev.lm_seeds_per_domain * len(ev.lm_domains) * nb
    n_lm = len(p.lm_arms())
    assert c.loc["episodes_total", "scripted"] == (len(p.arms) - n_lm) * c.loc["episodes_per_arm", "scripted"] \
        + n_lm * c.loc["episodes_per_arm", "lm"]
    assert c["lm"].isna().sum() == 1 and c.loc["max_turns", "scripted"] == 2 * ev.max_rounds
