"""NeMo-RL's leave-one-out advantages against a hand computation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from negolib.training.advantages import loo_advantages, loo_advantages_torch, loo_baseline_and_std


def test_hand_computation_group_of_four():
    r = [1.0, 0.0, 0.5, -0.3]
    # rollout 0: others (0, 0.5, -0.3): mean 0.0667; sample std (ddof 1)
    others = [0.0, 0.5, -0.3]
    b0 = sum(others) / 3
    s0 = math.sqrt(sum((x - b0) ** 2 for x in others) / 2)
    base, std = loo_baseline_and_std(np.array(r), 4)
    assert base[0] == pytest.approx(b0) and std[0] == pytest.approx(s0)
    adv = loo_advantages(np.array(r), 4)
    assert adv[0] == pytest.approx((1.0 - b0) / s0)
    for i in range(4):  # every rollout, against numpy on the others
        o = np.delete(np.array(r), i)
        assert adv[i] == pytest.approx((r[i] - o.mean()) / o.std(ddof=1))


def test_ddof0_is_the_uncorrected_form():
    r = np.array([0.2, 0.9, 0.4])
    adv = loo_advantages(r, 3, ddof=0)
    for i in range(3):
        o = np.delete(r, i)
        assert adv[i] == pytest.approx((r[i] - o.mean()) / o.std(ddof=0))


def test_groups_are_independent_and_group_major():
    r = np.array([1.0, 0.0, 5.0, 5.0, 2.0, 3.0])
    adv = loo_advantages(r, 2)
    # G = 2: the other reward is the baseline; the std of one value (ddof 1) is undefined -> unscaled
    assert adv == pytest.approx([1.0, -1.0, 0.0, 0.0, -1.0, 1.0])


def test_zero_std_of_others_leaves_the_difference_unscaled():
    r = np.array([1.0, 0.0, 0.0, 0.0])
    adv = loo_advantages(r, 4)
    assert adv[0] == pytest.approx(1.0)  # others all 0: std 0, no division
    o = np.array([1.0, 0.0, 0.0])
    assert adv[1] == pytest.approx((0.0 - o.mean()) / o.std(ddof=1))


def test_equal_rewards_give_zero_advantage_and_group_of_one_is_zero():
    assert loo_advantages(np.full(8, 0.3), 8) == pytest.approx(np.zeros(8))
    assert loo_advantages(np.array([0.7, -0.1]), 1) == pytest.approx([0.0, 0.0])


def test_unnormalized_is_r_minus_loo_mean():
    r = np.array([0.1, 0.4, 0.7, 1.0])
    assert loo_advantages(r, 4, normalize=False) == pytest.approx(4 / 3 * (r - r.mean()))


def test_bad_group_size():
    with pytest.raises(ValueError):
        loo_advantages(np.zeros(5), 2)


def test_torch_wrapper_matches_and_zeroes_nan():
    torch = pytest.importorskip("torch")
    r = torch.tensor([1.0, 0.0, 0.5, -0.3, float("nan"), 0.2, 0.2, 0.1])
    adv = loo_advantages_torch(r, 4)
    assert adv.dtype == r.dtype and adv.shape == r.shape
    assert adv[:4].tolist() == pytest.approx(loo_advantages(np.array([1.0, 0.0, 0.5, -0.3]), 4).tolist())
    assert adv[4].item() == 0.0


def test_equal_other_rewards_are_never_blown_up_by_float_cancellation():
    """Regression: E[r^2] - E[r]^2 over three equal rewards left ~1e-17 of variance, and a lone
    reward's advantage became ~1e9 (a GRPO loss of ~4e3 on the default profile's first step)."""
    rng = np.random.default_rng(0)
    for _ in range(2000):
        x, y = rng.random(2)
        adv = loo_advantages(np.array([y, x, x, x]), 4)
        assert adv[0] == pytest.approx(y - x, abs=1e-12)


def test_matches_a_direct_leave_one_out_computation():
    """Oracle: numpy's std (ddof) of the other rewards, rollout by rollout."""
    rng = np.random.default_rng(1)
    for G, ddof in ((4, 1), (8, 1), (5, 0)):
        r = rng.random(3 * G)
        adv = loo_advantages(r, G, ddof)
        for b in range(3):
            g = r[b * G:(b + 1) * G]
            for i in range(G):
                others = np.delete(g, i)
                assert adv[b * G + i] == pytest.approx((g[i] - others.mean()) / others.std(ddof=ddof), rel=1e-9)


def test_std_floor_bounds_a_lone_reward_against_nearly_equal_others():
    """The default profile's first GRPO group: three deals within 7e-6 of each other and one lower
    deal. NeMo-RL's rule (floor 0) divides by the others' ~4e-6 std; a floor bounds |A|."""
    r = np.array([0.9959707062978286, 0.9959707062978286, 0.9959640770918209, 0.6737541032511319])
    nemo = loo_advantages(r, 4)
    assert abs(nemo[3]) > 5e4
    floored = loo_advantages(r, 4, std_floor=0.1)
    assert floored[3] == pytest.approx((r[3] - r[:3].mean()) / 0.1)
    spread = np.array([0.2, 0.9, 0.5, 0.7])  # a real spread: the floor changes nothing
    assert np.allclose(loo_advantages(spread, 4, std_floor=0.1), loo_advantages(spread, 4))
