"""The book machinery: the in-notebook context (:mod:`negolib.book.context.context`, ``open_book``), the runner that
executes the notebooks (:mod:`negolib.book.context.runner`), its progress display, the static site, the widgets, the
exercises' checks and the handout.

The package imports nothing itself: import the module you need (``from negolib.book.context.context import open_book``).
"""
