"""The worker's garbage-collector settings (workers/gctune.py), in a child interpreter: they are
process-wide and must not leak into the test process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from workers.gctune import GC_THRESHOLDS, tune_gc

PROBE = """
import gc, json
from workers.gctune import tune_gc
before = gc.get_threshold()
frozen = tune_gc()
print(json.dumps({"before": before, "after": gc.get_threshold(), "frozen": frozen, "count": gc.get_freeze_count()}))
"""


def test_tune_gc_freezes_start_up_objects_and_raises_the_thresholds() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60)
    got = json.loads(out.stdout)
    assert got["before"] == [700, 10, 10]  # CPython's defaults: the child started untouched
    assert tuple(got["after"]) == GC_THRESHOLDS
    assert got["frozen"] == got["count"] > 1000  # the interpreter's and the imports' objects


@pytest.mark.parametrize("bad", [(0, 10, 10), (10_000, 0, 20), (1, 2)])
def test_a_threshold_that_would_switch_the_collector_off_is_refused(bad: tuple[int, ...]) -> None:
    import gc

    before = gc.get_threshold()
    with pytest.raises(ValueError, match="at least 1"):
        tune_gc(bad)  # type: ignore[arg-type]
    assert gc.get_threshold() == before  # refused before anything changed
