"""The GlusterFS report views that ``lockkeeper diagnose gluster`` (:mod:`lockkeeper.cli.diagnose`)
and ``start gluster-recovery --check-only`` print.

The diagnosis runs the same read as the procedure (``read_gluster``: pods, nodes, ``volume
info``/``status``, peers, heal info, in a usable GlusterFS pod through the API's exec) and the
same pure assessment (:func:`workflows.shared.glusterfs.assess.assess`); it writes nothing. Exit 0 when
healthy, 1 when not, 2 for a malformed kubeconfig, 3 when the cluster or the GlusterFS pods
cannot be reached.
"""

from __future__ import annotations

from typing import Any


def assessment_view(a: Any, title: str = "GlusterFS") -> Any:
    """A rich renderable of an :class:`~workflows.gluster.models.Assessment`: one row per
    brick (volume, replica set, brick, node, pod, online, why offline, heal entries), then the
    hosts to restart and anything that stops a recovery."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    t = Table(title=f"{title} (read in {a.exec_pod or '-'})", show_lines=False)
    for col in ("volume", "set", "brick", "node", "pod", "online", "state", "heal"):
        t.add_column(col)
    for v in a.volumes:
        heal = "skipped" if v.heal_skipped else ("-" if v.heal_entries is None and not v.heal_problems else str(v.heal_entries))
        for i, b in enumerate(v.bricks):
            t.add_row(v.name if i == 0 else "", str(b.replica_set), b.name + (" (arbiter)" if b.arbiter else ""), b.node or "-",
                      b.pod or "-", "Y" if b.online else "[red]N[/red]", b.reason or "", heal if i == 0 else "")
    parts: list[Any] = [t]
    for h in a.hosts:
        state = "safe to restart" if h.safe else f"UNSAFE: {h.unsafe_reason}"
        parts.append(Text(f"restart host {h.host} (node {h.node}, pod {h.pod}): {state}; offline: {', '.join(h.offline_bricks)}"))
    for line in [*a.fatal, *a.unmapped]:
        parts.append(Text(f"STOP: {line}", style="bold red"))
    for v in a.volumes:
        for p in v.heal_problems:
            parts.append(Text(f"heal {v.name}: {p}", style="yellow"))
    parts.append(Text("healthy" if a.healthy else "NOT healthy", style="bold green" if a.healthy else "bold red"))
    return Group(*parts)


def diagnosis_data(report: Any, a: Any) -> dict[str, Any]:
    """The JSON/YAML document of ``diagnose gluster``: healthy, the assessment, the pods, peers
    and the CLI calls made."""
    return {
        "healthy": a.healthy, "exec_pod": report.exec_pod, "assessment": a.model_dump(mode="json"),
        "peers": [p.model_dump(mode="json") for p in report.peers], "calls": [c.model_dump(mode="json") for c in report.calls],
    }
