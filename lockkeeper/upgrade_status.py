"""The MachineConfig rollout as ``oc adm upgrade status`` shows an update, computed from the
rollout's ``status`` query answer (:class:`workflows.machineconfig.models.RolloutStatus`).

Pure functions, no Temporal calls; computed by the CLI, so the workflow's query answer (and its
2 MB payload limit, tests/machineconfig/test_payload_sizes.py) does not grow. Layout and words follow
``oc adm upgrade status`` (openshift/oc ``pkg/cli/admin/upgrade/status``, GA in 4.20): per pool
``ASSESSMENT | COMPLETION | STATUS``, per node ``NAME | ASSESSMENT | PHASE | VERSION | EST |
MESSAGE``, and health insights (level, impact, reference, resources, message).

Shape (``-o json``, key ``upgrade`` of the status document; :func:`upgrade_view`)::

    {"pools": [{"name": str, "assessment": "Pending" | "Progressing" | "Completed" | "Degraded" | "Excluded",
                "completion": int (percent 0..100), "total": int, "available": int, "progressing": int,
                "outdated": int, "draining": int, "excluded": int, "degraded": int,
                "status": "59 Total, 44 Available, 5 Progressing, 37 Outdated, 12 Draining, 0 Excluded, 7 Degraded",
                "mean_node_seconds": float | null}],
     "nodes": [{"name": str, "pool": str, "assessment": "Outdated" | "Progressing" | "Completed" | "Excluded" | "Degraded",
                "phase": str, "version": str, "target": str, "est_seconds": float | null, "est": str, "message": str}],
     "insights": [{"level": "Warning" | "Error", "impact": str, "reference": str,
                   "resources": [{"kind": str, "namespace": str | null, "name": str}], "message": str,
                   "deadline": ISO 8601 | null}],
     "nodes_total": int, "nodes_shown": int}

``nodes`` lists every node not yet Completed (the ones a person watches; a 5,000-node pool at
its start lists 5,000 rows in JSON, the table shows the first :data:`TABLE_ROWS`).

Counts of a pool (``status``): Total = ``size`` of the pool's plan; Completed = nodes already at
the target when planned plus nodes done in this run; Outdated = Total - Completed; Progressing =
nodes running, blocked or waiting for an approval; Draining = nodes at the cordon, drain or
drain hand-off step, or with a blocked drain; Excluded = nodes skipped (decision or ``skip-node``);
Degraded = nodes degraded or failed; Available = Total - Progressing - Degraded (a node in flight
is, or is about to be, cordoned). COMPLETION = Completed / Total, rounded down.

EST (:func:`estimates`): the seconds until each remaining node is expected to finish, from the
durations (``finished_at - started_at``) of the nodes already done in this run: the pool's mean
where the pool has a done node, else the mean over the whole run; None (shown ``?``) only while
no node of the run is done. A node in flight is expected at ``started_at`` + mean (at least now);
the pending nodes, in plan order, take the pool's window slots (``max(capacity, 1)`` at once,
the rollout's sliding window) as the earlier nodes free them, each taking the mean. With
``pool_order`` sequential a pool's first pending node starts when the previous pool is
expected to finish. O(nodes x log window).
"""

from __future__ import annotations

import heapq
from datetime import UTC, datetime, timedelta
from typing import Any

from workflows.kit.models import NodePhase, NodeStatus
from workflows.machineconfig.models import PoolPlan, RolloutStatus

#: Rows of the per-node table in the rich view (JSON carries every remaining node).
TABLE_ROWS = 50

_DRAIN_STEPS = frozenset({"cordon", "drain", "hand-off-drain"})
_IN_FLIGHT = frozenset({NodePhase.RUNNING, NodePhase.BLOCKED, NodePhase.WAITING_APPROVAL})
_DEGRADED = frozenset({NodePhase.DEGRADED, NodePhase.FAILED})


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _duration(n: NodeStatus) -> float | None:
    if n.phase != NodePhase.DONE or n.started_at is None or n.finished_at is None:
        return None
    return max(0.0, (n.finished_at - n.started_at).total_seconds())


