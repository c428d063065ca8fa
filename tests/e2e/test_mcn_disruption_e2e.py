"""Issue 41 end to end (dev server + clustersim r1-ocp421): node disruption policies."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.e2e.harness import drive
from tests.e2e.test_upgrade_cli_e2e import lk
from workflows.machineconfig.models import MachineConfigRolloutResult

pytestmark = pytest.mark.e2e

SCALE = 0.05
REGISTRIES_ONLY = "rendered-worker-f545564a866bce772bf3fb8e1a72a29d"


@pytest.mark.timeout(300)
async def test_registries_d_rollout_drains_nothing_and_reboots_nothing(dev_server: Any, sim_factory: Any, worker_for: Any,
                                                                       temporal_client: Any, task_queue: str) -> None:
    sim = await sim_factory("r1-ocp421", time_scale=SCALE)
    await worker_for(sim)
    boots = {n["metadata"]["name"]: n["status"]["nodeInfo"]["bootID"] for n in sim.store.list("nodes")}
    cluster = f"mcn-{uuid.uuid4().hex[:6]}"
    base = ("start", "machineconfig-rollout", "--pool", "worker", "--cluster", cluster, "--target", f"worker={REGISTRIES_ONLY}")
    code, out, err = await lk(dev_server, task_queue, *base, "--dry-run")
    print(out, err)
    code, out, err = await lk(dev_server, task_queue, *base, "--dry-run", "-o", "json")
    print(out, err)
    sim.requests.clear()
    code, out, err = await lk(dev_server, task_queue, *base, "--decide-after", "60")
    assert code == 0, (out, err)
    print(out)
    handle = temporal_client.get_workflow_handle(out.splitlines()[0].strip(), result_type=MachineConfigRolloutResult)
    result = await drive(handle, timeout=240)
    print(result)
    assert result.outcome == "completed", result.message
    evictions = sim.requests.entries(verb="create", subresource="eviction")
    print(len(evictions))
    print({n["metadata"]["name"]: n["status"]["nodeInfo"]["bootID"] == boots[n["metadata"]["name"]] for n in sim.store.list("nodes")})
