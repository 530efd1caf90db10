"""The paper's study of its own game (the multi-issue negotiation): the frozen evaluation protocol and the
evaluation itself, the paired contrasts, diagnostics, efficiency, cost, the paper's reported numbers, the
training runs of a profile and the learning ladder, and the analysis and report layers over them.

The package imports nothing itself: import the module you need (``from negolib.study.evaluation import ...``).
"""
