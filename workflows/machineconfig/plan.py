"""Pure planning of the MachineConfig rollout: which nodes of which pools, in which order.

Deterministic and side-effect free (tests/machineconfig/test_planning.py). The generic parts (maxUnavailable,
node order, unavailable nodes, gates, batches) are the kit's (:mod:`workflows.kit.plan`); what is
MachineConfig-specific is "at target" (currentConfig == desiredConfig == the rendered config, state
Done) and the pool order (master first, as the machine-config-controller's pools are independent
but the masters carry the control plane).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from activities.cluster.models import DaemonState, NodeInfo
from activities.machineconfig.models import HealthCheckFact, PoolInfo
from workflows.kit.models import GateKind
from workflows.kit.plan import (
    ZONE_OLDEST, ApprovalPolicy, MaxUnavailable, PlannedGate, batches, check_node_order, is_unavailable, order_name,
    order_nodes, plan_gates, resolve_max_unavailable,
)
from workflows.machineconfig.disruption import plan_pool_disruption
from workflows.machineconfig.models import PoolOrder, PoolPlan, RolloutPlan

#: Gate id of R1's cluster-wide pod deletion; always gated whatever the approval policy.
DELETE_ALL_PODS_GATE = "delete-all-pods"


def order_pools(pools: Sequence[str], *, explicit: bool) -> list[str]:
    """Order pools: as given when the operator listed them (``explicit``), else master first then
    alphabetical (masters carry the control plane; the others are independent)."""
    unique = list(dict.fromkeys(pools))
    if explicit:
        return unique
    return sorted(unique, key=lambda p: (p != "master", p))


def is_at_target(node: NodeInfo, target: str) -> bool:
    """True when the node needs nothing: currentConfig == desiredConfig == target and state Done."""
    return (
        node.current_config == target
        and node.state == DaemonState.DONE
        and node.desired_config in (None, target)
    )


IRRECONCILABLE_GATE = "irreconcilable/{node}"


def irreconcilable_gates(pool: str, todo: Sequence[str], irreconcilable: Mapping[str, Sequence[str]]) -> list[PlannedGate]:
    """A gate before each node to roll whose MachineConfigNode reports irreconcilableChanges
    (issue 41: a person decides before the update of a node that cannot take all of the target),
    whatever the approval policy; in the pool's node order."""
    return [PlannedGate(id=IRRECONCILABLE_GATE.format(node=n), kind=GateKind.NODE, pool=pool, before_node=n)
            for n in todo if irreconcilable.get(n)]


MHC_GATE = "machinehealthcheck/{pool}"


def risky_health_checks(pool: PoolInfo, todo: Sequence[str], reboots: set[str] | None) -> list[HealthCheckFact]:
    """The pool's MachineHealthChecks that are not paused and cover a node to roll that will
    reboot (``reboots``: the nodes the daemon reboots; None: every node, no disruption facts),
    each with only those nodes."""
    rolling = [n for n in todo if reboots is None or n in reboots]
    out = []
    for hc in pool.health_checks:
        nodes = [n for n in rolling if n in hc.nodes]
        if not hc.paused and nodes:
            out.append(hc.model_copy(update={"nodes": nodes}))
    return out


def health_check_gates(pool: str, todo: Sequence[str], risky: Sequence[HealthCheckFact],
                       approval: ApprovalPolicy) -> list[PlannedGate]:
    """Issue 41: a MachineHealthCheck that is not paused may remediate (delete and replace) a
    node that stays NotReady during its reboot. With no approval gates (``--approve-each none``)
    such a pool gets the gate ``machinehealthcheck/<pool>`` before its first node; with
    ``--approve-each`` pool, node or canary a person already approves, and the plan only warns."""
    if not risky or not todo or approval != ApprovalPolicy.NONE:
        return []
    return [PlannedGate(id=MHC_GATE.format(pool=pool), kind=GateKind.POOL, pool=pool, before_node=todo[0])]


