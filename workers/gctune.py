"""Garbage-collector settings for a long-running process with a large live heap (issue 16).

CPython's cyclic collector stops the whole interpreter while it runs, and a full (generation 2)
collection walks every tracked object. A worker that caches hundreds of workflow instances, or
a simulator that holds thousands of nodes and pods, has millions of them: measured on the 2-core
benchmark machine (``benchmarks/rollout_overhead.py --nodes 2000 --max-unavailable 200 ...``),
with the defaults (700, 10, 10) the worker paused 2.3 s in 16 full collections (the longest
243 ms) and the simulator 6.4 s in 19 (the longest 613 ms): workflow tasks, watch streams and
API answers all waited. With :func:`tune_gc` in both, the run took 96 s instead of 110 to 121 s,
the largest workflow task fell from 835 to 452 ms and the worker used 60 CPU seconds instead of
71 to 78.

What it does (the approach of the CPython docs' ``gc.freeze`` note, used by forking servers):

- one full collection, then ``gc.freeze()``: every object alive after start-up (modules,
  classes, pydantic schemas, the registry) moves to the permanent generation, which no
  collection walks again. They are still freed by reference counting; only a reference cycle
  among them would never be collected, and start-up objects live for the whole process anyway;
- ``gc.set_threshold(*GC_THRESHOLDS)``: a young collection every 10,000 net allocations instead
  of 700, and the older generations after 20 of the younger instead of 10, so the collector
  runs far less often (each young collection is still a few milliseconds).

Call it once, in a process's entry point after its imports; never in a library or a test process.
"""

from __future__ import annotations

import gc

#: ``gc.set_threshold`` arguments (young allocations, then collections of the generation below).
GC_THRESHOLDS = (10_000, 20, 20)


def tune_gc(thresholds: tuple[int, int, int] = GC_THRESHOLDS) -> int:
    """Collect, freeze what is alive (start-up objects) and raise the collection thresholds.
    Returns the number of objects in the permanent generation. Raises ``ValueError`` for a
    threshold below 1 (0 would switch the collector off)."""
    if len(thresholds) != 3 or any(t < 1 for t in thresholds):
        raise ValueError(f"GC thresholds are three numbers of at least 1, got {thresholds}")
    gc.collect()
    gc.freeze()
    gc.set_threshold(*thresholds)
    return gc.get_freeze_count()
