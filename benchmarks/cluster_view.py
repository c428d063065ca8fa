"""Where a rollout's time goes beyond the cluster's own, seen from the cluster (the simulator's store).

``rollout_overhead.py`` feeds :class:`ClusterClock` every node change clustersim's store commits,
then prints :func:`describe` of its :meth:`ClusterClock.breakdown`. A node *begins* when its
``desiredConfig`` annotation first changes (lockkeeper's first write to it) and *ends* when the
daemon next sets ``state=Done``. Over a rollout the wall time beyond the ideal is then:

- **start**: from the rollout's start to the first node's begin (plan, leases, the first run);
- **in the node**: a node's begin to its end, less the cluster's own time for it (drain, files,
  reboot): the API calls, watches and workflow tasks inside the handshake;
- **handover**: a node's end to the begin of the node that took its place in the window. The
  ``w``-th node to begin (``w`` = maxUnavailable) took the place of the first to end, and so on:
  exact for one pool whose nodes begin one at a time as places free up, as the MachineConfig
  window does;
- **end**: from the last node's end to the rollout's result.

Inside the node, :class:`ClusterClock` also times each step of the handshake as the store saw it
(:data:`STEPS`): the daemon's drain request, lockkeeper's cordon (``lockkeeper.io/cordoned-by``
appears), its drain hand-off, the daemon's uncordon request, the uncordon (the annotation goes),
the uncordon hand-off and Done. Two of those gaps hold the cluster's own time: the cordon to the
drain hand-off holds the pods' termination, the hand-off to the uncordon request the daemon's
files and reboot; the others are all reaction.

Nothing here touches Temporal or the simulator; the caller gives the times (Unix seconds).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from activities.cluster.models import (
    ANN_CORDONED_BY,
    ANN_DESIRED_CONFIG,
    ANN_DESIRED_DRAIN,
    ANN_LAST_APPLIED_DRAIN,
    ANN_STATE,
)

#: The handshake's steps in their order, each the first commit after the node began where
#: ``test(new annotations, old annotations)`` holds.
STEPS: tuple[tuple[str, Any], ...] = (
    ("drain asked", lambda n, o: _became(n, o, ANN_DESIRED_DRAIN, "drain-")),
    ("cordoned", lambda n, o: ANN_CORDONED_BY in n and ANN_CORDONED_BY not in o),
    ("drain handed off", lambda n, o: _became(n, o, ANN_LAST_APPLIED_DRAIN, "drain-")),
    ("uncordon asked", lambda n, o: _became(n, o, ANN_DESIRED_DRAIN, "uncordon-")),
    ("uncordoned", lambda n, o: ANN_CORDONED_BY in o and ANN_CORDONED_BY not in n),
    ("uncordon handed off", lambda n, o: _became(n, o, ANN_LAST_APPLIED_DRAIN, "uncordon-")),
)


def _became(new: dict[str, Any], old: dict[str, Any], key: str, prefix: str) -> bool:
    value = new.get(key) or ""
    return value.startswith(prefix) and value != old.get(key)


@dataclass
class Breakdown:
    """Seconds beyond the cluster's own time (see the module docstring); lists hold one value
    per node (``in_node``) or per handover (``handovers``)."""

    start: float
    in_node: list[float] = field(default_factory=list)
    handovers: list[float] = field(default_factory=list)
    end: float = 0.0
    nodes: int = 0


class ClusterClock:
    """Begin and end times of every node of a rollout, from the store's node events."""

    def __init__(self) -> None:
        self.began: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        #: node -> step name (:data:`STEPS`) -> first commit time after the begin.
        self.steps: dict[str, dict[str, float]] = {}

    def observe(self, name: str, new: dict[str, Any] | None, old: dict[str, Any] | None, at: float) -> None:
        """One committed change of node ``name``: ``new`` and ``old`` are its annotations after and
        before (None: none), ``at`` the commit time. Keeps the first begin and the first end after
        it of each node."""
        new, old = new or {}, old or {}
        if name not in self.began:
            if old.get(ANN_DESIRED_CONFIG) and new.get(ANN_DESIRED_CONFIG) != old.get(ANN_DESIRED_CONFIG):
                self.began[name] = at
            return
        if name in self.ended:
            return
        steps = self.steps.setdefault(name, {})
        for step, test in STEPS:
            if step not in steps and test(new, old):
                steps[step] = at
        if new.get(ANN_STATE) == "Done" and old.get(ANN_STATE) != "Done":
            self.ended[name] = at

    def step_gaps(self) -> list[tuple[str, list[float]]]:
        """Seconds between successive handshake steps (begin, :data:`STEPS`, Done), one list per
        gap with a value for each node that ended and went through both of its steps."""
        names = ["begin", *(s for s, _ in STEPS), "Done"]
        gaps: list[tuple[str, list[float]]] = []
        for a, b in zip(names, names[1:]):
            values = []
            for node, end in self.ended.items():
                times = {"begin": self.began[node], **self.steps.get(node, {}), "Done": end}
                if a in times and b in times:
                    values.append(times[b] - times[a])
            gaps.append((f"{a} -> {b}", values))
        return gaps

    def breakdown(self, *, started: float, finished: float, window: int, cluster_seconds: float) -> Breakdown | None:
        """The overhead of a rollout that started at ``started`` and returned at ``finished``, rolling
        its nodes ``window`` at a time, each taking ``cluster_seconds`` of the cluster's own time.
        None when no node both began and ended. Raises ValueError for a window below 1."""
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        whole = [n for n in self.began if n in self.ended]
        if not whole:
            return None
        begins = sorted(self.began.values())
        ends = sorted(self.ended.values())
        return Breakdown(
            start=begins[0] - started,
            in_node=[self.ended[n] - self.began[n] - cluster_seconds for n in whole],
            handovers=[begins[window + k] - ends[k] for k in range(max(0, min(len(begins) - window, len(ends))))],
            end=finished - ends[-1],
            nodes=len(whole),
        )


