"""Rendering of plans, status, results and lists for the CLI: rich tables for people, JSON/YAML
for scripts. Pure functions of the models in :mod:`workflows.models`; no Temporal calls here."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from activities.machineconfig.models import PoolDiagnosis
from workflows.kit.models import GateState, NodePhase, NodeStatus
from workflows.kit.plan import ORDER_MEANING
from workflows.machineconfig.models import MachineConfigRolloutResult, RolloutPlan, RolloutStatus

FORMATS = ("table", "json", "yaml")

#: rich style of each node phase in tables.
PHASE_STYLE = {
    NodePhase.DONE: "green",
    NodePhase.SKIPPED: "dim",
    NodePhase.RUNNING: "cyan",
    NodePhase.BLOCKED: "bold yellow",
    NodePhase.WAITING_APPROVAL: "magenta",
    NodePhase.DEGRADED: "bold red",
    NodePhase.FAILED: "bold red",
    NodePhase.ABORTED: "red",
    NodePhase.PENDING: "",
}


def console(stderr: bool = False) -> Any:
    """A rich Console; when not on a terminal (piped, CI) wide enough that tables do not wrap."""
    from rich.console import Console

    c = Console(stderr=stderr)
    if not c.is_terminal:
        c = Console(stderr=stderr, width=200)
    return c


def to_data(obj: Any) -> Any:
    """JSON-ready data of a model (or list/dict of models)."""
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if isinstance(obj, list | tuple):
        return [to_data(o) for o in obj]
    if isinstance(obj, dict):
        return {k: to_data(v) for k, v in obj.items()}
    return obj


def dump(obj: Any, fmt: str) -> str:
    """``obj`` as JSON (indented) or YAML text."""
    data = to_data(obj)
    if fmt == "yaml":
        import yaml

        return yaml.safe_dump(data, sort_keys=False)
    return json.dumps(data, indent=2, default=str)


def fmt_time(t: datetime | None, now: datetime | None = None) -> str:
    """``HH:MM:SS`` UTC, plus a relative ``(12s ago)`` / ``(in 3m)`` when ``now`` is given."""
    if t is None:
        return "-"
    s = t.astimezone(UTC).strftime("%H:%M:%S")
    if now is not None:
        delta = (t - now).total_seconds()
        s += f" ({fmt_duration(-delta)} ago)" if delta <= 0 else f" (in {fmt_duration(delta)})"
    return s


def fmt_duration(seconds: float | None) -> str:
    """``1h02m``, ``3m05s``, ``12.3s``."""
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(seconds), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def plan_table(plan: RolloutPlan) -> RenderableType:
    """One row per pool: target, sizes, capacity, node order (batches), skipped, gates."""
    t = Table(title="Plan", title_justify="left")
    for col in ("pool", "target", "nodes", "maxUnavailable", "batches (in order)", "skipped", "unavailable", "gates"):
        t.add_column(col)
    for p in plan.pools:
        batches = " | ".join(", ".join(b) for b in p.batches) or "-"
        t.add_row(
            p.name,
            p.target_config,
            f"{len(p.nodes)}/{p.size}",
            f"{p.max_unavailable} (free {p.capacity})",
            batches,
            ", ".join(p.skipped) or "-",
            ", ".join(p.unavailable) or "-",
            ", ".join(g.id for g in p.gates) or "-",
        )
    parts: list[RenderableType] = [t]
    order = str(plan.pool_order)
    how = {"parallel": "every pool at once, each in its own maxUnavailable window",
           "masters-first": "master first, then the other pools at once"}.get(order, "one pool after the other")
    parts.append(Text(f"pool order: {order} ({how})"))
    parts.append(Text(f"order: {plan.node_order} ({ORDER_MEANING.get(plan.node_order, 'unknown')}; "
                      "each pool's batches above are in this order)"))
    parts.extend(disruption_lines(plan))
    if plan.final_gates:
        parts.append(Text("then: " + ", ".join(g.id for g in plan.final_gates)))
    if plan.network_type:
        parts.append(Text(f"cluster network type: {plan.network_type}", style="dim"))
    return Group(*parts)


def disruption_lines(plan: RolloutPlan) -> list[Text]:
    """One line per pool and current config: what the machine-config-daemon will do to those
    nodes under the cluster's node disruption policies (actions, drain, reboot, why)."""
    out = []
    for p in plan.pools:
        for d in p.disruption:
            nodes = ", ".join(d.nodes[:5]) + (f" +{len(d.nodes) - 5}" if len(d.nodes) > 5 else "")
            style = "yellow" if d.reboot else "green"
            out.append(Text(f"disruption {p.name}: {d.from_config} -> {p.target_config} ({len(d.nodes)} node(s): "
                            f"{nodes}): {d.text()} ({d.why})", style=style))
        for hc in p.health_checks:
            gate = f"gate machinehealthcheck/{p.name} before the pool" if any(
                g.id == f"machinehealthcheck/{p.name}" for g in p.gates) else "the approval gates cover it"
            out.append(Text(
                f"machinehealthcheck {hc.namespace}/{hc.name} (not paused) may replace rebooting nodes of {p.name} "
                f"({len(hc.nodes)}: {', '.join(hc.nodes[:5])}) when {' or '.join(hc.unhealthy_conditions) or 'unhealthy'}"
                f"; pause it (annotation cluster.x-k8s.io/paused) or accept; {gate}", style="yellow"))
        for node, paths in p.irreconcilable.items():
            out.append(Text(f"irreconcilable {p.name}/{node}: {', '.join(paths)} (only a new node takes these); "
                            f"gate irreconcilable/{node} before it", style="yellow"))
    if plan.machine_config_nodes:
        out.append(Text("node phases: MachineConfigNode names (the API serves machineconfignodes)", style="dim"))
    return out


