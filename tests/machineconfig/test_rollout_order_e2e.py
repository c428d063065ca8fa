"""Issue 40 end to end: ``lockkeeper start machineconfig-rollout --order newest-first`` on a
generated worker pool whose nodes were created a second apart (and spread over three zones, so
the default zone-oldest order differs). The dry run's plan and the started command's plan name
the order and list the nodes newest first, and the simulator's own request record shows the
rollout's first write to each Node (its cordon) in that order: the newest node first."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.support.harness import drive, worker_pool_scenario
from tests.cluster_upgrade.test_upgrade_cli_e2e import lk
from workflows.machineconfig.models import MachineConfigRolloutResult

pytestmark = pytest.mark.e2e

SCALE = 0.05
NEWEST_FIRST = ["worker-0003", "worker-0002", "worker-0001", "worker-0000"]


def first_writes(requests: Any) -> list[str]:
    """The Nodes in the order of their first successful PATCH (the rollout's cordon opens each)."""
    first: dict[str, float] = {}
    for e in requests.entries(verb="patch", resource="nodes"):
        if e.code < 300 and e.name not in first:
            first[e.name] = e.time
    return sorted(first, key=lambda n: first[n])


@pytest.mark.timeout(300)
async def test_newest_first_rolls_the_newest_node_first(dev_server: Any, sim_factory: Any, worker_for: Any,
                                                        temporal_client: Any, task_queue: str) -> None:
    sim = await sim_factory(worker_pool_scenario(4, "order-newest-first"), time_scale=SCALE)
    created = {n["metadata"]["name"]: n["metadata"]["creationTimestamp"] for n in sim.store.list("nodes")}
    assert len(set(created.values())) == len(created), created  # distinct creationTimestamps, or the test proves nothing
    await worker_for(sim)
    cluster = f"order-{uuid.uuid4().hex[:6]}"
    base = ("start", "machineconfig-rollout", "--pool", "worker", "--cluster", cluster, "--order", "newest-first")

    code, out, err = await lk(dev_server, task_queue, *base, "--dry-run", "-o", "json")
    assert code == 0, (out, err)
    doc = json.loads(out)
    plan = doc["result"]["plan"]
    assert [c["state"] for c in doc["result"]["preconditions"]] == ["ok"], doc["result"]["preconditions"]  # the pools' check
    assert plan["node_order"] == "newest-first" and plan["pools"][0]["nodes"] == NEWEST_FIRST, plan

    sim.requests.clear()
    code, out, err = await lk(dev_server, task_queue, *base, "--decide-after", "60")
    assert code == 0, (out, err)
    assert "order: newest-first" in out, out
    handle = temporal_client.get_workflow_handle(out.splitlines()[0].strip(), result_type=MachineConfigRolloutResult)
    result = await drive(handle, timeout=240)
    assert result.outcome == "completed", result.message
    assert first_writes(sim.requests) == NEWEST_FIRST
    assert result.plan is not None and result.plan.node_order == "newest-first"
