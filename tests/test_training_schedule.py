"""Warmup-cosine with a floor, learning-rate arms and continuation restarts [App. H]."""

from __future__ import annotations

import math

import pytest

from negolib.training.schedule import WarmupCosine, combined_schedule, lambda_scheduler


def test_warmup_is_linear_from_the_first_update():
    s = WarmupCosine(1e-6, 64, warmup=5, min_ratio=0.1)
    assert [s.lr(k) for k in range(1, 6)] == pytest.approx([2e-7, 4e-7, 6e-7, 8e-7, 1e-6])


def test_cosine_decays_to_a_floor_of_a_tenth():
    s = WarmupCosine(1e-6, 64, warmup=5, min_ratio=0.1)
    vals = s.values()
    assert len(vals) == 64
    assert vals[4] == pytest.approx(1e-6) and vals[-1] == pytest.approx(1e-7)
    assert all(a >= b for a, b in zip(vals[4:], vals[5:]))  # monotone after warmup
    mid = 5 + (64 - 5) / 2  # half-way through the decay: the mean of peak and floor
    k = int(mid)
    expect = 1e-7 + 0.9e-6 * 0.5 * (1 + math.cos(math.pi * (k - 5) / 59))
    assert s.lr(k) == pytest.approx(expect)
    assert s.lr(100) == pytest.approx(1e-7)  # past the end: the floor


@pytest.mark.parametrize("mult, floor", [(1, 1e-7), (3, 3e-7), (10, 1e-6)])
def test_arms_scale_peak_and_floor(mult, floor):
    s = WarmupCosine(1e-6 * mult, 64)
    assert max(s.values()) == pytest.approx(1e-6 * mult)
    assert s.values()[-1] == pytest.approx(floor)
    assert [v / mult for v in s.values()] == pytest.approx(WarmupCosine(1e-6, 64).values())


def test_continuation_restarts_its_own_warmup():
    initial, cont = WarmupCosine(1e-6, 64), WarmupCosine(1e-6, 40)
    both = combined_schedule([initial, cont])
    assert len(both) == 104
    assert both[63] == pytest.approx(1e-7)  # end of the initial run: the floor
    assert both[64] == pytest.approx(2e-7)  # first continued step: warmup again, not the parent cosine
    assert both[68] == pytest.approx(1e-6) and both[-1] == pytest.approx(1e-7)


def test_lambda_scheduler_reproduces_the_schedule():
    torch = pytest.importorskip("torch")
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([p], lr=123.0)
    s = WarmupCosine(3e-6, 12, warmup=5)
    sched = lambda_scheduler(opt, s)
    seen = []
    for _ in range(12):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx(s.values())


def test_invalid_schedule():
    with pytest.raises(ValueError):
        WarmupCosine(1e-6, 0)
    with pytest.raises(ValueError):
        WarmupCosine(1e-6, 10).lr(0)
