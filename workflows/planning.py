"""Pure planning functions of the MachineConfig rollout: decide, never do.

Everything here is deterministic and side-effect free, so the workflow can call it directly and
the unit tests table-test it (tests/unit/test_planning.py). The rules follow the
machine-config-controller (``pkg/controller/node/node_controller.go``, ``getAllCandidateMachines``
and ``getUnavailableMachines``) and apimachinery ``intstr.GetScaledValueFromIntOrPercent``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from activities.models import DaemonState, NodeInfo, PoolInfo
from workflows.models import (
    ApprovalPolicy,
    GateKind,
    MaxUnavailable,
    PlannedGate,
    PoolPlan,
    RolloutPlan,
)

#: Gate id of R1's cluster-wide pod deletion; always gated whatever the approval policy.
DELETE_ALL_PODS_GATE = "delete-all-pods"

_PERCENT = re.compile(r"^\s*(\d+)\s*%\s*$")
_INT = re.compile(r"^\s*(\d+)\s*$")
_EPOCH = datetime.min.replace(tzinfo=UTC)


class PlanError(ValueError):
    """The rollout input cannot be planned (bad maxUnavailable, unknown node in node_order)."""


def resolve_max_unavailable(value: MaxUnavailable, pool_size: int) -> int:
    """Resolve ``maxUnavailable`` (int, "N" or "N%") against ``pool_size`` nodes.

    A percent is scaled and rounded DOWN (``intstr.GetScaledValueFromIntOrPercent(roundUp=false)``,
    as the MCO does), then raised to at least 1 so a rollout always progresses (MCO
    ``getMaxUnavailable``: "if maxunavail == 0 { maxunavail = 1 }"). An integer is used as is
    (at least 1). Raises :class:`PlanError` on a negative number or a malformed string.
    """
    if isinstance(value, bool):
        raise PlanError(f"invalid max_unavailable {value!r}: expected an integer or a percent like '25%'")
    if isinstance(value, int):
        resolved = value
    else:
        if m := _PERCENT.match(value):
            resolved = math.floor(int(m.group(1)) * pool_size / 100)
        elif m := _INT.match(value):
            resolved = int(m.group(1))
        else:
            raise PlanError(f"invalid max_unavailable {value!r}: expected an integer or a percent like '25%'")
    if resolved < 0:
        raise PlanError(f"invalid max_unavailable {value!r}: must not be negative")
    return max(resolved, 1)


def order_pools(pools: Sequence[str], *, explicit: bool) -> list[str]:
    """Order pools: as given when the operator listed them (``explicit``), else master first then
    alphabetical (masters carry the control plane; the others are independent)."""
    unique = list(dict.fromkeys(pools))
    if explicit:
        return unique
    return sorted(unique, key=lambda p: (p != "master", p))


def node_sort_key(node: NodeInfo) -> tuple[str, datetime, str]:
    """Zone label, then creationTimestamp (oldest first), then name: MCO's candidate order."""
    return (node.zone or "", node.created or _EPOCH, node.name)


def order_nodes(nodes: Iterable[NodeInfo], node_order: str | Sequence[str] = "zone-oldest") -> list[NodeInfo]:
    """Sort ``nodes`` for a rollout.

    ``"zone-oldest"``: by :func:`node_sort_key`. An explicit list of names puts those nodes first in
    that order and the rest after them zone-oldest; names not among ``nodes`` are ignored here
    (:func:`plan_rollout` rejects names that are in no pool).
    """
    ordered = sorted(nodes, key=node_sort_key)
    if isinstance(node_order, str):
        if node_order != "zone-oldest":
            raise PlanError(f"unknown node_order {node_order!r}: expected 'zone-oldest' or a list of node names")
        return ordered
    rank = {name: i for i, name in enumerate(node_order)}
    listed = sorted((n for n in ordered if n.name in rank), key=lambda n: rank[n.name])
    return listed + [n for n in ordered if n.name not in rank]


def is_at_target(node: NodeInfo, target: str) -> bool:
    """True when the node needs nothing: currentConfig == desiredConfig == target and state Done."""
    return (
        node.current_config == target
        and node.state == DaemonState.DONE
        and node.desired_config in (None, target)
    )


def is_unavailable(node: NodeInfo) -> bool:
    """True when the node already counts against maxUnavailable (MCO ``isNodeUnavailable``-like):
    not Ready, Degraded/Unreconcilable, or cordoned by somebody else (unschedulable without our
    ``lockkeeper.io/cordoned-by`` record)."""
    return (not node.ready) or node.degraded or (node.unschedulable and not node.cordoned_by)


