"""negolib: the library behind negobook.

Environment, agents, rollouts, GRPO training, evaluation, statistics, diagnostics, tables and
plots for the study "Do Small Language Models Learn to Negotiate?". Data flows one way:
domains -> scenarios -> episodes -> transcripts -> metrics -> tables and figures.
"""

__version__ = "0.1.0"
