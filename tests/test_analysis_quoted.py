"""The contrasts the paper quotes in its text, on synthetic transcripts whose answer is known: scores built as a
scenario effect shared by every arm plus a constant per arm (and per buyer or domain where a row needs one), so
every paired difference is that constant on every resample and the interval collapses onto it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from paper_frames import ROOT, assert_tidy, paper_setup

from negolib.games.multi_issue.metrics import synthetic_episodes
from negolib.params import load_params
from negolib.stats import ClusterResampler
from negolib.study.analysis.contrasts import extension_fires, held_out_contrasts, held_out_extension_trigger, run_pairs
from negolib.study.analysis.quoted import QUOTED, quoted_contrasts, resolve
from negolib.study.analysis.resamplers import Analysis
from negolib.study.paired import contrast_difference, paired_contrast

EFFECTS = {"e2b_base": 0.40, "e2b_shared_104": 0.41, "e2b_shared_64": 0.405, "e2b_lr3_56": 0.44,
           "e2b_lr10_56": 0.45, "e4b_base": 0.43, "e4b_shared_104": 0.46, "e4b_shared_56": 0.44,
           "e4b_lr3_56": 0.52, "e4b_lr3_64": 0.515, "g12b_base": 0.52, "g12b_shared_104": 0.59,
           "g12b_shared_64": 0.55, "g12b_lr3_56": 0.60, "g31b_base": 0.54, "g31b_shared_104": 0.63,
           "g31b_shared_40": 0.56, "g31b_shared_56": 0.57, "g31b_lr3_56": 0.625, "sonnet5": 0.515, "terra": 0.50}
LR10_TERRA = 0.12   # the 10x arm's extra score against buyer_terra only
SONNET_CAR = 0.07   # Sonnet 5's extra score on the held-out car domain only


def known_frame() -> pd.DataFrame:
    """The paper's 21 design arms on 8 seeds: score = scenario effect + the arm's constant (+ the two offsets)."""
    df = synthetic_episodes(list(EFFECTS), n_seeds=8, buyers=("buyer_terra", "buyer_sonnet5"), seed=5)
    scen = df.groupby(["seed", "domain", "buyer"])["score"].transform("first")
    df["score"] = scen + df["arm"].map(EFFECTS)
    df.loc[(df["arm"] == "e2b_lr10_56") & (df["buyer"] == "buyer_terra"), "score"] += LR10_TERRA
    df.loc[(df["arm"] == "sonnet5") & (df["domain"] == "car"), "score"] += SONNET_CAR
    return df


def rows(frame: pd.DataFrame, section: str | None = None) -> dict[str, dict]:
    sub = frame if section is None else frame[frame["section"] == section]
    return {r["key"]: r for r in sub.to_dict("records")}


def gain(size_arm: str, base: str) -> float:
    return EFFECTS[size_arm] - EFFECTS[base]


@pytest.fixture(scope="module")
def known() -> pd.DataFrame:
    p, _, _, _ = paper_setup()
    return quoted_contrasts(Analysis(known_frame(), n_resamples=300, seed=0, refine_resamples=900), p)


def test_every_row_computed_with_the_paper_arms(known):
    assert known["available"].all() and known["missing"].isna().all()
    assert len(known) == len(QUOTED) + sum(q.refined for q in QUOTED)
    assert_tidy(known, identifiers=("key", "section", "arm_a", "arm_b", "arm_c", "arm_d", "buyer", "buyer_c",
                                    "domains", "missing"))


def test_gain_differences_behind_contribution_i(known):
    r = rows(known, "5")
    want = {"gain_diff_within_eseries": gain("e4b_shared_104", "e4b_base") - gain("e2b_shared_104", "e2b_base"),
            "gain_diff_across_boundary": gain("g12b_shared_104", "g12b_base") - gain("e4b_shared_104", "e4b_base"),
            "gain_diff_within_conventional": gain("g31b_shared_104", "g31b_base") - gain("g12b_shared_104",
                                                                                          "g12b_base"),
            "lr3_g31b_minus_g12b": gain("g31b_lr3_56", "g12b_lr3_56"),
            "e4b_lr3_56_minus_64": gain("e4b_lr3_56", "e4b_lr3_64")}
    for key, v in want.items():
        assert r[key]["estimate"] == pytest.approx(v, abs=1e-9), key
        assert r[key]["ci_low"] == pytest.approx(v, abs=1e-9) and r[key]["ci_high"] == pytest.approx(v, abs=1e-9)
        assert r[key]["significant"] == (abs(v) > 1e-9)
    assert (r["gain_diff_within_eseries"]["arm_a"], r["gain_diff_within_eseries"]["arm_d"]) == ("e4b_shared_104",
                                                                                                "e2b_base")
    assert r["e4b_lr3_56_minus_64"]["arm_b"] == "e4b_lr3_64"


def test_continuation_gains_of_figure3(known):
    r = rows(known, "B")
    for size, (a, b) in {"E2B": ("e2b_shared_104", "e2b_shared_64"), "E4B": ("e4b_shared_104", "e4b_shared_56"),
                         "12B": ("g12b_shared_104", "g12b_shared_64"),
                         "31B": ("g31b_shared_104", "g31b_shared_56")}.items():
        assert r[f"continuation_gain.{size}"]["estimate"] == pytest.approx(gain(a, b), abs=1e-9)


def test_frontier_and_31b_at_56_by_panel(known):
    r = rows(known, "C")
    base = gain("sonnet5", "terra")
    assert r["sonnet_minus_terra.training_domains"]["estimate"] == pytest.approx(base, abs=1e-9)
    assert r["sonnet_minus_terra.held_out"]["estimate"] == pytest.approx(base + SONNET_CAR, abs=1e-9)
    assert r["sonnet_minus_terra.pooled"]["estimate"] == pytest.approx(base + SONNET_CAR / 9, abs=1e-9)
    assert r["sonnet_minus_terra.held_out"]["n_episodes"] == 8 * 2
    assert r["sonnet_minus_terra.training_domains"]["n_episodes"] == 8 * 8 * 2
    for d in ("pooled", "held_out"):
        assert r[f"g31b_56_minus_g12b_104.{d}"]["estimate"] == pytest.approx(gain("g31b_shared_56", "g12b_shared_104"),
                                                                             abs=1e-9)


def test_ten_x_arm_by_buyer_and_its_split_difference(known):
    r = rows(known, "E")
    g = gain("e2b_lr10_56", "e2b_base")
    assert r["e2b_lr10_minus_base_vs_terra"]["estimate"] == pytest.approx(g + LR10_TERRA, abs=1e-9)
    assert r["e2b_lr10_minus_base_vs_sonnet5"]["estimate"] == pytest.approx(g, abs=1e-9)
    assert r["e2b_lr10_minus_base"]["estimate"] == pytest.approx(g + LR10_TERRA / 2, abs=1e-9)
    split = r["e2b_lr10_split_minus_base_split"]
    assert split["estimate"] == pytest.approx(LR10_TERRA, abs=1e-9)
    assert (split["buyer"], split["buyer_c"]) == ("buyer_terra", "buyer_sonnet5")
    assert r["e2b_lr10_minus_lr3"]["estimate"] == pytest.approx(gain("e2b_lr10_56", "e2b_lr3_56") + LR10_TERRA / 2,
                                                                abs=1e-9)


def test_app_k_reruns_at_the_refine_resamples(known):
    k = known[known["section"] == "K"]
    assert sorted(k["n_resamples"]) == [300, 300, 900, 900]
    assert set(k["key"]) == {"gain_diff_within_conventional", "lr3_g31b_minus_g12b"}


def test_a_gain_difference_is_the_difference_of_two_paired_contrasts_on_shared_resamples():
    """With noise: the estimate is the difference of the two gains run_pairs reports, and the interval is
    stats.contrast_difference's on one resampler over the seeds all four arms played."""
    p, _, an, _ = paper_setup()
    r = rows(quoted_contrasts(an, p, sections=("5",)))["gain_diff_across_boundary"]
    gains = run_pairs(an, [("g12b_shared_104", "g12b_base"), ("e4b_shared_104", "e4b_base")])
    g = dict(zip(gains["arm_a"], gains["estimate"]))
    assert r["estimate"] == pytest.approx(g["g12b_shared_104"] - g["e4b_shared_104"])
    res = an.resampler(an.df["seed"])
    first = paired_contrast(an.df, "g12b_shared_104", "g12b_base", "score", res)
    second = paired_contrast(an.df, "e4b_shared_104", "e4b_base", "score", res)
    d = contrast_difference(first, second)
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((d.interval.ci_low, d.interval.ci_high))
    assert isinstance(res, ClusterResampler) and r["n_resamples"] == res.n_resamples


