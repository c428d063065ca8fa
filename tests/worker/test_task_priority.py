"""Issue 40: on one worker with few activity slots, a priority-1 procedure's first activity runs
before the activities a rollout queued ahead of it.

Order of events only, never wall time. The probe workflows run one activity each and set no
priority of their own: the activity inherits the run's, which is what
:func:`lockkeeper.starter.run_priority` gives a real start of that procedure (its spec's key, the
cluster as fairness key). The server orders a task queue partition's backlog by priority key, so
the private dev server here has one partition (with the default four, each partition is ordered
on its own and the urgent task goes first only in its own partition).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from lockkeeper.starter import run_priority
from workflows.registry import PROCEDURES
from workflows.kit.spec import spec_by_name

ONE_PARTITION = {"matching.numTaskqueueReadPartitions": "1", "matching.numTaskqueueWritePartitions": "1"}
QUEUED = 6

ran: list[str] = []


@activity.defn(name="priority_probe_step")
async def step(name: str) -> None:
    ran.append(name)
    await asyncio.sleep(0.05)


@workflow.defn(name="PriorityProbeWorkflow")
class PriorityProbeWorkflow:
    @workflow.run
    async def run(self, name: str) -> None:
        await workflow.execute_activity(step, name, start_to_close_timeout=timedelta(seconds=30))


async def test_an_urgent_procedure_overtakes_a_queued_rollout(dev_server_factory: Any) -> None:
    server = await dev_server_factory(dynamic_config=ONE_PARTITION)
    client = await Client.connect(server.address, namespace=server.namespace)
    tq = f"prio-{uuid.uuid4().hex[:8]}"
    rollout, backup = spec_by_name(PROCEDURES, "machineconfig-rollout"), spec_by_name(PROCEDURES, "etcd-backup")
    assert (rollout.priority, backup.priority) == (3, 1)
    ran.clear()

    async def start(name: str, spec: Any, cluster: str) -> Any:
        return await client.start_workflow(PriorityProbeWorkflow.run, name, id=f"{name}-{tq}", task_queue=tq,
                                           priority=run_priority(spec, cluster))

    async def scheduled(handles: list[Any]) -> None:  # every run's activity is in the queue's backlog
        for h in handles:
            while not (await h.describe()).raw_description.pending_activities:
                await asyncio.sleep(0.05)

    # The workflows alone first (no activity slots): every activity waits in the queue.
    async with Worker(client, task_queue=tq, workflows=[PriorityProbeWorkflow], activities=[],
                      workflow_runner=UnsandboxedWorkflowRunner()):
        lows = [await start(f"rollout-{i}", rollout, "big") for i in range(QUEUED)]
        await scheduled(lows)
        urgent = await start("etcd-backup", backup, "other")
        await scheduled([urgent])
        desc = await urgent.describe()
        assert desc.raw_description.pending_activities[0].priority.priority_key in (0, 1)  # 0: inherited
        # One slot: the activities run one at a time, in the order the server hands them out.
        async with Worker(client, task_queue=tq, activities=[step], max_concurrent_activities=1):
            for h in [*lows, urgent]:
                await h.result()
    assert ran[0] == "etcd-backup", ran
    assert sorted(ran[1:]) == [f"rollout-{i}" for i in range(QUEUED)]


def test_every_procedure_has_its_kind_priority_and_the_cluster_as_fairness_key() -> None:
    by_name = {s.name: s.priority for s in PROCEDURES}
    assert {n for n, p in by_name.items() if p == 1} == {"etcd-backup", "etcd-restore", "drain", "gluster-recovery"}
    assert {n for n, p in by_name.items() if p == 2} == {"control-plane-upgrade", "network-migration", "cluster-upgrade", "campaign",
                                                         "revert-records"}
    assert all(p in (1, 2, 3) for p in by_name.values())
    p = run_priority(spec_by_name(PROCEDURES, "drain"), "prod-east")
    assert (p.priority_key, p.fairness_key, p.fairness_weight) == (1, "prod-east", None)
    assert len(run_priority(PROCEDURES[0], "c" * 100).fairness_key.encode()) == 64  # the server's limit