def estimates(st: RolloutStatus, now: datetime) -> tuple[dict[str, float], dict[str, float | None]]:
    """``(est, mean)``: ``est`` node -> seconds from ``now`` until it is expected done (every
    node neither done, skipped, degraded nor failed, once a mean is known); ``mean`` pool -> the
    mean duration (seconds) used for it, None while no node of the run is done. See the module doc."""
    if st.plan is None:
        return {}, {}
    durations: dict[str, list[float]] = {}
    for n in st.nodes.values():
        d = _duration(n)
        if d is not None:
            durations.setdefault(n.pool, []).append(d)
    overall = _mean([d for ds in durations.values() for d in ds])
    sequential = str(st.plan.pool_order) == "sequential"
    est: dict[str, float] = {}
    means: dict[str, float | None] = {}
    pool_start = now
    for p in st.plan.pools:
        mean = _mean(durations.get(p.name, [])) or overall
        means[p.name] = mean
        if mean is None:
            continue
        width = max(p.capacity, 1)
        slots: list[datetime] = []
        pending: list[str] = []
        for name in p.nodes:
            n = st.nodes.get(name)
            phase = n.phase if n is not None else NodePhase.PENDING
            if phase in _IN_FLIGHT and n is not None:
                end = max(now, (n.started_at or now) + timedelta(seconds=mean))
                slots.append(end)
                est[name] = (end - now).total_seconds()
            elif phase in (NodePhase.PENDING, NodePhase.ABORTED):
                pending.append(name)
        base = pool_start if sequential else now
        slots = sorted(slots)[-width:] if len(slots) > width else slots
        slots += [base] * (width - len(slots))
        heapq.heapify(slots)
        last = max(slots) if slots else base
        for name in pending:
            start = max(heapq.heappop(slots), base)
            end = start + timedelta(seconds=mean)
            heapq.heappush(slots, end)
            est[name] = (end - now).total_seconds()
            last = max(last, end)
        if sequential:
            pool_start = max(pool_start, last)
    return est, means


def fmt_est(seconds: float | None) -> str:
    """``?`` (unknown), ``+12m``, ``+1h05m``, ``+40s`` (oc's EST column)."""
    if seconds is None:
        return "?"
    s = int(round(seconds))
    if s < 60:
        return f"+{s}s"
    m = s // 60
    return f"+{m}m" if m < 60 else f"+{m // 60}h{m % 60:02d}m"


def _when(t: datetime, now: datetime) -> str:
    delta = int((t - now).total_seconds())
    rel = f"in {fmt_est(delta)[1:]}" if delta >= 0 else f"{fmt_est(-delta)[1:]} ago"
    return f"{t.astimezone(UTC).strftime('%H:%M:%S')} UTC ({rel})"


def _versions(p: PoolPlan) -> dict[str, str]:
    return {n: d.from_config for d in p.disruption for n in d.nodes}


def _node_message(st: RolloutStatus, n: NodeStatus, now: datetime) -> str:
    rep = n.drain_report
    if rep is not None and rep.blocked_pods and n.phase == NodePhase.BLOCKED:
        bp = rep.blocked_pods[0]
        since = f" for {fmt_est((now - n.blocked_since).total_seconds())[1:]}" if n.blocked_since else ""
        budget = f" (PodDisruptionBudget {bp.pdbs[0].name}: {bp.pdbs[0].disruptions_allowed} disruptions allowed)" if bp.pdbs else ""
        return f"Drain blocked{since} by pod {bp.namespace}/{bp.name}{budget}"
    if n.phase == NodePhase.WAITING_APPROVAL:
        return n.waiting_for or "waiting for an approval"
    return n.reason or n.warning or n.waiting_for or ""


def _phase(st: RolloutStatus, n: NodeStatus | None, mcn: dict[str, str]) -> str:
    if n is None or n.phase == NodePhase.PENDING:
        return "Pending"
    if n.name in mcn:
        return mcn[n.name]
    if n.phase in _IN_FLIGHT:
        return n.step or str(n.phase)
    return str(n.phase).capitalize()