def plan_pool(
    pool: PoolInfo,
    *,
    max_unavailable: MaxUnavailable,
    node_order: str | Sequence[str] = ZONE_OLDEST,
    approval: ApprovalPolicy = ApprovalPolicy.NONE,
) -> PoolPlan:
    """Plan one pool: order its nodes, skip those at target, count the unavailable ones; the
    gates of ``approval`` plus :func:`health_check_gates` and :func:`irreconcilable_gates`; the
    daemon's disruption decision.

    ``capacity`` = resolved maxUnavailable minus the nodes already unavailable (a node that is
    unavailable is never free capacity, whether or not it still needs the update), at least 0.
    Raises :class:`workflows.kit.plan.PlanError` for a bad maxUnavailable or node_order.
    """
    ordered = order_nodes(pool.nodes, node_order)
    size = len(ordered)
    resolved = resolve_max_unavailable(max_unavailable, size)
    todo = [n.name for n in ordered if not is_at_target(n, pool.target_config)]
    skipped = [n.name for n in ordered if is_at_target(n, pool.target_config)]
    unavailable = [n.name for n in ordered if is_unavailable(n)]
    capacity = max(resolved - len(unavailable), 0)
    disruption = plan_pool_disruption(pool.disruption)
    reboots = None if pool.disruption is None else {n for d in disruption if d.reboot for n in d.nodes}
    risky = risky_health_checks(pool, todo, reboots)
    return PoolPlan(
        name=pool.name, target_config=pool.target_config, size=size, max_unavailable=resolved, capacity=capacity, nodes=todo,
        skipped=skipped, unavailable=unavailable, batches=batches(todo, capacity), disruption=disruption, health_checks=risky,
        gates=plan_gates(pool.name, todo, approval) + health_check_gates(pool.name, todo, risky, approval)
        + irreconcilable_gates(pool.name, todo, pool.irreconcilable),
        irreconcilable={n: list(pool.irreconcilable[n]) for n in todo if n in pool.irreconcilable},
    )


def plan_rollout(
    pools: Sequence[PoolInfo],
    *,
    requested_pools: Sequence[str] = (),
    max_unavailable: MaxUnavailable = 1,
    node_order: str | Sequence[str] = ZONE_OLDEST,
    approval: ApprovalPolicy = ApprovalPolicy.NONE,
    repair_network: bool = False,
    network_type: str | None = None,
    pool_order: PoolOrder = PoolOrder.SEQUENTIAL,
    machine_config_nodes: bool = False,
) -> RolloutPlan:
    """Plan a whole rollout from preflight's pools.

    Pools are ordered by :func:`order_pools` (``requested_pools`` non-empty = explicit order).
    ``pool_order`` is recorded in the plan (see :func:`pool_stages`), and the name of ``node_order``
    (:func:`workflows.kit.plan.order_nodes`; each pool's nodes are in that order).
    ``repair_network`` adds the always-present ``delete-all-pods`` gate after the pools.
    Each pool's ``disruption`` is the daemon's node disruption decision
    (:func:`workflows.machineconfig.disruption.plan_pool_disruption`); ``machine_config_nodes``
    (the API serves them) is recorded in the plan.
    Raises :class:`workflows.kit.plan.PlanError` for an explicit ``node_order`` naming a node that
    is in no pool (and for what :func:`plan_pool` refuses).
    """
    by_name = {p.name: p for p in pools}
    names = order_pools([p for p in requested_pools if p in by_name] + [p for p in by_name if p not in requested_pools],
                        explicit=bool(requested_pools))
    check_node_order(node_order, (n.name for p in pools for n in p.nodes))
    plan = RolloutPlan(
        pools=[plan_pool(by_name[n], max_unavailable=max_unavailable, node_order=node_order, approval=approval) for n in names],
        network_type=network_type, pool_order=pool_order, node_order=order_name(node_order), machine_config_nodes=machine_config_nodes,
    )
    if repair_network:
        plan.final_gates.append(PlannedGate(id=DELETE_ALL_PODS_GATE, kind=GateKind.STEP))
    return plan


def pool_stages(plan: RolloutPlan) -> list[list[str]]:
    """The pools of ``plan`` as stages: the pools of one stage roll at once (each in its own
    window), a stage starts when the previous one finished. ``sequential``: one pool per stage
    in plan order; ``parallel``: one stage with every pool; ``masters-first``: the master pool,
    then the rest together (just the rest when there is no master pool)."""
    names = [p.name for p in plan.pools]
    if plan.pool_order == PoolOrder.PARALLEL:
        return [names] if names else []
    if plan.pool_order == PoolOrder.MASTERS_FIRST:
        rest = [n for n in names if n != "master"]
        return [s for s in (["master"] if "master" in names else [], rest) if s]
    return [[n] for n in names]
