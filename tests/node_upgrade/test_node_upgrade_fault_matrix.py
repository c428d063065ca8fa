"""The fault matrix of the node upgrade (R3d, ``lockkeeper start node-upgrade``) on
``r3-okd310-upgrade``, judged by the simulator's own view (tests/support/faultmatrix.py, issue 39): at
each mutating step an abort while its first request is held, a refusal of that request, and the
worker SIGKILLed while it is held (then an abort).

The run is the README's: ``--selector region=infra --serial 50% --canary-count 1`` with the
ansible-playbook stand-in as the node action, after the control plane is on 3.10 (R3's order;
tests/node_upgrade/test_upgrade_nodes_e2e.py). Mutating steps, in the order the procedure takes them
(workflows/node_upgrade/node.py):

- ``canary-cordon``: the canary node01's first write, the cordon (its PATCH);
- ``second-cordon``: node02's cordon, after the canary was upgraded and its gate approved (past
  the middle of the run);
- ``canary-evict``: the first eviction of the canary's drain (node01 cordoned, its pods going).

:func:`test_node_upgrade_matrix_covers_every_write` checks these are every kind of write a happy
run sends (tests/support/faultmatrix.py).

The upgrade keeps no records and has no point of no return: an abort stops before any new node,
a node still draining is rolled back (uncordoned, as this run cordoned it) and an upgraded node
stays upgraded. So the outcome's ``left_changed`` must name exactly what the simulator sees
changed: each node upgraded by this run (its kubelet version and the labels of its new node
group), and each node left cordoned, with ``kubectl uncordon``.

Documented changes (ignored in the diff): pods the drain evicted are replaced by their
workloads elsewhere (an eviction is not undone; the workload owns its pods), so the pods a
drained node's owners run are compared by count only after settling; nothing else.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from clustersim import traps
from tests.node_upgrade.test_upgrade_nodes_e2e import control_plane_on_310, hosts_env, r3_scenario, upgrade_input
from tests.support.faultmatrix import Case, Step, World, check_coverage, judge, matrix_params, run_case
from workflows.node_upgrade import NodeUpgradeWorkflow
from workflows.node_upgrade.models import BatchPolicy, NodeUpgradeResult

pytestmark = pytest.mark.e2e

SCALE = 0.02
DOCUMENTED: list[str] = []

STEPS = {
    "canary-cordon": Step("canary-cordon", traps.api("patch", "nodes", name="node01.example.com")),
    "second-cordon": Step("second-cordon", traps.api("patch", "nodes", name="node02.example.com")),
    "canary-evict": Step("canary-evict", traps.api("create", "pods", subresource="eviction")),
}

#: (step, case) -> why it does not pass as the procedure is today (what the run showed).
XFAIL: dict[tuple[str, Case], str] = {}



#: Kinds of write that fall inside a step above (kind -> (step, why)).
WITHIN: dict[str, tuple[str, str]] = {}


async def setup(sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str, tmp_path: Path) -> tuple[World, Any]:
    """The matrix's world (R3, the control plane on 3.10) and its start."""
    sim = await sim_factory(r3_scenario(), time_scale=SCALE)
    await control_plane_on_310(sim)
    worker = await worker_for(sim, env=hosts_env(sim))
    inp = upgrade_input(tmp_path, "region=infra", BatchPolicy(serial="50%", canary=1))

    async def begin() -> Any:
        return await temporal_client.start_workflow(NodeUpgradeWorkflow.run, inp, id=f"nu-fm-{uuid.uuid4().hex[:8]}",
                                                    task_queue=task_queue, result_type=NodeUpgradeResult)

    return World(sim=sim, client=temporal_client, worker=worker), begin


@pytest.mark.timeout(300)
async def test_node_upgrade_matrix_covers_every_write(sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str,
                                                      tmp_path: Path) -> None:
    """Every kind of write a happy node upgrade sends is a step above (tests/support/faultmatrix.py)."""
    world, begin = await setup(sim_factory, worker_for, temporal_client, task_queue, tmp_path)
    await check_coverage(world, begin, STEPS, WITHIN)


@pytest.mark.timeout(360)
@pytest.mark.parametrize(("step", "case"), matrix_params(STEPS, XFAIL))
async def test_node_upgrade_fault_matrix(step: str, case: Case, sim_factory: Any, worker_for: Any, temporal_client: Any,
                                         task_queue: str, tmp_path: Path) -> None:
    world, begin = await setup(sim_factory, worker_for, temporal_client, task_queue, tmp_path)
    cr = await run_case(world, begin, STEPS[step], case, ignore=DOCUMENTED)
    print("\n".join([f"{step}/{case}: {cr.outcome} {(cr.result or {}).get('message') or cr.failure or ''}", *cr.log]))
    judge(cr)
    if cr.outcome != "completed":  # every node left changed comes with what it is, cordons with their undo
        for item in cr.left_changed:
            if "cordoned" in item.what:
                assert item.undo == f"kubectl uncordon {item.target.removeprefix('Node ')}", item
