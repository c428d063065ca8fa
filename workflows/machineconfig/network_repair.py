"""R1 completion: after the pools, repair the pod network of a cluster whose SDN was down.

Field report R1: nodes came back from the MachineConfig rollout, but pods kept their old network.
The repair is: wait until ovnkube-node is Ready on every node (health gate) → the always-present
gate ``delete-all-pods`` (a person approves the disruption) → delete every pod so its controller
recreates it on the repaired network → wait until all pods are Ready again (health gate).
Progress is the status's :class:`NetworkRepairStatus` (stage, polls, what is not ready yet).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import PodsReadyInput, PodsReadyResult
    from workflows.kit import calls as acts
    from workflows.kit.batches import pass_planned_gate
    from workflows.kit.control import Control
    from workflows.kit.gates import Gates
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.kit.inputs import GatePolicy
    from workflows.kit.models import HealthStatus
    from workflows.machineconfig.models import (
        NetworkRepairStatus,
        RolloutPhase,
        RolloutPlan,
    )

OVN_NAMESPACE = "openshift-ovn-kubernetes"
OVNKUBE_NODE_SELECTOR = "app=ovnkube-node"


@dataclass
class RepairContext:
    """What the repair uses of its rollout: ``control`` (abort stops the waits, base phase),
    ``gates`` (the delete-all-pods gate), ``touch`` (status refresh), ``health`` (the status's
    health board), activity ``timeouts``, the polls' ``backoff`` and the input's gate ``policy``."""

    control: Control
    gates: Gates
    touch: Callable[[], None]
    health: dict[str, HealthStatus]
    timeouts: acts.Timeouts
    backoff: Backoff
    policy: GatePolicy


async def _poll_ready(ctx: RepairContext, net: NetworkRepairStatus, stage: str, check: PodsReadyInput) -> bool:
    """Poll ``check_pods_ready`` with a durable backoff timer until ready; False on abort."""
    net.stage = stage

    async def pods_ready() -> Check:
        result: PodsReadyResult = await acts.call(acts.CHECK_PODS_READY, check, PodsReadyResult, timeouts=ctx.timeouts)
        net.polls += 1
        net.not_ready = (result.not_ready + [f"missing on {n}" for n in result.nodes_missing])[:20]
        return Check(ok=result.ready, detail=", ".join(net.not_ready[:5]))

    hs = await wait_until(
        pods_ready,
        name=stage,
        backoff=ctx.backoff,
        stop=lambda: ctx.control.abort,
        board=ctx.health,
        on_poll=lambda _: ctx.touch(),
    )
    return hs.state == "ok"


async def repair_network(ctx: RepairContext, net: NetworkRepairStatus, plan: RolloutPlan) -> None:
    """R1: ovnkube-node Ready on every node → gate delete-all-pods → delete → all Ready.

    Returns early (leaving ``net.stage`` where it stopped) on abort. A rejected or timed-out gate
    pauses the rollout; ``resume`` opens it again.
    """
    control = ctx.control
    control.base_phase = RolloutPhase.COMPLETING
    ctx.touch()
    check = PodsReadyInput(namespace=OVN_NAMESPACE, label_selector=OVNKUBE_NODE_SELECTOR, expect_per_node=True)
    if not await _poll_ready(ctx, net, "wait-ovnkube", check):
        return
    net.ovnkube_ready = True
    net.stage = "gate"
    # The gate is shown as a waiting approval although the base phase is completing.
    control.base_phase = RolloutPhase.RUNNING
    for planned in plan.final_gates:
        while not await pass_planned_gate(
            ctx.gates, planned, timeout_seconds=ctx.policy.timeout_seconds, timeout_outcome=ctx.policy.timeout_outcome,
            on_change=ctx.touch, noun="rollout",
        ):
            ctx.touch()
            if control.abort:
                return
            await workflow.wait_condition(lambda: not control.paused or control.abort)
            if control.abort:
                return
        ctx.touch()
    control.base_phase = RolloutPhase.COMPLETING
    net.stage = "delete-pods"
    ctx.touch()
    listed, deleted = await acts.delete_pods_once([], ctx.timeouts)
    net.pods_listed, net.pods_deleted, net.pods_gone = listed, deleted.deleted, deleted.gone
    if await _poll_ready(ctx, net, "wait-workloads", PodsReadyInput()):
        net.workloads_ready = True
        net.stage = "done"
    ctx.touch()
