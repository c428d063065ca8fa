"""``drain_when_asked`` against the simulator: the daemon's drain request, the cordon and the
first drain pass in one activity (issue 16). Harness and fixtures from test_activities_cluster.py."""

from __future__ import annotations

import asyncio

import pytest

from activities.cluster.models import ANN_CORDONED_BY, ANN_DESIRED_CONFIG, DrainInput, SetNodeAnnotationsInput
from activities.machineconfig.handshake import HandshakeActivities
from activities.machineconfig.models import DrainWhenAskedInput
from tests.gateway.test_activities_cluster import Harness, r1_static, r2  # noqa: F401,F811 (fixtures)

pytestmark = pytest.mark.timeout(120)

R1_APP_TARGET = "rendered-app-c2144a20e3d0e37e96785165ba81f4e8"
R2_WORKER_TARGET = "rendered-worker-5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b"


async def test_waits_for_the_request_then_cordons_and_drains(r2: Harness) -> None:
    h = r2
    node, owner, target = "okd-worker-01", "rollout/node/okd-worker-01", R2_WORKER_TARGET
    h.sim.store.mutate(
        "poddisruptionbudgets.policy", "router-default", "openshift-ingress", lambda o: o["spec"].update(minAvailable=0)
    )
    for _ in range(100):  # the simulated disruption controller recomputes the budget's status on its own time
        pdb = h.sim.store.get("poddisruptionbudgets.policy", "router-default", "openshift-ingress")
        if (pdb.get("status") or {}).get("disruptionsAllowed", 0) >= 1:
            break
        await asyncio.sleep(0.05)
    acts = HandshakeActivities(lambda: h.gateway)
    await h.run(h.acts.set_node_annotations, SetNodeAnnotationsInput(node=node, annotations={ANN_DESIRED_CONFIG: target}))
    res = await h.run(acts.drain_when_asked, DrainWhenAskedInput(
        node=node, target=target, owner=owner, timeout_seconds=30, drain=DrainInput(node=node, wait_seconds=10),
    ))
    assert res.asked and res.cordon is not None and res.cordon.cordoned_by_us, res
    assert res.drain is not None and res.drain.done and res.drain.evicted, res.drain
    stored = h.sim.store.get("nodes", node)
    assert stored["spec"]["unschedulable"] is True and stored["metadata"]["annotations"][ANN_CORDONED_BY] == owner
    evictions = [e for e in h.sim.requests.entries() if e.verb == "create" and e.subresource == "eviction"]
    assert evictions, "the pass evicted through the Eviction API"
    # One LIST of the node's pods per pass: the wait for them to go watches from its resourceVersion.
    pod_reads = [e.verb for e in h.sim.requests.entries() if e.resource == "pods" and e.namespace == ""]
    assert pod_reads.count("list") == 1, pod_reads


async def test_no_request_changes_nothing(r1_static: Harness) -> None:
    """No daemon runs in r1_static: the wait times out and nothing is written."""
    h, node = r1_static, "qsu-app-04"
    acts = HandshakeActivities(lambda: h.gateway)
    writes = len(h.writes())
    res = await h.run(acts.drain_when_asked, DrainWhenAskedInput(
        node=node, target=R1_APP_TARGET, owner="o", timeout_seconds=1, drain=DrainInput(node=node),
    ))
    assert not res.asked and res.timed_out and res.cordon is None and res.drain is None
    assert len(h.writes()) == writes
