"""The fault matrix of the cluster upgrade (R3 composed, ``lockkeeper start cluster-upgrade``) on
``r3-okd310-upgrade``, judged by the simulator's own view (tests/support/faultmatrix.py, issue 39).

The upgrade writes only through its phases, each a child procedure with its own fault matrix
(tests/control_plane/test_control_plane_fault_matrix.py, test_node_upgrade_fault_matrix.py). What this
matrix proves is the composition: a fault in a later phase, after an earlier phase finished,
ends the upgrade with a ``left_changed`` that is exactly the simulator's diff: what the
finished phase changed (it stays finished: an abort does not undo it) plus what the stopped
phase left changed. The plan is the control plane (every master's API manifest) then the infra
nodes with a canary; the steps are the control plane's first write (master01's manifest), in the
first phase, and the canary's first write (its cordon), in the second phase. The phases' other
writes fall inside those (:data:`WITHIN`: each is a step of its phase's own matrix), which
:func:`test_cluster_upgrade_matrix_covers_every_write` checks against a happy run.

Documented changes (ignored in the diff): the controllers' leader lease, which passes to the
next running master as the control plane restarts them (as in the control plane's own matrix).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from clustersim import traps
from tests.control_plane.test_control_plane_fault_matrix import DOCUMENTED as CONTROL_PLANE_DOCUMENTED
from tests.control_plane.test_upgrade_control_plane_e2e import CA, cp_input, r3_without_brick_fault
from tests.node_upgrade.test_upgrade_nodes_e2e import hosts_env, upgrade_input
from tests.support.faultmatrix import Case, Step, World, check_coverage, judge, matrix_params, run_case
from workflows.cluster_upgrade import ClusterUpgradeWorkflow
from workflows.cluster_upgrade.models import ClusterUpgradeInput, ClusterUpgradePlan, ClusterUpgradeResult
from workflows.node_upgrade.models import BatchPolicy

pytestmark = pytest.mark.e2e

SCALE = 0.02
DOCUMENTED: list[str] = list(CONTROL_PLANE_DOCUMENTED)  # the leader lease, as in the control plane's own matrix

STEPS = {
    "infra-canary-cordon": Step("infra-canary-cordon", traps.api("patch", "nodes", name="node01.example.com")),
    "first-manifest": Step("first-manifest", traps.host(r"^tee /etc/origin/node/pods/apiserver.yaml", host="master01.example.com",
                                                        stderr="tee: Permission denied\n", exit_code=1)),
}

#: (step, case) -> why it does not pass as the procedure is today (what the run showed).
XFAIL: dict[tuple[str, Case], str] = {}


#: Kinds of write that fall inside a step above (kind -> (step, why)).
#: The phases' own writes are each a step of the phase's own matrix
#: (test_control_plane_fault_matrix.py, test_node_upgrade_fault_matrix.py); here they fall inside
#: the phase's first step, which proves the composition.
WITHIN: dict[str, tuple[str, str]] = {
    "host: mkdir /etc/origin/node/pods": ("first-manifest", "the control-plane phase's ``mkdir -p`` before each manifest"),
    "host: master-restart api": ("first-manifest", "the control-plane phase's restart of each master's API "
                                                   "(test_control_plane_fault_matrix.py: restart-api)"),
    "host: master-restart controllers": ("first-manifest", "the control-plane phase's restart of each master's controllers "
                                                           "(test_control_plane_fault_matrix.py: restart-controllers)"),
    "create pods/eviction": ("infra-canary-cordon", "the infra phase's drains, begun by each cordon "
                                                    "(test_node_upgrade_fault_matrix.py: canary-evict)"),
}


async def setup(sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str, tmp_path: Path) -> tuple[World, Any]:
    """The matrix's world (R3 without the brick fault, master01's CA fixed) and its start."""
    sim = await sim_factory(r3_without_brick_fault(), time_scale=SCALE)
    host = sim.components["hosts"].hosts["master01.example.com"]
    host.files[CA] = host.files["/etc/origin/master/ipa-ca.crt"]  # symptom (c) fixed before the snapshot
    worker = await worker_for(sim, env=hosts_env(sim))
    # A killed worker's lost host command (first-manifest) is judged after its heartbeat timeout
    # (the control-plane upgrade's default 30 s): short here, as in test_control_plane_fault_matrix.py.
    plan = ClusterUpgradePlan(control_plane=cp_input(sim, {"heartbeat_seconds": 5, "host_heartbeat_seconds": 5}),
                              infra_nodes=upgrade_input(tmp_path, "region=infra", BatchPolicy(serial="50%", canary=1)))

    async def begin() -> Any:
        return await temporal_client.start_workflow(
            ClusterUpgradeWorkflow.run, ClusterUpgradeInput(plan=plan, search_attributes=False, approvals={"requested_by": "e2e"}),
            id=f"cu-fm-{uuid.uuid4().hex[:8]}", task_queue=task_queue, result_type=ClusterUpgradeResult)

    return World(sim=sim, client=temporal_client, worker=worker), begin


@pytest.mark.timeout(420)
async def test_cluster_upgrade_matrix_covers_every_write(sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str, tmp_path: Path) -> None:
    """Every kind of write a happy cluster upgrade sends is a step above (tests/support/faultmatrix.py)."""
    world, begin = await setup(sim_factory, worker_for, temporal_client, task_queue, tmp_path)
    await check_coverage(world, begin, STEPS, WITHIN)


@pytest.mark.timeout(420)
@pytest.mark.parametrize(("step", "case"), matrix_params(STEPS, XFAIL))
async def test_cluster_upgrade_fault_matrix(step: str, case: Case, sim_factory: Any, worker_for: Any, temporal_client: Any,
                                            task_queue: str, tmp_path: Path) -> None:
    world, begin = await setup(sim_factory, worker_for, temporal_client, task_queue, tmp_path)
    cr = await run_case(world, begin, STEPS[step], case, ignore=DOCUMENTED)
    print("\n".join([f"{step}/{case}: {cr.outcome} {(cr.result or {}).get('message') or cr.failure or ''}", *cr.log]))
    judge(cr)
    if step == "infra-canary-cordon" and cr.outcome != "completed":
        # the finished control-plane phase stays: every master's host is named as upgraded
        targets = {i.target for i in cr.left_changed}
        assert {f"host master0{i}.example.com" for i in (1, 2, 3)} <= targets, cr.left_changed