def append_next_steps(head: Text, model: Any) -> None:
    """Append to a status or result headline what a person does next: the exact command that
    answers each waiting gate, the point of no return, what an abort or revert restored, what
    stays changed (with its undo command), the commands to go on, a refusal's problems."""
    from workflows.kit.details import gate_commands

    get = lambda k: getattr(model, k, None)  # noqa: E731 - status and result models differ
    for g in get("gates") or []:
        if str(g.state) == "waiting":
            for cmd in gate_commands(get("workflow_id") or "ID", g):
                head.append(f"\n  answer: {cmd}", style="bold")
    if get("point_of_no_return"):
        head.append(f"\npast the point of no return: {get('point_of_no_return')}")
    for line in get("restored") or []:
        head.append(f"\nrestored: {line}", style="green")
    for item in get("left_changed") or []:
        head.append(f"\nleft changed: {item.line()}", style="yellow")
    for cmd in get("next_commands") or []:
        head.append(f"\nnext: {cmd}", style="bold")
    for line in get("problems") or []:
        head.append(f"\nproblem: {line}", style="red")


def status_view(st: RolloutStatus, now: datetime | None = None) -> RenderableType:
    """The live view of a rollout: headline with what it waits for, nodes, gates, totals."""
    now = now or datetime.now(UTC)
    head = Text()
    head.append(f"{st.workflow_id}  ", style="bold")
    head.append(f"cluster {st.cluster}  phase ")
    head.append(str(st.phase), style="bold cyan")
    if len(st.current_pools) > 1:
        head.append(f"  pools {', '.join(st.current_pools)}")
    elif st.current_pool:
        head.append(f"  pool {st.current_pool}")
    if st.paused_reason:
        head.append(f"\npaused: {st.paused_reason}", style="yellow")
    if st.waiting_for:
        head.append(f"\nwaiting for {st.waiting_for}")
        if st.since:
            head.append(f" since {fmt_time(st.since, now)}")
        if st.deadline:
            head.append(f" until {fmt_time(st.deadline, now)}")
    append_next_steps(head, st)
    if st.error:
        head.append(f"\nerror: {st.error}", style="bold red")
    tt = st.totals
    head.append(
        f"\nnodes: {tt.done} done, {tt.in_flight} in flight, {tt.pending} pending, {tt.skipped} skipped, "
        f"{tt.degraded} degraded, {tt.failed} failed, {tt.aborted} aborted"
    )
    parts: list[RenderableType] = [head]
    pre = preconditions_view(st)
    if pre is not None:
        parts.append(pre)
    if st.plan is not None:
        parts.extend(disruption_lines(st.plan))
        parts.extend(upgrade_tables(st, now))

    nodes = Table(title="Nodes", title_justify="left", expand=False)
    mcn = getattr(st, "mcn_phases", {}) if st.plan is not None and st.plan.machine_config_nodes else None
    for col in ("node", "pool", "phase", "MachineConfigNode phase" if mcn is not None else "step", "waiting for",
                "since", "deadline", "warning / reason"):
        nodes.add_column(col, overflow="fold")
    for n in st.nodes.values():
        note = n.warning or n.reason or ""
        if n.drain_report and n.drain_report.blocked_pods:
            bp = n.drain_report.blocked_pods[0]
            pdb = bp.pdbs[0] if bp.pdbs else None
            note += f"\nblocked: {bp.namespace}/{bp.name}: {bp.message}"
            if pdb:
                note += f" (PDB {pdb.name}: {pdb.disruptions_allowed} disruptions allowed)"
            for pr in n.drain_report.pending_replacements[:2]:
                note += f"\npending {pr.namespace}/{pr.name}: {pr.message}"
        nodes.add_row(
            n.name,
            n.pool,
            Text(str(n.phase), style=PHASE_STYLE.get(n.phase, "")),
            (f"{mcn.get(n.name) or '-'} ({n.step})" if n.step else mcn.get(n.name) or "-") if mcn is not None
            else n.step or "-",
            n.waiting_for or (f"held {st.holds[n.name].until_text()}" if n.name in st.holds else "-"),
            fmt_time(n.since, now) if n.since else "-",
            fmt_time(n.deadline, now) if n.deadline else "-",
            note.strip() or "-",
        )
    parts.append(nodes)
    held = holds_view(st, now)
    if held is not None:
        parts.append(held)
    for n in st.nodes.values():
        if n.drain_report is not None and (n.phase == NodePhase.BLOCKED or n.decision_gate is not None):
            parts.append(blocked_view(n, st.workflow_id, now))
    if st.gates or st.gate_history:
        gates = Table(title="Gates", title_justify="left")
        for col in ("gate", "state", "opened", "timeout", "decided by", "at", "comment"):
            gates.add_column(col)
        for g in st.gates:
            gates.add_row(
                g.id,
                str(g.state),
                fmt_time(g.opened_at),
                fmt_time(g.timeout_at) if g.timeout_at else "never",
                g.decided_by or "-",
                fmt_time(g.decided_at),
                g.comment or "",
            )
        parts.append(gates)
    if st.network_repair:
        nr = st.network_repair
        parts.append(
            Text(
                f"network repair: {nr.stage}; ovnkube-node ready {nr.ovnkube_ready}; "
                f"pods deleted {nr.pods_deleted if nr.pods_deleted is not None else '-'}; "
                f"workloads ready {nr.workloads_ready}"
                + (f"; not ready: {', '.join(nr.not_ready[:5])}" if nr.not_ready else "")
            )
        )
    for w in st.warnings:
        parts.append(Text(f"warning: {w}", style="yellow"))
    return Group(*parts)


