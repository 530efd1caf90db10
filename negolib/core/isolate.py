"""Run one call in a fresh child process, so that the memory it takes ends with it.

A notebook kernel runs several heavy phases in turn (a format warm-up, a GRPO run, a lesson's training and its
evaluations). In one process their peaks stack: freed model weights, optimizer moments and activations are not all
handed back to the system, and a resident-memory high-water mark never falls. Each phase in its own process peaks
at what that phase needs. The call must be importable (a module-level function) and its arguments and result
picklable, and a script (not a notebook) that calls it needs an ``if __name__ == "__main__":`` guard (the child
imports the script's main module). What the child prints reaches the same output (file descriptors are
inherited), and an exception in the child is raised here.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def run_isolated(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a fresh ``spawn``ed process (no state inherited from this one but the environment
    and the open file descriptors); returns its result. The child is waited for before this returns, so its peak
    memory counts in this process's ``RUSAGE_CHILDREN``."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(fn, *args, **kwargs).result()


__all__ = ["run_isolated"]
