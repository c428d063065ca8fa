"""The campaign's status and result panels (issue 38), named by its spec's ``panels``.

A table of clusters × (wave, state, the child's current step or what it waits for, its open gate
with the command that answers it, started, ended) below the generic procedure view, and the
campaign's counts (clusters per state, failures against the budget, the most clusters seen in
flight). A gate of a child is answered on the child's ID (``lockkeeper approve CHILD GATE``).
"""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from lockkeeper.output import fmt_time
from lockkeeper.panels import procedure_view

_STYLE = {"done": "green", "failed": "red", "aborted": "red", "running": "cyan", "pending": "dim", "not-started": "dim"}


def gate_command(cluster: Any) -> str:
    """The open gate of ``cluster``'s child and the command that approves it, or ``-``."""
    report = cluster.child_status
    gates = list(report.gates) if report is not None else []
    if not gates:
        return "-"
    g = gates[0]
    return f"{g.id}: lockkeeper approve {g.workflow_id or cluster.child_id} {g.id}"


def current_step(cluster: Any) -> str:
    """What ``cluster``'s child does or waits for now (its last report or live status), or its
    ended message."""
    report = cluster.child_status
    if cluster.state == "running" and report is not None:
        return report.waiting_for or report.phase or "running"
    return cluster.message or ("-" if cluster.state in ("pending", "not-started") else cluster.state)


def clusters_table(clusters: list[Any]) -> Table:
    t = Table(title="Clusters", title_justify="left")
    for col in ("cluster", "wave", "state", "current step", "open gate / command", "started", "ended"):
        t.add_column(col, overflow="fold")
    for c in clusters:
        t.add_row(c.name, str(c.wave), Text(c.state, style=_STYLE.get(c.state, "")), Text(current_step(c)), Text(gate_command(c)),
                  fmt_time(c.started_at) if c.started_at else "-", fmt_time(c.ended_at) if c.ended_at else "-")
    return t


def counts_line(doc: Any) -> Text:
    counts = ", ".join(f"{k} {v}" for k, v in sorted(doc.counts.items()))
    budget = getattr(doc, "failure_budget", None)
    failures = getattr(doc, "failures", len(getattr(doc, "failed", []) or []))
    parts = [f"clusters: {counts}", f"failures {failures}" + (f" / budget {budget}" if budget is not None else "")]
    if getattr(doc, "waves", 0):
        parts.append(f"wave {doc.current_wave or '-'} of {doc.waves}")
    if getattr(doc, "max_in_flight_seen", 0):
        parts.append(f"most in flight {doc.max_in_flight_seen}")
    return Text(" · ".join(parts))


def campaign_status(st: Any) -> RenderableType:
    """Status panel: the generic view, the counts and the clusters table."""
    return Group(procedure_view(st, skip=frozenset({"clusters", "counts"})), counts_line(st), clusters_table(st.clusters))


def campaign_result(res: Any) -> RenderableType:
    """Result panel: the generic view, the counts and the clusters table."""
    return Group(procedure_view(res, skip=frozenset({"clusters", "counts"})), counts_line(res), clusters_table(res.clusters))


CAMPAIGN_PANELS = (campaign_status, campaign_result)
