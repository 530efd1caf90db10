"""The report layer: tables for display and figures, built from the compute layer's numeric frames.

Contract: a report module reads the tidy frames an analysis module returns (one report module per analysis,
e.g. :mod:`negolib.report.tournament` for :mod:`negolib.tournament`) and returns display tables (strings) or
matplotlib figures; it computes no statistic and imports only its analysis module and plotting libraries.
Figures are :class:`matplotlib.figure.Figure` objects built without pyplot (no global figure state).
"""
