"""The prespecified guards of each trained arm against the policy its training started from (App. E), on the seeds
both played.

One row per (arm, guard) from :func:`negolib.study.diagnostics.guards_table`: the comparator's and the arm's value,
the change with its paired seed-cluster interval (``ci_low``, ``ci_high``), the guard's ``limit`` on the
change (or on the arm's value for the turn cap) and whether it ``passed`` (None for the hand-read guard);
``base_arm`` names the arm compared with and ``comparator`` says which it is (:data:`COMPARATORS`).

Why not the base: a guard asks whether training broke something the policy could already do. Where a run
starts with a format warm-up, the raw base writes no parseable action and closes no deal, so "the deal rate
holds" passes against it whatever GRPO did; the policy GRPO started from is the run's step 0 (the warm-up).
:func:`guard_comparators` picks it from the profile and falls back to the base only where it was not evaluated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from negolib.params import Params
from negolib.study.analysis.resamplers import Analysis
from negolib.study.diagnostics import guards_table

STARTING_POLICY = "starting policy"
BASE_FALLBACK = "base (no starting-policy arm evaluated)"
GIVEN = "given"
COMPARATORS = (STARTING_POLICY, BASE_FALLBACK, GIVEN)
"""What a guard row's ``comparator`` says: the policy the arm's training started from; the same-size base,
because no arm holding that policy was evaluated; or a pair the caller gave without a profile."""


def _root_run(params: Params, run: str) -> str:
    """The run a chain of continuations (``init: run@step``) starts from."""
    seen = {run}
    while run in params.training.runs:
        parent, at, _ = params.training.runs[run].init.partition("@")
        if not at or parent in seen:
            break
        run = parent
        seen.add(run)
    return run


def starting_policy(params: Params, arm: str) -> str | None:
    """The arm that holds the policy ``arm``'s training started from, or None (not a trained arm, or no arm of
    the profile holds that policy).

    For a trained arm read after step 0: the ``backend: trained, step: 0`` arm of the first run of its chain of
    continuations (the format warm-up where the run has one), else, for a run without a warm-up, the run's
    ``init`` arm (its step 0 is those weights). For a step-0 arm (the warm-up itself): the run's ``init`` arm,
    which the warm-up started from. The profile's ``statistics.primary`` pairs the default profile's GRPO arm
    with the same arm (its warm-up), and the paper profile's shared-LR arms with their base (no warm-up).
    """
    spec = params.arms.get(arm)
    if spec is None or spec.backend != "trained" or not spec.run or spec.run not in params.training.runs:
        return None
    root = _root_run(params, spec.run)
    run = params.training.runs[root]
    init = run.init.partition("@")[0]
    if spec.step == 0 and root == spec.run:
        return init if init in params.arms else None
    for name, other in params.arms.items():
        if name != arm and other.backend == "trained" and other.run == root and other.step == 0:
            return name
    return init if run.warmup is None and init in params.arms else None


def guard_comparators(params: Params, pairs: Sequence[tuple[str, str]],
                      available: Callable[[str], bool]) -> list[tuple[str, str, str]]:
    """``(arm, comparator arm, comparator)`` for each ``(trained arm, same-size base)`` of ``pairs``: the arm's
    :func:`starting_policy` where ``available`` (evaluated), else the base (``comparator`` says which)."""
    out = []
    for arm, base in pairs:
        start = starting_policy(params, arm)
        if start is not None and start != arm and available(start):
            out.append((arm, start, STARTING_POLICY))
        else:
            out.append((arm, base, BASE_FALLBACK))
    return out


def guards_frame(an: Analysis, pairs: Sequence[tuple[str, str] | tuple[str, str, str]]) -> pd.DataFrame:
    """The four prespecified guards (and ours, accepts only offers) of each ``(arm, comparator arm[, comparator])``
    (from :func:`guard_comparators`; a pair without the third element is :data:`GIVEN`), on the seeds both played,
    with paired seed-cluster intervals."""
    frames = []
    for arm, ref, *kind in pairs:
        if an.has(arm) and an.has(ref):
            sub, res = an.pair_frame(arm, ref)
            g = guards_table(sub, ref, arm, res, alpha=an.alpha)
            g.insert(2, "comparator", kind[0] if kind else GIVEN)
            frames.append(g)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


__all__ = ["BASE_FALLBACK", "COMPARATORS", "GIVEN", "STARTING_POLICY", "guard_comparators", "guards_frame",
           "starting_policy"]
