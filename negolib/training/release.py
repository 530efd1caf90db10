"""Hand a finished phase's memory back before the next phase of the same process (a notebook kernel runs several).

A finished Hugging Face trainer sits in reference cycles (its callbacks and accelerator point back at it), so its
model, gradients and optimizer moments stay allocated until Python's next full collection, which nothing schedules:
the next phase's peak then stacks on the last one's. And glibc keeps freed heap pages mapped unless asked to trim.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys


def release_memory() -> int:
    """Collect reference cycles now, then return glibc's free heap pages to the system (``malloc_trim(0)``; skipped
    where there is no glibc). Returns the number of unreachable objects the collection found."""
    found = gc.collect()
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            libc.malloc_trim(0)
        except (OSError, AttributeError):  # musl and other libcs have no malloc_trim
            pass
    return found


__all__ = ["release_memory"]
