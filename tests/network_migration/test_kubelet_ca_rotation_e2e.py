"""Issue 41 preflight blocker, end to end: the network migration pauses the MachineConfigPools,
and a paused pool does not receive the rotated kubelet CA. With the kube-apiserver-to-kubelet-signer
(``status.certExpirys`` of the pools) due for rotation within the pause's bound, the migration is
refused before any write, naming the rotation date."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from tests.network_migration.test_network_migration_e2e import MCP, MUTATING, SCALE, fast, start
from tests.support.harness import activity_runs

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(120)
async def test_a_migration_whose_pause_spans_the_kubelet_ca_rotation_is_refused(sim_factory, worker_for, temporal_client,
                                                                                 task_queue) -> None:
    sim = await sim_factory("r1-sdn-to-ovn", time_scale=SCALE)
    # fast(): pools_timeout 300 s + 8 reboot batches x ready_timeout 120 s = a pause of at most 21 min.
    expiry = datetime.now(UTC) + timedelta(days=73, minutes=10)
    stamp = expiry.strftime("%Y-%m-%dT%H:%M:%SZ")
    for pool in [p["metadata"]["name"] for p in sim.store.list(MCP)]:
        sim.store.mutate(MCP, pool, None, lambda o: o["status"].__setitem__("certExpirys", [
            {"bundle": "KubeAPIServerServingCAData", "subject": "CN=kube-apiserver-to-kubelet-signer,OU=openshift",
             "expiry": stamp}]), subresource="status")
    await asyncio.sleep(0.2)
    assert sim.store.get(MCP, "worker")["status"]["certExpirys"][0]["expiry"] == stamp  # kept by the pool status controller
    await worker_for(sim)
    sim.requests.clear()
    handle = await start(temporal_client, task_queue, fast())
    result = await handle.result()
    rotation = (expiry - timedelta(days=73)).strftime("%Y-%m-%d %H:%M")
    assert result.outcome == "refused", result.message
    assert f"the kubelet CA rotates on {rotation} UTC" in result.message and "pools " in result.message, result.message
    assert not [e for e in sim.requests.entries() if e.verb in MUTATING], "refused before any write"
    # ...at once: its reads each answered on the first attempt, nothing retried or waited out.
    runs = await activity_runs(handle)
    assert runs and all(r.attempts == 1 and r.ended == "completed" for r in runs), runs