def plan_gates(pool: str, nodes: Sequence[str], policy: ApprovalPolicy) -> list[PlannedGate]:
    """Gates of one pool for ``policy`` (see :class:`workflows.models.ApprovalPolicy`).

    pool: ``pool/<pool>`` before the first node; node: ``node/<node>`` before each node;
    canary: ``canary/<pool>`` after the first node, only when other nodes follow; none: no gate.
    A pool with nothing to roll gets no gate.
    """
    if not nodes or policy == ApprovalPolicy.NONE:
        return []
    if policy == ApprovalPolicy.POOL:
        return [PlannedGate(id=f"pool/{pool}", kind=GateKind.POOL, pool=pool, before_node=nodes[0])]
    if policy == ApprovalPolicy.NODE:
        return [PlannedGate(id=f"node/{n}", kind=GateKind.NODE, pool=pool, before_node=n) for n in nodes]
    if policy == ApprovalPolicy.CANARY:
        if len(nodes) < 2:
            return []
        return [PlannedGate(id=f"canary/{pool}", kind=GateKind.CANARY, pool=pool, after_node=nodes[0])]
    raise PlanError(f"unknown approval policy {policy!r}")


def batches(nodes: Sequence[str], size: int) -> list[list[str]]:
    """Split ``nodes`` into consecutive groups of ``size`` (at least 1) for display."""
    size = max(size, 1)
    return [list(nodes[i : i + size]) for i in range(0, len(nodes), size)]


def plan_pool(
    pool: PoolInfo,
    *,
    max_unavailable: MaxUnavailable,
    node_order: str | Sequence[str] = "zone-oldest",
    approval: ApprovalPolicy = ApprovalPolicy.NONE,
) -> PoolPlan:
    """Plan one pool: order its nodes, skip those at target, count the unavailable ones.

    ``capacity`` = resolved maxUnavailable minus the nodes already unavailable (a node that is
    unavailable is never free capacity, whether or not it still needs the update), at least 0.
    """
    ordered = order_nodes(pool.nodes, node_order)
    size = len(ordered)
    resolved = resolve_max_unavailable(max_unavailable, size)
    todo = [n.name for n in ordered if not is_at_target(n, pool.target_config)]
    skipped = [n.name for n in ordered if is_at_target(n, pool.target_config)]
    unavailable = [n.name for n in ordered if is_unavailable(n)]
    capacity = max(resolved - len(unavailable), 0)
    return PoolPlan(
        name=pool.name,
        target_config=pool.target_config,
        size=size,
        max_unavailable=resolved,
        capacity=capacity,
        nodes=todo,
        skipped=skipped,
        unavailable=unavailable,
        batches=batches(todo, capacity),
        gates=plan_gates(pool.name, todo, approval),
    )


def plan_rollout(
    pools: Sequence[PoolInfo],
    *,
    requested_pools: Sequence[str] = (),
    max_unavailable: MaxUnavailable = 1,
    node_order: str | Sequence[str] = "zone-oldest",
    approval: ApprovalPolicy = ApprovalPolicy.NONE,
    repair_network: bool = False,
    network_type: str | None = None,
) -> RolloutPlan:
    """Plan a whole rollout from preflight's pools.

    Pools are ordered by :func:`order_pools` (``requested_pools`` non-empty = explicit order).
    ``repair_network`` adds the always-present ``delete-all-pods`` gate after the pools.
    Raises :class:`PlanError` for an explicit ``node_order`` naming a node that is in no pool.
    """
    by_name = {p.name: p for p in pools}
    names = order_pools(
        [p for p in requested_pools if p in by_name] + [p for p in by_name if p not in requested_pools],
        explicit=bool(requested_pools),
    )
    if not isinstance(node_order, str):
        known = {n.name for p in pools for n in p.nodes}
        unknown = [n for n in node_order if n not in known]
        if unknown:
            raise PlanError(f"node_order names nodes that are in none of the pools: {', '.join(unknown)}")
    plan = RolloutPlan(
        pools=[
            plan_pool(by_name[n], max_unavailable=max_unavailable, node_order=node_order, approval=approval)
            for n in names
        ],
        network_type=network_type,
    )
    if repair_network:
        plan.final_gates.append(PlannedGate(id=DELETE_ALL_PODS_GATE, kind=GateKind.STEP))
    return plan