def upgrade_tables(st: RolloutStatus, now: datetime | None = None) -> list[RenderableType]:
    """``oc adm upgrade status``'s layout for the rollout (:mod:`lockkeeper.upgrade_status`):
    the pools (ASSESSMENT, COMPLETION, STATUS), the nodes not yet completed (NAME, ASSESSMENT,
    PHASE, VERSION, EST, MESSAGE; the first ``TABLE_ROWS``) and the health insights."""
    from lockkeeper.upgrade_status import TABLE_ROWS, upgrade_view

    view = upgrade_view(st, now)
    pools = Table(title="Update status (worker and master pools)", title_justify="left")
    for col in ("NAME", "ASSESSMENT", "COMPLETION", "STATUS"):
        pools.add_column(col, overflow="fold")
    style = {"Completed": "green", "Degraded": "bold red", "Progressing": "cyan", "Excluded": "dim"}
    for p in view["pools"]:
        pools.add_row(p["name"], Text(p["assessment"], style=style.get(p["assessment"], "")), f"{p['completion']}%", p["status"])
    parts: list[RenderableType] = [pools]
    if view["nodes"]:
        nodes = Table(title="Nodes to update", title_justify="left")
        for col in ("NAME", "POOL", "ASSESSMENT", "PHASE", "VERSION", "EST", "MESSAGE"):
            nodes.add_column(col, overflow="fold")
        for r in view["nodes"][:TABLE_ROWS]:
            nodes.add_row(r["name"], r["pool"], Text(r["assessment"], style=style.get(r["assessment"], "")), r["phase"],
                          r["version"], r["est"], r["message"] or "-")
        parts.append(nodes)
        if len(view["nodes"]) > TABLE_ROWS:
            parts.append(Text(f"... {len(view['nodes']) - TABLE_ROWS} more node(s) to update (-o json lists every one)", style="dim"))
    for i in view["insights"]:
        res = ", ".join(f"{r['kind']} {r['namespace'] + '/' if r['namespace'] else ''}{r['name']}" for r in i["resources"])
        parts.append(Text(f"{i['level']} ({i['impact']}): {i['message']}\n  resources: {res}\n  reference: {i['reference']}",
                          style="bold red" if i["level"] == "Error" else "yellow"))
    return parts