def _insights(st: RolloutStatus, now: datetime) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    wid = st.workflow_id or "ID"
    for n in st.nodes.values():
        rep = n.drain_report
        if n.phase == NodePhase.BLOCKED and rep is not None and (rep.blocked_pods or rep.pending_replacements):
            resources: list[dict[str, Any]] = [{"kind": "Node", "namespace": None, "name": n.name}]
            parts = []
            for bp in rep.blocked_pods:
                resources.append({"kind": "Pod", "namespace": bp.namespace, "name": bp.name})
                text = f"pod {bp.namespace}/{bp.name} cannot be evicted ({bp.message})"
                for pdb in bp.pdbs:
                    resources.append({"kind": "PodDisruptionBudget", "namespace": pdb.namespace, "name": pdb.name})
                    limit = (f"minAvailable {pdb.min_available}" if pdb.min_available is not None
                             else f"maxUnavailable {pdb.max_unavailable}")
                    text += (f": PodDisruptionBudget {pdb.namespace}/{pdb.name} ({limit}, currentHealthy "
                             f"{pdb.current_healthy}, desiredHealthy {pdb.desired_healthy}, disruptionsAllowed "
                             f"{pdb.disruptions_allowed})")
                parts.append(text)
            for pr in rep.pending_replacements:
                resources.append({"kind": "Pod", "namespace": pr.namespace, "name": pr.name})
                parts.append(f"replacement {pr.namespace}/{pr.name} Pending: {pr.message or 'no FailedScheduling event'}")
            since = f" for {fmt_est((now - n.blocked_since).total_seconds())[1:]}" if n.blocked_since else ""
            msg = f"Drain of node {n.name} blocked{since}: " + "; ".join(parts)
            if n.deadline is not None:
                msg += (f". The machine-config-daemon degrades node {n.name} at {_when(n.deadline, now)} "
                        f"(its 1 h drain deadline) unless the drain is handed off first")
            g = n.decision_gate
            gate_open = g is not None and str(g.state) == "waiting"
            if gate_open:
                msg += f". Decision gate {g.id} open since {_when(g.opened_at, now)}" if g.opened_at else f". Decision gate {g.id} open"
            else:  # the decide command would be refused until the gate opens: offer it only then
                msg += ". The decision gate is not open yet (--decide-after, or the drain escalation)"
            level = "Error" if n.deadline is not None and (n.deadline - now).total_seconds() < 600 else "Warning"
            out.append({
                "level": level, "impact": "Update Stalled",
                "reference": (f"lockkeeper decide {wid} {n.name} wait|skip|delete-pod|abort" if gate_open
                              else f"lockkeeper status {wid}"),
                "resources": resources, "message": msg,
                "deadline": n.deadline.isoformat() if n.deadline else None,
            })
        elif n.phase in _DEGRADED:
            out.append({
                "level": "Error", "impact": "Update Stalled", "reference": f"lockkeeper retry-node {wid} {n.name}",
                "resources": [{"kind": "Node", "namespace": None, "name": n.name}],
                "message": f"Node {n.name} is {n.phase}: {n.reason or n.warning or 'no reason given'}", "deadline": None,
            })
        elif n.phase == NodePhase.RUNNING and n.deadline is not None and n.warning:
            out.append({
                "level": "Warning", "impact": "Update Stalled", "reference": f"lockkeeper status {wid}",
                "resources": [{"kind": "Node", "namespace": None, "name": n.name}],
                "message": f"Node {n.name}: {n.warning}; the machine-config-daemon's deadline is {_when(n.deadline, now)}",
                "deadline": n.deadline.isoformat(),
            })
    return out


def upgrade_view(st: RolloutStatus, now: datetime | None = None) -> dict[str, Any]:
    """The view (shape in the module doc) of ``st`` at ``now`` (default: the current time)."""
    now = now or datetime.now(UTC)
    if st.plan is None:
        return {"pools": [], "nodes": [], "insights": [], "nodes_total": 0, "nodes_shown": 0}
    est, means = estimates(st, now)
    mcn = st.mcn_phases
    pools: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    total_nodes = 0
    for p in st.plan.pools:
        versions = _versions(p)
        c = dict(total=p.size, completed=len(p.skipped), progressing=0, draining=0, excluded=0, degraded=0, started=0)
        total_nodes += p.size
        for name in p.nodes:
            n = st.nodes.get(name)
            phase = n.phase if n is not None else NodePhase.PENDING
            if phase == NodePhase.DONE:
                c["completed"] += 1
                continue
            if phase != NodePhase.PENDING:
                c["started"] += 1
            if phase in _IN_FLIGHT:
                c["progressing"] += 1
                assessment = "Progressing"
                if phase == NodePhase.BLOCKED or (n is not None and n.step in _DRAIN_STEPS):
                    c["draining"] += 1
            elif phase == NodePhase.SKIPPED:
                c["excluded"] += 1
                assessment = "Excluded"
            elif phase in _DEGRADED:
                c["degraded"] += 1
                assessment = "Degraded"
            else:
                assessment = "Outdated"
            e = est.get(name)
            rows.append({
                "name": name, "pool": p.name, "assessment": assessment, "phase": _phase(st, n, mcn),
                "version": versions.get(name, "-"), "target": p.target_config,
                "est_seconds": round(e, 1) if e is not None else None,
                "est": fmt_est(e) if assessment in ("Progressing", "Outdated") else "-",
                "message": _node_message(st, n, now) if n is not None else "",
            })
        outdated = c["total"] - c["completed"]
        available = max(0, c["total"] - c["progressing"] - c["degraded"])
        if c["degraded"]:
            assessment = "Degraded"
        elif outdated <= 0:
            assessment = "Completed"
        elif c["progressing"] or c["started"] > c["excluded"] or c["completed"] > len(p.skipped):
            assessment = "Progressing"
        elif outdated == c["excluded"]:
            assessment = "Excluded"
        else:
            assessment = "Pending"
        pools.append({
            "name": p.name, "assessment": assessment,
            "completion": (100 * c["completed"] // c["total"]) if c["total"] else 100,
            "total": c["total"], "available": available, "progressing": c["progressing"], "outdated": outdated,
            "draining": c["draining"], "excluded": c["excluded"], "degraded": c["degraded"],
            "status": (f"{c['total']} Total, {available} Available, {c['progressing']} Progressing, {outdated} Outdated, "
                       f"{c['draining']} Draining, {c['excluded']} Excluded, {c['degraded']} Degraded"),
            "mean_node_seconds": round(means[p.name], 1) if means.get(p.name) is not None else None,
        })
    return {"pools": pools, "nodes": rows, "insights": _insights(st, now), "nodes_total": total_nodes,
            "nodes_shown": len(rows)}
