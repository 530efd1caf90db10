"""The report layer: tables for display and figures, built from the analysis layer's tidy numeric frames.

Contract: a report module reads the frames an analysis module returns (:mod:`negolib.study.analysis`,
:mod:`negolib.study.diagnostics`, :mod:`negolib.study.efficiency`, :mod:`negolib.tournament`, ...) and returns display
tables (strings: :class:`negolib.study.report.booktable.BookTable`) or matplotlib figures, with the paper's
reported values (:mod:`negolib.study.paper`) beside ours in columns and panels labelled ``paper``; it computes no
statistic. Nothing below this layer imports it.

One module per notebook section:

* :mod:`~negolib.study.report.environment` (01): the domains' schemas, Figure 1;
* :mod:`~negolib.study.report.setup` (02): arm matrix, scenario set, sampling, recipe, Table 8;
* :mod:`~negolib.study.report.training` (03, and App. D in 07): the learning ladder, training curves, the per-run
  training summary;
* :mod:`~negolib.study.report.evaluation` (04): the pilot gate;
* :mod:`~negolib.study.report.results` (05): the primary family, Table 1, Figure 2, Table 2, openings, frontier;
* :mod:`~negolib.study.report.appendix_b_c` (06): Tables 3 and 4, Figure 3, the held-out panel;
* :mod:`~negolib.study.report.appendix_d_e` (07): guards, Tables 5 and 6, style diagnostics;
* :mod:`~negolib.study.report.appendix_g_k` (08): Table 7, cost, Monte Carlo error, Table 9;
* :mod:`~negolib.study.report.beyond` (09): scripted baselines, efficiency and the Pareto figure, turn order, fixed
  openings, training seeds and scaffold;
* :mod:`~negolib.study.report.quoted` (05-08): the contrasts and diagnostics the paper quotes in its text, one table per
  section, each row with the paper's value beside (or "not run in this profile");
* :mod:`~negolib.study.report.tournament`: the round-robin tournament of any game (:mod:`negolib.tournament`).

Shared: :mod:`~negolib.study.report.booktable` (the table object, ``simple_table``, the paper's cells),
:mod:`~negolib.study.report.cells` (intervals, marks, labels) and :mod:`~negolib.study.report.figures` (pyplot and
styles). The tournament's figures are built without pyplot; the sections' figures use pyplot so that a
notebook shows them inline.
"""
