"""Issue 16: pool order. ``parallel`` rolls every pool at once, each within its own
maxUnavailable (the machine-config-controller's behaviour); ``masters-first`` rolls the master
pool alone, then the others at once; ``sequential`` (the default) one pool after the other."""

from __future__ import annotations

import asyncio
import uuid

from tests.support.wf_fakes import FakeCluster, rollout_worker

from workflows import MachineConfigRolloutWorkflow
from workflows.kit.models import NodePhase
from workflows.machineconfig.models import (
    MachineConfigRolloutInput,
    MachineConfigRolloutResult,
    PoolOrder,
    RolloutPlan,
    PoolPlan,
)
from workflows.machineconfig.plan import pool_stages


class PoolTrackingCluster(FakeCluster):
    """FakeCluster that also records the most nodes updating at once per pool, and the order in
    which pools first and last had a node updating."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.max_per_pool: dict[str, int] = {}
        self.first_update: dict[str, int] = {}
        self.last_update: dict[str, int] = {}
        self.ticks = 0

    def _track(self) -> None:
        super()._track()
        self.ticks += 1
        for pool, names in self.pools.items():
            busy = len([n for n in names if n in self.updating])
            self.max_per_pool[pool] = max(self.max_per_pool.get(pool, 0), busy)
            if busy:
                self.first_update.setdefault(pool, self.ticks)
                self.last_update[pool] = self.ticks


def _input(**kw) -> MachineConfigRolloutInput:
    return MachineConfigRolloutInput(
        cluster=f"c-{uuid.uuid4().hex[:8]}", search_attributes=False, approvals={"requested_by": "alice"},
        daemon={"wait_activity_timeout_seconds": 5}, drain={"wait_seconds": 1}, **kw,
    )


def _plan(order: PoolOrder, *names: str) -> RolloutPlan:
    return RolloutPlan(
        pools=[PoolPlan(name=n, target_config="c", size=1, max_unavailable=1, capacity=1) for n in names], pool_order=order
    )


def test_pool_stages():
    assert pool_stages(_plan(PoolOrder.SEQUENTIAL, "master", "infra", "worker")) == [["master"], ["infra"], ["worker"]]
    assert pool_stages(_plan(PoolOrder.PARALLEL, "master", "infra", "worker")) == [["master", "infra", "worker"]]
    assert pool_stages(_plan(PoolOrder.MASTERS_FIRST, "master", "infra", "worker")) == [["master"], ["infra", "worker"]]
    assert pool_stages(_plan(PoolOrder.MASTERS_FIRST, "infra", "worker")) == [["infra", "worker"]]
    assert pool_stages(_plan(PoolOrder.PARALLEL)) == []


async def _roll(env, tq: str, fake: PoolTrackingCluster, order: PoolOrder, max_unavailable: int = 1):
    """Run the rollout, polling status; returns (result, the largest current_pools seen)."""
    seen: list[str] = []
    async with rollout_worker(env.client, fake, tq):
        handle = await env.client.start_workflow(
            MachineConfigRolloutWorkflow.run, _input(max_unavailable=max_unavailable, pool_order=order),
            id=f"rollout-{uuid.uuid4().hex[:8]}", task_queue=tq, result_type=MachineConfigRolloutResult,
        )
        result_task = asyncio.ensure_future(handle.result())
        while not result_task.done():
            st = await handle.query(MachineConfigRolloutWorkflow.status)
            if len(st.current_pools) > len(seen):
                seen = list(st.current_pools)
            await asyncio.sleep(0.02)
        return await result_task, seen


async def test_parallel_pools_each_in_its_own_window(time_skipping_env, wf_task_queue):
    fake = PoolTrackingCluster({"master": 2, "infra": 2, "worker": 3}, reboot_polls=4)
    result, seen = await _roll(time_skipping_env, wf_task_queue, fake, PoolOrder.PARALLEL)
    assert result.outcome == "completed" and result.summary.done == 7
    assert all(r.phase == NodePhase.DONE for r in result.nodes.values())
    assert result.plan.pool_order == PoolOrder.PARALLEL
    # Never more than maxUnavailable=1 per pool, but the pools overlapped.
    assert fake.max_per_pool == {"master": 1, "infra": 1, "worker": 1}
    assert fake.max_in_flight >= 2
    assert sorted(seen) == ["infra", "master", "worker"]


async def test_masters_first_then_the_rest_together(time_skipping_env, wf_task_queue):
    fake = PoolTrackingCluster({"master": 2, "infra": 2, "worker": 2}, reboot_polls=4)
    result, _ = await _roll(time_skipping_env, wf_task_queue, fake, PoolOrder.MASTERS_FIRST)
    assert result.outcome == "completed" and result.summary.done == 6
    assert fake.last_update["master"] < min(fake.first_update["infra"], fake.first_update["worker"])
    assert fake.max_per_pool == {"master": 1, "infra": 1, "worker": 1}
    assert fake.max_in_flight == 2  # infra and worker together, one node each


async def test_sequential_is_the_default_and_never_overlaps(time_skipping_env, wf_task_queue):
    assert MachineConfigRolloutInput().pool_order == PoolOrder.SEQUENTIAL
    fake = PoolTrackingCluster({"master": 2, "worker": 2}, reboot_polls=2)
    result, seen = await _roll(time_skipping_env, wf_task_queue, fake, PoolOrder.SEQUENTIAL)
    assert result.outcome == "completed" and result.plan.pool_order == PoolOrder.SEQUENTIAL
    assert fake.max_in_flight == 1 and len(seen) == 1
    assert fake.last_update["master"] < fake.first_update["worker"]
