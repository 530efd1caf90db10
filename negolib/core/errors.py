"""Errors raised by negolib with messages that name the file, the field and what is allowed."""

from __future__ import annotations


class NegolibError(Exception):
    """Base class of every error negolib raises on bad input."""


class ValidationError(NegolibError, ValueError):
    """A file or value failed validation; the message names the source, field and allowed values."""

    def __init__(self, source: str, field: str, problem: str) -> None:
        self.source, self.field, self.problem = source, field, problem
        super().__init__(f"{source}: field '{field}': {problem}")
