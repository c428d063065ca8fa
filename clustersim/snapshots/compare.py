"""One diff of two captures: objects, pods, simulator state, reboots, restarts, ignore counts (pure)."""

from __future__ import annotations

import time

from clustersim.snapshots.ignore import IgnoreSet
from clustersim.snapshots.models import Diff, DiffOptions
from clustersim.snapshots.objects import diff_objects, diff_pod_groups
from clustersim.snapshots.state import diff_state
from clustersim.snapshots.world import World


def default_patterns(options: DiffOptions) -> list[str]:
    """The patterns a diff adds itself: ``Event`` (core/v1 and events.k8s.io) unless
    ``include_events``, ``Lease`` (coordination.k8s.io) unless ``include_leases``."""
    return [p for p, include in (("Event", options.include_events), ("Lease", options.include_leases))
            if not include]


def diff_worlds(before: World, after: World, options: DiffOptions | None = None) -> Diff:
    """What differs from ``before`` to ``after`` under ``options`` (default DiffOptions()).

    Reads only the captures (safe in a worker thread: captured objects are never mutated)."""
    options = options or DiffOptions()
    t0 = time.perf_counter()
    ignore = IgnoreSet(options.ignore, default_patterns(options))
    objects = diff_objects(before, after, options, ignore)
    pods = diff_pod_groups(before, after, ignore) if options.pods == "owners" else []
    state, reboots, restarts = diff_state(before, after, ignore)
    return Diff(before=before.info, after=after.info, options=options, objects=objects, pods=pods, state=state,
                reboots=reboots, restarts=restarts, ignored=ignore.counts(),
                compare_ms=round((time.perf_counter() - t0) * 1000, 3))
