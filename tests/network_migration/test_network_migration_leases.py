"""NetworkMigrationWorkflow's leases on a time-skipping server (fake cluster of
test_network_migration_wf.py): ``sdn/<cluster>`` from the first write, ``cluster/<cluster>``
(covering every pool and node) from the pause of the pools on. A second migration, and a
procedure taking a rollout's scopes (pool and node leases, probing the cluster lease), are
refused naming the holder, whichever starts second."""

from __future__ import annotations

import asyncio

import uuid
from typing import Any

import pytest
from temporalio.service import RPCError
from tests.support.kit_probes import AlphaLeaseProbeWorkflow, ProbeInput, ProbeResult
from temporalio.client import WorkflowFailureError
from temporalio.worker import Worker
from tests.network_migration.test_network_migration_wf import Cluster, FakeRollout, inp

from workflows.kit.lease import LeaseWorkflow
from workflows.kit.models import ApproveInput, ControlInput
from workflows.kit.scopes import scopes_overlap
from workflows.network_migration import NetworkMigrationWorkflow
from workflows.network_migration.models import NetworkMigrationResult

pytestmark = pytest.mark.timeout(120)

ROLLOUT_SCOPES = ["pool/x/worker", "node/x/w1", "node/x/w2"]  # what a MachineConfig rollout of pool worker takes


def worker(env: Any, c: Cluster, tq: str) -> Worker:
    return Worker(env.client, task_queue=tq, workflows=[NetworkMigrationWorkflow, FakeRollout, LeaseWorkflow, AlphaLeaseProbeWorkflow],
                  activities=c.activities())


async def poll(env: Any, h: Any, pred: Any) -> dict[str, Any]:
    """Query ``status`` until ``pred`` holds; between queries the server's time moves 5 s."""
    for _ in range(200):
        st = await h.query("status", result_type=dict)
        if pred(st):
            return st
        await env.sleep(5)
    raise AssertionError(f"condition not reached; last status: {st}")


async def update(h: Any, name: str, arg: Any) -> Any:
    """``execute_update``, sent again when the server lost it ("update … not found": the test
    server drops an update whose workflow task timed out, which a loaded machine can cause, and
    one that closed its workflow in the task that accepted it: then None, and the caller checks
    the workflow's result)."""
    from temporalio.service import RPCError, RPCStatusCode

    from temporalio.client import WorkflowExecutionStatus

    for attempt in range(5):
        try:
            return await h.execute_update(name, arg)
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND or "update" not in exc.message:
                raise
            if (await h.describe()).status != WorkflowExecutionStatus.RUNNING:
                return None  # the update closed the workflow in its own task: the caller checks the result
            if attempt == 4:
                raise
            await asyncio.sleep(0.5 * (attempt + 1))


async def start(env: Any, tq: str, **kw: Any) -> Any:
    i = inp("x").model_copy(update=kw)
    return await env.client.start_workflow(NetworkMigrationWorkflow.run, i, id=f"network-migration-x-{uuid.uuid4().hex[:6]}",
                                           task_queue=tq, result_type=NetworkMigrationResult)


async def test_second_migration_is_refused_naming_the_first(time_skipping_env, wf_task_queue):
    env, c = time_skipping_env, Cluster(controller_dead=True)
    async with worker(env, c, wf_task_queue):
        first = await start(env, wf_task_queue, stall_seconds=1e6, poll_seconds=300)  # waits for the pools, holding sdn/x
        st = await poll(env, first, lambda s: s["step"] == "wait-pools")
        assert st["leases"] == ["sdn/x"]
        writes = list(c.writes)
        second = await start(env, wf_task_queue)
        result = await second.result()
        assert result.outcome == "refused" and result.lease_holder == first.id
        assert f"sdn on cluster x is held by migration {first.id}" in result.message and "nothing was changed" in result.message
        assert c.writes == writes, "the second run wrote nothing"
        await update(first, "abort", ControlInput(identity="op", reason="test over"))
        assert (await first.result()).outcome == "aborted"


async def test_rollout_scopes_free_while_waiting_then_refused_under_the_cluster_lease(time_skipping_env, wf_task_queue):
    env, c = time_skipping_env, Cluster()
    assert not any(scopes_overlap("sdn/x", s) for s in ROLLOUT_SCOPES), "the scope rules: pool and node scopes miss sdn/x"
    async with worker(env, c, wf_task_queue):
        h = await start(env, wf_task_queue)
        st = await poll(env, h, lambda s: any(g["id"] == "cleanup" and g["state"] == "waiting" for g in s["gates"]))
        assert {"sdn/x", "cluster/x", "pool/x/worker", "node/x/w1", "node/x/m1"} <= set(st["leases"])
        rollout = await env.client.start_workflow(AlphaLeaseProbeWorkflow.run, ProbeInput(cluster="x", scopes=ROLLOUT_SCOPES),
                                                  id=f"rollout-x-{uuid.uuid4().hex[:6]}", task_queue=wf_task_queue, result_type=ProbeResult)
        # In real time: the migration waits at its gate with no timer, so a time-skipping wait
        # would jump to its execution timeout (ten years on) if the probe were slow to fail.
        with env.auto_time_skipping_disabled(), pytest.raises(WorkflowFailureError) as refused:
            await rollout.result()
        cause = refused.value.cause
        assert getattr(cause, "type", None) == "LeaseHeld" and h.id in str(cause), cause
        await update(h, "approve", ApproveInput(gate_id="cleanup", identity="op"))
        result = await h.result()
    assert result.outcome == "completed", result.message
    assert c.switch_when_settled == [True]


async def test_migration_refused_at_the_switch_by_a_rollout_holding_a_pool(time_skipping_env, wf_task_queue):
    """The rollout's scopes do not overlap sdn/x, so it may start while the migration waits for
    the pools; the migration is then refused when it takes the cluster lease, before any pause
    or switch."""
    env, c = time_skipping_env, Cluster(controller_dead=True)
    async with worker(env, c, wf_task_queue):
        h = await start(env, wf_task_queue)
        await poll(env, h, lambda s: s["step"] == "wait-pools")
        rollout = await env.client.start_workflow(AlphaLeaseProbeWorkflow.run, ProbeInput(cluster="x", scopes=ROLLOUT_SCOPES, hold_seconds=None),
                                                  id=f"rollout-x-{uuid.uuid4().hex[:6]}", task_queue=wf_task_queue, result_type=ProbeResult)
        await poll(env, rollout, lambda s: s["leases"] == ROLLOUT_SCOPES)
        await poll(env, h, lambda s: any(g["id"] == "takeover" and g["state"] == "waiting" for g in s["gates"]))
        await update(h, "approve", ApproveInput(gate_id="takeover", identity="op"))
        result = await h.result()
        try:
            await rollout.terminate("test over")
        except RPCError:
            pass  # cleanup only: the probe may have ended on its own already
    assert result.outcome == "refused" and result.lease_holder == rollout.id, result.message
    assert "spec.migration stays set" in result.message
    assert c.switch_when_settled == [] and not any(c.paused.values()), "no pause, no switch"
    assert c.migration == "OVNKubernetes"
