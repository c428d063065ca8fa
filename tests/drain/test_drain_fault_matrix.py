"""The fault matrix of the standalone drain (``lockkeeper start drain``), judged by the
simulator's own view (tests/support/faultmatrix.py, issue 39): at each mutating step an abort while its
first request is held, a refusal of that request, and the worker SIGKILLed while it is held (then
an abort).

Mutating steps, in the order the procedure takes them (workflows/drain/workflow.py):

- ``cordon``: the node's PATCH that sets ``spec.unschedulable`` and ``lockkeeper.io/cordoned-by``;
- ``evict``: the first eviction of one of its pods (``POST pods/eviction``).

The drain keeps no records and has no point of no return: an abort uncordons the node when this
run cordoned it, so every case must end with the node as it was. An evicted pod is not put back
(its ReplicaSet starts a replacement elsewhere): documented, the pods of the drained node's
owners are ignored in the diff.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from clustersim import traps
from clustersim.scenario import generate_scenario
from tests.support.faultmatrix import Case, Step, World, check_coverage, judge, matrix_params, run_case
from workflows.drain.models import NodeDrainInput, NodeDrainResult

pytestmark = pytest.mark.e2e

NODE = "worker-0000"
#: The evicted pods' replacements (an eviction is not undone; the workload owns its pods).
DOCUMENTED: list[str] = []

STEPS = {
    "cordon": Step("cordon", traps.api("patch", "nodes", name=NODE)),
    "evict": Step("evict", traps.api("create", "pods", subresource="eviction")),
}


def scenario() -> Any:
    return generate_scenario(nodes=2, pods=4, pools={"worker": 2}, name="drain-fm", pod_start_seconds=1,
                             namespaces=1, pods_per_deployment=2)


#: The activity timeouts of the matrix's runs (seconds): a kill-then-abort case waits for the
#: killed worker's call to time out before its run moves on; short ones, as in the crash matrix
#: (the calls themselves take milliseconds), keep that wait short.
KILL_RECOVERY = {"short_call_seconds": 6, "heartbeat_seconds": 5}


#: Kinds of write that fall inside a step above (kind -> (step, why)).
WITHIN: dict[str, tuple[str, str]] = {}


async def setup(sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str) -> tuple[Any, World, Any]:
    """The matrix's simulator, world and start."""
    sim = await sim_factory(scenario(), time_scale=0.05)
    worker = await worker_for(sim)

    async def begin() -> Any:
        return await temporal_client.start_workflow(
            "NodeDrainWorkflow",
            NodeDrainInput(node=NODE, approvals={"requested_by": "fault-matrix"}, uncordon_after=True,
                           drain={"backoff_initial_seconds": 1, "wait_seconds": 5}, calls=KILL_RECOVERY),
            id=f"drain-fm-{uuid.uuid4().hex[:8]}", task_queue=task_queue, result_type=NodeDrainResult,
        )

    return sim, World(sim=sim, client=temporal_client, worker=worker), begin


@pytest.mark.timeout(300)
async def test_drain_matrix_covers_every_write(sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str) -> None:
    """Every kind of write a happy drain sends is a step above (tests/support/faultmatrix.py)."""
    _sim, world, begin = await setup(sim_factory, worker_for, temporal_client, task_queue)
    await check_coverage(world, begin, STEPS, WITHIN)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("step", "case"), matrix_params(STEPS))
async def test_drain_fault_matrix(step: str, case: Case, sim_factory: Any, worker_for: Any, temporal_client: Any,
                                  task_queue: str) -> None:
    sim, world, begin = await setup(sim_factory, worker_for, temporal_client, task_queue)
    cr = await run_case(world, begin, STEPS[step], case, ignore=DOCUMENTED)
    print("\n".join([f"{step}/{case}: {cr.outcome} {(cr.result or {}).get('message') or cr.failure or ''}", *cr.log]))
    judge(cr)
    node = sim.store.get("nodes", NODE)
    assert not node["spec"].get("unschedulable"), f"{step}/{case}: the node stays cordoned: {cr.log}"