def note_drain_ask(asks: dict[tuple[str, str], float], node: str, new: dict[str, str] | None,
                   old: dict[str, str] | None, at: float) -> None:
    """Record in ``asks`` the first time ``at`` (Unix seconds) the daemon asked ``node`` for a
    drain step: ``(node, "drain"|"uncordon") -> at`` when ``desiredDrain`` in the node's new
    annotations ``new`` differs from the old ones' ``old`` (None: no annotations)."""
    value = (new or {}).get(ANN_DESIRED_DRAIN)
    if value and value != (old or {}).get(ANN_DESIRED_DRAIN):
        asks.setdefault((node, value.split("-")[0]), at)


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1, nearest rank) of ``values``; NaN when there are none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def describe(b: Breakdown, *, waves: int) -> list[str]:
    """Printable lines (milliseconds) for ``b``, with the estimate ``start + waves x (in the node +
    handover) + end`` of the time beyond the ideal (the wall time's critical path of ``waves``
    nodes one after another in one place of the window)."""
    ms = 1000.0
    lines = [f"cluster's view: {b.nodes} nodes; start {b.start * ms:.0f} ms, end {b.end * ms:.0f} ms"]
    node_mean = statistics.mean(b.in_node)
    lines.append(f"  in the node (begin -> Done, less the cluster's time): mean {node_mean * ms:.0f} ms,"
                 f" p50 {pct(b.in_node, 0.5) * ms:.0f}, max {max(b.in_node) * ms:.0f}")
    hand_mean = statistics.mean(b.handovers) if b.handovers else 0.0
    if b.handovers:
        lines.append(f"  handover (a node Done -> the next node's begin in its place): mean {hand_mean * ms:.0f} ms,"
                     f" p50 {pct(b.handovers, 0.5) * ms:.0f}, p90 {pct(b.handovers, 0.9) * ms:.0f},"
                     f" max {max(b.handovers) * ms:.0f}")
    estimate = b.start + waves * node_mean + max(waves - 1, 0) * hand_mean + b.end
    lines.append(f"  beyond the ideal, from the means: start + {waves} x in-node + {max(waves - 1, 0)} x handover + end"
                 f" = {estimate * ms:.0f} ms (the slowest place of the window sets the wall time)")
    return lines


def describe_steps(clock: ClusterClock) -> list[str]:
    """Printable lines (milliseconds): the mean and p90 of each gap of :meth:`ClusterClock.step_gaps`."""
    parts = [f"{gap} {statistics.mean(v) * 1000:.0f}/{pct(v, 0.9) * 1000:.0f}" for gap, v in clock.step_gaps() if v]
    if not parts:
        return []
    return ["  in the node by step (mean/p90 ms; the pods' termination and the reboot are in the 3rd and 4th):",
            *(f"    {p}" for p in parts)]
