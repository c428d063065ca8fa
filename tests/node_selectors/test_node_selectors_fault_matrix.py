"""The fault matrix of the node-selector migration (R3e, ``r3-okd310-upgrade``), judged by the
simulator's own view (tests/support/faultmatrix.py, issue 39): at each mutating step an abort while its
first request is held, a refusal of that request, and the worker SIGKILLed while it is held (then
an abort).

Mutating steps, in the order the procedure takes them (workflows/node_selectors/workflow.py):

- ``selector``: the first workload's nodeSelector patch (DeploymentConfig ``default/docker-registry``);
- ``labels``: the first node's label removal (a Node PATCH), after every workload moved.

The migration records each patch before it writes it and has no point of no return: an abort
anywhere puts back what the records hold (labels, then selectors) and reads it back, so every
case must end restored (the diff empty) or, where a request was refused, completed or restored.
Documented: the record ConfigMap (kept for the revert window) and the DeploymentConfigs'
ReplicationControllers and pods, which a selector change rolls out (a restored selector rolls
them out once more, as a new deployment).
"""

from __future__ import annotations

from typing import Any

import pytest

from clustersim import traps
from tests.node_selectors.test_upgrade_node_selectors_e2e import add_new_labels, migration_input, start
from tests.support.faultmatrix import Case, Step, World, check_coverage, judge, matrix_params, run_case

pytestmark = pytest.mark.e2e

SCALE = 0.02
#: The record ConfigMap, and each DeploymentConfig's deployments: a selector change rolls the
#: DeploymentConfig out (a new ReplicationController ``NAME-N`` takes the pods), and so does the
#: restored selector; the DeploymentConfig itself must read back as it was.
DOCUMENTED = ["ConfigMap/*/lockkeeper-record-*", "ReplicationController/default/docker-registry-*",
              "ReplicationController/default/router-*", "pods/default/ReplicationController/*"]

STEPS = {
    "selector": Step("selector", traps.api("patch", "deploymentconfigs", namespace="default", name="docker-registry")),
    "labels": Step("labels", traps.api("patch", "nodes", name_regex=r"^node0[1-4]\.example\.com$")),
}


#: The activity timeouts of the matrix's runs (seconds; the default short call is 15 s): a
#: kill-then-abort case waits for the killed worker's call to time out before its run moves on;
#: short ones, as in the crash matrix (the calls themselves take milliseconds), keep that short.
KILL_RECOVERY = {"short_call_seconds": 6, "heartbeat_seconds": 5}


#: Kinds of write that fall inside a step above (kind -> (step, why)).
WITHIN: dict[str, tuple[str, str]] = {}


async def setup(sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str) -> tuple[World, Any]:
    """The matrix's world (R3 with the new labels added) and its start."""
    sim = await sim_factory("r3-okd310-upgrade", time_scale=SCALE)
    add_new_labels(sim)
    worker = await worker_for(sim)

    async def begin() -> Any:
        # revert_window_seconds=0: the run ends when done
        return await start(temporal_client, migration_input(revert_window_seconds=0, calls=KILL_RECOVERY), task_queue)

    return World(sim=sim, client=temporal_client, worker=worker), begin


@pytest.mark.timeout(420)
async def test_node_selectors_matrix_covers_every_write(sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str) -> None:
    """Every kind of write a happy node-selector migration sends is a step above (tests/support/faultmatrix.py)."""
    world, begin = await setup(sim_factory, worker_for, temporal_client, task_queue)
    await check_coverage(world, begin, STEPS, WITHIN)


@pytest.mark.timeout(420)
@pytest.mark.parametrize(("step", "case"), matrix_params(STEPS))
async def test_node_selectors_fault_matrix(step: str, case: Case, sim_factory: Any, worker_for: Any, temporal_client: Any,
                                           task_queue: str) -> None:
    world, begin = await setup(sim_factory, worker_for, temporal_client, task_queue)
    cr = await run_case(world, begin, STEPS[step], case, ignore=DOCUMENTED)
    print("\n".join([f"{step}/{case}: {cr.outcome} {(cr.result or {}).get('message') or cr.failure or ''}", *cr.log]))
    judge(cr)
    if case != Case.FAIL or cr.outcome != "completed":
        assert cr.diff is not None and cr.diff.empty, f"{step}/{case}: not restored: {cr.log}"
