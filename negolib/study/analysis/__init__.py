"""The analysis layer: tidy numeric frames computed from a run's episodes, logs and profile.

Contract: an analysis function returns a :class:`pandas.DataFrame` whose columns hold numbers, booleans
and identifiers only (arm, metric, run, guard, model names): no formatted strings (no ``"+0.023 [...]"``,
no ``"12.5%"``, no significance marks) and never a number of the paper's. The report layer
(:mod:`negolib.study.report`, one module per notebook section) formats these frames for display and puts the
paper's reported values beside them. Analysis imports nothing of the report layer.

One module per concept:

* :mod:`negolib.study.analysis.resamplers`: :class:`~negolib.study.analysis.resamplers.Analysis`, an episode table with
  one seeded set of seed-cluster resamples per scenario set (shared by every estimate on those seeds);
* :mod:`negolib.study.analysis.arms`: arm-level estimates with intervals, point estimates, and the
  :class:`~negolib.study.analysis.arms.Results` the results notebooks read;
* :mod:`negolib.study.analysis.contrasts`: paired contrasts grouped by shared seeds, the profile's design pairs
  and the Holm-corrected primary family (``primary``, ``p_holm``, ``significant``);
* :mod:`negolib.study.analysis.decomposition`: deal-only paired changes split into distributive and integrative
  parts (Tables 2 and 9);
* :mod:`negolib.study.analysis.guards`: the prespecified guards of each trained arm (App. E);
* :mod:`negolib.study.analysis.cost`: tokens and USD per episode by arm (App. G);
* :mod:`negolib.study.analysis.training`: per-run training summaries with FLOPs (App. D, I) and per-size compute
  (Table 8);
* :mod:`negolib.study.analysis.design`: the evaluation scenario set's counts;
* :mod:`negolib.study.analysis.serving`: per arm, the seller turns whose prompt cap bound;
* :mod:`negolib.study.analysis.quoted`: the contrasts the paper quotes in its text (gain differences across sizes, the
  continuation gains, the frontier sellers by panel, the 10x arm by buyer, App. K's 10^5-resample re-runs), arms
  named by design role so a profile without one gets a "not run" row;
* :mod:`negolib.study.analysis.quoted_diagnostics`: the smaller diagnostics the paper quotes (late closes, the
  integrative split, shares of the gain, self-play, KL at the read step, deal rate by domain, walk-aways,
  off-schema terms on the closing ledger);
* :mod:`negolib.study.analysis.beyond`: the contrasts of notebook 9 (scripted baselines, turn order, fixed
  openings) and the runs with several seeds or the evaluation scaffold.
"""