def blocked_view(n: NodeStatus, workflow_id: str = "ID", now: datetime | None = None) -> RenderableType:
    """One readable block per blocked drain (R2): how long, which pods, which budgets with
    their counts, the Pending replacements' FailedScheduling messages, and the decision gate."""
    now = now or datetime.now(UTC)
    t = Text()
    t.append(f"Blocked drain on node {n.name}", style="bold yellow")
    if n.blocked_since:
        t.append(f": blocked for {fmt_duration((now - n.blocked_since).total_seconds())} (since {fmt_time(n.blocked_since)})")
    rep = n.drain_report
    for bp in rep.blocked_pods if rep else []:
        t.append(f"\n  pod {bp.namespace}/{bp.name}: {bp.message}")
        for c in bp.causes:
            t.append(f"\n    {c}")
        for pdb in bp.pdbs:
            limit = f"minAvailable {pdb.min_available}" if pdb.min_available is not None else f"maxUnavailable {pdb.max_unavailable}"
            t.append(
                f"\n    PodDisruptionBudget {pdb.namespace}/{pdb.name}: {limit}, currentHealthy {pdb.current_healthy}, "
                f"desiredHealthy {pdb.desired_healthy}, disruptionsAllowed {pdb.disruptions_allowed}"
            )
    for pr in rep.pending_replacements if rep else []:
        t.append(f"\n  replacement {pr.namespace}/{pr.name} Pending: {pr.message or '(no FailedScheduling event)'}")
    g = n.decision_gate
    if g is not None and g.state == GateState.WAITING:
        t.append(f"\n  decision gate {g.id} open since {fmt_time(g.opened_at, now)}", style="magenta")
        if g.timeout_at:
            t.append(f"; times out {fmt_time(g.timeout_at, now)}", style="magenta")
        t.append(f"\n  decide: lockkeeper decide {workflow_id} {n.name} wait|skip|delete-pod|abort [--comment ...]")
    elif g is not None:
        t.append(f"\n  last decision on {g.id}: {g.decision or g.state} by {g.decided_by or '-'} at {fmt_time(g.decided_at)}")
    return t


