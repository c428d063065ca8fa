"""The Temporal Web UI as a live view of a procedure: the workflow's *current details*.

Temporal shows a workflow's current details (``workflow.set_current_details``, markdown) in the
UI's summary panel and returns them from the built-in ``__temporal_workflow_metadata`` query.
They are held in the worker's memory, never written to history, so setting them cannot change a
stored history's replay.

:func:`render` turns a procedure's status into markdown: the phase; what it waits for, since and
until when; the open gates with the exact ``lockkeeper approve``/``decide`` command; a compact
node table (nodes that are in flight or need attention, at most :data:`MAX_NODE_ROWS`, plus
counts per phase); the alerts that block an alert gate (:func:`alert_lines`); the blocked-drain
report of a node whose drain is blocked; for a fleet (a campaign's ``clusters``, issue 38) a short
summary: clusters per state and the clusters in flight or ended badly (:func:`fleet_lines`).
:meth:`DetailsPublisher.publish` sets it only when the text changed, once per activation, and nothing in it moves per poll (a health
check's last reading and poll count are left out), so the details change with the phase, a gate,
a node's step, never with a poll.

Pure over the status models; no I/O (workflow code).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.kit.models import FINAL_NODE_PHASES, Gate, GateKind, NodePhase, NodeStatus, ProcedureStatus

#: Node rows shown at most (in flight and problem nodes first); the rest are counted per phase.
MAX_NODE_ROWS = 20
#: Pods of a blocked-drain report shown at most per node.
MAX_BLOCKED_PODS = 5


def _t(t: datetime | None) -> str:
    return "-" if t is None else t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _cell(text: Any) -> str:
    # A pipe would end the markdown table cell; newlines end the row.
    return str(text).replace("|", "\\|").replace("\n", " ")


def gate_commands(workflow_id: str, gate: Gate) -> list[str]:
    """The exact commands that answer ``gate`` (sent to the workflow that owns it:
    ``gate.workflow_id``, else ``workflow_id``): a blocked drain's decision gate
    ``lockkeeper decide ID NODE wait|skip|delete-pod|abort -m REASON``; a gate with choices
    ``lockkeeper decide ID GATE CHOICE|... -m REASON`` (approve takes the first choice) and
    reject; any other gate ``lockkeeper approve ID GATE -m REASON`` and reject."""
    wid = gate.workflow_id or workflow_id
    if gate.kind == GateKind.DRAIN and gate.node:
        choices = "|".join(str(c) for c in gate.choices) or "wait|skip|delete-pod|abort"
        return [f"lockkeeper decide {wid} {gate.node} {choices} -m REASON"]
    reject = f"lockkeeper reject {wid} {gate.id} -m REASON"
    if gate.choices:
        return [f"lockkeeper decide {wid} {gate.id} {'|'.join(gate.choices)} -m REASON", reject]
    return [f"lockkeeper approve {wid} {gate.id} -m REASON", reject]


def gate_command(workflow_id: str, gate: Gate) -> str:
    """The first of :func:`gate_commands`: the one that lets the procedure go on."""
    return gate_commands(workflow_id, gate)[0]


def waiting_line(
    status: ProcedureStatus, gates: Iterable[Gate], paused_reason: str | None, paused_since: datetime | None = None,
    hold_wait: tuple[str, datetime | None, datetime | None] | None = None,
) -> tuple[str, datetime | None, datetime | None] | None:
    """``(what, since, until)`` the procedure waits for: a waiting gate first, then a pause
    (since ``paused_since``), then holds on nodes when only they keep it waiting (``hold_wait``,
    :meth:`workflows.kit.batches.NodeBatches.hold_wait`), then the procedure's own
    ``waiting_for``, then a health check; None when it waits for nothing."""
    waiting = [g for g in gates if g.state == "waiting"]
    if waiting:
        g = waiting[0]
        what = f"decision on the blocked drain of {g.node}" if g.kind == GateKind.DRAIN else f"approval of gate {g.id}"
        return what, g.opened_at, g.timeout_at
    if paused_reason:
        return f"resume (paused: {paused_reason})", paused_since, None
    if hold_wait is not None:
        return hold_wait
    if status.waiting_for:
        return status.waiting_for, status.since, status.deadline
    for h in status.health.values():
        if h.state == "waiting":
            return f"health check {h.name}", h.since, h.deadline
    return None


def alert_lines(status: ProcedureStatus) -> list[str]:
    """One markdown item per alert gate that blocks now (the ``alerts/<where>`` entries of the
    health board, :mod:`workflows.kit.alerts`): where, since when it waits, and what blocks:
    each alert with its labels and since when it is active, or why Prometheus could not be asked.
    The line changes only when the blocking set changes (never per poll); a check still in flight
    (nothing said yet) is left out."""
    out = []
    for name, h in status.health.items():
        if name.startswith("alerts/") and h.state == "waiting" and h.last:
            out.append(f"- `{_cell(name)}` waiting since {_t(h.since)}: {_cell(h.last)}")
    return out


def node_statuses(status: ProcedureStatus) -> dict[str, NodeStatus]:
    """The procedure's ``nodes`` that are kit :class:`NodeStatus` rows; a procedure whose
    ``nodes`` holds its own row type (or none) gives ``{}``, so the live view and the
    notifications never fail a workflow task over a shape they do not know."""
    nodes = getattr(status, "nodes", None)
    if not isinstance(nodes, dict):
        return {}
    return {k: n for k, n in nodes.items() if isinstance(n, NodeStatus)}


def _node_rows(nodes: dict[str, NodeStatus]) -> tuple[list[NodeStatus], Counter[str]]:
    counts: Counter[str] = Counter(str(n.phase) for n in nodes.values())
    # Problem nodes first, then those in flight; pending and finished nodes are only counted.
    order = {NodePhase.BLOCKED: 0, NodePhase.DEGRADED: 0, NodePhase.WAITING_APPROVAL: 1, NodePhase.RUNNING: 2}
    shown = [n for n in nodes.values() if n.phase in order]
    shown.sort(key=lambda n: order[n.phase])
    return shown[:MAX_NODE_ROWS], counts


def render(
    status: ProcedureStatus,
    *,
    phase: str,
    gates: Iterable[Gate],
    paused_reason: str | None,
    noun: str,
    paused_since: datetime | None = None,
    hold_wait: tuple[str, datetime | None, datetime | None] | None = None,
) -> str:
    """The markdown details of a procedure (see the module doc). ``status``: the procedure's
    status model (``nodes`` when it has them); ``phase``: the phase now; ``gates``: the gates
    known now; ``paused_reason`` / ``paused_since``: the pause; ``noun``: "rollout", "drain", ...
    Deterministic: equal inputs give equal text (``updated_at`` is never shown: it moves on
    every change)."""
    gates = list(gates)
    wid = status.workflow_id
    lines = [f"**{status.procedure or noun}** on cluster `{status.cluster}` — phase **{phase}**"]
    wait = waiting_line(status, gates, paused_reason, paused_since, hold_wait)
    if wait:
        what, since, until = wait
        lines.append("")
        lines.append(f"Waiting for {what} since {_t(since)}" + (f", until {_t(until)}" if until else ""))
    open_gates = [g for g in gates if g.state == "waiting"]
    if open_gates:
        lines += ["", "**Open gates**", ""]
        for g in open_gates:
            where = ", ".join(x for x in (f"pool {g.pool}" if g.pool else "", f"node {g.node}" if g.node else "") if x)
            lines.append(f"- `{g.id}` ({g.kind}{', ' + where if where else ''}) opened {_t(g.opened_at)}"
                         + (f", times out {_t(g.timeout_at)}" if g.timeout_at else ""))
            lines.append(f"  - `{gate_command(wid, g)}`")
    alert_waits = alert_lines(status)
    if alert_waits:
        lines += ["", "**Blocking alerts** (Prometheus alert gate: nothing new starts while they block)", ""] + alert_waits
    holds = getattr(status, "holds", None) or {}
    if holds:
        lines += ["", "**Held nodes**", ""]
        for h in holds.values():
            lines.append(f"- `{_cell(h.node)}` held by {_cell(h.by)} since {_t(h.since)}, "
                         + (f"until {_t(h.until)}" if h.until else "until released") + f": {_cell(h.reason)}")
            lines.append(f"  - `lockkeeper release {wid} {h.node} -m REASON`")
    nodes = node_statuses(status)
    if nodes:
        shown, counts = _node_rows(nodes)
        lines += ["", "**Nodes** " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())), ""]
        if shown:
            lines += ["| node | pool | phase | step | waiting for |", "|---|---|---|---|---|"]
            for n in shown:
                waiting = n.waiting_for or n.reason
                if not n.step and not waiting and n.phase == NodePhase.RUNNING and n.run_id and not n.in_process:
                    # The parent is not sent a running node's steps: its run shows them.
                    waiting = f"see node run `{n.run_id}`"
                lines.append(f"| {_cell(n.name)} | {_cell(n.pool)} | {n.phase} | {_cell(n.step or '-')} | {_cell(waiting or '-')} |")
            if len(shown) < sum(1 for n in nodes.values() if n.phase not in FINAL_NODE_PHASES and n.phase != NodePhase.PENDING):
                lines.append(f"(first {MAX_NODE_ROWS} shown; `lockkeeper status {wid}` lists all)")
        for n in nodes.values():
            if n.drain_report is not None and n.phase == NodePhase.BLOCKED:
                lines += _drain_report(n)
    lines += fleet_lines(status)
    if status.error:
        lines += ["", f"**Error:** {_cell(status.error)}"]
    return "\n".join(lines)


def fleet_lines(status: ProcedureStatus) -> list[str]:
    """A fleet's summary (a status with ``clusters``: rows with ``name``, ``wave``, ``state``,
    ``child_id``, as a campaign's): the count of clusters per state, then a row for each cluster
    that runs, failed or was aborted (at most :data:`MAX_NODE_ROWS`); none for another status."""
    clusters = getattr(status, "clusters", None)
    if not isinstance(clusters, list) or not clusters or not all(hasattr(c, "wave") and hasattr(c, "state") for c in clusters):
        return []
    counts = Counter(str(c.state) for c in clusters)
    wave = getattr(status, "current_wave", 0)
    head = "**Clusters** " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    lines = ["", head + (f" (wave {wave} of {getattr(status, 'waves', '?')})" if wave else ""), ""]
    shown = [c for c in clusters if str(c.state) in ("running", "failed", "aborted")][:MAX_NODE_ROWS]
    if shown:
        lines += ["| cluster | wave | state | run |", "|---|---|---|---|"]
        lines += [f"| {_cell(c.name)} | {c.wave} | {c.state} | `{_cell(c.child_id or '-')}` |" for c in shown]
    return lines


def _drain_report(n: NodeStatus) -> list[str]:
    rep = n.drain_report
    assert rep is not None
    out = ["", f"**Drain of {n.name} blocked** since {_t(n.blocked_since)}", ""]
    for p in rep.blocked_pods[:MAX_BLOCKED_PODS]:
        budgets = "; ".join(
            f"PDB {b.namespace}/{b.name}: {b.current_healthy} healthy, needs {b.desired_healthy}, "
            f"{b.disruptions_allowed} disruptions allowed" for b in p.pdbs
        )
        out.append(f"- pod `{p.namespace}/{p.name}`: {_cell(p.message)}" + (f" ({_cell(budgets)})" if budgets else ""))
    for r in rep.pending_replacements[:MAX_BLOCKED_PODS]:
        out.append(f"- replacement `{r.namespace}/{r.name}` Pending: {_cell(r.message or '-')}")
    return out


class DetailsPublisher:
    """Keeps the last text set, so the details are set only on change, and when the current
    pause began (the kit's control keeps no such time).

    :meth:`publish` renders once per workflow activation, at its end, whatever the number of
    changes in it: a render reads every node, and a 5,000-node rollout's activation that took in
    500 node-run completions rendered 500 times (23 s, past the deadlock detector's 2 s: the
    rollout's workflow task then failed for good). The flush is a ready callback of the workflow's
    event loop, which runs before the activation completes; it issues no command, so replay is
    unchanged."""

    def __init__(self) -> None:
        self._last: str | None = None
        self._pause: tuple[str, datetime] | None = None
        self._pending: tuple[ProcedureStatus, str, Iterable[Gate], str | None, str, Any] | None = None

    def publish(self, status: ProcedureStatus, *, phase: str, gates: Iterable[Gate], paused_reason: str | None, noun: str,
                hold_wait: tuple[str, datetime | None, datetime | None] | None = None) -> None:
        """Render and set the current details, if they changed, at the end of this activation
        (from ``status`` and ``gates`` as they are then); at once in a read-only context (a query
        or an update's validator), which may not schedule."""
        if paused_reason is None:
            self._pause = None
        elif self._pause is None or self._pause[0] != paused_reason:
            self._pause = (paused_reason, workflow.now())
        scheduled = self._pending is not None
        self._pending = (status, phase, gates, paused_reason, noun, hold_wait)
        if scheduled:
            return
        try:
            asyncio.get_running_loop().call_soon(self.flush)
        except workflow.ReadOnlyContextError:
            self.flush()

    def flush(self) -> bool:
        """Render what :meth:`publish` was last given and set it if it changed; whether it did."""
        if self._pending is None:
            return False
        status, phase, gates, paused_reason, noun, hold_wait = self._pending
        self._pending = None
        since = self._pause[1] if self._pause else None
        text = render(status, phase=phase, gates=gates, paused_reason=paused_reason, noun=noun, paused_since=since,
                      hold_wait=hold_wait)
        if text == self._last:
            return False
        self._last = text
        workflow.set_current_details(text)
        return True