def test_a_missing_arm_gives_a_row_not_run():
    p, _, _, _ = paper_setup()
    df = known_frame()
    out = quoted_contrasts(Analysis(df[df["arm"] != "e4b_lr3_64"], n_resamples=100), p, sections=("5",))
    r = rows(out)["e4b_lr3_56_minus_64"]
    assert not r["available"] and r["missing"] == "E4B.lr3_other" and np.isnan(r["estimate"])
    assert out.loc[out["key"] != "e4b_lr3_56_minus_64", "available"].all()


def test_the_default_profile_resolves_what_it_has():
    """The default profile has one size (paper key E2B: base and a 3x-LR arm) and no frontier sellers: every quoted
    quantity is a row, none computable, each naming what is missing."""
    p = load_params(ROOT / "params" / "default.yaml")
    assert resolve(p, "E2B.lr3") == "smollm2_grpo" and resolve(p, "12B.shared") is None
    assert resolve(p, "frontier.0") is None
    df = synthetic_episodes(["smollm2_base", "smollm2_grpo"], n_seeds=4)
    out = quoted_contrasts(Analysis(df, n_resamples=50), p)
    assert len(out) == len(QUOTED) + sum(q.refined for q in QUOTED)
    assert not out["available"].any() and out["missing"].notna().all()
    lr10 = rows(out)["e2b_lr10_minus_lr3"]
    assert lr10["missing"] == "E2B.lr10" and lr10["arm_b"] == "smollm2_grpo"