def diagnosis_view(d: PoolDiagnosis) -> RenderableType:
    """``lockkeeper diagnose pool``: target, nodes behind, degraded, drain blockers, Pending pods, conditions."""
    head = Text()
    head.append(f"MachineConfigPool {d.pool}", style="bold")
    head.append(
        f"  target {d.target_config or '-'}  current {d.current_config or '-'}\n"
        f"machines {d.machine_count}, updated {d.updated_machine_count}, ready {d.ready_machine_count}, "
        f"degraded {d.degraded_machine_count}"
    )
    parts: list[RenderableType] = [head]
    cond = Table(title="Conditions", title_justify="left")
    for col in ("type", "status", "reason", "message"):
        cond.add_column(col, overflow="fold")
    for c in d.conditions:
        cond.add_row(c.type, c.status, c.reason or "-", c.message or "-")
    parts.append(cond)
    nodes = Table(title="Nodes not at the target config", title_justify="left")
    for col in ("node", "currentConfig", "desiredConfig", "state", "reason", "desiredDrain", "lastAppliedDrain", "cordoned"):
        nodes.add_column(col, overflow="fold")
    for n in d.nodes_not_at_target:
        nodes.add_row(
            n.name, n.current_config or "-", n.desired_config or "-", n.state or "-", n.reason or "-",
            n.desired_drain or "-", n.last_applied_drain or "-",
            (f"yes ({n.cordoned_by})" if n.cordoned_by else "yes") if n.unschedulable else "no",
        )
    parts.append(nodes if d.nodes_not_at_target else Text("every node is at the target config", style="green"))
    for n in d.degraded:
        parts.append(Text(f"degraded: {n.name}: {n.reason or n.state}", style="bold red"))
    for b in d.drain_blockers:
        p = b.pdb
        limit = f"minAvailable {p.min_available}" if p.min_available is not None else f"maxUnavailable {p.max_unavailable}"
        parts.append(Text(
            f"drain blocker: PodDisruptionBudget {p.namespace}/{p.name} ({limit}, currentHealthy {p.current_healthy}, "
            f"desiredHealthy {p.desired_healthy}, disruptionsAllowed {p.disruptions_allowed}) covers {', '.join(b.pods)}",
            style="yellow",
        ))
    for pp in d.pending_pods:
        extra = f" (would replace {pp.replaces})" if pp.replaces else ""
        parts.append(Text(f"pending: {pp.namespace}/{pp.name}{extra}: {pp.message or '(no FailedScheduling event)'}"))
    return Group(*parts)


def result_view(res: MachineConfigRolloutResult) -> RenderableType:
    """Summary of a finished rollout: outcome, nodes with durations, gate decisions."""
    head = Text()
    head.append("outcome ")
    head.append(res.outcome, style="bold green" if res.outcome in ("completed", "dry-run") else "bold red")
    if res.message:
        head.append(f": {res.message}")
    if res.started_at and res.finished_at:
        head.append(f"\ntotal time {fmt_duration((res.finished_at - res.started_at).total_seconds())}")
    append_next_steps(head, res)
    parts: list[RenderableType] = [head]
    if res.nodes:
        t = Table(title="Nodes", title_justify="left")
        for col in ("node", "pool", "phase", "attempts", "duration", "drain", "reboot", "reason"):
            t.add_column(col)
        for n in res.nodes.values():
            t.add_row(
                n.name,
                n.pool,
                Text(str(n.phase), style=PHASE_STYLE.get(n.phase, "")),
                str(n.attempts),
                fmt_duration(n.duration_seconds),
                fmt_duration(n.drain_seconds),
                fmt_duration(n.reboot_seconds),
                n.reason or "",
            )
        parts.append(t)
    if res.gate_history:
        parts.append(gate_history_table(res.gate_history))
    if res.network_repair:
        nr = res.network_repair
        parts.append(
            Text(f"network repair: {nr.stage}; pods deleted {nr.pods_deleted}; workloads ready {nr.workloads_ready}")
        )
    return Group(*parts)


