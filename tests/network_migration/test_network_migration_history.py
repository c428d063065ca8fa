"""The run that produces the network migration's stored history (test_replay.py replays it), on
the time-skipping server with the fake cluster of test_network_migration_wf.py.

The run takes every branch a migration records: both leases, the
stall and the takeover child, the guard before the pause and before the switch, the pause, the
switch, multus, the reboots in batches, the unpause, the broken-pods gate and its deletion, the
cleanup gate and the cleanup. With ``LOCKKEEPER_WRITE_HISTORY=1`` it stores the history
(tests/support/replay.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.replay import recording, store
from temporalio import activity
from temporalio.worker import Worker
from tests.network_migration.test_network_migration_wf import Cluster, FakeRollout, inp

from activities.cluster.models import DeleteAllPodsInput, DeleteAllPodsResult
from activities.network_migration.models import MigrationState, MigrationStateInput
from workflows.kit.lease import LeaseWorkflow
from workflows.kit.models import ApproveInput
from workflows.network_migration import NetworkMigrationWorkflow
from workflows.network_migration.models import NetworkMigrationResult

pytestmark = pytest.mark.timeout(180)

HISTORY_ID = "network-migration-history"


class BrokenPodsCluster(Cluster):
    """Two pods keep stale IPs after the switch until all pods are deleted."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.deleted_all = False

    @activity.defn(name="read_migration_state")
    async def read_migration_state(self, input: MigrationStateInput) -> MigrationState:
        self.roll_one()
        state = self.state()
        if input.count_pods and self.status_type == "OVNKubernetes" and not self.deleted_all:
            state.broken_pods = ["shop/api-1", "shop/frontend-2"]
            state.broken_pod_count = 2
        return state

    @activity.defn(name="delete_all_pods")
    async def delete_all_pods(self, input: DeleteAllPodsInput) -> DeleteAllPodsResult:
        self.deleted_all = True
        return DeleteAllPodsResult(deleted=2)


async def test_full_migration_with_takeover_records_its_history(time_skipping_env, wf_task_queue):
    env, c = time_skipping_env, BrokenPodsCluster(controller_dead=True)
    async with Worker(env.client, task_queue=wf_task_queue, workflows=[NetworkMigrationWorkflow, FakeRollout, LeaseWorkflow],
                      activities=c.activities()):
        h = await env.client.start_workflow(NetworkMigrationWorkflow.run, inp("h"), id=HISTORY_ID, task_queue=wf_task_queue,
                                            result_type=NetworkMigrationResult)
        for gate in ("takeover", "delete-broken-pods", "cleanup"):
            for _ in range(200):  # time moves only while the test sleeps on the server
                st = await h.query("status", result_type=dict)
                if any(x["id"] == gate and x["state"] == "waiting" for x in st["gates"]):
                    break
                await env.sleep(5)
            await h.execute_update("approve", ApproveInput(gate_id=gate, identity="op", comment="history"))
        result = await h.result()
        history = await h.fetch_history()
        if recording():
            await store(history, "NetworkMigrationWorkflow.takeover-and-reboots")
    children = [e.start_child_workflow_execution_initiated_event_attributes for e in history.events
                if e.HasField("start_child_workflow_execution_initiated_event_attributes")]
    started = [(a.workflow_type.name, a.workflow_id) for a in children]
    assert started[0] == ("LeaseWorkflow", "lease/h/@sdn"), "the sdn lease before the first write"
    assert ("MachineConfigRolloutWorkflow", f"{HISTORY_ID}/takeover-1") in started
    assert ("LeaseWorkflow", "lease/h/@cluster") in started
    assert started.index(("MachineConfigRolloutWorkflow", f"{HISTORY_ID}/takeover-1")) < started.index(("LeaseWorkflow", "lease/h/@cluster"))
    assert result.outcome == "completed" and result.cleaned_up, result.message
    assert c.child_runs and c.switch_when_settled == [True] and c.deleted_all
    assert sorted(c.reboots) == sorted(c.current)
