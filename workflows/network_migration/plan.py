"""Pure planning of the network migration: reboot batches and pool progress lines.

Reboot order (the offline migration reboots every node): non-master nodes first, by pool then
name, ``max_unavailable`` at a time; then the masters one at a time (etcd quorum and the API
stay up with two of three masters).
"""

from __future__ import annotations

from activities.network_migration.models import MigrationState, NodeState, PoolState
from workflows.network_migration.models import PoolProgress


def reboot_batches(nodes: list[NodeState], max_unavailable: int) -> list[list[str]]:
    """Batches of node names: workers/infra ``max_unavailable`` at a time, masters alone, last."""
    others = sorted((n for n in nodes if not n.master), key=lambda n: (n.pool, n.name))
    masters = sorted((n for n in nodes if n.master), key=lambda n: n.name)
    size = max(1, max_unavailable)
    batches = [[n.name for n in others[i:i + size]] for i in range(0, len(others), size)]
    return batches + [[m.name] for m in masters]


def progress(pools: list[PoolState]) -> list[PoolProgress]:
    """Status lines of the pools."""
    out = []
    for p in pools:
        cond = f"Updated={p.updated} Updating={p.updating} Degraded={p.degraded}"
        out.append(PoolProgress(name=p.name, updated=p.updated_machine_count, machines=p.machine_count, conditions=cond, paused=p.paused))
    return out


def signature(state: MigrationState) -> tuple[object, ...]:
    """What counts as progress while waiting for the pools: any pool's counts or any node's
    MCO annotations or readiness changing."""
    return (tuple((p.name, p.updated_machine_count, p.target) for p in state.pools),
            tuple((n.name, n.current_config, n.desired_config, n.mco_state, n.ready) for n in state.nodes))


def preflight_problems(state: MigrationState, to: str) -> list[str]:
    """Bad input or a cluster not fit to start: the type already set, a Degraded pool, a pool
    already paused (its rollout would never start)."""
    problems = []
    if state.config_type == to or state.status_type == to:
        problems.append(f"the cluster network type is already {to} (spec {state.config_type}, status {state.status_type})")
    for p in state.pools:
        if p.degraded:
            problems.append(f"pool {p.name} is Degraded")
        if p.paused:
            problems.append(f"pool {p.name} is paused")
    if state.migration not in (None, to):
        problems.append(f"spec.migration.networkType is already {state.migration}")
    return problems