def test_held_out_extension_trigger_reads_the_largest_sizes_held_out_gain():
    """App. C: the extension fires when the largest size's held-out gain straddles zero (the prespecified shared
    recipe's row); a clear held-out gain does not fire it."""
    p, _, _, _ = paper_setup()
    df = known_frame()
    clear = held_out_extension_trigger(held_out_contrasts(df, p), p)
    assert list(clear["arm"]) == ["g31b_shared_104", "g31b_lr3_56"] and clear["available"].all()
    assert clear["estimate"].tolist() == pytest.approx([gain("g31b_shared_104", "g31b_base"),
                                                        gain("g31b_lr3_56", "g31b_base")])
    assert not clear["straddles_zero"].any() and extension_fires(clear) is False
    car_base = df.loc[(df["arm"] == "g31b_base") & (df["domain"] == "car"), "score"].to_numpy()
    df.loc[(df["arm"] == "g31b_shared_104") & (df["domain"] == "car"), "score"] = car_base  # no held-out gain
    flat = held_out_extension_trigger(held_out_contrasts(df, p), p)
    assert flat["straddles_zero"].tolist() == [True, False] and extension_fires(flat) is True
    assert_tidy(flat, identifiers=("size", "paper_size", "role", "arm", "base"))


def test_extension_trigger_without_held_out_gains_cannot_be_read():
    p, _, _, _ = paper_setup()
    df = known_frame()
    trig = held_out_extension_trigger(held_out_contrasts(df[df["domain"] != "car"], p), p)
    assert not trig["available"].any() and extension_fires(trig) is None
