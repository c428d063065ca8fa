"""R1 completion: after the pools, repair the pod network of a cluster whose SDN was down.

Field report R1: nodes came back from the MachineConfig rollout, but pods kept their old network.
The repair is: wait until ovnkube-node is Ready on every node (the kit's health wait) → the
always-present gate ``delete-all-pods`` (a person approves the disruption; the kit's planned gate,
:meth:`workflows.kit.batches.NodeBatches.pass_gate`) → delete every pod listed then, by UID, so
its controller recreates it on the repaired network → wait until all pods are Ready again.
Progress is the status's :class:`NetworkRepairStatus` (stage, polls, what is not ready yet).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import PodsReadyInput, PodsReadyResult
    from workflows.kit import calls as acts
    from workflows.kit.health import Backoff, Check, wait_until
    from workflows.machineconfig.models import MachineConfigRolloutInput, NetworkRepairStatus, RolloutPhase, RolloutPlan

if TYPE_CHECKING:
    from workflows.machineconfig.workflow import MachineConfigRolloutWorkflow

OVN_NAMESPACE = "openshift-ovn-kubernetes"
OVNKUBE_NODE_SELECTOR = "app=ovnkube-node"


async def _pods_ready(wf: MachineConfigRolloutWorkflow, input: MachineConfigRolloutInput, net: NetworkRepairStatus, stage: str,
                      check: PodsReadyInput) -> bool:
    """Poll ``check_pods_ready`` with a durable backoff timer until ready (the kit's
    :func:`workflows.kit.health.wait_until`, on the status's health board); False on abort."""
    net.stage = stage

    async def pods_ready() -> Check:
        result: PodsReadyResult = await acts.call(acts.CHECK_PODS_READY, check, PodsReadyResult, timeouts=wf.timeouts)
        net.polls += 1
        net.not_ready = (result.not_ready + [f"missing on {n}" for n in result.nodes_missing])[:20]
        return Check(ok=result.ready, detail=", ".join(net.not_ready[:5]))

    backoff = Backoff(initial=input.network_poll_initial_seconds, maximum=input.network_poll_max_seconds)
    hs = await wait_until(pods_ready, name=stage, backoff=backoff, stop=lambda: wf.control.abort, board=wf.kit_status.health,
                          on_poll=lambda _: wf.touch())
    return hs.state == "ok"


async def repair_network(wf: MachineConfigRolloutWorkflow, input: MachineConfigRolloutInput, net: NetworkRepairStatus,
                         plan: RolloutPlan) -> None:
    """R1: ovnkube-node Ready on every node → gate delete-all-pods → delete → all Ready.

    Returns early (leaving ``net.stage`` where it stopped) on abort. A rejected or timed-out gate
    pauses the rollout; ``resume`` opens it again.
    """
    control = wf.control
    control.base_phase = RolloutPhase.COMPLETING
    wf.touch()
    check = PodsReadyInput(namespace=OVN_NAMESPACE, label_selector=OVNKUBE_NODE_SELECTOR, expect_per_node=True)
    if not await _pods_ready(wf, input, net, "wait-ovnkube", check):
        return
    net.ovnkube_ready = True
    net.stage = "gate"
    # The gate is shown as a waiting approval although the base phase is completing.
    control.base_phase = RolloutPhase.RUNNING
    for planned in plan.final_gates:
        if not await wf.batches.pass_gate(planned):
            return
    control.base_phase = RolloutPhase.COMPLETING
    net.stage = "delete-pods"
    wf.touch()
    listed, deleted = await acts.delete_pods_once([], wf.timeouts)
    net.pods_listed, net.pods_deleted, net.pods_gone = listed, deleted.deleted, deleted.gone
    if await _pods_ready(wf, input, net, "wait-workloads", PodsReadyInput()):
        net.workloads_ready = True
        net.stage = "done"
    wf.touch()
