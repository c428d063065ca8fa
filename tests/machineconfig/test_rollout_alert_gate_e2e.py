"""Issue 37 end to end: a MachineConfig rollout with ``alerts`` (the CLI's ``--alert-gate URL``)
on a generated cluster, a real Prometheus (Debian's binary, tests/support/promserver.py) scraping the
simulator's ``/metrics`` and evaluating tests/support/prometheus_rules.yml, a dev server and a worker
process. A node outside the rolled pool is made NotReady out of band while the first worker node
rolls: ``KubeNodeNotReady`` fires, no further node starts while it fires (the status names the
alert and the wait), and once the node is Ready again and the alert resolves the rollout goes on
and completes. The simulator's request record shows no write to a node that had not started
while the alert fired."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from tests.support.promserver import prometheus_factory, set_node_ready  # noqa: F401 - prometheus_factory: a fixture, found by name

from clustersim.scenario import generate_scenario
from tests.support.harness import drive, fast_timings, start_rollout, status
from workflows.kit.inputs import AlertGatePolicy

pytestmark = pytest.mark.e2e

SCALE = 0.05
#: Known noise of a generated cluster, filtered as operators do (kured's --alert-filter-regexp).
KNOWN = "^(Watchdog|KubePodNotReady|KubeDeploymentReplicasMismatch)$"


def blocking_alert(st: Any) -> str | None:
    """The status's line for a waiting alert gate that names KubeNodeNotReady, else None."""
    for name, hs in st.health.items():
        if name.startswith("alerts/") and hs.state == "waiting" and "KubeNodeNotReady" in hs.last:
            return f"{name}: {hs.last}"
    return None


@pytest.mark.timeout(300)
async def test_no_node_starts_while_a_node_is_not_ready_and_the_rollout_completes_after(
        sim_factory: Any, prometheus_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str) -> None:
    scenario = generate_scenario(nodes=6, pods=4, pools={"worker": 4, "infra": 2}, name="alert-gate", reboot_seconds=200,
                                 write_files_seconds=1, pod_start_seconds=1, namespaces=2, pods_per_deployment=1)
    sim = await sim_factory(scenario, time_scale=SCALE)
    prom = await prometheus_factory(sim)
    await worker_for(sim)
    outsider = sorted(n["metadata"]["name"] for n in sim.store.list("nodes")
                      if "node-role.kubernetes.io/infra" in (n["metadata"].get("labels") or {}))[0]
    handle = await start_rollout(temporal_client, task_queue, pools=["worker"], max_unavailable=1, search_attributes=False,
                                 alerts=AlertGatePolicy(url=prom.url, filter=KNOWN, poll_seconds=1), **fast_timings(SCALE))

    end = time.monotonic() + 120
    while True:  # the first node rolls: then the outsider stops being Ready
        st = await status(handle)
        if any(n.phase not in ("pending",) for n in st.nodes.values()):
            break
        assert time.monotonic() < end, st.nodes
        await asyncio.sleep(0.2)
    await set_node_ready(sim, outsider, False)

    end = time.monotonic() + 120
    while (line := blocking_alert(st := await status(handle))) is None:
        assert time.monotonic() < end, (st.health, st.nodes)
        await asyncio.sleep(0.3)
    assert outsider in line and "firing since" in line, line
    pending = {n for n, ns in st.nodes.items() if ns.phase == "pending"}
    assert pending, "the alert fired after every node had started: nothing left to hold back"
    sim.requests.clear()  # from here to the node's return, the simulator's own record of writes
    assert "waiting for alerts to clear" in (st.step_doing or ""), (st.step, st.step_doing)
    await asyncio.sleep(8)  # about 160 simulated seconds: long enough for the next node to start, were it allowed
    held = await status(handle)
    assert {n for n, ns in held.nodes.items() if ns.phase == "pending"} == pending, held.nodes
    assert blocking_alert(held) is not None

    # The simulator's record: not one write to a node that had not started while the alert fired.
    started = [f"{e.verb} {e.name}" for e in sim.requests.entries(resource="nodes") if e.verb != "get" and e.verb != "list"
               and e.verb != "watch" and e.name in pending]
    assert started == [], started
    await set_node_ready(sim, outsider, True)
    result = await drive(handle, timeout=240)
    assert result.outcome == "completed", result.message
    assert all(n.phase == "done" for n in result.nodes.values()), result.nodes
