"""Known answers for the read-point analyses (negolib.study.analysis.read_points) and Table 8's topology
(negolib.study.analysis.serving.size_topology), on the paper profile's design with hand-built numbers."""

from __future__ import annotations

import math

import pandas as pd
from paper_frames import paper_setup

from negolib.study.analysis.read_points import (
    adjacent_reads,
    held_out_mc_band,
    read_validation,
    shared_reads,
    turn_ranges,
)
from negolib.study.analysis.serving import size_topology


def _est(metric: str, values: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame([{"arm": a, "metric": metric, "estimate": v, "ci_low": v, "ci_high": v}
                         for a, v in values.items()])


def test_adjacent_reads_finds_the_largest_move_between_shared_recipe_reads():
    p, _, _, _ = paper_setup()
    assert shared_reads(p, p.design.sizes[3]) == ["g31b_shared_40", "g31b_shared_56", "g31b_shared_104"]
    assert shared_reads(p, p.design.sizes[1]) == ["e4b_shared_56", "e4b_shared_104"]  # the 3x run's extra read is not
    # Table 4's scores: the paper's 0.004 at 2.3B and 0.056 at 31B; the base is no read point
    est = _est("score", {"e2b_base": 0.422, "e2b_shared_64": 0.428, "e2b_shared_104": 0.424, "g31b_shared_40": 0.563,
                         "g31b_shared_56": 0.564, "g31b_shared_104": 0.620, "e4b_shared_104": 0.453})
    a = adjacent_reads(est, p).set_index("paper_size")
    assert list(a.index) == ["E2B", "31B"]  # 4.5B has one evaluated read
    assert math.isclose(a.loc["E2B", "movement"], -0.004, abs_tol=1e-12)
    assert (a.loc["31B", "arm_from"], a.loc["31B", "arm_to"]) == ("g31b_shared_56", "g31b_shared_104")
    assert math.isclose(a.loc["31B", "movement"], 0.056, abs_tol=1e-12)
    assert a.loc["31B", "reads"] == "g31b_shared_40@40, g31b_shared_56@56, g31b_shared_104@104"


def test_turn_ranges_over_matched_and_all_arms():
    p, _, _, _ = paper_setup()
    est = _est("mean_turns", {"e2b_base": 11.9, "g12b_shared_104": 9.9, "e4b_base": 12.8, "g31b_lr3_56": 7.3,
                              "e2b_lr10_56": 14.4, "sonnet5": 10.4})
    r = turn_ranges(est, p).set_index("arms")
    assert (r.loc["matched", "min"], r.loc["matched", "arm_min"]) == (9.9, "g12b_shared_104")
    assert (r.loc["matched", "max"], r.loc["matched", "arm_max"], r.loc["matched", "n_arms"]) == (12.8, "e4b_base", 3)
    assert (r.loc["all", "arm_min"], r.loc["all", "arm_max"]) == ("g31b_lr3_56", "e2b_lr10_56")
    assert r.loc["all", "n_arms"] == 6
    assert math.isclose(r.loc["all", "ratio"], 14.4 / 7.3)
    assert turn_ranges(_est("mean_turns", {}), p)["n_arms"].tolist() == [0, 0]


def test_read_validation_reads_the_step_the_peak_and_the_last():
    p, _, _, _ = paper_setup()
    spec = p.arms["g12b_lr3_56"]
    seed = p.training.runs[spec.run].seeds[0]
    log = pd.DataFrame({"step": [0, 32, 56, 64], "score": [0.30, 0.481, 0.449, 0.368]})  # App. K's 12B 3x LR curve
    v = read_validation({(spec.run, seed): log}, p, ["g12b_lr3_56", "e2b_base", "e2b_lr3_56"])
    assert list(v["arm"]) == ["g12b_lr3_56"]  # a base, and a run with no log, give no row
    r = v.iloc[0]
    assert (r["step"], r["val_at_read"], r["peak_step"], r["val_peak"]) == (56, 0.449, 32, 0.481)
    assert (r["last_step"], r["val_last"], bool(r["read_is_peak"])) == (64, 0.368, False)


def test_held_out_mc_band_clears_only_beyond_three_ses_of_the_nearest_endpoint():
    held = pd.DataFrame([
        {"arm_a": "x", "arm_b": "b", "metric": "score", "estimate": 0.059, "ci_low": 0.023, "ci_high": 0.095,
         "se_low": 0.002, "se_high": 0.002},
        {"arm_a": "y", "arm_b": "b", "metric": "score", "estimate": 0.032, "ci_low": 0.003, "ci_high": 0.063,
         "se_low": 0.0015, "se_high": 0.002},
        {"arm_a": "z", "arm_b": "b", "metric": "score", "estimate": -0.02, "ci_low": -0.05, "ci_high": 0.01,
         "se_low": 0.001, "se_high": 0.001},
        {"arm_a": "w", "arm_b": "b", "metric": "deal_rate", "estimate": 0.1, "ci_low": 0.05, "ci_high": 0.2,
         "se_low": 0.001, "se_high": 0.001}])
    m = held_out_mc_band(held).set_index("arm_a")
    assert list(m.index) == ["x", "y", "z"]  # score only
    assert m.loc["x", "clears_band"] and math.isclose(m.loc["x", "band"], 0.006)
    assert m.loc["y", "excludes_zero"] and not m.loc["y", "clears_band"]  # 0.003 <= 3 x 0.0015
    assert m.loc["z", "nearest_bound"] == 0.01 and not m.loc["z", "excludes_zero"]
    assert held_out_mc_band(pd.DataFrame()).empty


def test_size_topology_reads_the_profiles_serving_and_its_runs():
    p, _, _, _ = paper_setup()
    t = size_topology(p).set_index("paper_size")
    assert t.loc["31B", "eval_backend"] == "vllm" and t.loc["31B", "eval_tp"] == 4 and t.loc["E2B", "eval_tp"] == 1
    assert "g31b_shared_cont" in t.loc["31B", "train_runs"]  # a continuation counts for the size it starts from
    assert t.loc["31B", "train_memory_fraction"] == [0.3] and 0.45 in t.loc["E2B", "train_memory_fraction"]
    assert all(isinstance(x, int) for x in t.loc["31B", "train_tp"])