def holds_view(model: Any, now: datetime | None = None) -> Table | None:
    """The held nodes of a status (node, by whom, why, since, until when: a time or "until
    released") and the hold history's releases and expiries; None without either."""
    from workflows.kit.models import HoldRecord, NodeHold

    holds = [h if isinstance(h, NodeHold) else NodeHold.model_validate(h) for h in (getattr(model, "holds", None) or {}).values()]
    history = [r if isinstance(r, HoldRecord) else HoldRecord.model_validate(r) for r in getattr(model, "hold_history", None) or []]
    if not holds and not history:
        return None

    def when(t: datetime) -> str:  # holds last hours or days: the date too, and how far off
        return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") + (fmt_time(t, now)[8:] if now is not None else "")

    t = Table(title="Holds", title_justify="left")
    for col in ("node", "state", "by", "reason", "at", "until"):
        t.add_column(col, overflow="fold")
    for h in holds:
        t.add_row(h.node, Text("held", style="yellow"), h.by, h.reason, when(h.since),
                  when(h.until) if h.until is not None else "until released")
    for r in history:
        if r.action != "held":
            t.add_row(r.node, r.action, r.by or "-", r.reason or "-", when(r.at), "-")
    return t


def preconditions_view(model: Any) -> RenderableType | None:
    """The preconditions the kit's preflight checked (``model.preconditions``, a list of
    :class:`activities.preflight.models.PreconditionResult`), or None when there are none.

    Every check is listed, one line each with its result (``ok``/``FAILED``/``not run`` and why),
    while a gate waits (the plan gate: the person deciding sees what was checked, issue 39), when a
    check failed or was not run, and on a result; otherwise one summary line
    (``preconditions: 5 ok``) keeps a long run's status short."""
    results = getattr(model, "preconditions", None) or []
    if not results:
        return None
    if not all(hasattr(r, "state") for r in results):  # a procedure's own lines (the VXLAN port change's)
        return Text("Preconditions:\n  " + "\n  ".join(str(r) for r in results))
    counts: dict[str, int] = {}
    for r in results:
        counts[str(r.state)] = counts.get(str(r.state), 0) + 1
    summary = ", ".join(f"{n} {state}" for state, n in counts.items())
    waiting = any(str(getattr(g, "state", "")) == "waiting" for g in getattr(model, "gates", None) or [])
    ended = getattr(model, "outcome", None) is not None
    if not (waiting or ended or any(not r.ok for r in results)):
        return Text(f"preconditions: {summary} (checked before the first write)", style="dim")
    text = Text(f"Preconditions ({summary}), checked before the first write:")
    for r in results:
        text.append("\n  ")
        text.append(r.line(), style="" if r.ok else "bold red" if str(r.state) == "failed" else "yellow")
    return text


def gate_history_table(history: list[Any]) -> Table:
    """Who decided which gate, when and how (``timeout`` rows show the applied outcome)."""
    t = Table(title="Gate history", title_justify="left")
    for col in ("gate", "action", "by", "at", "comment"):
        t.add_column(col)
    for r in history:
        action = r.action + (f" → {r.outcome}" if r.outcome else "")
        t.add_row(r.gate_id, action, r.by, fmt_time(r.at), r.comment or "")
    return t


def list_table(rows: list[dict[str, Any]]) -> Table:
    """Rows of ``lockkeeper list``: id, procedure, cluster, pools, status, started, closed."""
    t = Table()
    for col in ("id", "procedure", "cluster", "pools", "status", "execution", "started"):
        t.add_column(col)
    for r in rows:
        t.add_row(
            r["id"],
            r.get("procedure") or "-",
            r.get("cluster") or "-",
            ", ".join(r.get("pools") or []) or "-",
            r.get("status") or "-",
            r.get("execution") or "-",
            r.get("started") or "-",
        )
    return t
