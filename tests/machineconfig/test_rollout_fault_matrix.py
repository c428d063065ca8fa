"""The fault matrix of the MachineConfig rollout, judged by the simulator's own view
(tests/support/faultmatrix.py, issue 39): at each mutating step an abort while its first request is held,
a refusal of that request, and the worker SIGKILLed while it is held (then an abort).

A generated pool ``worker`` of three nodes rolled one at a time (maxUnavailable 1). Mutating
steps, in the order the rollout takes them (the first write to each node, its
``desiredConfig``):

- ``first-node``: worker-0000's first PATCH;
- ``second-node``: worker-0001's first PATCH, after worker-0000 is on the new rendered config;
- ``evict``: the first eviction of worker-0000's drain (the node cordoned, its pods going).

:func:`test_rollout_matrix_covers_every_write` checks that these are every kind of write a happy
rollout sends (tests/support/faultmatrix.py, :func:`tests.support.faultmatrix.assert_covers`).

The rollout keeps no records and has no point of no return: a node before its drain hand-off is
rolled back (``desiredConfig`` back to ``currentConfig``, uncordoned if this run cordoned it); a
node the daemon already updated stays updated. So an abort at ``first-node`` ends with the
cluster as it was; otherwise the outcome's ``left_changed`` names exactly what the simulator
sees changed (each node the daemon already updated; after a worker kill the node in flight
finishes its handshake before the abort arrives), with the command that rolls them back.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from clustersim import traps
from tests.support.harness import fast_timings, worker_pool_scenario
from tests.support.faultmatrix import Case, Step, World, check_coverage, judge, matrix_params, run_case
from workflows.machineconfig.models import MachineConfigRolloutInput, MachineConfigRolloutResult

pytestmark = pytest.mark.e2e

SCALE = 0.05
DOCUMENTED: list[str] = []

STEPS = {
    "first-node": Step("first-node", traps.api("patch", "nodes", name="worker-0000")),
    "second-node": Step("second-node", traps.api("patch", "nodes", name="worker-0001")),
    "evict": Step("evict", traps.api("create", "pods", subresource="eviction")),
}


#: Kinds of write that fall inside a step above (kind -> (step, why)).
WITHIN: dict[str, tuple[str, str]] = {}


#: The activity timeouts of the matrix's runs (seconds): a kill-then-abort case waits for the
#: killed worker's call to time out before its run moves on; short ones, as in the crash matrix
#: (the calls themselves take milliseconds), keep that wait short.
KILL_RECOVERY = {"short_call_seconds": 6, "heartbeat_seconds": 5}


def begin_rollout(temporal_client: Any, task_queue: str) -> Any:
    async def begin() -> Any:
        return await temporal_client.start_workflow(
            "MachineConfigRolloutWorkflow",
            MachineConfigRolloutInput(cluster=f"fm-{uuid.uuid4().hex[:6]}", pools=["worker"], max_unavailable=1,
                                      approvals={"requested_by": "fault-matrix"}, calls=KILL_RECOVERY, **fast_timings(SCALE)),
            id=f"rollout-fm-{uuid.uuid4().hex[:8]}", task_queue=task_queue, result_type=MachineConfigRolloutResult,
        )
    return begin


@pytest.mark.timeout(300)
async def test_rollout_matrix_covers_every_write(sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str) -> None:
    """Every kind of write a happy rollout sends is a step above (tests/support/faultmatrix.py)."""
    sim = await sim_factory(worker_pool_scenario(3, "rollout-fm"), time_scale=SCALE)
    world = World(sim=sim, client=temporal_client, worker=await worker_for(sim))
    await check_coverage(world, begin_rollout(temporal_client, task_queue), STEPS, WITHIN)


@pytest.mark.timeout(420)
@pytest.mark.parametrize(("step", "case"), matrix_params(STEPS))
async def test_rollout_fault_matrix(step: str, case: Case, sim_factory: Any, worker_for: Any, temporal_client: Any,
                                    task_queue: str) -> None:
    sim = await sim_factory(worker_pool_scenario(3, "rollout-fm"), time_scale=SCALE)
    worker = await worker_for(sim)
    world = World(sim=sim, client=temporal_client, worker=worker)

    cr = await run_case(world, begin_rollout(temporal_client, task_queue), STEPS[step], case, ignore=DOCUMENTED)
    print("\n".join([f"{step}/{case}: {cr.outcome} {(cr.result or {}).get('message') or cr.failure or ''}", *cr.log]))
    judge(cr)
    if step == "first-node" and case == Case.ABORT:  # aborted before its hand-off: rolled back, nothing changed
        assert cr.outcome == "aborted" and cr.diff is not None and cr.diff.empty, f"{step}/{case}: not rolled back: {cr.log}"
    if cr.outcome == "aborted" and cr.left_changed:  # what stays changed comes with the command that rolls it back
        assert any("--target worker=" in c for c in cr.result["next_commands"]), cr.result
