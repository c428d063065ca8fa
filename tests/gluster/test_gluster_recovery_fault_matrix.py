"""The fault matrix of the GlusterFS recovery (R3a, ``lockkeeper start gluster-recovery``) on
``r3-okd310-upgrade`` (seed 002: the registry volume's brick on 10.0.0.12 is offline), judged by
the simulator's own view (tests/support/faultmatrix.py, issue 39): at its mutating step an abort while
its first request is held, a refusal of that request, and the worker SIGKILLed while it is held
(then an abort).

Mutating steps (workflows/gluster/workflow.py): the recovery has one kind of write, the delete of
a host's GlusterFS pod after gate ``delete/<host>`` (its DaemonSet starts a new one, whose
bricks come online):

- ``delete-pod``: the DELETE of ``glusterfs-storage-r24wg`` on master03 (10.0.0.12).

The recovery keeps no records and has no point of no return: a deleted pod stays deleted (its
DaemonSet replaces it). So the run must end completed, or its ``left_changed`` must name exactly
what the simulator sees changed.

Documented changes (ignored in the diff): none.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from clustersim import traps
from tests.support.faultmatrix import Case, Step, World, check_coverage, judge, matrix_params, run_case
from workflows.gluster import GlusterRecoveryWorkflow
from workflows.gluster.models import GlusterHealthParams, GlusterRecoveryInput, GlusterRecoveryResult

pytestmark = pytest.mark.e2e

SCALE = 0.05
SEED_POD = "glusterfs-storage-r24wg"
DOCUMENTED: list[str] = []

STEPS = {
    "delete-pod": Step("delete-pod", traps.api("delete", "pods", name=SEED_POD)),
}

#: (step, case) -> why it does not pass as the procedure is today (what the run showed).
XFAIL: dict[tuple[str, Case], str] = {}



#: Kinds of write that fall inside a step above (kind -> (step, why)).
WITHIN: dict[str, tuple[str, str]] = {}


async def setup(sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str) -> tuple[World, Any]:
    """The matrix's world (R3, the brick fault on) and its start."""
    sim = await sim_factory("r3-okd310-upgrade", time_scale=SCALE)
    worker = await worker_for(sim)
    inp = GlusterRecoveryInput(approvals={"requested_by": "fault-matrix"}, reread_delay_seconds=1, calls={"short_call_seconds": 5},
                               command_timeout_seconds=20,
                               heal=GlusterHealthParams(interval_seconds=1, max_interval_seconds=2, timeout_seconds=120,
                                                        stall_after_seconds=60))

    async def begin() -> Any:
        return await temporal_client.start_workflow(GlusterRecoveryWorkflow.run, inp, id=f"gluster-recovery-fm-{uuid.uuid4().hex[:8]}",
                                                    task_queue=task_queue, result_type=GlusterRecoveryResult)

    return World(sim=sim, client=temporal_client, worker=worker), begin


@pytest.mark.timeout(300)
async def test_gluster_recovery_matrix_covers_every_write(sim_factory: Any, worker_for: Any, temporal_client: Any,
                                                          task_queue: str) -> None:
    """Every kind of write a happy GlusterFS recovery sends is a step above (tests/support/faultmatrix.py)."""
    world, begin = await setup(sim_factory, worker_for, temporal_client, task_queue)
    await check_coverage(world, begin, STEPS, WITHIN)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("step", "case"), matrix_params(STEPS, XFAIL))
async def test_gluster_recovery_fault_matrix(step: str, case: Case, sim_factory: Any, worker_for: Any, temporal_client: Any,
                                             task_queue: str) -> None:
    world, begin = await setup(sim_factory, worker_for, temporal_client, task_queue)
    cr = await run_case(world, begin, STEPS[step], case, ignore=DOCUMENTED)
    print("\n".join([f"{step}/{case}: {cr.outcome} {(cr.result or {}).get('message') or cr.failure or ''}", *cr.log]))
    judge(cr)
