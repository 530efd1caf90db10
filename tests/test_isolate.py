"""run_isolated: a call in a fresh child process returns its result, raises its error, and keeps its memory out of
the caller's high-water mark (while the caller's RUSAGE_CHILDREN still counts it, as the book runner reads it)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from negolib.core.isolate import run_isolated

# Allocates ~600 MB in the child (every page written) or, sabotaged, in this process; prints both peaks in kB.
PROBE = """
import json, resource, sys
from negolib.core.isolate import run_isolated
code = "block = b'1' * 600_000_000"
if sys.argv[1] == "isolated":
    run_isolated(exec, code)
else:
    exec(code)
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"self": hwm, "children": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""
# "self" is VmHWM, this process's own high-water mark: Linux carries ru_maxrss across exec, so RUSAGE_SELF of a probe
# started from a large test process would report that process's size.


def test_returns_the_childs_result():
    assert run_isolated(pow, 2, 10) == 1024
    assert run_isolated(sorted, [3, 1, 2], reverse=True) == [3, 2, 1]


def test_raises_the_childs_error():
    with pytest.raises(ValueError, match="invalid literal"):
        run_isolated(int, "not a number")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in kB is Linux's")
@pytest.mark.parametrize("mode", ["isolated", "sabotaged"])
def test_the_childs_memory_stays_out_of_the_callers_peak(mode):
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True, timeout=120)
    peaks = json.loads(out.stdout.strip().splitlines()[-1])
    if mode == "isolated":
        assert peaks["self"] < 400_000  # the caller never held the block
        assert peaks["children"] >= 550_000  # the runner's RUSAGE_CHILDREN still sees it
    else:  # the same allocation in the caller: the check above would catch it
        assert peaks["self"] >= 550_000
