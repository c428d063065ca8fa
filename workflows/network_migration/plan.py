"""Pure planning of the network migration: reboot batches and pool progress lines.

Reboot order (the offline migration reboots every node): non-master nodes first, by pool then
name, ``max_unavailable`` at a time; then the masters one at a time (etcd quorum and the API
stay up with two of three masters).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from activities.network_migration.models import MigrationState, NodeState, PoolState
from workflows.kit.inputs import resolve_max_unavailable
from workflows.network_migration.models import NetworkMigrationInput, NetworkMigrationResult, PoolProgress


def reboot_batches(nodes: list[NodeState], max_unavailable: int | str) -> list[list[str]]:
    """Batches of node names: workers/infra ``max_unavailable`` at a time (an int, or ``"N%"`` of
    them rounded down and at least 1: :func:`workflows.kit.inputs.resolve_max_unavailable`),
    masters alone, last. Raises ValueError for a ``max_unavailable`` the kit refuses."""
    others = sorted((n for n in nodes if not n.master), key=lambda n: (n.pool, n.name))
    masters = sorted((n for n in nodes if n.master), key=lambda n: n.name)
    size = resolve_max_unavailable(max_unavailable, len(others))
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


#: The kubelet client CA's signer (a MachineConfigPool ``status.certExpirys`` subject).
KUBELET_SIGNER = "kube-apiserver-to-kubelet-signer"
#: OpenShift rotates the kube-apiserver-to-kubelet-signer, valid 365 days, at 292 days (80 %):
#: 73 days before it expires; the new CA reaches the nodes through their pool, which a pause
#: holds back, and the old one is removed when it expires (OpenShift documentation, "Pausing the
#: machine config pools" and "Understanding the effects of pausing MCPs").
ROTATE_BEFORE_EXPIRY = timedelta(days=73)


def pause_bound_seconds(batches: int, pools_timeout_seconds: float, ready_timeout_seconds: float) -> float:
    """The longest the migration keeps the pools paused before it stops on a timeout: multus
    (``pools_timeout_seconds``) then each reboot batch (``ready_timeout_seconds``)."""
    return pools_timeout_seconds + batches * ready_timeout_seconds


def kubelet_ca_problems(pools: list[PoolState], now: datetime, pause_seconds: float) -> list[str]:
    """Issue 41: the pools' pause (from ``now``, at most ``pause_seconds``) must not span the
    kubelet CA rotation: refuse when it reaches a kube-apiserver-to-kubelet-signer's rotation
    date (``expiry`` - 73 days) while that certificate is still valid, naming the date."""
    until = now + timedelta(seconds=pause_seconds)
    found: dict[tuple[str, datetime], list[str]] = {}
    for p in pools:
        for c in p.cert_expirys:
            if c.expiry is None or KUBELET_SIGNER not in c.subject:
                continue
            rotation = c.expiry - ROTATE_BEFORE_EXPIRY
            if rotation <= until and now < c.expiry:
                found.setdefault((c.subject, c.expiry), []).append(p.name)
    out = []
    for (subject, expiry), names in sorted(found.items(), key=lambda kv: kv[0][1]):
        rotation = expiry - ROTATE_BEFORE_EXPIRY
        out.append(
            f"the kubelet CA rotates on {rotation:%Y-%m-%d %H:%M} UTC ({subject} expires {expiry:%Y-%m-%d %H:%M} UTC, "
            f"rotated at 292 of its 365 days), within the pools' pause of up to {pause_seconds / 3600:.1f} h "
            f"(pools {', '.join(names)}): a paused pool does not receive the new CA; migrate once it has rolled out"
        )
    return out


#: The records a full revert takes over from an ended migration: the switch, and each pool's
#: pause still in force (the rollback unpauses those pools through them).
ROLLBACK_RECORDS = ("network-type", "pool-paused/")


def reverse_input(inp: NetworkMigrationInput, workflow_id: str, result: NetworkMigrationResult | None = None) -> NetworkMigrationInput | None:
    """The input of ``revert --full`` of the ended migration ``workflow_id`` (input ``inp``,
    ``result`` its result, None for a failed or terminated run): the documented rollback in a
    new run (``rollback_of``), from that run's open records of the switch and of the pools it
    left paused, reading back the pools against the run's ``baseline``. None when the ended run
    left the network type as it found it (completed or reverted: no ``network-type`` record;
    aborted before the switch: restored then): nothing to roll back."""
    records = [e for e in (result.open_records if result is not None else []) if e.name.startswith(ROLLBACK_RECORDS)]
    if not any(e.name == "network-type" for e in records):
        return None
    assert result is not None
    return inp.model_copy(update={"rollback_of": workflow_id, "rollback_records": records, "rollback_baseline": dict(result.baseline),
                                  "dry_run": False})
