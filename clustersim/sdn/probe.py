"""The probe mesh: pod-to-pod reachability between every ordered node pair, and its outage record.

``ok(A -> B)`` (procedures-spec §8.5) holds iff both nodes' datapaths are up (not rebuilding, host
up, OVS running), ``A.dst_port == B.dst_port``, B's firewall accepts UDP to that port, and the
underlay does not block it. The mesh is re-evaluated only when an input changes
(``update_node`` re-checks the 2(N-1) pairs touching one node, ``update_all`` every pair), never per
tick per pair; an outage interval opens when a pair starts failing and closes when it passes.

Times are simulated seconds since the SDN component started (floats).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Endpoint:
    """What the mesh needs to know about one node."""

    up: bool = True
    port: int = 4789
    allows: bool = True  # the node's firewall accepts UDP to ``port``


@dataclass
class ProbeMesh:
    """Outage bookkeeping per ordered pair. ``blocked(port, a, b)`` says whether the underlay drops
    VXLAN to ``port`` between ``a`` and ``b`` now."""

    blocked: Callable[[int, str, str], bool] = lambda port, a, b: False
    nodes: dict[str, Endpoint] = field(default_factory=dict)
    failing: dict[tuple[str, str], float] = field(default_factory=dict)  # pair -> outage start
    outages: dict[tuple[str, str], list[list[float]]] = field(default_factory=dict)  # closed [start, end]
    evaluations: int = 0
    # Union of failure time: while any pair fails, ``_any_since`` is the start of that stretch.
    _any_since: float | None = None
    _any_total: float = 0.0
    first_failure: float | None = None
    last_failure: float | None = None

    def ok(self, a: str, b: str) -> bool:
        """Reachability of ``b``'s pods from ``a``'s pods now."""
        ea, eb = self.nodes[a], self.nodes[b]
        self.evaluations += 1
        return ea.up and eb.up and ea.port == eb.port and eb.allows and not self.blocked(eb.port, a, b)

    def _set(self, pair: tuple[str, str], good: bool, now: float) -> None:
        if good:
            start = self.failing.pop(pair, None)
            if start is not None:
                self.outages.setdefault(pair, []).append([start, now])
                self.last_failure = now
        elif pair not in self.failing:
            self.failing[pair] = now
            if self.first_failure is None:
                self.first_failure = now

    def _settle(self, now: float) -> None:
        if self.failing and self._any_since is None:
            self._any_since = now
        elif not self.failing and self._any_since is not None:
            self._any_total += now - self._any_since
            self._any_since = None
            self.last_failure = now

    def update_node(self, name: str, now: float) -> None:
        """Re-evaluate the pairs touching ``name`` (after its endpoint changed)."""
        if name not in self.nodes:
            return
        for other in self.nodes:
            if other == name:
                continue
            self._set((name, other), self.ok(name, other), now)
            self._set((other, name), self.ok(other, name), now)
        self._settle(now)

    def update_all(self, now: float) -> None:
        """Re-evaluate every pair (after a global change such as an underlay fault)."""
        names = list(self.nodes)
        for a in names:
            for b in names:
                if a != b:
                    self._set((a, b), self.ok(a, b), now)
        self._settle(now)

    def remove_node(self, name: str, now: float) -> None:
        """Forget a node (deleted): its open outages close now."""
        for pair in [p for p in self.failing if name in p]:
            self._set(pair, True, now)
        self.nodes.pop(name, None)
        self._settle(now)

    def report(self, now: float) -> dict[str, Any]:
        """JSON-able record: outage intervals per pair ("a->b"), the pairs failing now, total outage
        seconds (time with at least one pair failing), pair-seconds of outage, first/last failure."""
        pairs: dict[str, list[dict[str, float | None]]] = {}
        pair_seconds = 0.0
        for (a, b), spans in self.outages.items():
            pairs[f"{a}->{b}"] = [{"start": round(s, 3), "end": round(e, 3)} for s, e in spans]
            pair_seconds += sum(e - s for s, e in spans)
        for (a, b), s in self.failing.items():
            pairs.setdefault(f"{a}->{b}", []).append({"start": round(s, 3), "end": None})
            pair_seconds += now - s
        total = self._any_total + (now - self._any_since if self._any_since is not None else 0.0)
        return {
            "now": round(now, 3),
            "total_outage_seconds": round(total, 3),
            "pair_outage_seconds": round(pair_seconds, 3),
            "first_failure": None if self.first_failure is None else round(self.first_failure, 3),
            "last_failure": round(now, 3) if self.failing else (
                None if self.last_failure is None else round(self.last_failure, 3)),
            "failing_now": sorted(f"{a}->{b}" for a, b in self.failing),
            "pairs": dict(sorted(pairs.items())),
            "evaluations": self.evaluations,
        }
