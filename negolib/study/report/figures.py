"""What the section modules' figures share: pyplot with the book's seaborn theme, the paper's sizes and the
recipe roles' styles.

The section figures are drawn with pyplot so that a notebook shows them inline when the cell ends (the
book saves them with :meth:`negolib.book.context.Book.save_figure`); every plotted number is ours (from this
run's transcripts and logs) or the paper's (``params/paper_reported.yaml``, in panels and series
labelled "paper"). Nothing else is drawn.
"""

from __future__ import annotations

from typing import Any

ROLE_STYLE = {"base": ("base", "#777777", "o"), "shared": ("shared LR", "#1f77b4", "s"),
              "lr3": ("3× LR", "#d62728", "D"), "lr10": ("10× LR", "#9467bd", "^")}
PAPER_SIZES = ("E2B", "E4B", "12B", "31B")


def pyplot() -> Any:
    """``matplotlib.pyplot`` (on the Agg backend unless an inline or interactive one is in use), with the
    book's seaborn theme set."""
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        try:
            matplotlib.use("Agg", force=False)
        except Exception:  # an interactive backend is already in use
            pass
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    return plt


__all__ = ["PAPER_SIZES", "ROLE_STYLE", "pyplot"]
