"""R3d masters end to end: ControlPlaneUpgradeWorkflow on a real dev server, a real worker process
and clustersim ``r3-okd310-upgrade`` (per-master API listeners, SSH hosts, GlusterFS on the
masters, master01's missing-LDAP-CA fault).

Facts come from the simulator: ``GET /_sim/api/availability`` (per-master API intervals) and
``GET /_sim/hosts/<h>`` (the host command log).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from temporalio.client import Client, WorkflowHandle

from activities.host.models import HostAccess
from clustersim import ClusterSim
from clustersim.scenario import load_scenario
from workflows.control_plane import ControlPlaneUpgradeWorkflow
from workflows.control_plane.models import (
    ControlPlaneResult,
    ControlPlaneStatus,
    ControlPlaneUpgradeInput,
    MasterAction,
    MasterSpec,
    StaticPodManifest,
)
from workflows.kit.models import ApproveInput, GateState

pytestmark = pytest.mark.e2e

MASTERS = ["master01.example.com", "master02.example.com", "master03.example.com"]
CA = "/etc/origin/master/freeipa_ldap_ca.crt"
MANIFEST = "/etc/origin/node/pods/apiserver.yaml"
CONTENT = "apiVersion: v1\nkind: Pod\nmetadata: {name: master-api, namespace: kube-system}\nspec:\n  containers:\n  - name: api\n    image: docker.io/openshift/origin-control-plane:v3.10\n"
SCALE = 0.02


def r3_without_brick_fault() -> Any:
    """r3-okd310-upgrade with every brick online (the brick symptom is R3a's, not this test's)."""
    sc = load_scenario("r3-okd310-upgrade")
    gluster = {**(sc.gluster or {}), "enabled_symptoms": []}
    return sc.model_copy(update={"gluster": gluster})


def hosts_env(sim: ClusterSim) -> dict[str, str]:
    return sim.components["hosts"].client_env()  # type: ignore[attr-defined]


def cp_input(sim: ClusterSim, calls: dict[str, float] | None = None) -> ControlPlaneUpgradeInput:
    """The e2e run's input; ``calls``: activity timeouts over its ``short_call_seconds`` 15."""
    ssh_map = json.loads(Path(hosts_env(sim)["CLUSTERSIM_SSH_MAP"]).read_text())
    masters_comp = sim.components["masters"]
    masters = [MasterSpec(name=m, api_url=masters_comp.api_url(m), gluster_host=True,  # type: ignore[attr-defined]
                          access=HostAccess(backend="ssh", host=ssh_map[m].split(":")[0], port=int(ssh_map[m].split(":")[1]),
                                            user="root", node=m))
               for m in MASTERS]
    return ControlPlaneUpgradeInput(
        masters=masters, action=MasterAction(kind="static-pods", manifests=[StaticPodManifest(path=MANIFEST, content=CONTENT)]),
        etcd_backup_skip_reason="the simulator's masters run no etcd members",
        etcd_health_skip_reason="the simulator's masters run no etcd members", approve_first=False, search_attributes=False,
        approvals={"requested_by": "e2e"}, api_ready_timeout_seconds=20, api_poll_seconds=0.5, pods_ready_timeout_seconds=60,
        gluster_timeout_seconds=120, calls={"short_call_seconds": 15, **(calls or {})},
    )


async def sim_get(sim: ClusterSim, path: str) -> Any:
    async with aiohttp.ClientSession() as http, http.get(f"{sim.url}/_sim/{path}") as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


def down_intervals(avail: dict[str, Any]) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for m, d in avail["masters"].items():
        out[m] = [(i["start"], i["end"] if i["end"] is not None else avail["now"]) for i in d["intervals"] if i["state"] != "up"]
    return out


def assert_one_master_down_at_most(avail: dict[str, Any]) -> None:
    downs = down_intervals(avail)
    names = list(downs)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for s1, e1 in downs[a]:
                for s2, e2 in downs[b]:
                    assert e1 <= s2 or e2 <= s1, f"{a} and {b} down at once: {(s1, e1)} {(s2, e2)}"
    assert avail["zero_masters_up"] == [], avail["zero_masters_up"]


async def restarts_on(sim: ClusterSim, host: str) -> list[list[str]]:
    h = await sim_get(sim, f"hosts/{host}")
    return [r["argv"] for r in h["log"] if r["argv"] and r["argv"][0].endswith("master-restart")]


async def status_of(handle: WorkflowHandle[Any, Any]) -> ControlPlaneStatus:
    return await handle.query("status", result_type=ControlPlaneStatus)


async def wait_gate(handle: WorkflowHandle[Any, Any], prefix: str, timeout: float = 300) -> tuple[str, ControlPlaneStatus]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        st = await status_of(handle)
        for g in st.gates:
            if g.id.startswith(prefix) and g.state == GateState.WAITING:
                return g.id, st
        desc = await handle.describe()
        if desc.status is not None and desc.status.name != "RUNNING":
            raise AssertionError(f"closed early: {st.error}")
        await asyncio.sleep(0.3)
    raise AssertionError(f"no gate {prefix}: {(await status_of(handle)).model_dump_json(indent=1)[:3000]}")


async def start(client: Client, sim: ClusterSim, task_queue: str, calls: dict[str, float] | None = None) -> WorkflowHandle[Any, Any]:
    return await client.start_workflow(ControlPlaneUpgradeWorkflow.run, cp_input(sim, calls), id=f"cp-{uuid.uuid4().hex[:8]}",
                                       task_queue=task_queue, result_type=ControlPlaneResult)


async def test_missing_ca_waits_gates_with_logs_then_retry_completes(dev_server: Any, temporal_client: Client, sim_factory: Any,
                                                                     worker_process_factory: Any, task_queue: str) -> None:
    sim = await sim_factory(r3_without_brick_fault(), time_scale=SCALE)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue,
                                    env=hosts_env(sim))
    await worker.start()
    handle = await start(temporal_client, sim, task_queue)
    gate_id, st = await wait_gate(handle, "api/master01.example.com/")
    row = st.masters[0]
    assert "freeipa_ldap_ca.crt" in (row.logs_tail or ""), row.logs_tail
    assert await restarts_on(sim, "master02.example.com") == []  # master02 untouched
    # The fix: the CA file where 3.10 looks for it; then retry.
    host = sim.components["hosts"].hosts["master01.example.com"]  # type: ignore[attr-defined]
    host.files[CA] = host.files["/etc/origin/master/ipa-ca.crt"]
    await handle.execute_update("approve", ApproveInput(gate_id=gate_id, identity="e2e-approver", comment="CA file created"))
    result = await handle.result()
    assert result.outcome == "completed", result.message
    for m in MASTERS:
        assert await restarts_on(sim, m) == [["/usr/local/bin/master-restart", "api"], ["/usr/local/bin/master-restart", "controllers"]]
        assert sim.components["hosts"].hosts[m].files[MANIFEST] == CONTENT  # type: ignore[attr-defined]
    assert_one_master_down_at_most(await sim_get(sim, "api/availability"))
